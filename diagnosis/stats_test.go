package diagnosis

import (
	"math"
	"testing"
)

// Each value here is worked out by hand from the distribution's pmf.
func TestTests(t *testing.T) {
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, want) {
			t.Errorf("%s = %.12g, want %.12g", name, got, want)
		}
	}
	// P[Bin(4, 0.2) >= 4] = 0.2^4
	near("binomial upper", binomialTail(4, 4, 0.2, 1), 0.0016)
	// P[Bin(5, 0.2) >= 4] = 5*0.2^4*0.8 + 0.2^5
	near("binomial upper, two terms", binomialTail(5, 4, 0.2, 1), 5*0.0016*0.8+0.00032)
	// below the mean the complement is taken: P[Bin(10, 0.5) >= 1] = 1 - 0.5^10
	near("binomial upper from below the mode", binomialTail(10, 1, 0.5, 1), 1-math.Pow(0.5, 10))
	near("binomial lower", binomialTail(10, 0, 0.5, -1), math.Pow(0.5, 10))
	// 4 preemptions in 10 s after none in 40 s: Binomial(4, 10/50) at 4
	near("poisson rates", poissonRates(4, 10, 0, 40, 1), 0.0016)
	// 3 events after 1: P[Bin(4, 0.2) >= 3] = 4*0.2^3*0.8 + 0.2^4
	near("poisson rates, three after one", poissonRates(3, 10, 1, 40, 1), 4*0.008*0.8+0.0016)
	// Fisher: 2 of 2 recent above, 0 of 2 baseline: hypergeometric
	// (K=2, N=4, n=2) at 2 = 1/C(4,2)
	near("fisher", fisher(2, 2, 0, 2, 1), 1.0/6)
	near("fisher lower", fisher(0, 2, 2, 2, -1), 1.0/6)
	// one standard error above: P[Z >= 1]
	near("z", zTail(1, 1, 1), 0.5*math.Erfc(1/math.Sqrt2))
	// a tail far out underflows to 0 and stops early instead of summing
	// a hundred thousand zero terms
	if p := binomialTail(100000, 60000, 0.1, 1); p != 0 {
		t.Errorf("far tail = %v, want 0", p)
	}
}

// Rare events never outvote a change backed by many requests: three
// preemptions after none in a short window are not significant at the
// per-signal level, and do not reach the share of requests a cause needs.
func TestRareEventsAreNoCause(t *testing.T) {
	if p := poissonRates(3, 10, 0, 40, 1); !(p > DefaultSignificance/numSignals) {
		t.Errorf("3 preemptions after none: p = %v, significant", p)
	}
}

// binomialTail sums its terms by their ratio: it agrees with the sum of
// each term from lchoose (tailSum) over small and large n, both tails,
// either side of the mode.
func TestBinomialTailByRatioAgreesWithTheTermSum(t *testing.T) {
	bySum := func(n, k int, p float64, dir int) float64 {
		lp, lq := math.Log(p), math.Log1p(-p)
		pmf := func(x int) float64 { return lchoose(n, x) + float64(x)*lp + float64(n-x)*lq }
		return tailSum(pmf, 0, n, k, dir, float64(n)*p)
	}
	for _, n := range []int{1, 2, 7, 40, 333, 2000, 50000} {
		for _, p := range []float64{0.001, 0.1, 0.25, 0.5, 0.9} {
			for _, f := range []float64{0, 0.01, 0.2, 0.5, 0.7, 1} {
				k := int(f * float64(n))
				for _, dir := range []int{-1, 1} {
					got, want := binomialTail(n, k, p, dir), bySum(n, k, p, dir)
					if math.Abs(got-want) > 1e-12+1e-9*want {
						t.Errorf("binomialTail(%d, %d, %g, %d) = %.17g, the term sum %.17g", n, k, p, dir, got, want)
					}
				}
			}
		}
	}
}
