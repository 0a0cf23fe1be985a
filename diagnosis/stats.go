package diagnosis

import "math"

// The tests the diagnosis runs on each signal; docs/diagnosis.md says
// which signal uses which and why. Each returns a one-sided p-value: the
// probability, were nothing changed, of data at least as far in the
// tested direction.

// tailSum sums exp(logpmf(x)) from k towards the end of the support in
// direction dir (+1 up to hi, -1 down to lo). Terms fall monotonically
// away from the mode, so once past it the sum stops when they no longer
// count. When k lies on the wrong side of the mode the complement is
// taken instead, whose terms do fall.
func tailSum(logpmf func(int) float64, lo, hi, k, dir int, mode float64) float64 {
	if dir > 0 && k <= lo {
		return 1
	}
	if dir < 0 && k >= hi {
		return 1
	}
	if dir > 0 && float64(k) < mode {
		return clamp01(1 - tailSum(logpmf, lo, hi, k-1, -1, mode))
	}
	if dir < 0 && float64(k) > mode {
		return clamp01(1 - tailSum(logpmf, lo, hi, k+1, +1, mode))
	}
	sum := 0.0
	for x := k; x >= lo && x <= hi; x += dir {
		t := math.Exp(logpmf(x))
		sum += t
		if t < sum*1e-15 || t < 1e-300 {
			break // the terms only fall from here
		}
	}
	return clamp01(sum)
}

func clamp01(p float64) float64 { return math.Min(math.Max(p, 0), 1) }

func lchoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// binomialTail is P[X >= k] (dir +1) or P[X <= k] (dir -1) for X ~
// Binomial(n, p).
func binomialTail(n, k int, p float64, dir int) float64 {
	if n <= 0 {
		return 1
	}
	switch {
	case p <= 0:
		if dir > 0 && k > 0 {
			return 0
		}
		return 1
	case p >= 1:
		if dir < 0 && k < n {
			return 0
		}
		return 1
	}
	if dir > 0 && k <= 0 || dir < 0 && k >= n {
		return 1
	}
	// from the mode's wrong side the complement, whose terms fall
	if mode := float64(n) * p; dir > 0 && float64(k) < mode {
		return clamp01(1 - binomialTail(n, k-1, p, -1))
	} else if dir < 0 && float64(k) > mode {
		return clamp01(1 - binomialTail(n, k+1, p, +1))
	}
	// Each term from the last by their ratio, pmf(x+1)/pmf(x) = (n-x)/(x+1)
	// * p/(1-p): one Lgamma call for the tail, not three and an Exp a term
	// as tailSum takes (BenchmarkObserve/queueing: the rank finding's sent
	// share sums a hundred terms an evaluation, 123 -> 80 µs).
	t := math.Exp(lchoose(n, k) + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
	odds := p / (1 - p)
	sum := 0.0
	for x := k; x >= 0 && x <= n; x += dir {
		sum += t
		if t < sum*1e-15 || t < 1e-300 {
			break // the terms only fall from here
		}
		if dir > 0 {
			t *= float64(n-x) / float64(x+1) * odds
		} else {
			t *= float64(x) / float64(n-x+1) / odds
		}
	}
	return clamp01(sum)
}

// poissonRates tests whether k1 events over t1 seconds (recent) are more
// (dir +1) or fewer (dir -1) than k0 events over t0 (baseline) allow, the
// rate being the same: given n = k1+k0, k1 is Binomial(n, t1/(t1+t0)).
// It needs no rate estimate and is exact for the few events of rare ones.
func poissonRates(k1, t1, k0, t0 float64, dir int) float64 {
	if !(t1 > 0 && t0 > 0) || k1 < 0 || k0 < 0 || math.IsNaN(k1+k0) {
		return 1
	}
	a, b := int(math.Round(k1)), int(math.Round(k0))
	return binomialTail(a+b, a, t1/(t1+t0), dir)
}

// fisher tests whether k1 of n1 recent observations above a threshold are
// a larger (dir +1) or smaller (dir -1) share than k0 of n0 baseline ones:
// given the k = k0+k1 above it in both, k1 is hypergeometric. It is the
// binomial test on the recent share with the baseline's own uncertainty
// taken into account, which a short baseline needs.
func fisher(k1, n1, k0, n0 float64, dir int) float64 {
	N1, N0 := int(math.Round(n1)), int(math.Round(n0))
	K1, K0 := int(math.Round(k1)), int(math.Round(k0))
	if N1 <= 0 || N0 <= 0 {
		return 1
	}
	K1, K0 = min(max(K1, 0), N1), min(max(K0, 0), N0)
	N, K := N1+N0, K1+K0
	lo, hi := max(0, N1-(N-K)), min(K, N1)
	base := lchoose(N, N1)
	pmf := func(x int) float64 { return lchoose(K, x) + lchoose(N-K, N1-x) - base }
	return tailSum(pmf, lo, hi, K1, dir, float64(N1)*float64(K)/float64(N))
}

// zTail is the one-sided p-value of a difference d with standard error
// se: P[Z >= d/se] for dir +1, P[Z <= d/se] for dir -1.
func zTail(d, se float64, dir int) float64 {
	if math.IsNaN(d) || math.IsNaN(se) {
		return 1
	}
	if se <= 0 {
		if d*float64(dir) > 0 {
			return 0
		}
		return 1
	}
	return 0.5 * math.Erfc(float64(dir)*d/se/math.Sqrt2)
}

// welch tests two means, each with its variance and number of
// observations (the normal approximation: both windows hold dozens of
// observations by the time anything is claimed).
func welch(m1, v1, n1, m0, v0, n0 float64, dir int) float64 {
	if !(n1 > 0 && n0 > 0) {
		return 1
	}
	return zTail(m1-m0, math.Sqrt(v1/n1+v0/n0), dir)
}

// chi2UpperFactor is df over χ²'s level quantile on df degrees of
// freedom, the quantile found by bisection on chi2CDF.
func chi2UpperFactor(df int, level float64) float64 {
	lo, hi := 0.0, float64(df)
	for chi2CDF(df, hi) < level {
		hi *= 2
	}
	for range 60 {
		mid := (lo + hi) / 2
		if chi2CDF(df, mid) < level {
			lo = mid
		} else {
			hi = mid
		}
	}
	return float64(df) / ((lo + hi) / 2)
}

// chi2CDF is P(χ²_df ≤ x), the regularized lower incomplete gamma
// P(df/2, x/2) by its series.
func chi2CDF(df int, x float64) float64 {
	if !(x > 0) {
		return 0
	}
	a, y := float64(df)/2, x/2
	lg, _ := math.Lgamma(a + 1)
	term, sum := 1.0, 1.0
	for n := 1; n < 1000; n++ {
		term *= y / (a + float64(n))
		sum += term
		if term < sum*1e-15 {
			break
		}
	}
	return math.Min(1, math.Exp(a*math.Log(y)-y-lg)*sum)
}
