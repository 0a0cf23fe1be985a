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
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// History keeps, for the upstream series its Inputs name, a short windowed
// history of values.
//
// Layout: windows of equal resolution share one ring of point timestamps;
// per series and ring one slice of values aligned with that ring (NaN where
// the series had no value at that point), and for counters one slice of the
// increments that led to each value. Each window's resolution is its own
// (max(minResolution, window/300)), so a long window never coarsens a short
// one.
//
// Counters are stored reset-corrected: a value v not below the previous one
// prev adds v-prev, a lower one, or one that restarted (see below) and came
// back higher than before, adds v (the upstream counts from zero). A
// counter restarted when its _created time, or the upstream's
// process_start_time_seconds, moved to a time after the previous scrape
// that read it and not after this one: it started between the two. Any
// other change of either is jitter (a start time recomputed from clock
// ticks, a rounding): counted in ObserveStats and otherwise ignored, since
// taking it for a restart would add the counter's whole value as one
// scrape's increase. The stored value is the running sum of those increments since
// the ring's oldest point; it is rebased on its increments when it grows
// large, and an increase whose ends are large is summed from the increments
// themselves, so that one absurd value costs precision only while it is in
// the window. Gauges are stored as observed.
//
// Memory is bounded by the resolution: a ring's timeline is cut into slots,
// and a slot holds at most one point, the newest observation made in it. When
// a later observation of the same slot replaces an earlier one, a series
// missing from the later one loses its value there (its increment is carried
// to its next value): no value ever stands at a time it was not observed.
// Points at or before newest-longest window of the ring are dropped, so a
// ring holds at most ceil(longest/resolution)+1 points. A series forgotten
// upstream is dropped once its last value has left every ring, and at most
// MaxSeries series are kept: samples beyond are not windowed, are counted,
// and make the derivations of their group absent (see Reader.Unwindowed).
//
// History is safe for concurrent use.
type History struct {
	mu      sync.Mutex
	windows []time.Duration // ascending, distinct, positive
	longest time.Duration
	rings   []*ring
	ringOf  map[time.Duration]int // window -> index in rings

	// Time is kept as nanoseconds since base, computed with time.Time.Sub,
	// so a monotonic clock reading is used when both times carry one.
	base    time.Time
	hasBase bool

	inputs    *Inputs
	maxSeries int // 0: no bound
	// labelBytes is the size of the kept series' labels; new series are
	// refused beyond maxSeries*labelBytesPerSeries, so that labels that
	// change every scrape cannot fill memory with series that are few
	// but huge.
	labelBytes uint64
	bySig      map[uint64][]*Series
	series     []*Series
	children   map[uint64][]*child
	round      uint64 // incremented on each Observe, to spot duplicate samples

	// Per observation: _created times by the hash of their labels, the
	// upstream's process start time as last accepted and as on the page
	// being observed (NaN: none, or several), the wall-clock time of the
	// last observation in Unix seconds, and what the last Observe found.
	created      map[uint64]float64
	procStart    float64
	procStartNew float64
	lastWall     float64
	noted        bool // NoteStarts read the next Observe's page
	last         ObserveStats
	// The _created samples already counted as jitter in this observation:
	// the series of one histogram child share one.
	jittered map[uint64]uint64
	// Label sets of the samples the last Observe could not window; nil
	// with unwindowedAll when there were more than maxUnwindowed.
	unwindowed    []labels.Labels
	unwindowedAll bool
}

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

// ObserveStats is what one Observe found beyond the values.
type ObserveStats struct {
	// Unwindowed counts samples not kept because the history already held
	// MaxSeries series.
	Unwindowed int
	// LayoutChanges counts histogram children whose set of bucket bounds
	// changed, and series whose family changed type under the same name
	// (TensorRT-LLM's spec-decode gauges became counters): their window
	// restarted from the new layout.
	LayoutChanges int
	// Restarts counts counter series found to have restarted by their
	// _created time or the upstream's process start time while their value
	// did not go down (a reset Prometheus cannot see).
	Restarts int
	// CreatedJitter counts _created samples whose time changed without
	// moving past the previous scrape of their series: not a restart.
	CreatedJitter int
	// ProcessStartJitter is 1 when process_start_time_seconds changed
	// without moving past the previous scrape: not a restart.
	ProcessStartJitter int
}

