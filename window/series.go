package window

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

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
	// noInf: the last observation of the child had no +Inf bucket, so no
	// total count (see Series.WithoutInf).
	noInf bool
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
