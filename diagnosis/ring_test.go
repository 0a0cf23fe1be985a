package diagnosis

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// refRing is the ring as it was before its points were encoded: every
// point stored as a struct with its own bucket slices. The encoded ring
// must read back exactly what it reads.
type refRing struct {
	res int64
	pts []point
}

func (r *refRing) add(p *point) {
	q := *p
	for i := range q.h {
		q.h[i] = slices.Clone(p.h[i])
	}
	if n := len(r.pts); n > 0 && slotOf(p.t, r.res) == slotOf(r.pts[n-1].t, r.res) {
		r.pts[n-1] = q
		return
	}
	r.pts = append(r.pts, q)
}

func (r *refRing) prune(cut int64) {
	i := 0
	for i+1 < len(r.pts) && r.pts[i+1].t <= cut {
		i++
	}
	r.pts = r.pts[i:]
}

func (r *refRing) dropHistogram(w int) {
	for i := range r.pts {
		r.pts[i].h[w] = nil
	}
}

// samePoint reports whether a and b hold the same bits, NaNs and -0
// included, and the same histograms (nil or not).
func samePoint(a, b *point) bool {
	if a.t != b.t || scalarsOf(a) != scalarsOf(b) {
		return false
	}
	for w := range a.h {
		if (a.h[w] == nil) != (b.h[w] == nil) || len(a.h[w]) != len(b.h[w]) {
			return false
		}
		for i := range a.h[w] {
			if math.Float64bits(a.h[w][i]) != math.Float64bits(b.h[w][i]) {
				return false
			}
		}
	}
	return true
}

// randomValue is a value as an upstream or a running sum may give it:
// mostly growing integers, some fractions, NaN, ±0, ±Inf, tiny and huge.
func randomValue(rng *rand.Rand, prev float64) float64 {
	switch rng.IntN(12) {
	case 0:
		return prev // unchanged
	case 1:
		return math.NaN()
	case 2:
		return math.Copysign(0, -1)
	case 3:
		return []float64{math.Inf(1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64, 1 << 53, -1e-300}[rng.IntN(6)]
	case 4:
		return math.Float64frombits(rng.Uint64()) // any bits
	case 5:
		return prev + rng.Float64()
	default:
		if math.IsNaN(prev) || math.IsInf(prev, 0) {
			prev = 0
		}
		return prev + float64(rng.IntN(1<<rng.IntN(40)))
	}
}

// TestRingMatchesReference: over random sequences of observations (slots
// replaced and appended, gaps, prunes, histograms appearing, vanishing and
// changing their bounds, values of every kind) the encoded ring returns,
// point for point and from every accessor, bit for bit what the reference
// ring returns, so the diagnosis' statistics and verdicts cannot change
// with the encoding. A lossy encoding of any value fails it.
func TestRingMatchesReference(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		res := int64(1 + rng.IntN(5))
		var r ring
		ref := refRing{res: res}
		r.res = res
		var cur point
		lens := [numHists]int{}
		for w := range lens {
			lens[w] = 1 + rng.IntN(20)
		}
		tm := int64(rng.IntN(10)) - 5
		for step := range 300 {
			tm += int64(rng.IntN(3)) // 0: the same slot, or the same time
			if rng.IntN(40) == 0 {
				tm += int64(rng.IntN(50)) // a gap
			}
			cur.t = tm
			// steady: the scalars move as before (a constant gauge's sums,
			// counters at a steady rate), which the encoding predicts
			steady := rng.IntN(3) == 0
			for i := range numGauges {
				if steady {
					cur.gsum[i] += 0.25
					cur.gsq[i] += 0.0625
					cur.gn[i]++
					continue
				}
				cur.gsum[i] = randomValue(rng, cur.gsum[i])
				cur.gsq[i] = randomValue(rng, cur.gsq[i])
				cur.gn[i] = randomValue(rng, cur.gn[i])
			}
			idle := rng.IntN(3) == 0
			for i := range cur.c {
				switch {
				case steady:
					cur.c[i] += float64(i)
				case !idle:
					cur.c[i] = randomValue(rng, cur.c[i])
				}
			}
			for w := range cur.h {
				switch {
				case rng.IntN(30) == 0:
					cur.h[w] = nil
				case rng.IntN(30) == 0: // new bounds
					lens[w] = rng.IntN(25)
					cur.h[w] = make([]float64, lens[w])
					r.dropHistogram(w)
					ref.dropHistogram(w)
				default:
					if len(cur.h[w]) != lens[w] {
						cur.h[w] = make([]float64, lens[w])
					} else {
						cur.h[w] = slices.Clone(cur.h[w])
					}
					if !idle {
						for i := range cur.h[w] {
							cur.h[w][i] = randomValue(rng, cur.h[w][i])
						}
					}
				}
			}
			r.add(&cur)
			ref.add(&cur)
			if rng.IntN(4) == 0 {
				cut := tm - int64(rng.IntN(30))
				r.prune(cut)
				ref.prune(cut)
			}
			if len(r.pts) != len(ref.pts) {
				t.Fatalf("seed %d step %d: %d points, reference %d", seed, step, len(r.pts), len(ref.pts))
			}
			got := r.points()
			for i := range ref.pts {
				if !samePoint(&got[i], &ref.pts[i]) || !samePoint(r.at(i), &ref.pts[i]) {
					t.Fatalf("seed %d step %d: point %d of %d reads %+v, reference %+v", seed, step, i, len(ref.pts), *r.at(i), ref.pts[i])
				}
			}
			if p := r.newest(); !samePoint(p, &ref.pts[len(ref.pts)-1]) {
				t.Fatalf("seed %d step %d: newest reads %+v, reference %+v", seed, step, *p, ref.pts[len(ref.pts)-1])
			}
			// a walk forward, as the baseline's sub-windows read it
			walk, at := r.walk(), 0
			var held []*point // the walker's last two distinct points stay valid
			for cut := tm - int64(rng.IntN(40)); cut <= tm+1; cut += int64(1 + rng.IntN(6)) {
				for at+1 < len(ref.pts) && ref.pts[at+1].t <= cut {
					at++
				}
				var want *point
				if at < len(ref.pts) && ref.pts[at].t <= cut {
					want = &ref.pts[at]
				}
				got := walk.atOrBefore(cut)
				if (got == nil) != (want == nil) || got != nil && !samePoint(got, want) {
					t.Fatalf("seed %d step %d: walking to %d the ring reads %v, the reference %v", seed, step, cut, got, want)
				}
				if got != nil && (len(held) == 0 || held[len(held)-1] != got) {
					held = append(held, got)
				}
				if n := len(held); n >= 2 && held[n-2].t >= held[n-1].t {
					t.Fatalf("seed %d step %d: the walker's previous point changed under it", seed, step)
				}
			}
			cut := tm - int64(rng.IntN(40))
			before, after := r.atOrBefore(cut), r.atOrAfter(cut)
			refBefore, refAfter := refAtOrBefore(&ref, cut), refAtOrAfter(&ref, cut)
			if (before == nil) != (refBefore == nil) || before != nil && !samePoint(before, refBefore) ||
				(after == nil) != (refAfter == nil) || after != nil && !samePoint(after, refAfter) {
				t.Fatalf("seed %d step %d: around %d the ring reads %v and %v, the reference %v and %v", seed, step, cut, before, after, refBefore, refAfter)
			}
		}
	}
}