// startSlack is how far a start time may lie after the scrape that reads
// it and still be taken as a restart: the upstream's clock may run a little
// ahead of the sidecar's. A start time further on is not a fresh start.
const startSlack = 60.0

// procStartSlack is how far process_start_time_seconds must move forward to
// be a restart: it is computed from the boot time and clock ticks, and a
// real restart of vLLM takes far longer than that.
const procStartSlack = 0.5

// maxUnwindowed bounds the label sets remembered for Reader.Unwindowed.
const maxUnwindowed = 1024

// labelBytesPerSeries is the mean label size per kept series the history
// allows: a vLLM series' labels take 100 to 300 bytes.
const labelBytesPerSeries = 512

// rebaseAbove is the stored value beyond which a ring's counters are
// rebased and increases are summed from increments: below 2^30 a float64
// difference is exact to 2^-22.
const rebaseAbove = 1 << 30

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
	// per ring: the values and increments aligned with that ring.
	rs []seriesRing
	// createdHash is the label hash of the _created sample that dates this
	// series' child (0 for gauges).
	createdHash uint64
	child       *child // the histogram child of a bucket series

	// Reset correction state (counters): the last value, its _created time
	// and the wall-clock time (Unix seconds) of the observation that read
	// them.
	lastRaw     float64
	lastCreated float64
	lastWall    float64
	seen        bool

	lastT     int64 // time of the newest observation
	seenRound uint64
	// typ is the type of the family the series was last printed in.
	typ model.MetricType
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

// child is the set of bucket series of one histogram child (one key, one
// label set without le): its layout is the set of their bounds.
type child struct {
	key     Key
	lbls    labels.Labels // without le, __name__ of the bucket samples
	members []*Series
	// sig and n identify the layout last seen; cur* accumulate this
	// observation's.
	sig, curSig uint64
	n, curN     int
	round       uint64
}

// New keeps, per series that inputs name, reset-corrected cumulative
// values for each window, at a resolution of max(minResolution,
// window/300): at most one point per resolution (the newest observation
// always being kept). Windows sharing a resolution share their points.
// Windows <= 0 are ignored.
func New(windows []time.Duration, minResolution time.Duration, inputs *Inputs) *History {
	ws := make([]time.Duration, 0, len(windows))
	for _, w := range windows {
		if w > 0 {
			ws = append(ws, w)
		}
	}
	slices.Sort(ws)
	ws = slices.Compact(ws)
	h := &History{windows: ws, inputs: inputs, bySig: map[uint64][]*Series{}, children: map[uint64][]*child{},
		ringOf: map[time.Duration]int{}, created: map[uint64]float64{},
		jittered: map[uint64]uint64{}, procStartNew: math.NaN()}
	if len(ws) > 0 {
		h.longest = ws[len(ws)-1]
	}
	byRes := map[time.Duration]int{}
	for _, w := range ws {
		res := max(minResolution, w/300, time.Nanosecond)
		i, ok := byRes[res]
		if !ok {
			i = len(h.rings)
			byRes[res] = i
			h.rings = append(h.rings, &ring{resolution: res})
		}
		r := h.rings[i]
		r.windows = append(r.windows, w)
		r.longest = max(r.longest, w)
		h.ringOf[w] = i
	}
	for _, r := range h.rings {
		// Kept points are newer than newest-longest and lie in distinct
		// slots, so they span at most ceil(longest/resolution)+1 slots.
		r.maxPoints = max(int((r.longest+r.resolution-1)/r.resolution)+1, 2)
	}
	return h
}

