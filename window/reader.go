package window

import (
	"math"
	"sort"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

// Reader reads a History as of one instant; see History.Read.
type Reader struct {
	h *History
	t int64 // the instant, in nanoseconds since h.base
}

// Range is the set of points of one window ending at the Reader's instant,
// in the ring of that window.
type Range struct{ ring, first, last int }

// Read calls fn with a Reader of the history as of now, holding the
// history's lock: fn must not call the History's other methods. fn is not
// called before the first observation.
func (h *History) Read(now time.Time, fn func(r *Reader)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.hasBase || len(h.rings) == 0 || h.rings[0].n == 0 {
		return
	}
	fn(&Reader{h: h, t: int64(now.Sub(h.base))})
}

// Windows returns the windows, ascending.
func (r *Reader) Windows() []time.Duration { return r.h.windows }

// Series returns every kept series, in the order they were first seen.
func (r *Reader) Series() []*Series { return r.h.series }

// Unwindowed returns the label sets of the samples the last observation
// could not keep, all true when there were too many to list: derivations
// over a group holding one of them would silently miss it.
func (r *Reader) Unwindowed() (lsets []labels.Labels, all bool) {
	return r.h.unwindowed, r.h.unwindowedAll
}

// Range returns the points of the window w ending at the Reader's instant
// (from < ts <= now); ok is false when it holds fewer than 2 points, where
// nothing is defined.
func (r *Reader) Range(w time.Duration) (rg Range, ok bool) {
	ri, known := r.h.ringOf[w]
	if !known {
		return Range{}, false
	}
	first, last := r.h.rings[ri].windowPoints(r.t-int64(w), r.t)
	return Range{ri, first, last}, last-first >= 1
}

// Key is what the series stands for.
func (s *Series) Key() Key { return s.in.Key }

// Kind is how the series is stored.
func (s *Series) Kind() Kind { return s.in.Kind }

// Labels are the upstream labels, with __name__.
func (s *Series) Labels() labels.Labels { return s.lbls }

// UpperBound is the parsed le of a Bucket series.
func (s *Series) UpperBound() float64 { return s.le }

// WithoutInf reports whether s is a bucket of a histogram child whose last
// observation had no +Inf bucket: without its total count, a sum over
// children that took its buckets in would be no histogram. Its window
// holds that layout alone (a layout change restarts the child).
func (s *Series) WithoutInf() bool { return s.child != nil && s.child.noInf }

// windowPoints returns the logical positions [first, last] of the points
// with from < ts <= to; last < first when there are none.
func (r *ring) windowPoints(from, to int64) (first, last int) {
	first = sort.Search(r.n, func(i int) bool { return r.ts[r.ring(i)] > from })
	last = sort.Search(r.n, func(i int) bool { return r.ts[r.ring(i)] > to }) - 1
	return first, last
}

// Values calls fn with each value gauge series s has in rg, oldest first.
func (r *Reader) Values(s *Series, rg Range, fn func(v float64)) {
	rn, vals := r.h.rings[rg.ring], s.rs[rg.ring].vals
	for i := rg.first; i <= rg.last; i++ {
		if v := vals[rn.ring(i)]; !math.IsNaN(v) {
			fn(v)
		}
	}
}

// Increase returns counter series s's increase between its first and last
// point in rg and the seconds between them. inWindow says whether s has a
// point there at all, ok whether it has two.
func (r *Reader) Increase(s *Series, rg Range) (inc, secs float64, inWindow, ok bool) {
	rn, sr := r.h.rings[rg.ring], &s.rs[rg.ring]
	// First and last point of the window where the series has a value.
	lo, hi := -1, -1
	for i := rg.first; i <= rg.last; i++ {
		if !math.IsNaN(sr.vals[rn.ring(i)]) {
			lo = i
			break
		}
	}
	if lo < 0 {
		return 0, 0, false, false
	}
	for i := rg.last; i > lo; i-- {
		if !math.IsNaN(sr.vals[rn.ring(i)]) {
			hi = i
			break
		}
	}
	if hi < 0 {
		return 0, 0, true, false // a single point
	}
	if end := sr.vals[rn.ring(hi)]; math.Abs(end) <= rebaseAbove {
		inc = end - sr.vals[rn.ring(lo)]
	} else {
		// Large stored values (an absurd value in the ring, outside this
		// window or not): sum the window's own increments.
		for i := lo + 1; i <= hi; i++ {
			if d := sr.incs[rn.ring(i)]; !math.IsNaN(d) {
				inc += d
			}
		}
	}
	secs = float64(rn.ts[rn.ring(hi)]-rn.ts[rn.ring(lo)]) / float64(time.Second)
	if !(inc >= 0) || secs <= 0 {
		return 0, 0, true, false // cannot happen: increments are never negative, points are ordered
	}
	return inc, secs, true, true
}
