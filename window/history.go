// Package window keeps a short, reset-corrected history of the upstream
// samples that derivations read, so that rates, ratios, means and quantiles
// over sliding windows can be computed without a time-series database.
//
// It knows nothing of metric names: the caller says, as Inputs, which
// sample names to keep, under which key and of which kind.
package window

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// History keeps, for the upstream series its Inputs name, a short windowed
// history of values.
//
// Layout: one ring of point timestamps shared by all series, and per series
// one value slice aligned with that ring (NaN where the series had no value
// at that point). Counter values are stored reset-corrected: the stored value
// only ever grows, by v-prev when an observation v is not below the previous
// one prev and by v when it is (the upstream restarted and counts from zero).
// Gauges are stored as observed.
//
// Memory is bounded by the resolution: the timeline is cut into slots of one
// resolution, and a slot holds at most one point, the newest observation made
// in it (a later observation in the same slot replaces the earlier one's
// values, after the earlier values have been used for reset correction).
// Points at or before newest-longestWindow are dropped, so at most
// ceil(longestWindow/resolution)+1 points are stored. A series forgotten
// upstream is dropped once its last value has left the ring.
//
// History is safe for concurrent use.
type History struct {
	mu         sync.Mutex
	windows    []time.Duration // ascending, distinct, positive
	longest    time.Duration
	resolution time.Duration
	maxPoints  int

	// Time is kept as nanoseconds since base, computed with time.Time.Sub,
	// so a monotonic clock reading is used when both times carry one.
	base    time.Time
	hasBase bool

	// Ring of points: ts[(start+i)%len(ts)] for i in [0, n) is the i-th
	// oldest point. firstSeq is the sequence number of the oldest point;
	// sequence numbers count every point ever appended.
	ts       []int64
	start, n int
	firstSeq uint64

	inputs *Inputs
	bySig  map[uint64][]*Series
	series []*Series
	round  uint64 // incremented on each Observe, to spot duplicate samples
}

// Kind says how a kept sample is stored.
type Kind uint8

const (
	// Counter samples are stored reset-corrected.
	Counter Kind = iota + 1
	// Bucket samples are counters with a parsed le bound.
	Bucket
	// Gauge samples are stored as observed.
	Gauge
)

// Key identifies what a kept sample stands for; its meaning is the
// caller's (a derivation input).
type Key uint16

// Input is how one upstream sample name is kept.
type Input struct {
	Key  Key
	Kind Kind
}

// Inputs are the upstream samples a History keeps, by sample name.
type Inputs struct {
	bySample map[string]Input
	// byFamily holds every family name under which a kept sample may be
	// printed: the sample name itself (counters in text format 0.0.4, and
	// any sample whose family had no TYPE line) and the name without
	// _total or the histogram suffix (OpenMetrics counters, histograms).
	byFamily map[string]bool
}

// NewInputs returns the Inputs that keep exactly the given sample names.
func NewInputs(bySample map[string]Input) *Inputs {
	in := &Inputs{bySample: make(map[string]Input, len(bySample)), byFamily: map[string]bool{}}
	for name, i := range bySample {
		in.bySample[name] = i
		in.byFamily[name] = true
		for _, suf := range []string{"_total", "_bucket", "_sum", "_count"} {
			if len(name) > len(suf) && name[len(name)-len(suf):] == suf {
				in.byFamily[name[:len(name)-len(suf)]] = true
			}
		}
	}
	return in
}

// Family reports whether a family of that name may hold kept samples.
func (in *Inputs) Family(name string) bool { return in.byFamily[name] }

// Sample returns how a sample of that name is kept, if it is.
func (in *Inputs) Sample(name string) (Input, bool) {
	i, ok := in.bySample[name]
	return i, ok
}

// Series is the stored history of one upstream series.
type Series struct {
	in Input
	// lbls are the upstream labels (with __name__); le is the parsed bucket
	// bound for bucket series.
	lbls labels.Labels
	le   float64
	// vals is aligned with History.ts: vals[i] belongs to point ts[i].
	vals []float64

	// Reset correction state (counters).
	lastRaw   float64
	corrected float64
	seen      bool

	lastSeq   uint64 // sequence number of the newest point with a value
	seenRound uint64
}

// New keeps, per series that inputs name, reset-corrected cumulative
// values for the longest window. At most one point is kept per
// resolution (the newest observation always being kept); a resolution <= 0
// stands for longestWindow/300. Windows <= 0 are ignored.
func New(windows []time.Duration, resolution time.Duration, inputs *Inputs) *History {
	ws := make([]time.Duration, 0, len(windows))
	for _, w := range windows {
		if w > 0 {
			ws = append(ws, w)
		}
	}
	slices.Sort(ws)
	ws = slices.Compact(ws)
	h := &History{windows: ws, inputs: inputs, bySig: map[uint64][]*Series{}}
	if len(ws) > 0 {
		h.longest = ws[len(ws)-1]
	}
	if resolution <= 0 {
		resolution = h.longest / 300
	}
	if resolution <= 0 {
		resolution = time.Nanosecond
	}
	h.resolution = resolution
	// Kept points are newer than newest-longest and lie in distinct slots,
	// so they span at most ceil(longest/resolution)+1 slots.
	maxPoints := int((h.longest + resolution - 1) / resolution)
	h.maxPoints = maxPoints + 1
	if h.maxPoints < 2 {
		h.maxPoints = 2
	}
	return h
}

