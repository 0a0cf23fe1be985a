package diagnosis

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// inBucketShift runs the test pod with vLLM's inter-token buckets: ten
// minutes at steps of 26 and 30 ms in turn (mean 28 ms, the 25-50 ms
// bucket), then 90 s at steps times mean (the same bucket for a mean up to
// 1.4x), and returns the last families and report.
func inBucketShift(t *testing.T, mean float64) ([]exposition.Family, *Report) {
	t.Helper()
	f := newFeeder(t, testOpts)
	f.p.o.ITL = Histogram{Bounds: simITLBounds, Counts: make([]float64, len(simITLBounds))}
	for i := range 640 + 90 {
		s := healthy
		s.itl = []float64{0.026, 0.030}[i%2]
		if i >= 640 {
			s.itl *= mean
		}
		f.feed(1, s, nil)
	}
	return f.fams, f.d.Report()
}

// TestShiftInsideABucketNamedByItsMean: the inter-token latency rises 1.3x
// inside vLLM's 25-50 ms bucket (the bursty simulator's batch_growth: true
// p90 28 -> 36 ms). Every observation stays in its bucket, so the p90 reads
// 1.00x; the histogram's sum gives the exact mean, 1.30x, and itl_up is
// named from it, reported as itl_mean. A rise of 1.1x in the same bucket,
// below the minimum change, is not. Fails on the code before: nothing read
// the sum, and itl_up was never named.
func TestShiftInsideABucketNamedByItsMean(t *testing.T) {
	fams, rep := inBucketShift(t, 1.3)
	if got := values(fams, FamilySymptom, "symptom"); got[SymptomITLUp] != 1 {
		t.Errorf("symptoms %v, want itl_up named from the exact mean", active(got))
	}
	ratios := values(fams, FamilyChangeRatio, "signal")
	if r := ratios[SignalITLMean]; math.Abs(r-1.3) > 0.01 {
		t.Errorf("itl_mean ratio %v, want 1.30", r)
	}
	if r := ratios[SignalITLP90]; r != 1 {
		t.Errorf("itl_p90 ratio %v, want 1.00: the p90 cannot see a rise inside its bucket", r)
	}
	var mean, p90 *SignalReport
	for i := range rep.Models[0].Steps[0].Signals {
		switch s := &rep.Models[0].Steps[0].Signals[i]; s.Signal {
		case SignalITLMean:
			mean = s
		case SignalITLP90:
			p90 = s
		}
	}
	if mean == nil || mean.Change != ChangeUp || !mean.Bad || p90 == nil || p90.Change == ChangeUp {
		t.Fatalf("the report's itl_mean and itl_p90 (%v, %v), want the mean up and bad (what moved), the p90 not", mean != nil && mean.Change == ChangeUp, p90 != nil && p90.Change == ChangeUp)
	}
	if inc := rep.Models[0].Incident; inc == nil || !strings.Contains(inc.Sentence, "nter-token latency, exact mean") {
		t.Errorf("incident %+v, want its sentence to say the exact mean moved", inc)
	}

	fams, _ = inBucketShift(t, 1.1)
	if got := values(fams, FamilySymptom, "symptom"); got[SymptomITLUp] != 0 {
		t.Errorf("a mean 1.1x (minimum change 1.25x): symptoms %v, want none", active(got))
	}
}

// TestHistVarBound: the variance bound is exact when every observation sits
// at one value inside one bucket, and never below the true variance of
// random latencies spread over vLLM's buckets.
func TestHistVarBound(t *testing.T) {
	// 100 observations at 28 ms, all in (25, 50] ms: a mean of 28 ms allows
	// at most 12 % of them at 50 ms and the rest at 25: variance 66 ms².
	h := cumulativeAt(simITLBounds, map[float64]float64{0.025: 0, 0.05: 100}, 100)
	if v := histVarBound(simITLBounds, h, 100*0.028); math.Abs(v-0.12*0.88*0.025*0.025) > 1e-12 {
		t.Errorf("bound %v, want %v", v, 0.12*0.88*0.025*0.025)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n := 5 + rng.IntN(500)
		sum, sq := 0.0, 0.0
		counts := make([]float64, len(simTTFTBounds))
		for range n {
			x := 0.15 * math.Exp(float64(trial%4)*rng.NormFloat64())
			sum, sq = sum+x, sq+x*x
			counts[bucketOf(simTTFTBounds, x)]++
		}
		for i := 1; i < len(counts); i++ {
			counts[i] += counts[i-1]
		}
		m := sum / float64(n)
		truth := sq/float64(n) - m*m
		if v := histVarBound(simTTFTBounds, counts, sum); !(v >= truth*(1-1e-9)) {
			t.Fatalf("trial %d: bound %v below the true variance %v", trial, v, truth)
		}
	}
	if v := histVarBound(simITLBounds, h, 100*0.06); !math.IsNaN(v) {
		t.Errorf("a sum the buckets cannot hold (mean 60 ms, all at most 50): %v, want NaN", v)
	}
}
