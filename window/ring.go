package window

import (
	"math"
	"slices"
	"time"
)

// ring is the timeline of the windows that share one resolution.
type ring struct {
	windows    []time.Duration // ascending
	longest    time.Duration
	resolution time.Duration
	maxPoints  int
	// ts[(start+i)%len(ts)] for i in [0, n) is the i-th oldest point.
	// firstSeq is the sequence number of the oldest point; sequence
	// numbers count every point ever appended.
	ts       []int64
	start, n int
	firstSeq uint64
}

// ring maps the i-th oldest point to its index in ts.
func (r *ring) ring(i int) int { return (r.start + i) % len(r.ts) }

func (r *ring) slot(t int64) int64 {
	res := int64(r.resolution)
	if t >= 0 {
		return t / res
	}
	return (t - res + 1) / res
}

// prune drops the points of r that no window ending at t or later can use
// (at or before t-longest), rebases the counters of r whose stored values
// grew large, and reports whether it dropped any point.
func (h *History) prune(r *ring, t int64) bool {
	cut := t - int64(r.longest)
	dropped := false
	for r.n > 0 && r.ts[r.start] <= cut {
		r.start = (r.start + 1) % len(r.ts)
		r.n--
		r.firstSeq++
		dropped = true
	}
	if dropped {
		ri := slices.Index(h.rings, r)
		for _, s := range h.series {
			if sr := &s.rs[ri]; sr.incs != nil {
				h.rebase(r, sr)
			}
		}
	}
	return dropped
}

// rebase recomputes one series' stored values in r as the running sum of
// its increments from r's oldest point on, so that their size, and with it
// their precision, depends on what is in the window only.
func (h *History) rebase(r *ring, sr *seriesRing) {
	sum, first := 0.0, true
	for i := 0; i < r.n; i++ {
		idx := r.ring(i)
		if math.IsNaN(sr.incs[idx]) {
			continue
		}
		if first {
			first = false // the oldest value's own increment is outside every window
		} else {
			sum += sr.incs[idx]
		}
		sr.vals[idx] = sum
	}
	// A pending carry is part of the next value's increment.
	sr.cum = sum + sr.carry
	if math.Abs(sr.cum) <= rebaseAbove/2 {
		sr.incs, sr.carry = nil, 0 // back to 8 bytes a point; cum holds the carry
	}
}

// appendPoint adds a point at t to r, growing it if needed, and returns its
// index and sequence number. Every series gets NaN at the new point.
func (h *History) appendPoint(r *ring, t int64) (int, uint64) {
	ri := slices.Index(h.rings, r)
	if r.n == len(r.ts) {
		if len(r.ts) < r.maxPoints {
			h.grow(r, ri)
		} else {
			// Cannot happen given maxPoints, but stay bounded anyway.
			r.start = (r.start + 1) % len(r.ts)
			r.n--
			r.firstSeq++
		}
	}
	idx := r.ring(r.n)
	r.n++
	r.ts[idx] = t
	for _, s := range h.series {
		sr := &s.rs[ri]
		sr.vals[idx] = math.NaN()
		if sr.incs != nil {
			sr.incs[idx] = math.NaN()
		}
	}
	return idx, r.firstSeq + uint64(r.n) - 1
}

// grow doubles r (up to maxPoints), laying points out oldest first.
func (h *History) grow(r *ring, ri int) {
	c := min(max(2*len(r.ts), 8), r.maxPoints)
	old := r.ts
	r.ts = relayout(r, old, c, 0)
	for _, s := range h.series {
		sr := &s.rs[ri]
		sr.vals = relayout(r, sr.vals, c, math.NaN())
		if sr.incs != nil {
			sr.incs = relayout(r, sr.incs, c, math.NaN())
		}
	}
	r.start = 0
}

// relayout copies the ring's n points, oldest first, into a new slice of
// length c whose other entries are fill.
func relayout[T any](r *ring, old []T, c int, fill T) []T {
	out := make([]T, c)
	for i := 0; i < r.n; i++ {
		out[i] = old[(r.start+i)%len(old)]
	}
	for i := r.n; i < c; i++ {
		out[i] = fill
	}
	return out
}

