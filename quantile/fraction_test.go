package quantile

import (
	"math"
	"testing"
)

// Every expectation is worked out by hand: at a bucket bound the share is
// count(bound)/count(+Inf); inside a bucket (lower, upper] it is
//
//	(count(lower) + (count(upper)-count(lower)) * (target-lower)/(upper-lower)) / count(+Inf)
//
// with lower = 0 and count(lower) = 0 for the lowest bucket.
func TestBucketFractionAtMost(t *testing.T) {
	inf := math.Inf(1)
	nan := math.NaN()
	// 0.1:2, 0.5:10, 1:16, 2.5:19, +Inf:20.
	h := []Bucket{{0.1, 2}, {0.5, 10}, {1, 16}, {2.5, 19}, {inf, 20}}
	cases := []struct {
		name    string
		target  float64
		buckets []Bucket
		want    float64
	}{
		{"on a bound", 0.5, h, 10.0 / 20},
		{"on the lowest bound", 0.1, h, 2.0 / 20},
		{"on the highest finite bound", 2.5, h, 19.0 / 20},
		// (0.5, 1]: 10 + 6*(0.75-0.5)/0.5 = 13 -> 13/20.
		{"inside a bucket", 0.75, h, 13.0 / 20},
		// (1, 2.5]: 16 + 3*(2-1)/1.5 = 18 -> 0.9.
		{"inside a wide bucket", 2, h, 0.9},
		// (0, 0.1]: 2*0.05/0.1 = 1 -> 1/20.
		{"below the lowest bound", 0.05, h, 1.0 / 20},
		{"zero target", 0, h, 0},
		// One observation above 2.5: how many are <= 5 is unknown.
		{"above the highest finite bound, +Inf bucket holds some", 5, h, nan},
		{"above the highest finite bound, +Inf bucket empty", 5, []Bucket{{1, 3}, {2, 4}, {inf, 4}}, 1},
		{"+Inf target", inf, h, 1},
		{"empty window", 0.5, []Bucket{{0.1, 0}, {0.5, 0}, {inf, 0}}, nan},
		{"no +Inf bucket", 0.5, []Bucket{{0.1, 2}, {0.5, 10}}, nan},
		{"only +Inf bucket", 0.5, []Bucket{{inf, 7}}, nan},
		{"no buckets", 0.5, nil, nan},
		{"NaN target", nan, h, nan},
		{"negative target", -1, h, nan},
		// A lowest bound <= 0 has no lower bound below it: a target under
		// it cannot be interpolated; on it, it is exact.
		{"below a negative lowest bound", -2, []Bucket{{-1, 1}, {1, 4}, {inf, 4}}, nan},
		{"on a negative lowest bound", -1, []Bucket{{-1, 1}, {1, 4}, {inf, 4}}, 0.25},
		// (-1, 1]: 1 + 3*(0.5+1)/2 = 3.25 -> 3.25/4.
		{"inside above a negative lowest bound", 0.5, []Bucket{{-1, 1}, {1, 4}, {inf, 4}}, 3.25 / 4},
		// Unsorted, le "1" and "1.0" both present: 0.5:2, 1:6, +Inf:8;
		// 0.75 -> 2 + 4*0.5 = 4 -> 0.5.
		{"unsorted and duplicate bounds", 0.75, []Bucket{{inf, 8}, {1, 5}, {0.5, 2}, {1, 1}}, 0.5},
		// 1:5, 2:3 (a decrease, raised to 5), 4:8, +Inf:8: at 2 -> 5/8;
		// at 3 -> 5 + 3*(1/2) = 6.5 -> 6.5/8.
		{"monotonicity fix, on the lowered bound", 2, []Bucket{{1, 5}, {2, 3}, {4, 8}, {inf, 8}}, 5.0 / 8},
		{"monotonicity fix, above it", 3, []Bucket{{1, 5}, {2, 3}, {4, 8}, {inf, 8}}, 6.5 / 8},
		// Counts that are fractions (increases of a rate) work the same:
		// 0.25:1.2, 0.5:2.4, +Inf:3; 0.3 -> 1.2 + 1.2*0.05/0.25 = 1.44 -> 0.48.
		{"fractional counts", 0.3, []Bucket{{0.25, 1.2}, {0.5, 2.4}, {inf, 3}}, 0.48},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := FractionAtMost(c.target, append([]Bucket(nil), c.buckets...))
			if math.IsNaN(c.want) {
				if !math.IsNaN(got) {
					t.Fatalf("got %g, want undefined (NaN)", got)
				}
				return
			}
			if math.Abs(got-c.want) > 1e-12 {
				t.Fatalf("got %.15g, want %.15g", got, c.want)
			}
		})
	}
}

// The share at the q-quantile estimate is q wherever the quantile falls
// inside a finite bucket: both interpolate linearly under the same rule,
// one from the rank, the other from the value.
func TestBucketFractionInvertsQuantile(t *testing.T) {
	inf := math.Inf(1)
	h := []Bucket{{0.01, 40}, {0.025, 100}, {0.05, 140}, {0.1, 150}, {inf, 150}}
	for _, q := range []float64{0.1, 0.25, 0.5, 0.75, 0.9, 0.99} {
		v := Estimate(q, append([]Bucket(nil), h...))
		got := FractionAtMost(v, append([]Bucket(nil), h...))
		if math.Abs(got-q) > 1e-12 {
			t.Errorf("q=%g: quantile %g, share at it %g", q, v, got)
		}
	}
}
