package window

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// startSlack is how far a start time may lie after the scrape that reads
// it and still be taken as a restart: the upstream's clock may run a little
// ahead of the sidecar's. A start time further on is not a fresh start.
const startSlack = 60.0

// procStartSlack is how far process_start_time_seconds must move forward to
// be a restart: it is computed from the boot time and clock ticks, and a
// real restart of vLLM takes far longer than that.
const procStartSlack = 0.5

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

// processRestarted judges the process start time read for the observation
// at wall (Unix seconds): true when it moved to a time between the
// previous observation and this one, so that every counter restarted;
// any other change is counted as jitter.
func (h *History) processRestarted(wall float64) bool {
	ps := h.procStartNew
	if math.IsNaN(ps) {
		return false
	}
	restarted := false
	if h.procStart != 0 && ps != h.procStart {
		if ps > h.procStart+procStartSlack && startedBetween(ps, h.lastWall, wall) {
			restarted = true
			h.last.ProcessRestarted = true
		} else {
			h.last.ProcessStartJitter = 1
		}
	}
	h.procStart = ps
	return restarted
}

// counterIncrease is counter series s's increase from its previous value
// to v: the difference, or v itself after a reset or a restart its
// _created time or the process start time tells (see History).
func (h *History) counterIncrease(s *Series, v float64, o *observation) float64 {
	d := 0.0
	created, hasCreated := h.created[s.createdHash]
	if s.seen {
		restarted := o.restartAll
		if hasCreated && s.lastCreated != 0 && created != s.lastCreated {
			if created > s.lastCreated && startedBetween(created, s.lastWall, o.wall) {
				restarted = true
				h.last.Announced = append(h.last.Announced, s.lbls)
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
	s.lastRaw, s.lastWall, s.seen = v, o.wall, true
	if hasCreated {
		s.lastCreated = created
	}
	return d
}

// noteBound adds bucket bound le to the layout histogram child c shows in
// this observation.
func (h *History) noteBound(c *child, le float64) {
	if c.round != h.round {
		c.round, c.curSig, c.curN = h.round, 0, 0
		h.touched = append(h.touched, c)
	}
	c.curSig += boundHash(le)
	c.curN++
}

// checkLayouts restarts the histogram children whose bucket layout this
// observation changed.
func (h *History) checkLayouts() {
	for _, c := range h.touched {
		invalid, noInf := h.invalidChild(c)
		c.noInf = noInf
		// A full history may hold part of a child: not the upstream's fault.
		if h.last.Unwindowed == 0 && invalid {
			h.last.InvalidHistograms++
		}
		if c.n > 0 && (c.curSig != c.sig || c.curN != c.n) {
			h.restartChild(c)
			h.last.LayoutChanges++
		}
		c.sig, c.n = c.curSig, c.curN
	}
	clear(h.touched)
	h.touched = h.touched[:0]
}

// invalidChild reports whether the bucket counts histogram child c showed
// in this observation are not a histogram's: a count above that of a
// higher bound (beyond float rounding), or no +Inf bucket (noInf).
func (h *History) invalidChild(c *child) (invalid, noInf bool) {
	h.bounds = h.bounds[:0]
	sorted := true
	for _, s := range c.members {
		if s.seenRound != h.round {
			continue
		}
		if n := len(h.bounds); n > 0 && s.le < h.bounds[n-1].le {
			sorted = false
		}
		h.bounds = append(h.bounds, bucketCount{s.le, s.lastRaw})
	}
	if !sorted { // a layout that gained a bound lists it last
		slices.SortFunc(h.bounds, func(a, b bucketCount) int { return cmp.Compare(a.le, b.le) })
	}
	n := len(h.bounds)
	if n == 0 || !math.IsInf(h.bounds[n-1].le, 1) {
		return true, true
	}
	for i := 1; i < n; i++ {
		if prev := h.bounds[i-1].count; prev-h.bounds[i].count > 1e-12*prev {
			return true, false
		}
	}
	return false, false
}

// bucketCount is one bucket of a histogram child as observed.
type bucketCount struct{ le, count float64 }

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

// StartOf returns when the upstream series of labels l (a counter, bucket,
// _sum or _count series of the last observed page, canonical labels) began
// counting, in Unix seconds: its _created time, else the process start
// time of a page with a single process; 0 when the page says neither.
func (h *History) StartOf(l labels.Labels) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if v, ok := h.created[createdLabels(l).Hash()]; ok && v > 0 && !math.IsInf(v, 0) {
		return v
	}
	if ps := h.procStartNew; ps > 0 && !math.IsInf(ps, 0) {
		return ps
	}
	return 0
}
