package collector

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// History keeps, for the upstream series that some derivation in derive.go
// reads, a short windowed history of values, so that rates, ratios, means and
// quantiles over sliding windows can be computed without a time-series
// database.
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

	bySig  map[uint64][]*series
	series []*series
	round  uint64 // incremented on each Observe, to spot duplicate samples
}

// source says which upstream sample a series is and how it is stored.
type source uint8

const (
	srcNone source = iota
	srcPreemptions
	srcPrefixHits
	srcPrefixQueries
	srcExtPrefixHits
	srcExtPrefixQueries
	srcPromptTokens
	srcGenerationTokens
	srcRequestSuccess
	srcQueueSum
	srcQueueCount
	srcPrefillSum
	srcPrefillCount
	srcDecodeSum
	srcDecodeCount
	srcPromptLenSum
	srcPromptLenCount
	srcGenLenSum
	srcGenLenCount
	srcTTFTBucket
	srcITLBucket
	srcE2EBucket
	srcV0PrefixHitRate // gauge, stored as observed
	numSources
)

// sourceBySample maps the upstream sample names that derivations read to
// their source. Everything else upstream is ignored.
var sourceBySample = map[string]source{
	"vllm:num_preemptions_total":               srcPreemptions,
	"vllm:prefix_cache_hits_total":             srcPrefixHits,
	"vllm:prefix_cache_queries_total":          srcPrefixQueries,
	"vllm:external_prefix_cache_hits_total":    srcExtPrefixHits,
	"vllm:external_prefix_cache_queries_total": srcExtPrefixQueries,
	"vllm:prompt_tokens_total":                 srcPromptTokens,
	"vllm:generation_tokens_total":             srcGenerationTokens,
	"vllm:request_success_total":               srcRequestSuccess,
	"vllm:request_queue_time_seconds_sum":      srcQueueSum,
	"vllm:request_queue_time_seconds_count":    srcQueueCount,
	"vllm:request_prefill_time_seconds_sum":    srcPrefillSum,
	"vllm:request_prefill_time_seconds_count":  srcPrefillCount,
	"vllm:request_decode_time_seconds_sum":     srcDecodeSum,
	"vllm:request_decode_time_seconds_count":   srcDecodeCount,
	"vllm:request_prompt_tokens_sum":           srcPromptLenSum,
	"vllm:request_prompt_tokens_count":         srcPromptLenCount,
	"vllm:request_generation_tokens_sum":       srcGenLenSum,
	"vllm:request_generation_tokens_count":     srcGenLenCount,
	"vllm:time_to_first_token_seconds_bucket":  srcTTFTBucket,
	"vllm:inter_token_latency_seconds_bucket":  srcITLBucket,
	"vllm:e2e_request_latency_seconds_bucket":  srcE2EBucket,
	"vllm:gpu_prefix_cache_hit_rate":           srcV0PrefixHitRate,
}

// neededFamily holds every family name under which a needed sample may be
// printed: the sample name itself (counters in text format 0.0.4, and any
// sample whose family had no TYPE line) and the name without _total or the
// histogram suffix (OpenMetrics counters, histograms).
var neededFamily = func() map[string]bool {
	m := map[string]bool{}
	for name := range sourceBySample {
		m[name] = true
		for _, suf := range []string{"_total", "_bucket", "_sum", "_count"} {
			if len(name) > len(suf) && name[len(name)-len(suf):] == suf {
				m[name[:len(name)-len(suf)]] = true
			}
		}
	}
	return m
}()

func (s source) isBucket() bool {
	return s == srcTTFTBucket || s == srcITLBucket || s == srcE2EBucket
}

func (s source) isGauge() bool { return s == srcV0PrefixHitRate }

// series is the stored history of one upstream series.
type series struct {
	src source
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

// NewHistory keeps, per series that some derivation needs, reset-corrected
// cumulative values for the longest window. At most one point is kept per
// resolution (the newest observation always being kept); a resolution <= 0
// stands for longestWindow/300. Windows <= 0 are ignored.
func NewHistory(windows []time.Duration, resolution time.Duration) *History {
	ws := make([]time.Duration, 0, len(windows))
	for _, w := range windows {
		if w > 0 {
			ws = append(ws, w)
		}
	}
	slices.Sort(ws)
	ws = slices.Compact(ws)
	h := &History{windows: ws, bySig: map[uint64][]*series{}}
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

// FormatWindow prints a window as Prometheus prints durations ("5s", "1m",
// "1h30m"); it is the value of the window label.
func FormatWindow(d time.Duration) string { return model.Duration(d).String() }

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
		if !neededFamily[f.Name] {
			continue
		}
		for si := range f.Samples {
			smp := &f.Samples[si]
			src := sourceBySample[smp.Name()]
			if src == srcNone {
				continue
			}
			v := smp.Value
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			s := h.lookup(src, smp.Labels)
			if s == nil || s.seenRound == h.round {
				continue // unusable le, or a duplicate sample
			}
			s.seenRound = h.round
			if src.isGauge() {
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

func (h *History) forget(s *series) {
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

// lookup returns the series for an upstream sample of source src, creating
// it, or nil if it is a bucket whose le cannot be parsed.
func (h *History) lookup(src source, lbls labels.Labels) *series {
	sig := lbls.Hash()
	for _, s := range h.bySig[sig] {
		if labels.Equal(s.lbls, lbls) {
			return s
		}
	}
	s := &series{src: src}
	if src.isBucket() {
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

// storedPoints returns the number of points in the ring (for tests).
func (h *History) storedPoints() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// storedSeries returns the number of series kept (for tests).
func (h *History) storedSeries() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.series)
}