// SetMaxSeries bounds the series kept, and their labels to 512 bytes a series
// on average; 0 means no bound. Series already kept stay until they are
// forgotten.
func (h *History) SetMaxSeries(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.maxSeries = max(n, 0)
}

// Windows returns the windows derivations are computed over, ascending.
func (h *History) Windows() []time.Duration { return slices.Clone(h.windows) }

// Format prints a window as Prometheus prints durations ("5s", "1m",
// "1h30m"); it is the value of the window label.
func Format(d time.Duration) string { return model.Duration(d).String() }

// Observe records one successful scrape taken at now. Observations must come
// in time order; one older than the newest point is ignored. Restarts are
// read from fams unless NoteStarts was given the page as parsed first.
func (h *History) Observe(now time.Time, fams []exposition.Family) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.noted {
		h.readStarts(fams)
	}
	h.noted = false
	h.last = ObserveStats{}
	h.unwindowed, h.unwindowedAll = nil, false
	if len(h.windows) == 0 {
		return
	}
	if !h.hasBase {
		h.base, h.hasBase = now, true
	}
	t := int64(now.Sub(h.base))
	for _, r := range h.rings {
		if r.n > 0 && t < r.ts[r.ring(r.n-1)] {
			return
		}
	}
	h.round++
	wall := float64(now.UnixNano()) / 1e9
	restartAll := false
	if ps := h.procStartNew; !math.IsNaN(ps) {
		if h.procStart != 0 && ps != h.procStart {
			if ps > h.procStart+procStartSlack && startedBetween(ps, h.lastWall, wall) {
				restartAll = true
			} else {
				h.last.ProcessStartJitter = 1
			}
		}
		h.procStart = ps
	}
	h.lastWall = wall

	// This observation's point in each ring, and whether it takes over the
	// ring's newest point (same slot).
	type at struct {
		idx    int
		seq    uint64
		merged bool
	}
	var pts [8]at
	points := pts[:0]
	pruned := false
	for _, r := range h.rings {
		if r.n > 0 && r.slot(t) == r.slot(r.ts[r.ring(r.n-1)]) {
			idx := r.ring(r.n - 1)
			r.ts[idx] = t
			points = append(points, at{idx, r.firstSeq + uint64(r.n) - 1, true})
			continue
		}
		if h.prune(r, t) {
			pruned = true
		}
		idx, seq := h.appendPoint(r, t)
		points = append(points, at{idx, seq, false})
	}
	if pruned {
		h.forgetOld(t)
	}

	var touched []*child
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
				continue // unusable le, no room, or a duplicate sample
			}
			s.seenRound = h.round
			s.lastT = t
			if s.typ != f.Type {
				if s.typ != "" {
					// Another type under the same name: no value reads
					// across the change.
					h.restartSeries(s)
					h.last.LayoutChanges++
				}
				s.typ = f.Type
			}
			if c := s.child; c != nil {
				if c.round != h.round {
					c.round, c.curSig, c.curN = h.round, 0, 0
					touched = append(touched, c)
				}
				c.curSig += boundHash(s.le)
				c.curN++
			}
			if in.Kind == Gauge {
				for ri, p := range points {
					sr := &s.rs[ri]
					sr.vals[p.idx] = v
					sr.lastSeq = p.seq
				}
				continue
			}
			d := 0.0
			created, hasCreated := h.created[s.createdHash]
			if s.seen {
				restarted := restartAll
				if hasCreated && s.lastCreated != 0 && created != s.lastCreated {
					if created > s.lastCreated && startedBetween(created, s.lastWall, wall) {
						restarted = true
					} else if h.jittered[s.createdHash] != h.round {
						h.jittered[s.createdHash] = h.round
						h.last.CreatedJitter++
					}
				}
				d = Increase(s.lastRaw, v)
				if restarted && v >= s.lastRaw {
					d = v // restarted, and already counted past the old value
					h.last.Restarts++
				}
				if math.IsInf(d, 0) {
					d = v
				}
			}
			s.lastRaw, s.lastWall, s.seen = v, wall, true
			if hasCreated {
				s.lastCreated = created
			}
			for ri, p := range points {
				sr := &s.rs[ri]
				had := p.merged && sr.lastSeq == p.seq && !math.IsNaN(sr.vals[p.idx])
				sr.cum += d
				if sr.incs == nil && !(math.Abs(sr.cum) <= rebaseAbove) {
					sr.keepIncrements(h.rings[ri])
				}
				if sr.incs != nil {
					if had {
						// The earlier observation of this slot is
						// replaced: its increment and this one lead here.
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
	}
	// A series the replaced observation of a slot had and this one lacks
	// loses its value there: it was not observed at the new time. Its
	// increment goes to its next value (the running sum already holds it).
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
	for _, c := range touched {
		if c.n > 0 && (c.curSig != c.sig || c.curN != c.n) {
			h.restartChild(c)
			h.last.LayoutChanges++
		}
		c.sig, c.n = c.curSig, c.curN
	}
}

// NoteStarts reads, for the next Observe, the _created times of the kept
// families and the upstream's process start time from the page as parsed
// (the sidecar drops _created families from what it serves and keeps).
func (h *History) NoteStarts(raw []exposition.Family) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.readStarts(raw)
	h.noted = true
}

