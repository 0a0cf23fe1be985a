package quantile

import (
	"math"
	"sort"
)

// FractionAtMost estimates the share of the observations that the
// cumulative buckets describe whose value was at most target: the inverse
// of Estimate, under the same assumptions (observations spread evenly
// inside a bucket, the lowest bucket starting at 0).
//
//   - buckets are prepared as for Estimate: sorted, equal bounds
//     added, counts made monotonic; the highest bucket must be +Inf and
//     there must be at least one finite bucket and one observation;
//   - a target equal to a bucket's upper bound gives that bucket's count
//     over the +Inf count: exact, no assumption made;
//   - a target inside a bucket interpolates linearly between the counts at
//     the bucket's lower and upper bound (lower bound 0 for the lowest
//     bucket, which then must have a positive upper bound and target >= 0);
//   - a target above the highest finite bound is known only when the +Inf
//     bucket holds nothing beyond that bound (the result is then 1);
//     otherwise the observations between the bound and the target are
//     unknown and the result is undefined.
//
// Undefined results are NaN; callers treat NaN as "no series". buckets is
// reordered and modified.
func FractionAtMost(target float64, buckets []Bucket) float64 {
	if math.IsNaN(target) {
		return math.NaN()
	}
	buckets, ok := prepare(buckets)
	if !ok {
		return math.NaN()
	}
	inf := len(buckets) - 1
	total := buckets[inf].Count
	// First bucket whose upper bound reaches the target; the +Inf bucket
	// always does.
	i := sort.Search(len(buckets), func(i int) bool { return buckets[i].UpperBound >= target })
	switch {
	case i == inf && !math.IsInf(target, +1):
		// Beyond the highest finite bound: only known if nothing is there.
		if buckets[inf-1].Count == total {
			return 1
		}
		return math.NaN()
	case buckets[i].UpperBound == target:
		return buckets[i].Count / total
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = buckets[i-1].UpperBound, buckets[i-1].Count
	} else if buckets[0].UpperBound <= 0 || target < 0 {
		return math.NaN() // no lower bound to interpolate from
	}
	upper := buckets[i].UpperBound
	at := below + (buckets[i].Count-below)*(target-lower)/(upper-lower)
	return at / total
}
