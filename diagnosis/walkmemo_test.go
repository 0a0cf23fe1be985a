package diagnosis

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestKeptEndsMatchAFreshWalk runs the simulator's pod through what moves
// a baseline's sub-windows (traffic shifts that open, name, freeze and end
// incidents, counters reset by an upstream restart, late scrapes and gaps,
// the TTFT histogram's bounds changing, the rings' prunes), at windows
// whose length is and is not a multiple of the coarse ring's slot, and
// after every scrape compares:
//   - what a Diagnoser keeping its sub-windows' ends reports (gauges and
//     report) with a Diagnoser whose kept ends and gauges' label sets
//     are dropped before every scrape, bit for bit;
//   - the baseline's dispersion (baselineStats, from the rolling
//     baseline's start and from the incident-free stretch's) with the walk
//     as it was before the ends were kept (refBaselineStats: every coarse
//     point decoded, countAbove over the buckets), bit for bit.
//
// It also fails where a case kept ends at fewer than a third of its
// scrapes, or saw no incident, restart, gap or change of bounds: it would
// not be testing the kept ends.
func TestKeptEndsMatchAFreshWalk(t *testing.T) {
	for ci, c := range []struct{ window, baseline, interval time.Duration }{
		{20 * time.Second, 5 * time.Minute, time.Second},              // w = 4 slots of 5 s
		{25 * time.Second, 7 * time.Minute, 2 * time.Second},          // w = 3.6 slots of 7 s
		{DefaultWindow, 12 * time.Minute, 3 * time.Second},            // w = 5 slots of 12 s
		{15 * time.Second, 40 * time.Second, time.Second},             // a baseline split in 4
		{DefaultWindow, DefaultBaseline, 10 * time.Second},            // the defaults, slow scrapes
		{10 * time.Second, 150 * time.Second, 500 * time.Millisecond}, // w = 4 slots of 2.5 s
	} {
		// an incident's shift of 4 windows after every baseline and 3
		// windows, for three and a half such periods
		period := c.baseline + 10*c.window
		scrapes := int(7 * period / 2 / c.interval)
		t.Run(fmt.Sprintf("%v-%v-%v", c.window, c.baseline, c.interval), func(t *testing.T) {
			opts := Options{Window: c.window, Baseline: c.baseline, MinChange: DefaultMinChange, Interval: c.interval}
			kept, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			fresh, _ := New(opts)
			rng := rand.New(rand.NewPCG(uint64(ci), 5))
			pod := &simPod{engines: []*simEngine{newSimEngine(uint64(ci), 0), newSimEngine(uint64(ci), 1)}}
			before, during := simScenario(CauseQueueing)
			var offset *Observation // counters as they were at the upstream's restart
			bounds := 0             // the TTFT histogram's: vLLM's, every other, without the last finite
			at := time.Duration(0)
			var evals, kepts, incidents, restarts, gaps, rebounds int
			for step := range scrapes {
				at += c.interval
				// what disrupts the history falls after each incident, so
				// that the next baseline is whole again
				phase := at % period
				disrupt := func() bool {
					return phase >= c.baseline+7*c.window && rng.Float64() < float64(c.interval)/float64(c.window)
				}
				if rng.IntN(10) == 0 {
					at += c.interval / 2 // late
				}
				if disrupt() {
					at += time.Duration(5+rng.IntN(20)) * c.interval // a gap
					gaps++
				}
				l := &before
				if phase >= c.baseline+3*c.window && phase < c.baseline+7*c.window {
					l = &during
				}
				for _, e := range pod.engines {
					e.run(at.Seconds(), l)
				}
				o := pod.observe()
				if disrupt() {
					restarts++
					for _, e := range pod.engines {
						e.restart()
					}
					cp := pod.observe()
					offset = &cp
				}
				if disrupt() {
					bounds = (bounds + 1 + rng.IntN(2)) % 3
					rebounds++
				}
				if offset != nil {
					o = sinceRestart(o, offset)
				}
				switch bounds {
				case 1:
					o.TTFT = everyOtherBound(o.TTFT)
				case 2:
					o.TTFT = withoutLastBound(o.TTFT)
				}
				now := t0.Add(at)
				gotFams := kept.Observe(now, []Observation{o})
				for _, tr := range fresh.tracks {
					tr.memo = nil
				}
				fresh.gauges = [gaugeFamilies]gaugeMemo{} // and its gauges' label sets
				wantFams := fresh.Observe(now, []Observation{o})
				if !sameBits(gotFams, wantFams) || !sameBits(kept.report, fresh.report) {
					t.Fatalf("scrape %d: the Diagnoser keeping its ends reports\n%+v\nwithout\n%+v", step, kept.report, fresh.report)
				}
				tr := kept.tracks["sim"]
				if tr == nil {
					continue
				}
				if tr.inc.open {
					incidents++
				}
				from, a, _, ok := kept.windows(tr, tr.lastT)
				if a == nil {
					continue
				}
				starts := []*point{tr.free.start}
				if ok {
					starts = append(starts, from)
				}
				if tr.memo != nil && len(tr.memo.pts) > 0 {
					kepts++
				}
				for _, s := range starts {
					if s == nil || s.t >= a.t {
						continue
					}
					evals++
					// the rolling baseline's keeps its ends, as diagnose's does
					got, want := baselineStats(tr, s, a, int64(c.window), s == from), refBaselineStats(tr, s, a, int64(c.window))
					if !sameBits(got, want) {
						t.Fatalf("scrape %d: from %d to %d the kept ends read\n%+v\nthe walk\n%+v", step, s.t, a.t, got, want)
					}
				}
			}
			t.Logf("%d scrapes, %d evaluations compared, ends kept at %d scrapes, %d scrapes in an incident, %d restarts, %d gaps, %d bound changes", scrapes, evals, kepts, incidents, restarts, gaps, rebounds)
			if evals < scrapes/3 || kepts < scrapes/3 || incidents == 0 || restarts == 0 || gaps == 0 || rebounds == 0 {
				t.Errorf("%d evaluations, ends kept at %d scrapes, %d scrapes in an incident, %d restarts, %d gaps, %d bound changes: the case does not exercise the kept ends", evals, kepts, incidents, restarts, gaps, rebounds)
			}
		})
	}
}