func refAtOrBefore(r *refRing, cut int64) *point {
	for i := len(r.pts) - 1; i >= 0; i-- {
		if r.pts[i].t <= cut {
			return &r.pts[i]
		}
	}
	return nil
}

func refAtOrAfter(r *refRing, cut int64) *point {
	for i := range r.pts {
		if r.pts[i].t >= cut {
			return &r.pts[i]
		}
	}
	return nil
}

// TestSteadyPointIsAByte: a model whose gauges hold and whose counters
// stand still or move at a steady rate and whose histograms stand still
// (an idle model; the constructed many-model page's) costs a byte a point once the ring has two points
// when its gauges are whole numbers or binary fractions, and 2 bytes a
// point on average for a gauge such as 0.3, whose running sums round; it
// reads back exactly. Before each scalar was predicted by its move, such a
// point kept every running sum's XOR and every histogram's length and
// bitmap: 24 to 80 bytes, and 3 more (these four cases without the
// histogram: 4,725 to 15,916 bytes for the 198 points).
func TestSteadyPointIsAByte(t *testing.T) {
	for _, c := range []struct {
		gauge, rate float64
		bytes       int // at most, a point
	}{{1, 0, 1}, {0.25, 3, 1}, {0.3, 0, 2}, {0.3, 3, 2}} {
		r := ring{res: 2}
		var p point
		var want []point
		p.h[hTTFT] = []float64{0, 3, 8, 20, 20, 21, 40, 40, 41, 41, 41, 42} // no request finishes
		for k := range 200 {
			p.t = int64(2 * k)
			for i := range numGauges {
				p.gsum[i] += c.gauge
				p.gsq[i] += c.gauge * c.gauge
				p.gn[i]++
			}
			for i := range p.c {
				p.c[i] += c.rate * float64(i)
			}
			p.c[cKVFailures] = math.NaN()
			r.add(&p)
			want = append(want, p)
		}
		// the first point is whole, the second its move from the first
		rest := len(r.enc) - int(r.off[2])
		t.Logf("gauge %v, rate %v: %d steady points take %d bytes", c.gauge, c.rate, len(r.pts)-2, rest)
		if rest > c.bytes*(len(r.pts)-2) {
			t.Errorf("gauge %v, rate %v: %d steady points take %d bytes, want at most %d each", c.gauge, c.rate, len(r.pts)-2, rest, c.bytes)
		}
		got := r.points()
		for i := range want {
			if !samePoint(&got[i], &want[i]) {
				t.Fatalf("gauge %v, rate %v: point %d reads %+v, want %+v", c.gauge, c.rate, i, got[i], want[i])
			}
		}
	}
}
