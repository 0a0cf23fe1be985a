package diagnosis

import (
	"encoding/json"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
)

// vLLM's bucket bounds for TTFT and inter-token latency (the simulator's).
var vllmTTFTBounds, vllmITLBounds = simTTFTBounds, simITLBounds

// cumulativeAt is bucket counts (cumulative over bounds) with at[le] of the
// observations at or below each listed bound and total in all.
func cumulativeAt(bounds []float64, at map[float64]float64, total float64) []float64 {
	h := make([]float64, len(bounds))
	c := 0.0
	for i, le := range bounds {
		if v, ok := at[le]; ok {
			c = v
		}
		if math.IsInf(le, 1) {
			c = total
		}
		h[i] = c
	}
	return h
}

// windowOf is a window's stats with only a latency histogram known: its
// bucket increases h over bounds and its sum (the quantile signal i's).
func windowOf(i int, bounds, h []float64, sum float64) *stats {
	s := nanStats()
	w, _ := quantileHist(i)
	s.h[w], s.bounds[w] = h, bounds
	s.v[i] = histQuantile(bounds, h, signalQuantile)
	s.requests, s.started, s.seconds = h[len(h)-1], h[len(h)-1], 60
	s.c[cTTFTSum], s.c[cITLSum] = sum, sum
	return &s
}

// quantileAlpha is the per-signal level at the default significance.
const quantileAlpha = 0.05 / numSignals

// TestQuantileRatioRange: the two readings of issue 30 that the buckets do
// not support. TTFT p90 interpolated in the 80-160 s bucket reads 1.87x
// where the truth was 1.17x; the buckets allow 1.00-4.00x, so the truth is
// in the range, and the exact mean (1.17x) does not tell a change.
// Inter-token steps all just below 0.05 s, then all just above (a true
// 1.00x), read 1.53x; the buckets allow 1.00-3.00x and the mean moved
// 1.004x.
func TestQuantileRatioRange(t *testing.T) {
	base := cumulativeAt(vllmTTFTBounds, map[float64]float64{20: 0, 40: 800, 80: 1000}, 1000)    // p90 60 s
	recent := cumulativeAt(vllmTTFTBounds, map[float64]float64{40: 0, 80: 83.26, 160: 100}, 100) // p90 112.2 s
	read := histQuantile(vllmTTFTBounds, recent, 0.9) / histQuantile(vllmTTFTBounds, base, 0.9)
	lo, hi := quantileRatioRange(vllmTTFTBounds, recent, vllmTTFTBounds, base, 0.9)
	if math.Abs(read-1.87) > 0.01 || lo != 1 || hi != 4 || !(lo <= 1.17 && 1.17 <= hi) {
		t.Errorf("TTFT in the 80-160 s bucket: read %.2fx, the buckets allow %v-%vx; want 1.87x read, 1-4x allowed (the truth, 1.17x, inside)", read, lo, hi)
	}
	if quantileChangeTold(sTTFT, lo, hi, windowOf(sTTFT, vllmTTFTBounds, recent, 100*60*1.17), windowOf(sTTFT, vllmTTFTBounds, base, 1000*60), +1, DefaultMinChange, quantileAlpha) {
		t.Error("TTFT read 1.87x with its mean at 1.17x: told as a change, want not")
	}
	base = cumulativeAt(vllmITLBounds, map[float64]float64{0.025: 0, 0.05: 1000}, 1000)
	recent = cumulativeAt(vllmITLBounds, map[float64]float64{0.05: 0, 0.075: 1000}, 1000)
	read = histQuantile(vllmITLBounds, recent, 0.9) / histQuantile(vllmITLBounds, base, 0.9)
	lo, hi = quantileRatioRange(vllmITLBounds, recent, vllmITLBounds, base, 0.9)
	if math.Abs(read-0.0725/0.0475) > 1e-9 || lo != 1 || math.Abs(hi-3) > 1e-9 {
		t.Errorf("ITL around the 0.05 s bound: read %.2fx, the buckets allow %v-%vx; want 1.53x read, 1-3x allowed", read, lo, hi)
	}
	if quantileChangeTold(sITL, lo, hi, windowOf(sITL, vllmITLBounds, recent, 1000*0.0501), windowOf(sITL, vllmITLBounds, base, 1000*0.0499), +1, DefaultMinChange, quantileAlpha) {
		t.Error("ITL read 1.53x with its mean at 1.004x: told as a change, want not")
	}
	// The quantile past the last finite bound: no upper end.
	recent = cumulativeAt(vllmITLBounds, map[float64]float64{80: 10}, 1000)
	if lo, hi := quantileRatioRange(vllmITLBounds, recent, vllmITLBounds, base, 0.9); lo != 80/0.05 || !math.IsInf(hi, 1) {
		t.Errorf("past the last bound: %v-%v, want 1600 and +Inf", lo, hi)
	}
}

