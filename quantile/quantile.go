package quantile

import (
	"math"
	"slices"
	"sort"
)

// Bucket is one cumulative classic-histogram bucket: Count observations were
// less than or equal to UpperBound.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// bucketDeltaTolerance is the relative difference between two neighbouring
// cumulative counts below which they are taken to be equal (a float rounding
// artefact, e.g. after summing increases), whichever direction it goes. It is
// the tolerance PromQL's histogram_quantile uses.
const bucketDeltaTolerance = 1e-12

// Estimate estimates the q-quantile (0 <= q <= 1) of the observations
// that the cumulative buckets describe, the way PromQL's histogram_quantile
// does for a classic histogram:
//
//   - buckets are ordered by upper bound, and buckets with the same upper
//     bound are added together;
//   - the highest bucket must be +Inf, otherwise the result is undefined;
//   - a count smaller than the count of a lower bucket is raised to it (the
//     cumulative counts are made monotonic), and counts that differ only by
//     float rounding are made equal;
//   - at least two buckets and at least one observation are needed;
//   - the quantile's rank is q times the +Inf count; the first bucket whose
//     count reaches the rank holds the quantile, which is linearly
//     interpolated between the bucket's lower bound (the previous bucket's
//     upper bound, or 0 for the lowest Bucket) and its upper bound;
//   - a lowest bucket whose upper bound is <= 0 returns that upper bound
//     (there is no lower bound to interpolate from);
//   - a quantile in the +Inf bucket returns the highest finite upper bound.
//
// Undefined results are NaN; callers treat NaN as "no series". q outside
// [0, 1] gives -Inf or +Inf, as in PromQL, but this package only asks for
// fixed quantiles inside that range. buckets is reordered and modified.
func Estimate(q float64, buckets []Bucket) float64 {
	switch {
	case math.IsNaN(q):
		return math.NaN()
	case q < 0:
		return math.Inf(-1)
	case q > 1:
		return math.Inf(+1)
	}
	buckets, ok := prepare(buckets)
	if !ok {
		return math.NaN()
	}
	return estimate(q, buckets)
}

// Estimates sets each of out to Estimate(qs[i], buckets) with the buckets
// prepared once for all: the derived latency gauges ask for three
// quantiles of each histogram, and preparing (sorting, merging, making
// monotonic) a copy for each was 12 % of a derivation's CPU on one engine
// (BenchmarkScrapeCycle's profile). buckets is reordered and modified.
func Estimates(qs []float64, buckets []Bucket, out []float64) {
	buckets, ok := prepare(buckets)
	for i, q := range qs {
		switch {
		case math.IsNaN(q) || !ok && q >= 0 && q <= 1:
			out[i] = math.NaN()
		case q < 0:
			out[i] = math.Inf(-1)
		case q > 1:
			out[i] = math.Inf(+1)
		default:
			out[i] = estimate(q, buckets)
		}
	}
}

// estimate is Estimate's reading of prepared buckets, q within [0, 1].
func estimate(q float64, buckets []Bucket) float64 {
	total := buckets[len(buckets)-1].Count
	rank := q * total
	// The +Inf bucket is not searched: if no finite bucket reaches the rank,
	// i lands on it.
	i := sort.Search(len(buckets)-1, func(i int) bool { return buckets[i].Count >= rank })
	if i == len(buckets)-1 {
		return buckets[len(buckets)-2].UpperBound
	}
	if i == 0 && buckets[0].UpperBound <= 0 {
		return buckets[0].UpperBound
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = buckets[i-1].UpperBound, buckets[i-1].Count
	}
	upper := buckets[i].UpperBound
	inBucket := buckets[i].Count - below
	return lower + (upper-lower)*((rank-below)/inBucket)
}

// prepare sorts the buckets by bound, adds up equal bounds and makes the
// counts monotonic, as histogram_quantile does before reading them. ok is
// false where nothing is defined: no +Inf bucket, fewer than two buckets, or
// no observation.
func prepare(buckets []Bucket) ([]Bucket, bool) {
	if len(buckets) == 0 {
		return nil, false
	}
	slices.SortFunc(buckets, func(a, b Bucket) int {
		switch {
		case a.UpperBound < b.UpperBound:
			return -1
		case a.UpperBound > b.UpperBound:
			return 1
		}
		return 0
	})
	if !math.IsInf(buckets[len(buckets)-1].UpperBound, +1) {
		return nil, false
	}
	buckets = mergeEqualBounds(buckets)
	makeMonotonic(buckets)
	if len(buckets) < 2 || buckets[len(buckets)-1].Count == 0 {
		return nil, false
	}
	return buckets, true
}

// mergeEqualBounds adds up neighbouring buckets of a sorted slice that share
// an upper bound ("1" and "1.0" are the same bound) and returns the shortened
// slice, reusing its array.
func mergeEqualBounds(buckets []Bucket) []Bucket {
	out := buckets[:1]
	for _, b := range buckets[1:] {
		last := &out[len(out)-1]
		if b.UpperBound == last.UpperBound {
			last.Count += b.Count
			continue
		}
		out = append(out, b)
	}
	return out
}

// makeMonotonic walks the sorted buckets upwards and replaces every count
// that is below the highest count seen so far, or equal to it up to float
// rounding, with that count. A count that was replaced does not become the
// new reference.
func makeMonotonic(buckets []Bucket) {
	ref := buckets[0].Count
	for i := 1; i < len(buckets); i++ {
		c := buckets[i].Count
		switch {
		case c == ref:
		case nearlyEqual(ref, c, bucketDeltaTolerance) || c < ref:
			buckets[i].Count = ref
		default:
			ref = c
		}
	}
}

// nearlyEqual reports whether a and b differ by less than eps relative to
// their magnitude; next to zero, where a relative difference means nothing,
// the difference must be below eps times the smallest normal float64.
func nearlyEqual(a, b, eps float64) bool {
	if math.IsNaN(a) && math.IsNaN(b) {
		return true
	}
	if a == b {
		return true
	}
	const smallestNormal = 0x1p-1022
	diff := math.Abs(a - b)
	sum := math.Abs(a) + math.Abs(b)
	if a == 0 || b == 0 || sum < smallestNormal {
		return diff < eps*smallestNormal
	}
	return diff/math.Min(sum, math.MaxFloat64) < eps
}
