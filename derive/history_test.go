package derive

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/exposition"
)

const fixture13 = "../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom"

// fixturePage returns fixture 13 (one V1 engine, engine="0") repeated for
// engines 0..engines-1, parsed.
func fixturePage(tb testing.TB, engines int) []exposition.Family {
	tb.Helper()
	raw, err := os.ReadFile(fixture13)
	if err != nil {
		tb.Fatal(err)
	}
	text := string(raw)
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	var b strings.Builder
	for e := range engines {
		for _, line := range strings.SplitAfter(text, "\n") {
			if e > 0 && strings.HasPrefix(line, "#") {
				continue // one HELP/TYPE per family
			}
			b.WriteString(strings.ReplaceAll(line, `engine="0"`, fmt.Sprintf(`engine="%d"`, e)))
		}
	}
	fams, _, err := exposition.Parse([]byte(b.String()), "text/plain; version=0.0.4", exposition.ParseOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return fams
}

// neededSamples returns the samples of fams that History stores (with a
// TPOT target, which keeps the TPOT histogram too).
func neededSamples(fams []exposition.Family) []*exposition.Sample {
	var out []*exposition.Sample
	in := newHistorySLO(nil, time.Second, SLOTargets{TPOT: []time.Duration{time.Second}}).d.Inputs()
	for fi := range fams {
		if !in.Family(fams[fi].Name) {
			continue
		}
		for si := range fams[fi].Samples {
			if _, ok := in.Sample(fams[fi].Samples[si].Name()); ok {
				out = append(out, &fams[fi].Samples[si])
			}
		}
	}
	return out
}

// The real V1 page: every derived family comes out under the real names.
// Between the two scrapes every needed counter, bucket, _sum and _count
// grows by 10, so:
//   - rates are 10 / 10 s = 1/s (requests: 1/s per finished_reason);
//   - hit ratios 10/10 = 1, means (_sum +10)/(_count +10) = 1, queue
//     ratio 1/(1+1) = 0.5;
//   - every bucket +10 puts all 10 new observations in the lowest bucket:
//     rank 5 of 10 in (0, lowest]: TTFT (0, 0.001] -> 0.0005,
//     ITL (0, 0.01] -> 0.005, e2e (0, 0.3] -> 0.15;
//   - SLO attainment, same buckets: TTFT at most 1ms (the lowest bound,
//     exact) 10/10 = 1; TPOT at most 5ms, half of (0, 0.01]: 0.5; e2e at
//     most 75ms, a quarter of (0, 0.3]: 0.25;
//   - running goes 0 -> 10, mean 5: 1 token/s / 5 = 0.2 per request.
func TestDeriveFixture13(t *testing.T) {
	fams := fixturePage(t, 1)
	h := newHistorySLO([]time.Duration{time.Minute}, time.Second, SLOTargets{TTFT: []time.Duration{time.Millisecond}, TPOT: []time.Duration{5 * time.Millisecond}, E2E: []time.Duration{75 * time.Millisecond}})
	h.Observe(at(0), fams)
	for _, s := range neededSamples(fams) {
		s.Value += 10
	}
	h.Observe(at(10), fams)
	out := h.Derive(at(10), byModelEngine)
	l := []string{"engine", "0", "model_name", "TinyLlama", "window", "1m"}
	for name, want := range map[string]float64{
		DerivedPreemptionsPerSecond:        1,
		DerivedPromptTokensPerSecond:       1,
		DerivedGenerationTokensPerSecond:   1,
		DerivedPrefixCacheHitRatio:         1,
		DerivedExternalPrefixCacheHitRatio: 1,
		DerivedQueueTimeMeanSeconds:        1,
		DerivedPrefillTimeMeanSeconds:      1,
		DerivedDecodeTimeMeanSeconds:       1,
		DerivedPromptTokensMean:            1,
		DerivedGenerationTokensMean:        1,
		DerivedTTFTQueueRatio:              0.5,
	} {
		wantValue(t, out, want, name, l...)
	}
	for _, r := range []string{"stop", "length", "abort", "error", "repetition"} {
		wantValue(t, out, 1, DerivedRequestsPerSecond, append(l, "finished_reason", r)...)
		// Five reasons at 1/s each: a fifth of the finished requests.
		wantValue(t, out, 0.2, DerivedFinishedRatio, append(l, "finished_reason", r)...)
	}
	wantValue(t, out, 0.0005, DerivedTTFTSeconds, append(l, "q", "0.5")...)
	wantValue(t, out, 0.005, DerivedInterTokenLatencySeconds, append(l, "q", "0.5")...)
	wantValue(t, out, 0.15, DerivedE2ELatencySeconds, append(l, "q", "0.5")...)
	wantValue(t, out, 1, DerivedSLOAttainmentRatio, append(l, "slo", "ttft", "target", "0.001")...)
	wantValue(t, out, 0.5, DerivedSLOAttainmentRatio, append(l, "slo", "tpot", "target", "0.005")...)
	wantValue(t, out, 0.25, DerivedSLOAttainmentRatio, append(l, "slo", "e2e", "target", "0.075")...)
	wantValue(t, out, 0.2, DerivedGenerationTokensPerSecondPerRequest, l...)
	// Fixture 13 runs NIXL and splits prompt tokens by source: the prefill
	// rate is local_compute's 1/s; the backlog waiting's mean 5 times the
	// mean prompt 1 over 1/s; transfers fail 10 of 10 + 10; the bandwidth
	// bytes over seconds 10/10; transfer time like the other quantiles, in
	// its lowest bucket (0, 0.005]. No offload families: no offload rates.
	wantValue(t, out, 1, DerivedPrefillTokensPerSecond, l...)
	wantValue(t, out, 5, DerivedPrefillBacklogSeconds, l...)
	wantValue(t, out, 0.5, DerivedKVTransferFailureRatio, l...)
	wantValue(t, out, 1, DerivedKVTransferBytesPerSecond, append(l, "per", "tp_rank")...)
	wantValue(t, out, 0.0025, DerivedKVTransferSeconds, append(l, "q", "0.5")...)
	wantValue(t, out, 0.00495, DerivedKVTransferSeconds, append(l, "q", "0.99")...)
	if want := windowedFamilies() + 5; len(out) != want {
		t.Errorf("%d families, want %d", len(out), want)
	}
}

// BenchmarkHistoryObserveDerive runs one collector cycle: Observe a scrape
// of fixture 13 (with every needed value moving) and Derive for /metrics
// (model_name, engine) and for routing (model_name), with windows 1m and
// 5m at 100 ms scrapes (resolution 1s), after the history is full.
func BenchmarkHistoryObserveDerive(b *testing.B) {
	for _, engines := range []int{1, 16} {
		b.Run(fmt.Sprintf("engines=%d", engines), func(b *testing.B) {
			fams := fixturePage(b, engines)
			needed := neededSamples(fams)
			h := NewHistory([]time.Duration{time.Minute, 5 * time.Minute}, time.Second)
			step := 0
			cycle := func(derive bool) {
				step++
				for _, s := range needed {
					s.Value++
				}
				now := at(float64(step) / 10)
				h.Observe(now, fams)
				if derive {
					_ = h.Derive(now, byModelEngine)
					_ = h.Derive(now, byModel)
				}
			}
			for range 3010 { // fill the 5m window
				cycle(false)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cycle(true)
			}
			b.ReportMetric(float64(h.storedSeries()), "series")
			b.ReportMetric(float64(h.storedPoints()), "points")
		})
	}
}
