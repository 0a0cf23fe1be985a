package quantile

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Every expectation below is worked out by hand from the interpolation rule:
// rank = q * count(+Inf); the first bucket whose cumulative count reaches the
// rank holds the quantile; inside it,
//
//	lower + (upper-lower) * (rank - count(below)) / (count(Bucket) - count(below))
//
// with lower = 0 for the lowest bucket.
func TestBucketQuantile(t *testing.T) {
	inf := math.Inf(1)
	nan := math.NaN()
	cases := []struct {
		name    string
		q       float64
		buckets []Bucket
		want    float64
	}{
		// 1:4, 2:12, 4:20, +Inf:20.
		// q=.5: rank 10 -> bucket (1,2]: 1 + 1*(10-4)/(12-4) = 1.75
		{"median", 0.5, []Bucket{{1, 4}, {2, 12}, {4, 20}, {inf, 20}}, 1.75},
		// q=.9: rank 18 -> (2,4]: 2 + 2*(18-12)/(20-12) = 3.5
		{"p90", 0.9, []Bucket{{1, 4}, {2, 12}, {4, 20}, {inf, 20}}, 3.5},
		// q=.99: rank 19.8 -> (2,4]: 2 + 2*(7.8/8) = 3.95
		{"p99", 0.99, []Bucket{{1, 4}, {2, 12}, {4, 20}, {inf, 20}}, 3.95},
		// The lowest bucket interpolates from 0: rank 5 of 10 in (0,0.5] -> 0.25.
		{"lowest bucket from zero", 0.5, []Bucket{{0.5, 10}, {inf, 10}}, 0.25},
		// A lowest bucket with upper bound <= 0 returns its upper bound.
		{"lowest bucket negative bound", 0.5, []Bucket{{-1, 10}, {inf, 10}}, -1},
		// Rank 2 of 8 falls in the bucket le=0, whose bound is returned.
		{"lowest bucket zero bound", 0.25, []Bucket{{0, 4}, {1, 8}, {inf, 8}}, 0},
		// 1:5, 2:6, +Inf:10; rank 9 is reached only by +Inf: the highest
		// finite bound, 2, is returned.
		{"in +Inf bucket", 0.9, []Bucket{{1, 5}, {2, 6}, {inf, 10}}, 2},
		{"no +Inf bucket", 0.5, []Bucket{{1, 5}, {2, 10}}, nan},
		{"no observations", 0.5, []Bucket{{1, 0}, {2, 0}, {inf, 0}}, nan},
		{"only +Inf bucket", 0.5, []Bucket{{inf, 7}}, nan},
		{"no buckets", 0.5, nil, nan},
		// Unsorted, and le "1" and "1.0" both present (same float): they
		// are added, giving 1:4, 2:8, +Inf:10. Rank 5 -> (1,2]:
		// 1 + 1*(5-4)/(8-4) = 1.25.
		{"unsorted and duplicate bounds", 0.5, []Bucket{{inf, 10}, {1, 3}, {2, 8}, {1, 1}}, 1.25},
		// 1:5, 2:3 (a decrease), 4:8, +Inf:8: 2's count becomes 5.
		// q=.5: rank 4 -> (0,1]: 4/5 = 0.8.
		{"monotonicity fix below", 0.5, []Bucket{{1, 5}, {2, 3}, {4, 8}, {inf, 8}}, 0.8},
		// q=.75: rank 6 -> (2,4] (1 and 2 both hold 5):
		// 2 + 2*(6-5)/(8-5) = 2.6667.
		{"monotonicity fix above", 0.75, []Bucket{{1, 5}, {2, 3}, {4, 8}, {inf, 8}}, 2 + 2.0/3},
		// 1:5, 2:3, 3:4, +Inf:6: 2 and 3 are raised to 5 (the decreased 3
		// does not become the reference for 4). Rank 5.4 is beyond every
		// finite bucket: the highest finite bound, 3.
		{"monotonicity fix keeps reference", 0.9, []Bucket{{1, 5}, {2, 3}, {3, 4}, {inf, 6}}, 3},
		// Rank exactly at a bucket's count stays in that bucket: rank 5 of
		// 1:5 -> 1.
		{"rank on boundary", 0.5, []Bucket{{1, 5}, {2, 10}, {inf, 10}}, 1},
		// 1:5, 2:5, 3:10: rank 6 skips the empty (1,2] bucket:
		// 2 + 1*(6-5)/(10-5) = 2.2.
		{"empty bucket skipped", 0.6, []Bucket{{1, 5}, {2, 5}, {3, 10}, {inf, 10}}, 2.2},
		{"q below 0", -0.1, []Bucket{{1, 5}, {inf, 5}}, math.Inf(-1)},
		{"q above 1", 1.1, []Bucket{{1, 5}, {inf, 5}}, math.Inf(1)},
		{"q NaN", nan, []Bucket{{1, 5}, {inf, 5}}, nan},
		// q=0: rank 0 is reached by the first bucket: 0 + 1*0/5 = 0.
		{"q zero", 0, []Bucket{{1, 5}, {inf, 5}}, 0},
		// q=1: rank 5 reached by le=1: 1.
		{"q one", 1, []Bucket{{1, 5}, {inf, 5}}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Estimate(c.q, append([]Bucket(nil), c.buckets...))
			if !sameFloat(got, c.want) {
				t.Fatalf("Estimate(%v) = %v, want %v", c.q, got, c.want)
			}
		})
	}
}

