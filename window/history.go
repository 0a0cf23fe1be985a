package window

import (
	"math"
	"slices"
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

	// Scratch of one Observe, kept to spare its allocations: the
	// observation's point in each ring, the histogram children it saw.
	points  []slotPoint
	touched []*child
	bounds  []bucketCount // invalidChild's scratch
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
	// InvalidHistograms counts histogram children whose bucket counts in
	// this observation fall as the bound grows, or that have no +Inf
	// bucket: no client library prints them (a page corrupted upstream).
	InvalidHistograms int
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
	// ProcessRestarted: process_start_time_seconds says every counter
	// restarted; Announced are the kept counter series whose _created
	// time says they restarted, whatever their value did.
	ProcessRestarted bool
	Announced        []labels.Labels
}

// maxUnwindowed bounds the label sets remembered for Reader.Unwindowed.
const maxUnwindowed = 1024

// labelBytesPerSeries is the mean label size per kept series the history
// allows: a vLLM series' labels take 100 to 300 bytes.
const labelBytesPerSeries = 512

// rebaseAbove is the stored value beyond which a ring's counters are
// rebased and increases are summed from increments: below 2^30 a float64
// difference is exact to 2^-22.
const rebaseAbove = 1 << 30

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
	o, ok := h.begin(now, fams)
	if !ok {
		return
	}
	for fi := range fams {
		f := &fams[fi]
		if !h.inputs.Family(f.Name) {
			continue
		}
		for si := range f.Samples {
			if in, ok := h.inputs.Sample(f.Samples[si].Name()); ok {
				h.observeSample(&o, in, f.Type, &f.Samples[si])
			}
		}
	}
	h.dropReplaced(o.points)
	h.checkLayouts()
}

// observation is what the steps of one Observe share.
type observation struct {
	t    int64   // its time, in nanoseconds since base
	wall float64 // its wall-clock time, Unix seconds
	// restartAll is set when the upstream process restarted since the
	// previous observation: every counter restarted.
	restartAll bool
	points     []slotPoint // its point in each ring, by ring index
}

// begin starts an observation at now: it reads the start times (unless
// NoteStarts did), resets what the last Observe found, places the
// observation's point in each ring and judges the process start time. It
// reports false for an observation to ignore (no windows, or older than
// the newest point).
func (h *History) begin(now time.Time, fams []exposition.Family) (observation, bool) {
	if !h.noted {
		h.readStarts(fams)
	}
	h.noted = false
	h.last = ObserveStats{}
	h.unwindowed, h.unwindowedAll = nil, false
	if len(h.windows) == 0 {
		return observation{}, false
	}
	if !h.hasBase {
		h.base, h.hasBase = now, true
	}
	o := observation{t: int64(now.Sub(h.base)), wall: float64(now.UnixNano()) / 1e9}
	for _, r := range h.rings {
		if r.n > 0 && o.t < r.ts[r.ring(r.n-1)] {
			return observation{}, false
		}
	}
	h.round++
	o.restartAll = h.processRestarted(o.wall)
	h.lastWall = o.wall
	o.points = h.placePoints(o.t)
	return o, true
}

// observeSample records one sample kept as in: a gauge as observed, a
// counter as its reset-corrected increase. A NaN or infinite value, an
// unusable le, a full history and a duplicate sample are skipped. A series
// whose family changed type under the same name (TensorRT-LLM's spec-decode
// gauges became counters) restarts: no value reads across the change.
func (h *History) observeSample(o *observation, in Input, typ model.MetricType, smp *exposition.Sample) {
	v := smp.Value
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	s := h.lookup(in, smp.Labels)
	if s == nil || s.seenRound == h.round {
		return // unusable le, no room, or a duplicate sample
	}
	s.seenRound = h.round
	s.lastT = o.t
	if s.typ != typ {
		if s.typ != "" {
			h.restartSeries(s)
			h.last.LayoutChanges++
		}
		s.typ = typ
	}
	if s.child != nil {
		h.noteBound(s.child, s.le)
	}
	if in.Kind == Gauge {
		s.storeGauge(v, o.points)
		return
	}
	s.storeIncrease(h.counterIncrease(s, v, o), o.points, h.rings)
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