// readStarts reads the _created times and the process start time for the
// next observation, which judges them against its time. The process start
// time is read only from a page with a single process_start_time_seconds:
// with several processes one restarting says nothing of the others'
// counters.
func (h *History) readStarts(raw []exposition.Family) {
	clear(h.created)
	h.procStartNew = math.NaN()
	for fi := range raw {
		f := &raw[fi]
		if base, ok := strings.CutSuffix(f.Name, "_created"); ok && h.inputs.Family(base) {
			for si := range f.Samples {
				h.created[f.Samples[si].Labels.Hash()] = f.Samples[si].Value
			}
			continue
		}
		if f.Name == "process_start_time_seconds" && len(f.Samples) == 1 {
			if v := f.Samples[0].Value; !math.IsNaN(v) && !math.IsInf(v, 0) && v > 0 {
				h.procStartNew = v
			}
		}
	}
}

// startedBetween reports whether a start time (Unix seconds) is that of a
// fresh start between the previous scrape (prev, 0 if none) and this one
// (now): after prev, and not after now beyond the clocks' slack.
func startedBetween(start, prev, now float64) bool {
	return prev > 0 && start > prev && start <= now+startSlack
}

// restartChild drops what a histogram child's bucket series hold before
// this observation: a new bucket layout is never mixed with the old one,
// so its quantiles are absent until the new layout has two points.
func (h *History) restartChild(c *child) {
	for _, s := range c.members {
		for ri, r := range h.rings {
			sr := &s.rs[ri]
			newest := r.ring(r.n - 1)
			for i := 0; i < r.n; i++ {
				idx := r.ring(i)
				if idx == newest && s.seenRound == h.round {
					continue
				}
				sr.vals[idx] = math.NaN()
				if sr.incs != nil {
					sr.incs[idx] = math.NaN()
				}
			}
			sr.carry = 0
		}
	}
}

// restartSeries drops what a series holds before this observation, as
// restartChild does for a histogram's buckets: its next value starts anew.
func (h *History) restartSeries(s *Series) {
	for ri := range h.rings {
		sr := &s.rs[ri]
		for i := range sr.vals {
			sr.vals[i] = math.NaN()
		}
		for i := range sr.incs {
			sr.incs[i] = math.NaN()
		}
		sr.carry = 0
	}
	s.seen = false
}