// TestQuantileChangeTold: inside the range the buckets allow, the exact
// mean decides. The same buckets (TTFT p90 0.175 -> 0.22 s, 1.26x, in the
// 0.1-0.25 s bucket: 0.4-2.5x) tell a change when the mean moved 1.67x and
// none when it moved 1.11x; past the range's conservative end the buckets
// alone tell it, whatever the mean.
func TestQuantileChangeTold(t *testing.T) {
	base := cumulativeAt(vllmTTFTBounds, map[float64]float64{0.08: 0, 0.1: 800, 0.25: 1000}, 1000)
	recent := cumulativeAt(vllmTTFTBounds, map[float64]float64{0.08: 0, 0.1: 500, 0.25: 1000}, 1000)
	lo, hi := quantileRatioRange(vllmTTFTBounds, recent, vllmTTFTBounds, base, 0.9)
	read := histQuantile(vllmTTFTBounds, recent, 0.9) / histQuantile(vllmTTFTBounds, base, 0.9)
	if !(lo < 1.25 && 1.25 <= read && read < hi) {
		t.Fatalf("read %.2fx, the buckets allow %.2f-%.2fx; want past 1.25 inside a range that straddles it", read, lo, hi)
	}
	for _, c := range []struct {
		mean float64
		want bool
	}{{0.15, true}, {0.1, false}} {
		if got := quantileChangeTold(sTTFT, lo, hi, windowOf(sTTFT, vllmTTFTBounds, recent, 1000*c.mean), windowOf(sTTFT, vllmTTFTBounds, base, 1000*0.09), +1, DefaultMinChange, quantileAlpha); got != c.want {
			t.Errorf("mean 0.09 -> %v s: told %v, want %v", c.mean, got, c.want)
		}
	}
	recent = cumulativeAt(vllmTTFTBounds, map[float64]float64{0.5: 0, 0.75: 1000}, 1000)
	lo, hi = quantileRatioRange(vllmTTFTBounds, recent, vllmTTFTBounds, base, 0.9)
	if !quantileChangeTold(sTTFT, lo, hi, windowOf(sTTFT, vllmTTFTBounds, recent, 1000*0.09), windowOf(sTTFT, vllmTTFTBounds, base, 1000*0.09), +1, DefaultMinChange, quantileAlpha) {
		t.Error("TTFT p90 from the 0.1-0.25 s bucket to 0.5-0.75 s with a flat mean: not told, want told (the buckets tell it)")
	}
}

// TestQuantileRangeReported: the JSON gives ratio_low and ratio_high beside
// a quantile's ratio (and not beside other signals), the page shows them,
// and the incident's sentence says what the buckets allow. The test pod's
// TTFT goes from 0.15 to 0.3 s, across the 0.2 s bound: read 0.38/0.19 =
// 2x, the buckets (0.1, 0.2] and (0.2, 0.4] allow 1-4x.
func TestQuantileRangeReported(t *testing.T) {
	s := healthy
	s.waiting, s.ttft = 6, 0.3
	d, _, _ := run(t, testOpts, timeline(640, 61, s))
	rec := httptest.NewRecorder()
	d.APIHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/diagnosis", nil))
	var doc struct {
		Models []struct {
			Incident *struct{ Sentence string }
			Steps    []struct {
				Signals []map[string]any
			}
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, st := range doc.Models[0].Steps {
		for _, sig := range st.Signals {
			_, hasLow := sig["ratio_low"]
			switch sig["signal"] {
			case SignalTTFTP90:
				found = true
				if sig["ratio_low"] != 1.0 || sig["ratio_high"] != 4.0 || math.Abs(sig["ratio"].(float64)-2) > 1e-9 {
					t.Errorf("ttft_p90: ratio %v, ratio_low %v, ratio_high %v; want 2, 1, 4", sig["ratio"], sig["ratio_low"], sig["ratio_high"])
				}
			case SignalWaiting:
				if hasLow {
					t.Errorf("waiting has a ratio_low: %v", sig)
				}
			}
		}
	}
	if !found {
		t.Fatal("no ttft_p90 signal in the JSON")
	}
	if inc := doc.Models[0].Incident; inc == nil || !strings.Contains(inc.Sentence, "2.00× (the buckets allow 1.00–4.00×) the baseline") {
		t.Errorf("incident %+v, want its sentence to say what the buckets allow", inc)
	}
	rec = httptest.NewRecorder()
	d.PageHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/diagnosis", nil))
	if !strings.Contains(rec.Body.String(), "2.00× (buckets: 1.00–4.00×)") {
		t.Error("the page does not show the range the buckets allow")
	}
}
