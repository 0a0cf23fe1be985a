package collector

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/routing"
)

// BenchmarkDiagnosisMemory measures what the diagnosis keeps between
// scrapes on the 16-engine demo page with the default windows (1m recent,
// 30m baseline): the heap still held, after a forced GC, by the diagnosis
// input (reset-correction state per upstream series) and the diagnoser's
// downsampled history, once 32 minutes of scrapes every 2 s have filled
// both rings (measured as the heap freed when both are dropped). Run it once: go test -run '^$' -bench DiagnosisMemory -benchtime 1x ./collector
func BenchmarkDiagnosisMemory(b *testing.B) {
	for range b.N {
		up, in, d, observe := demoDiagnosis(b, 16, demo.ScenarioSteady, 0)
		models := 0
		for range 32 * 30 {
			obs := observe()
			models = len(obs)
			d.Observe(up.now(), obs)
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
	}
}

// benchDemo is a demo upstream on a fake clock, and its mapper.
type benchDemo struct {
	clock  *fakeClock
	up     *demo.Upstream
	mapper *mapping.Mapper
}

func (u *benchDemo) now() time.Time { return u.clock.Now() }

// demoDiagnosis returns the demo with engines engines running scenario sc (shifting
// after shift), a diagnosis input and a diagnoser with the default windows
// for scrapes every 2 s, and observe, which advances the clock by 2 s and
// returns the page's observations.
func demoDiagnosis(b *testing.B, engines int, sc string, shift time.Duration) (*benchDemo, *diagnosisInput, *diagnosis.Diagnoser, func() []diagnosis.Observation) {
	u := &benchDemo{clock: newFakeClock(), mapper: testMapper(b, mapping.Options{})}
	var err error
	u.up, err = demo.New(demo.Options{Now: u.clock.Now, Seed: 1, Engines: engines, Scenario: sc, ShiftAfter: shift})
	if err != nil {
		b.Fatal(err)
	}
	in := &diagnosisInput{}
	d, err := diagnosis.New(diagnosis.Options{Window: diagnosis.DefaultWindow, Baseline: diagnosis.DefaultBaseline, MinChange: diagnosis.DefaultMinChange, Interval: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	observe := func() []diagnosis.Observation {
		u.clock.Advance(2 * time.Second)
		fams, _, err := exposition.Parse(u.up.Page(), exposition.ContentTypeText, exposition.ParseOptions{})
		if err != nil {
			b.Fatal(err)
		}
		norm, _ := u.mapper.Normalize(exposition.DropCreated(fams))
		roles := u.mapper.Catalogue().Roles()
		return in.observations(norm, viewGauges(norm, roles, u.mapper.StyleName), roles, "vllm", "")
	}
	return u, in, d, observe
}

// BenchmarkDiagnosisObserve measures the diagnosis's CPU per scrape: one
// Observe (tests, rules, incident, report and gauges, charts not drawn) on
// the 4-engine demo page with the default windows, once 32 minutes of
// scrapes every 2 s have filled both rings; for the queueing scenario the
// shift falls in the filled history, so an incident is open. The page's
// parse and normalisation run outside the timer.
func BenchmarkDiagnosisObserve(b *testing.B) {
	for _, sc := range []string{demo.ScenarioSteady, demo.ScenarioQueueing} {
		b.Run(sc, func(b *testing.B) {
			up, _, d, observe := demoDiagnosis(b, 4, sc, 31*time.Minute)
			for range 32 * 30 {
				d.Observe(up.now(), observe())
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				obs := observe()
				b.StartTimer()
				d.Observe(up.now(), obs)
			}
		})
	}
}

// BenchmarkDiagnosisInput measures the diagnosis input's CPU and
// allocations per scrape: observations (reset correction, per-model
// totals, the engines' running, waiting and finished requests) on the
// demo page over 1, 4 and 16 data-parallel engines, once the series are
// known; the page's parse and normalisation run outside the timer.
func BenchmarkDiagnosisInput(b *testing.B) {
	for _, engines := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("engines=%d", engines), func(b *testing.B) {
			u := &benchDemo{clock: newFakeClock(), mapper: testMapper(b, mapping.Options{})}
			up, err := demo.New(demo.Options{Now: u.clock.Now, Seed: 1, Engines: engines})
			if err != nil {
				b.Fatal(err)
			}
			roles := u.mapper.Catalogue().Roles()
			page := func() ([]exposition.Family, map[string]routing.ModelGauges) {
				u.clock.Advance(time.Second)
				fams, _, err := exposition.Parse(up.Page(), exposition.ContentTypeText, exposition.ParseOptions{})
				if err != nil {
					b.Fatal(err)
				}
				norm, _ := u.mapper.Normalize(exposition.DropCreated(fams))
				return norm, viewGauges(norm, roles, u.mapper.StyleName)
			}
			in := &diagnosisInput{}
			for range 3 {
				norm, g := page()
				in.observations(norm, g, roles, "vllm", "")
			}
			norm, g := page()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if obs := in.observations(norm, g, roles, "vllm", ""); len(obs) == 0 || len(obs[0].Engines) != engines && engines > 1 {
					b.Fatalf("observations: %d models, want one with %d engines", len(obs), engines)
				}
			}
		})
	}
}
