package window

import (
	"math"

	"github.com/prometheus/prometheus/model/labels"
)

// Increase is what a counter counted between two observations, last and v:
// v-last, or v itself when v is lower (the upstream restarted and counts
// from zero again, as Prometheus's rate() assumes).
func Increase(last, v float64) float64 {
	if v < last {
		return v
	}
	return v - last
}

// Increases keeps, per counter series (by its labels), its value at the
// last observation, so that each observation can say what the series
// counted since the previous one. A series not seen for Keep observations
// is forgotten; one missing from a page or two goes on from where it was.
//
// It is the reset correction of the consumers that sum counters across
// series between two scrapes (the diagnosis, the idle tracker), where
// History's windows are not needed. It is not safe for concurrent use.
type Increases struct {
	keep   uint64
	round  uint64
	series map[uint64][]increaseState
}

type increaseState struct {
	lbls  labels.Labels
	last  float64
	round uint64 // the last observation that saw it
}

// NewIncreases returns an empty Increases that forgets a series after keep
// observations without it (at least 1).
func NewIncreases(keep int) *Increases {
	return &Increases{keep: uint64(max(keep, 1)), series: map[uint64][]increaseState{}}
}

// Next starts an observation. Every keep observations it forgets the
// series not seen for keep of them, so that forgetting costs a walk of the
// map per keep observations, not one per observation.
func (x *Increases) Next() {
	x.round++
	if x.round%x.keep != 0 {
		return
	}
	for h, list := range x.series {
		kept := list[:0]
		for _, s := range list {
			if x.round-s.round <= x.keep {
				kept = append(kept, s)
			}
		}
		clear(list[len(kept):])
		if len(kept) == 0 {
			delete(x.series, h)
		} else {
			x.series[h] = kept
		}
	}
}

// Observe records v for the series lbls in this observation and returns
// what the series counted since its last one. New is true for a series
// not known before: nothing is known of its past, so inc is 0 and the
// caller decides what its first value means. A series seen already in this
// observation (the same labels twice on a page) counts once: the first
// value stands, and inc is 0. NaN and infinite values are not recorded.
func (x *Increases) Observe(lbls labels.Labels, v float64) (inc float64, isNew bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	h := lbls.Hash()
	list := x.series[h]
	for i := range list {
		s := &list[i]
		if !labels.Equal(s.lbls, lbls) {
			continue
		}
		if s.round == x.round {
			return 0, false
		}
		inc = Increase(s.last, v)
		s.last, s.round = v, x.round
		return inc, false
	}
	x.series[h] = append(list, increaseState{lbls: lbls.Copy(), last: v, round: x.round})
	return 0, true
}

// Len is the number of series kept.
func (x *Increases) Len() int {
	n := 0
	for _, list := range x.series {
		n += len(list)
	}
	return n
}