// sinceRestart is o as an upstream restarted when it read base prints it:
// every counter and bucket counted from zero again.
func sinceRestart(o Observation, base *Observation) Observation {
	for _, c := range []struct{ v, b *float64 }{
		{&o.Finished, &base.Finished}, {&o.PromptLenSum, &base.PromptLenSum}, {&o.GenLenSum, &base.GenLenSum},
		{&o.Preemptions, &base.Preemptions}, {&o.PromptTokens, &base.PromptTokens}, {&o.GenerationTokens, &base.GenerationTokens},
		{&o.PrefixHits, &base.PrefixHits}, {&o.PrefixQueries, &base.PrefixQueries}, {&o.TTFTSum, &base.TTFTSum},
		{&o.ITLSum, &base.ITLSum}, {&o.PromptLenCount, &base.PromptLenCount}, {&o.GenLenCount, &base.GenLenCount},
	} {
		*c.v -= *c.b
	}
	for _, h := range []struct{ v, b *Histogram }{{&o.TTFT, &base.TTFT}, {&o.ITL, &base.ITL}, {&o.PromptLen, &base.PromptLen}, {&o.GenLen, &base.GenLen}} {
		counts := slices.Clone(h.v.Counts)
		for i := range counts {
			counts[i] -= h.b.Counts[i]
		}
		h.v.Counts = counts
	}
	return o
}

// everyOtherBound is h with every other finite bound left out: the same
// observations in coarser buckets, as another server version prints them.
func everyOtherBound(h Histogram) Histogram {
	var out Histogram
	for i, le := range h.Bounds {
		if i%2 == 1 || math.IsInf(le, 1) {
			out.Bounds = append(out.Bounds, le)
			out.Counts = append(out.Counts, h.Counts[i])
		}
	}
	return out
}

// withoutLastBound is h without its last finite bound: the buckets below
// the same, the last finite one's observations counted in +Inf's.
func withoutLastBound(h Histogram) Histogram {
	n := len(h.Bounds)
	return Histogram{
		Bounds: append(slices.Clone(h.Bounds[:n-2]), h.Bounds[n-1]),
		Counts: append(slices.Clone(h.Counts[:n-2]), h.Counts[n-1]),
	}
}

// TestCountAboveFromThreeCounts: countAbove read through stopBucket and
// aboveIn, as the kept ends read it, is the loop it was, bit for bit, over
// random histograms and thresholds (below, inside and above the buckets,
// on their bounds, NaN).
func TestCountAboveFromThreeCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := 1 + rng.IntN(12)
		bounds, h := make([]float64, n), make([]float64, n)
		le, c := rng.Float64()*2-0.5, 0.0
		for i := range bounds {
			le += rng.Float64()
			c += float64(rng.IntN(5))
			bounds[i], h[i] = le, c
		}
		if rng.IntN(4) > 0 {
			bounds[n-1] = math.Inf(1)
		}
		xs := []float64{math.NaN(), bounds[rng.IntN(n)], rng.Float64()*le*1.2 - 0.3, -1, math.Inf(1)}
		for _, x := range xs {
			if got, want := countAbove(bounds, h, x), refCountAbove(bounds, h, x); math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("countAbove(%v, %v, %v) = %v, the loop %v", bounds, h, x, got, want)
			}
		}
	}
}

// refBaselineStats is baselineStats as it was before the sub-windows' ends
// were kept: every coarse point up to the baseline's end decoded, the
// share above the baseline's p90 read from the buckets.
func refBaselineStats(tr *track, from, a *point, w int64) stats {
	s := between(tr, from, a)
	s.phiWindows = refDispersions(tr, from, a, w, &s)
	return s
}