// slotPoint is an observation's point in one ring.
type slotPoint struct {
	idx int    // its index in the ring's ts
	seq uint64 // its sequence number
	// merged is set when the observation took over the ring's newest point
	// (same slot).
	merged bool
}

// placePoints gives the observation at t its point in each ring: the
// newest one when t falls in its slot, else a new one after the points no
// window can use any more are pruned (and the series that left every ring
// forgotten).
func (h *History) placePoints(t int64) []slotPoint {
	points := h.points[:0]
	pruned := false
	for _, r := range h.rings {
		if r.n > 0 && r.slot(t) == r.slot(r.ts[r.ring(r.n-1)]) {
			idx := r.ring(r.n - 1)
			r.ts[idx] = t
			points = append(points, slotPoint{idx, r.firstSeq + uint64(r.n) - 1, true})
			continue
		}
		if h.prune(r, t) {
			pruned = true
		}
		idx, seq := h.appendPoint(r, t)
		points = append(points, slotPoint{idx, seq, false})
	}
	if pruned {
		h.forgetOld(t)
	}
	h.points = points
	return points
}

// storeGauge stores gauge value v at the observation's points.
func (s *Series) storeGauge(v float64, points []slotPoint) {
	for ri, p := range points {
		sr := &s.rs[ri]
		sr.vals[p.idx] = v
		sr.lastSeq = p.seq
	}
}

// storeIncrease adds counter increase d to the running sums and stores it
// at the observation's points.
func (s *Series) storeIncrease(d float64, points []slotPoint, rings []*ring) {
	for ri, p := range points {
		sr := &s.rs[ri]
		had := p.merged && sr.lastSeq == p.seq && !math.IsNaN(sr.vals[p.idx])
		sr.cum += d
		if sr.incs == nil && !(math.Abs(sr.cum) <= rebaseAbove) {
			sr.keepIncrements(rings[ri])
		}
		if sr.incs != nil {
			if had {
				// The earlier observation of this slot is replaced: its
				// increment and this one lead here.
				sr.incs[p.idx] += d
			} else {
				sr.incs[p.idx] = d + sr.carry
			}
		}
		sr.carry = 0
		sr.vals[p.idx] = sr.cum
		sr.lastSeq = p.seq
	}
}

// dropReplaced: a series the replaced observation of a slot had and this
// one lacks loses its value there, as it was not observed at the new
// time. Its increment goes to its next value (the running sum already
// holds it).
func (h *History) dropReplaced(points []slotPoint) {
	for ri, p := range points {
		if !p.merged {
			continue
		}
		for _, s := range h.series {
			sr := &s.rs[ri]
			if s.seenRound == h.round || sr.lastSeq != p.seq || math.IsNaN(sr.vals[p.idx]) {
				continue
			}
			if sr.incs != nil {
				sr.carry += sr.incs[p.idx]
				sr.incs[p.idx] = math.NaN()
			}
			sr.vals[p.idx] = math.NaN()
		}
	}
}

// seriesRing is one series' part of one ring.
type seriesRing struct {
	// vals holds the value at each point; for counters the running sum of
	// the increments since the series' first value in the ring.
	vals []float64
	// incs holds, for a counter whose running sum passed rebaseAbove, the
	// increment that led to each value; nil otherwise (the increments are
	// then exact differences of vals), so that a counter costs 8 bytes a
	// point unless an absurd value needs 16.
	incs []float64
	cum  float64 // counters: the running sum at the newest point
	// carry is an increment whose point was taken over by a later
	// observation the series was missing from; it goes to the next value
	// (only kept with incs: the running sum holds it anyway).
	carry   float64
	lastSeq uint64 // sequence number of the newest point with a value
}

// keepIncrements starts keeping sr's increments in r, from the differences
// of its values so far (exact: they are all below rebaseAbove). The first
// value's increment is never part of a window's increase; it is 0.
func (sr *seriesRing) keepIncrements(r *ring) {
	sr.incs = nanSlice(len(sr.vals))
	prev := math.NaN()
	for i := 0; i < r.n; i++ {
		idx := r.ring(i)
		v := sr.vals[idx]
		if math.IsNaN(v) {
			continue
		}
		if math.IsNaN(prev) {
			sr.incs[idx] = 0
		} else {
			sr.incs[idx] = v - prev
		}
		prev = v
	}
}

func nanSlice(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.NaN()
	}
	return out
}