// Windows returns the windows derivations are computed over, ascending.
func (h *History) Windows() []time.Duration { return slices.Clone(h.windows) }

// Format prints a window as Prometheus prints durations ("5s", "1m",
// "1h30m"); it is the value of the window label.
func Format(d time.Duration) string { return model.Duration(d).String() }

// Observe records one successful scrape taken at now. Observations must come
// in time order; one older than the newest point is ignored.
func (h *History) Observe(now time.Time, fams []exposition.Family) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.windows) == 0 {
		return
	}
	if !h.hasBase {
		h.base, h.hasBase = now, true
	}
	t := int64(now.Sub(h.base))
	h.round++

	var idx int
	var seq uint64
	if h.n > 0 && t < h.ts[h.ring(h.n-1)] {
		return
	}
	if h.n > 0 && h.slot(t) == h.slot(h.ts[h.ring(h.n-1)]) {
		// Same slot as the newest point: that point becomes this
		// observation. Series missing from this observation keep the
		// value they had in the slot.
		idx = h.ring(h.n - 1)
		seq = h.firstSeq + uint64(h.n) - 1
		h.ts[idx] = t
	} else {
		h.prune(t)
		idx, seq = h.appendPoint(t)
	}

	for fi := range fams {
		f := &fams[fi]
		if !h.inputs.Family(f.Name) {
			continue
		}
		for si := range f.Samples {
			smp := &f.Samples[si]
			in, ok := h.inputs.Sample(smp.Name())
			if !ok {
				continue
			}
			v := smp.Value
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			s := h.lookup(in, smp.Labels)
			if s == nil || s.seenRound == h.round {
				continue // unusable le, or a duplicate sample
			}
			s.seenRound = h.round
			if in.Kind == Gauge {
				s.vals[idx] = v
			} else {
				if s.seen {
					d := v - s.lastRaw
					if v < s.lastRaw {
						d = v // restarted from zero
					}
					if d > 0 {
						s.corrected += d
					}
				}
				s.lastRaw, s.seen = v, true
				s.vals[idx] = s.corrected
			}
			s.lastSeq = seq
		}
	}
}

// ring maps the i-th oldest point to its index in ts.
func (h *History) ring(i int) int { return (h.start + i) % len(h.ts) }

func (h *History) slot(t int64) int64 {
	r := int64(h.resolution)
	if t >= 0 {
		return t / r
	}
	return (t - r + 1) / r
}

// prune drops points that no window ending at t or later can use (at or
// before t-longest), then series whose last value was in a dropped point.
func (h *History) prune(t int64) {
	cut := t - int64(h.longest)
	dropped := false
	for h.n > 0 && h.ts[h.start] <= cut {
		h.start = (h.start + 1) % len(h.ts)
		h.n--
		h.firstSeq++
		dropped = true
	}
	if !dropped {
		return
	}
	kept := h.series[:0]
	for _, s := range h.series {
		if s.lastSeq >= h.firstSeq && h.n > 0 {
			kept = append(kept, s)
			continue
		}
		h.forget(s)
	}
	clear(h.series[len(kept):])
	h.series = kept
}

func (h *History) forget(s *Series) {
	sig := s.lbls.Hash()
	list := h.bySig[sig]
	for i, o := range list {
		if o == s {
			list = slices.Delete(list, i, i+1)
			break
		}
	}
	if len(list) == 0 {
		delete(h.bySig, sig)
	} else {
		h.bySig[sig] = list
	}
}

// appendPoint adds a point at t, growing the ring if needed, and returns its
// index and sequence number. Every series gets NaN at the new point.
func (h *History) appendPoint(t int64) (int, uint64) {
	if h.n == len(h.ts) {
		if len(h.ts) < h.maxPoints {
			h.grow()
		} else {
			// Cannot happen given maxPoints, but stay bounded anyway.
			h.start = (h.start + 1) % len(h.ts)
			h.n--
			h.firstSeq++
		}
	}
	idx := h.ring(h.n)
	h.n++
	h.ts[idx] = t
	for _, s := range h.series {
		s.vals[idx] = math.NaN()
	}
	return idx, h.firstSeq + uint64(h.n) - 1
}

// grow doubles the ring (up to maxPoints), laying points out oldest first.
func (h *History) grow() {
	c := 2 * len(h.ts)
	if c < 8 {
		c = 8
	}
	if c > h.maxPoints {
		c = h.maxPoints
	}
	h.ts = relayout(h, h.ts, c, 0)
	for _, s := range h.series {
		s.vals = relayout(h, s.vals, c, math.NaN())
	}
	h.start = 0
}