func refDispersions(tr *track, from, a *point, w int64, base *stats) int {
	for i := range base.phi {
		base.phi[i], base.subLo[i], base.subHi[i] = DefaultDispersion, math.NaN(), math.NaN()
	}
	base.phiSplit, base.longWindows = false, [len(refusalSpans)]int{}
	if from == nil || a == nil || w <= 0 || base.seconds <= 0 {
		return 0
	}
	k := int((a.t - from.t) / w)
	if k < MinDispersionWindows {
		k = MinDispersionWindows
		w = (a.t - from.t) / int64(k)
		if w <= 0 {
			return 0
		}
		base.phiSplit = true
	}
	var subs []subWindow
	var ends [][2]int // as dispersions reads them, for the ranks' spread
	idx := func(p *point) int {
		switch p {
		case from:
			return fromEnd
		case a:
			return aEnd
		}
		i, _ := slices.BinarySearch(tr.coarse.pts, p.t)
		return i
	}
	atOrBefore := tr.coarse.walk().atOrBefore
	prev := atOrBefore(a.t - int64(k)*w)
	if prev == nil || prev.t < from.t {
		prev = from
	}
	for j := k - 1; j >= 0; j-- {
		end := a
		if j > 0 {
			end = atOrBefore(a.t - int64(j)*w)
		}
		if end == nil || end.t <= prev.t {
			continue
		}
		if float64(tr.unobserved(prev.t, end.t)) <= MaxUnobserved*float64(end.t-prev.t) {
			ends = append(ends, [2]int{idx(prev), idx(end)})
			if sw, ok := refSubWindowOf(tr, prev, end, base); ok {
				subs = append(subs, sw)
			}
		}
		prev = end
	}
	if len(subs) < MinDispersionWindows {
		return len(subs)
	}
	for i := range numDispersed {
		phi, lo, hi := pearson(subs, measureOf(i, base))
		base.phi[i], base.subLo[i], base.subHi[i] = max(1, phi), lo, hi
	}
	if tr.topo.slots != nil {
		base.phi[dRank], base.rankSentPhi = tr.topo.rankSpread(&tr.coarse, ends, from.t, a.t)
	}
	if !base.phiSplit {
		mergedRefusals(subs, base)
	}
	return len(subs)
}

func refSubWindowOf(tr *track, a, b *point, base *stats) (subWindow, bool) {
	sw := subWindow{seconds: float64(b.t-a.t) / nanosPerSecond}
	for c := range sw.c {
		sw.c[c] = inc(a, b, c)
	}
	for g := range sw.gsum {
		sw.gsum[g], sw.gn[g] = b.gsum[g]-a.gsum[g], b.gn[g]-a.gn[g]
	}
	sw.started = math.NaN()
	for j, h := range [2]int{hTTFT, hITL} {
		bounds, ha, hb := tr.bounds[h], a.h[h], b.h[h]
		sw.k[j], sw.n[j], sw.obs[j] = math.NaN(), math.NaN(), math.NaN()
		if len(ha) != len(bounds) || len(hb) != len(bounds) || len(bounds) == 0 {
			continue
		}
		q := base.v[sTTFT]
		if j == 1 {
			q = base.v[sITL]
		}
		sw.n[j] = hb[len(hb)-1] - ha[len(ha)-1]
		sw.obs[j] = sw.n[j]
		sw.k[j] = refCountAbove(bounds, hb, q) - refCountAbove(bounds, ha, q)
		if j == 0 {
			sw.started = sw.n[0]
		}
	}
	if f := perRequest(sw.n[1], sw.started); f != 1 {
		sw.n[1], sw.k[1] = sw.n[1]*f, sw.k[1]*f
	}
	return sw, sw.seconds > 0
}

// refCountAbove is countAbove as the loop it was.
func refCountAbove(bounds, h []float64, x float64) float64 {
	n := len(h)
	if n == 0 || len(bounds) != n {
		return math.NaN()
	}
	total := h[n-1]
	lower, below := 0.0, 0.0
	for i, le := range bounds {
		if math.IsInf(le, 1) {
			return total - below
		}
		if x < le {
			frac := 0.0
			if x > lower {
				frac = (x - lower) / (le - lower)
			}
			return total - (below + frac*(h[i]-below))
		}
		lower, below = le, h[i]
	}
	return total - below
}

// sameBits is reflect.DeepEqual with floats compared bit for bit (NaN
// equal to NaN), through pointers, slices, maps and structs.
func sameBits(a, b any) bool { return sameValue(reflect.ValueOf(a), reflect.ValueOf(b)) }

func sameValue(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameValue(a.Elem(), b.Elem())
	case reflect.Slice, reflect.Array:
		if a.Kind() == reflect.Slice && a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range a.NumField() {
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			if !sameValue(a.MapIndex(k), b.MapIndex(k)) {
				return false
			}
		}
		return true
	case reflect.Func:
		return a.IsNil() && b.IsNil()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.String:
		return a.String() == b.String()
	}
	panic(fmt.Sprintf("sameBits: %v not compared", a.Kind()))
}