// Counts that differ only by float rounding are made equal, upwards too.
func TestBucketQuantileIgnoresRoundingDifferences(t *testing.T) {
	// 1:10, 2:10*(1+1e-13), 3:20, +Inf:20. The le=2 count is 10 up to
	// rounding, so it is treated as 10. With q = 0.5*(1+5e-14) the rank is
	// 10*(1+5e-14): above 10, so not in (0,1] nor in (1,2] (which holds 10
	// after the fix), but in (2,3]: 2 + 1*(rank-10)/(20-10) = 2 + 5e-14.
	// Without the fix it would land in (1,2] at 1.5.
	q := 0.5 * (1 + 5e-14)
	got := Estimate(q, []Bucket{{1, 10}, {2, 10 * (1 + 1e-13)}, {3, 20}, {math.Inf(1), 20}})
	if math.Abs(got-2) > 1e-9 {
		t.Fatalf("got %v, want 2 (+5e-14)", got)
	}
}

func TestNearlyEqual(t *testing.T) {
	for _, c := range []struct {
		a, b float64
		want bool
	}{
		{1, 1, true},
		{1, 1 + 1e-13, true},
		{1, 1 + 1e-11, false},
		{0, 1e-300, false},
		{0, 0, true},
	} {
		if got := nearlyEqual(c.a, c.b, bucketDeltaTolerance); got != c.want {
			t.Errorf("nearlyEqual(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func sameFloat(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b))
}

// Estimates, which prepares the buckets once, gives each quantile bit for
// bit what Estimate gives it on its own copy, over random histograms:
// shuffled, with repeated and NaN bounds, counts going down or differing
// by rounding, without +Inf, empty; quantiles outside [0, 1] and NaN.
func TestEstimatesMatchEstimate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bounds := []float64{-1, 0, 0.005, 0.1, 0.1, 1, 2.5, 10, math.Inf(+1), math.NaN()}
	qs := []float64{0.5, 0.9, 0.99, 0, 1, -0.1, 1.1, math.NaN()}
	defined := 0
	for range 5000 {
		n := rng.IntN(12)
		bs := make([]Bucket, n)
		for i := range bs {
			bs[i] = Bucket{UpperBound: bounds[rng.IntN(len(bounds))], Count: float64(rng.IntN(20))}
			if rng.IntN(4) == 0 {
				bs[i].Count *= 1 + 1e-14 // a rounding difference
			}
		}
		if n > 0 && rng.IntN(3) > 0 {
			bs[n-1].UpperBound = math.Inf(+1)
			rng.Shuffle(n, func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
		}
		got := make([]float64, len(qs))
		Estimates(qs, slices.Clone(bs), got)
		for i, q := range qs {
			want := Estimate(q, slices.Clone(bs))
			if math.Float64bits(got[i]) != math.Float64bits(want) && !(math.IsNaN(got[i]) && math.IsNaN(want)) {
				t.Fatalf("Estimates gives the %v-quantile of %v as %v, Estimate %v", q, bs, got[i], want)
			}
			if q == 0.9 && !math.IsNaN(want) {
				defined++
			}
		}
	}
	// Guards the test: most histograms have a defined quantile.
	if defined < 2000 {
		t.Fatalf("%d of 5000 histograms had a defined 0.9-quantile", defined)
	}
}