// boundHash is an order-free fingerprint of one bucket bound: a layout's
// signature is the sum over its bounds.
func boundHash(le float64) uint64 {
	x := math.Float64bits(le)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
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

// forgetOld drops the series whose newest value has left every ring.
func (h *History) forgetOld(t int64) {
	cut := t - int64(h.longest)
	kept := h.series[:0]
	for _, s := range h.series {
		if s.lastT > cut {
			kept = append(kept, s)
			continue
		}
		h.forget(s)
	}
	clear(h.series[len(kept):])
	h.series = kept
}

func (h *History) forget(s *Series) {
	h.labelBytes -= s.lbls.ByteSize()
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
	if c := s.child; c != nil {
		if i := slices.Index(c.members, s); i >= 0 {
			c.members = slices.Delete(c.members, i, i+1)
		}
		if len(c.members) == 0 {
			h.forgetChild(c)
		}
	}
}

func (h *History) forgetChild(c *child) {
	sig := c.lbls.Hash() ^ uint64(c.key)
	list := h.children[sig]
	if i := slices.Index(list, c); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(h.children, sig)
	} else {
		h.children[sig] = list
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

// lookup returns the series for an upstream sample kept as in, creating
// it, or nil if it is a bucket whose le cannot be parsed or the history is
// full (then the sample is counted as unwindowed).
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
	if h.maxSeries > 0 && (len(h.series) >= h.maxSeries || h.labelBytes+lbls.ByteSize() > uint64(h.maxSeries)*labelBytesPerSeries) {
		h.last.Unwindowed++
		switch {
		case h.unwindowedAll:
		case len(h.unwindowed) >= maxUnwindowed:
			h.unwindowed, h.unwindowedAll = nil, true
		default:
			h.unwindowed = append(h.unwindowed, lbls.Copy())
		}
		return nil
	}
	s.lbls = lbls.Copy()
	h.labelBytes += s.lbls.ByteSize()
	s.rs = make([]seriesRing, len(h.rings))
	for ri, r := range h.rings {
		sr := &s.rs[ri]
		sr.vals = nanSlice(len(r.ts))
	}
	if in.Kind != Gauge {
		s.createdHash = createdLabels(s.lbls).Hash()
	}
	if in.Kind == Bucket {
		s.child = h.childOf(in.Key, s.lbls)
		s.child.members = append(s.child.members, s)
	}
	h.bySig[sig] = append(h.bySig[sig], s)
	h.series = append(h.series, s)
	return s
}

func nanSlice(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.NaN()
	}
	return out
}

// createdLabels are the labels of the _created sample that dates the child
// of a counter, _sum, _count or bucket series: its name with the suffix
// replaced by _created, without le.
func createdLabels(l labels.Labels) labels.Labels {
	name := l.Get(model.MetricNameLabel)
	for _, suf := range []string{"_total", "_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok {
			name = base
			break
		}
	}
	b := labels.NewBuilder(l)
	b.Set(model.MetricNameLabel, name+"_created")
	b.Del(model.BucketLabel)
	return b.Labels()
}

// childOf returns the histogram child of bucket labels l (key k).
func (h *History) childOf(k Key, l labels.Labels) *child {
	b := labels.NewBuilder(l)
	b.Del(model.BucketLabel)
	cl := b.Labels()
	sig := cl.Hash() ^ uint64(k)
	for _, c := range h.children[sig] {
		if c.key == k && labels.Equal(c.lbls, cl) {
			return c
		}
	}
	c := &child{key: k, lbls: cl}
	h.children[sig] = append(h.children[sig], c)
	return c
}

// StoredPoints returns the number of points in the ring of the longest
// window.
func (h *History) StoredPoints() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.rings) == 0 {
		return 0
	}
	return h.rings[h.ringOf[h.longest]].n
}

// StoredSeries returns the number of series kept.
func (h *History) StoredSeries() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.series)
}

// LastObservation returns what the last Observe found beyond the values.
func (h *History) LastObservation() ObserveStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

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

// Capacity returns the number of points the rings have room for now, summed.
func (h *History) Capacity() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.rings {
		n += len(r.ts)
	}
	return n
}