// relayout copies the ring's n points, oldest first, into a new slice of
// length c whose other entries are fill.
func relayout[T any](h *History, old []T, c int, fill T) []T {
	out := make([]T, c)
	for i := 0; i < h.n; i++ {
		out[i] = old[(h.start+i)%len(old)]
	}
	for i := h.n; i < c; i++ {
		out[i] = fill
	}
	return out
}

// lookup returns the series for an upstream sample kept as in, creating
// it, or nil if it is a bucket whose le cannot be parsed.
func (h *History) lookup(in Input, lbls labels.Labels) *Series {
	sig := lbls.Hash()
	for _, s := range h.bySig[sig] {
		if labels.Equal(s.lbls, lbls) {
			return s
		}
	}
	s := &Series{in: in}
	if in.Kind == Bucket {
		le, err := strconv.ParseFloat(lbls.Get(model.BucketLabel), 64)
		if err != nil || math.IsNaN(le) {
			return nil
		}
		s.le = le
	}
	s.lbls = lbls.Copy()
	s.vals = make([]float64, len(h.ts))
	for i := range s.vals {
		s.vals[i] = math.NaN()
	}
	h.bySig[sig] = append(h.bySig[sig], s)
	h.series = append(h.series, s)
	return s
}

// StoredPoints returns the number of points in the ring.
func (h *History) StoredPoints() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// StoredSeries returns the number of series kept.
func (h *History) StoredSeries() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.series)
}

// Reader reads a History as of one instant; see History.Read.
type Reader struct {
	h *History
	t int64 // the instant, in nanoseconds since h.base
}

// Range is the set of points of one window ending at the Reader's instant.
type Range struct{ first, last int }

// Read calls fn with a Reader of the history as of now, holding the
// history's lock: fn must not call the History's other methods. fn is not
// called before the first observation.
func (h *History) Read(now time.Time, fn func(r *Reader)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 || !h.hasBase {
		return
	}
	fn(&Reader{h: h, t: int64(now.Sub(h.base))})
}

// Windows returns the windows, ascending.
func (r *Reader) Windows() []time.Duration { return r.h.windows }

// Series returns every kept series, in the order they were first seen.
func (r *Reader) Series() []*Series { return r.h.series }

// Range returns the points of the window w ending at the Reader's instant
// (from < ts <= now); ok is false when it holds fewer than 2 points, where
// nothing is defined.
func (r *Reader) Range(w time.Duration) (rg Range, ok bool) {
	first, last := r.h.windowPoints(r.t-int64(w), r.t)
	return Range{first, last}, last-first >= 1
}

// Key is what the series stands for.
func (s *Series) Key() Key { return s.in.Key }

// Kind is how the series is stored.
func (s *Series) Kind() Kind { return s.in.Kind }

// Labels are the upstream labels, with __name__.
func (s *Series) Labels() labels.Labels { return s.lbls }

// UpperBound is the parsed le of a Bucket series.
func (s *Series) UpperBound() float64 { return s.le }

// windowPoints returns the logical positions [first, last] of the points
// with from < ts <= to; last < first when there are none.
func (h *History) windowPoints(from, to int64) (first, last int) {
	first = sort.Search(h.n, func(i int) bool { return h.ts[h.ring(i)] > from })
	last = sort.Search(h.n, func(i int) bool { return h.ts[h.ring(i)] > to }) - 1
	return first, last
}

// Values calls fn with each value gauge series s has in rg, oldest first.
func (r *Reader) Values(s *Series, rg Range, fn func(v float64)) {
	for i := rg.first; i <= rg.last; i++ {
		if v := s.vals[r.h.ring(i)]; !math.IsNaN(v) {
			fn(v)
		}
	}
}

// Increase returns counter series s's increase between its first and last
// point in rg and the seconds between them. inWindow says whether s has a
// point there at all, ok whether it has two.
func (r *Reader) Increase(s *Series, rg Range) (inc, secs float64, inWindow, ok bool) {
	h := r.h
	// First and last point of the window where the series has a value.
	lo, hi := -1, -1
	for i := rg.first; i <= rg.last; i++ {
		if !math.IsNaN(s.vals[h.ring(i)]) {
			lo = i
			break
		}
	}
	if lo < 0 {
		return 0, 0, false, false
	}
	for i := rg.last; i > lo; i-- {
		if !math.IsNaN(s.vals[h.ring(i)]) {
			hi = i
			break
		}
	}
	if hi < 0 {
		return 0, 0, true, false // a single point
	}
	inc = s.vals[h.ring(hi)] - s.vals[h.ring(lo)]
	secs = float64(h.ts[h.ring(hi)]-h.ts[h.ring(lo)]) / float64(time.Second)
	if inc < 0 || secs <= 0 {
		return 0, 0, true, false // cannot happen: stored counters never decrease, points are ordered
	}
	return inc, secs, true, true
}

// Capacity returns the number of points the ring has room for now.
func (h *History) Capacity() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ts)
}
