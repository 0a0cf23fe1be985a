package collector

import (
	"runtime"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// BenchmarkDiagnosisMemory measures what the diagnosis keeps between
// scrapes on the 16-engine demo page with the default windows (1m recent,
// 30m baseline): the heap still held, after a forced GC, by the diagnosis
// input (reset-correction state per upstream series) and the diagnoser's
// downsampled history, once 32 minutes of scrapes every 2 s have filled
// both rings (measured as the heap freed when both are dropped). Run it once: go test -run '^$' -bench DiagnosisMemory -benchtime 1x ./collector
func BenchmarkDiagnosisMemory(b *testing.B) {
	for range b.N {
		clock := newFakeClock()
		up, err := demo.New(demo.Options{Now: clock.Now, Seed: 1, Engines: 16, Scenario: demo.ScenarioSteady})
		if err != nil {
			b.Fatal(err)
		}
		mapper := testMapper(b, mapping.Options{})
		in := &diagnosisInput{}
		d, err := diagnosis.New(diagnosis.Options{Window: diagnosis.DefaultWindow, Baseline: diagnosis.DefaultBaseline, MinChange: diagnosis.DefaultMinChange, Interval: 2 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		models := 0
		for range 32 * 30 {
			clock.Advance(2 * time.Second)
			fams, _, err := exposition.Parse(up.Page(), exposition.ContentTypeText, exposition.ParseOptions{})
			if err != nil {
				b.Fatal(err)
			}
			norm, _ := mapper.Normalize(exposition.DropCreated(fams))
			roles := mapper.Catalogue().Roles()
			obs := in.observations(norm, viewGauges(norm, roles, mapper.StyleName), roles, "vllm", "")
			models = len(obs)
			d.Observe(clock.Now(), obs)
		}
		// The heap with the state held, then without it.
		var held, released runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&held)
		series := in.series.Len()
		in, d = nil, nil
		runtime.GC()
		runtime.ReadMemStats(&released)
		b.ReportMetric(float64(held.HeapAlloc)-float64(released.HeapAlloc), "retained-B")
		b.ReportMetric(float64(series), "series")
		b.ReportMetric(float64(models), "models")
		runtime.KeepAlive(up)
		runtime.KeepAlive(mapper)
	}
}
