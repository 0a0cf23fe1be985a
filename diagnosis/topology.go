package diagnosis

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The topology findings: a data-parallel rank queueing while others idle,
// and the prefill/decode findings of a disaggregated pod. Unlike the five
// steps they do not wait for a latency symptom: a starved rank or failing
// KV transfers are worth naming before the model's percentiles move. They
// are tested like the rest (docs/diagnosis.md, "Topology findings") and
// named and cleared through the same hysteresis.

// Signal names of the topology step, values of the signal label.
const (
	SignalEngineImbalanceRatio   = "engine_imbalance_ratio"
	SignalKVTransferP90          = "kv_transfer_p90"
	SignalKVTransferFailureRatio = "kv_transfer_failure_ratio"
	SignalPrefillBacklogSeconds  = "prefill_backlog_seconds"
	SignalAdmissionRejectedRatio = "admission_rejected_ratio"
)

const (
	zImbalance = iota
	zXferP90
	zXferFail
	zBacklog
	zRefused
	numTopoSignals
)

var topoSignalInfo = [numTopoSignals]struct{ name, unit, what string }{
	zImbalance: {SignalEngineImbalanceRatio, "ratio", "busiest rank's running + waiting over the ranks' mean, recent window"},
	zXferP90:   {SignalKVTransferP90, "s", "KV-transfer duration, 90th percentile"},
	zXferFail:  {SignalKVTransferFailureRatio, "ratio", "failed KV transfers per transfer attempted"},
	zBacklog:   {SignalPrefillBacklogSeconds, "s", "waiting prompt tokens over prompt tokens per second"},
	zRefused:   {SignalAdmissionRejectedRatio, "ratio", "requests refused at admission per request attempted (refused or started)"},
}

// Inputs of the topology findings, keys of SetInputNames.
const (
	InputKVTransferTime     = "kv_transfer_time"
	InputKVTransferFailures = "kv_transfer_failures"
	InputRejections         = "admission_rejections"
)

func init() {
	inputWhat[InputKVTransferTime] = "a KV-transfer duration histogram"
	inputWhat[InputKVTransferFailures] = "a failed KV-transfer counter"
	inputWhat[InputRejections] = "a counter of requests refused at admission"
}

// Thresholds of the rank finding, in requests: a queueing rank has at
// least one request waiting on average over the recent window, an idle one
// less than half.
const (
	rankQueued = 1.0
	rankIdle   = 0.5
)

// rankSnap is the engines' loads at one observation.
type rankSnap struct {
	t     int64
	loads []EngineLoad
}

// topoState is one model's topology history and verdicts.
type topoState struct {
	role               string
	xferSeen, failSeen bool // printed on the latest page
	rejSeen            bool
	engines            int // on the latest page
	// snaps keeps one snapshot per fine slot over the recent window, and
	// the newest at or before its start.
	snaps []rankSnap
	// slots sum each rank's requests in the system over each coarse slot
	// of the baseline, for the reference's spread of the ranks
	// (rankSpread); nil for a model that never showed two ranks
	slots     []rankSlot
	rankNames []string // the ranks slots index
	// the ranks' scratch, nil until the model shows two ranks: most show
	// one, and its slice headers in every model's track took it into the
	// next size class (TestModelStateFitsItsRoom)
	*rankScratch
	hyst [maxCauses]hysteresis // of the findings' records
	// Outside an incident, a change found by a baseline-based finding
	// freezes its own baseline until it clears, as an incident does.
	frozen             bool
	base               *stats // while frozen; nil otherwise, as most models never freeze one
	baseStart, baseEnd int64
	frozenAt           int64
	calm               int
	// spanFrom is the start of each span (refusalSpans) a named admission
	// was last held by (sinceWindows), a coarse point's time; spanRefused
	// and spanStarted its cumulative counts, so that a point is decoded
	// once per coarse slot, not at every evaluation
	spanFrom                 [len(refusalSpans)]int64
	spanRefused, spanStarted [len(refusalSpans)]float64
	// check: the reference a refusal check keeps beside the findings' own
	// (checkRefusals); nil when none runs
	check                         *stats
	checkStart, checkEnd, checkAt int64
	checkCalm                     int
	// the latest evaluation, for the report
	last topoEval
	// named: the causes the model's incident names (set by the caller
	// before step), which may lift a finding's gate (Cause.gate).
	named causeSet
	// kept: the findings were kept through a time not ready (keep); the
	// next evaluation holds them by their evidence only
	kept  bool
	gates [maxCauses]gate // of the findings' records with a gate rule
}

// rankScratch is the scratch of addSlot, rankSpread and sentPhi.
type rankScratch struct {
	seen []bool // scratch of addSlot
	// scratch of rankSpread
	sums  []float64
	pairs [][5]float64
	sentD [][3]float64
	terms []float64
	sh    []float64
	// scratch of sentPhi: sentD's indexes by rank, and where each rank's start
	order  []int32
	rankAt []int
}

// scratch allocates the ranks' scratch on first use.
func (ts *topoState) scratch() {
	if ts.rankScratch == nil {
		ts.rankScratch = new(rankScratch)
	}
}

// gate is where a finding with a gate rule stands in its lifecycle.
type gate struct {
	lifted bool  // named while its gate was lifted: it clears with the cause that lifted it
	held   uint8 // consecutive evaluations the finding held with its own gate
}

// clears counts the evaluations the finding held with its own gate and
// says whether one named on the lifted gate clears now, the cause that
// lifted it no longer named.
func (g *gate) clears(gated, lifted bool) bool {
	if gated {
		g.held = min(g.held+1, HoldEvaluations)
	} else {
		g.held = 0
	}
	return g.lifted && !lifted
}

// step follows the finding's hysteresis (on now, was before): named on the
// lifted gate stays so until it held with its gate as long as naming asks.
func (g *gate) step(on, was bool) {
	g.lifted = on && (g.lifted || !was) && g.held < HoldEvaluations
}

// lifted says whether finding k's gate is lifted by the causes named.
func (ts *topoState) lifted(k int) bool {
	r := causes[k].gate
	return r != nil && r.liftedBy(&ts.named)
}

// rankSlot is one coarse slot's scrapes: how many, and each rank's running
// plus waiting summed over them (by topoState.rankNames, NaN for a rank
// missing from one of them or absent).
type rankSlot struct {
	slot int64
	n    int32
	sum  []float32
	// in is each rank's requests sent to it so far (sentSoFar) at the
	// slot's latest scrape, NaN where unknown
	in []float64
}

// sentSoFar is the requests an engine was sent up to now, where its page
// counts its finished ones: those finished plus those still in it. Over a
// window its increase is what the router sent the rank (less the ones an
// engine restart dropped); NaN without the count.
func sentSoFar(l EngineLoad) float64 {
	if !l.Counted {
		return math.NaN()
	}
	return l.Finished + l.Running + l.Waiting
}

// observe keeps the latest snapshot of the fine slot (res) and adds the
// ranks' loads to the coarse slot's sums (coarse).
func (ts *topoState) observe(t int64, o *Observation, res, coarse int64) {
	ts.role = o.Role
	ts.xferSeen = validHistogram(o.KVTransferTime)
	ts.failSeen = !math.IsNaN(o.KVTransferFailures) && !math.IsInf(o.KVTransferFailures, 0)
	ts.rejSeen = !math.IsNaN(o.Rejections) && !math.IsInf(o.Rejections, 0)
	var loads []EngineLoad
	for _, e := range o.Engines {
		if !math.IsNaN(e.Running+e.Waiting) && !math.IsInf(e.Running+e.Waiting, 0) {
			if loads == nil {
				loads = make([]EngineLoad, 0, len(o.Engines))
			}
			loads = append(loads, e)
		}
	}
	ts.engines = len(loads)
	ts.addSlot(t, loads, coarse)
	s := rankSnap{t: t, loads: loads}
	switch n := len(ts.snaps); {
	case n > 0 && slotOf(t, res) == slotOf(ts.snaps[n-1].t, res):
		ts.snaps[n-1] = s
	case len(loads) < 2:
		// A snapshot of fewer than two ranks leaves no two ranks present
		// all along any window holding it, so ranks judges nothing while
		// it is in the window, and once it is older the newest snapshot
		// at or before the window's start is it or a later one: the ones
		// before it are never read again, and a model of one rank keeps
		// one snapshot instead of one a slot.
		ts.snaps = append(ts.snaps[:0], rankSnap{t: t})
	default:
		ts.snaps = append(ts.snaps, s)
	}
}

// addSlot adds one scrape's loads to its coarse slot's sums.
func (ts *topoState) addSlot(t int64, loads []EngineLoad, res int64) {
	if len(loads) < 2 && ts.slots == nil {
		return // a model of one rank keeps none
	}
	ts.scratch()
	k := slotOf(t, res)
	if n := len(ts.slots); n == 0 || ts.slots[n-1].slot != k {
		ts.slots = append(ts.slots, rankSlot{slot: k, sum: make([]float32, len(ts.rankNames)), in: make([]float64, len(ts.rankNames))})
	}
	s := &ts.slots[len(ts.slots)-1]
	ts.seen = slices.Grow(ts.seen[:0], len(ts.rankNames))[:len(ts.rankNames)]
	clear(ts.seen)
	for _, l := range loads {
		i := slices.Index(ts.rankNames, l.Engine)
		if i < 0 {
			i = len(ts.rankNames)
			ts.rankNames = append(ts.rankNames, l.Engine)
			ts.seen = append(ts.seen, false)
		}
		for len(s.sum) <= i {
			v := float32(0)
			if s.n > 0 {
				v = float32(math.NaN()) // absent from the slot's earlier scrapes
			}
			s.sum = append(s.sum, v)
		}
		for len(s.in) <= i {
			s.in = append(s.in, math.NaN())
		}
		s.sum[i] += float32(l.Running + l.Waiting)
		s.in[i] = sentSoFar(l)
		ts.seen[i] = true
	}
	for i := range s.sum {
		if !ts.seen[i] {
			s.sum[i] = float32(math.NaN())
		}
	}
	for i := range s.in {
		if !ts.seen[i] {
			s.in[i] = math.NaN()
		}
	}
	s.n++
}

// pruneSlots drops the coarse slots before cut's.
func (ts *topoState) pruneSlots(cut, res int64) {
	k := slotOf(cut, res)
	i := 0
	for i < len(ts.slots) && ts.slots[i].slot < k {
		i++
	}
	if i > 0 {
		ts.slots = slices.Delete(ts.slots, 0, i)
	}
}

// rankSpread is the reference's spread of the ranks, over its sub-windows
// (ends, as dispersions reads them from the coarse ring r, fromT and aT
// the times of its fromEnd and aEnd; those within a coarse slot read the
// whole slots after and before them). load: for each pair of ranks present
// all along a sub-window the difference d = a - b of their mean running
// plus waiting, whose variance is a + b when the requests spread evenly
// and independently (the rank test's null). Pearson's χ² of d about the
// pair's mean over the sub-windows, over its degrees of freedom, floored
// at 1, is the factor the rank test is widened by, as the signals' tests
// are by theirs: ranks that take turns queueing spread d far beyond a + b,
// while a rank starved all along keeps d steady and its imbalance is
// tested as before. sent: the spread of each rank's share of the requests
// the ranks were sent, where the page counts them per engine (sentPhi).
// DefaultDispersion with fewer than MinDispersionWindows sub-windows.
func (ts *topoState) rankSpread(r *ring, ends [][2]int, fromT, aT int64) (load, sent float64) {
	ts.scratch()
	e := len(ts.rankNames)
	np := e * (e - 1) / 2
	// per pair of loads: sub-windows, Σd, Σd²/s, Σd/s, Σ1/s
	acc := ts.pairs[:0]
	for range np {
		acc = append(acc, [5]float64{})
	}
	ts.pairs = acc
	// per sub-window and rank of what was sent: the rank, its share of
	// the ranks' requests, their number
	sentD := ts.sentD[:0]
	sum := ts.sums[:0]
	kl, ks := 0, 0
	for _, en := range ends {
		s0, s1 := slotOf(fromT, r.res)+1, slotOf(aT, r.res)-1
		if en[0] >= 0 {
			s0 = slotOf(r.pts[en[0]], r.res) + 1
		}
		if en[1] >= 0 {
			s1 = slotOf(r.pts[en[1]], r.res)
		}
		i, _ := slices.BinarySearchFunc(ts.slots, s0, func(s rankSlot, k int64) int { return cmp.Compare(s.slot, k) })
		// what each rank was sent: from the slot before the sub-window's
		// first to its last
		var in0, in1 []float64
		if i > 0 && ts.slots[i-1].slot == s0-1 {
			in0 = ts.slots[i-1].in
		}
		sum = slices.Grow(sum[:0], e)[:e]
		clear(sum)
		n := 0.0
		for ; i < len(ts.slots) && ts.slots[i].slot <= s1; i++ {
			s := &ts.slots[i]
			for j := range sum {
				v := math.NaN()
				if j < len(s.sum) {
					v = float64(s.sum[j])
				}
				sum[j] += v
			}
			n += float64(s.n)
			in1 = s.in
		}
		if n == 0 {
			continue
		}
		usedL, p := false, 0
		for a := range sum {
			for b := a + 1; b < e; b, p = b+1, p+1 {
				usedL = addPair(&acc[p], sum[a]/n, sum[b]/n) || usedL
			}
		}
		usedS := false
		if in0 != nil {
			all, known := 0.0, 0
			for j := range e {
				if x := sentIn(in0, in1, j); x >= 0 {
					all, known = all+x, known+1
				}
			}
			for j := range e {
				if x := sentIn(in0, in1, j); x >= 0 && known >= 2 && all > 0 {
					sentD, usedS = append(sentD, [3]float64{float64(j), x / all, all}), true
				}
			}
		}
		if usedL {
			kl++
		}
		if usedS {
			ks++
		}
	}
	ts.sums, ts.sentD = sum, sentD
	return pairsPhi(acc, kl), ts.sentPhi(ks)
}

// chi2Median1 is the median of χ² with one degree of freedom.
const chi2Median1 = 0.4549364231195724

// sentPhi is the dispersion factor of what the ranks were sent (ts.sentD,
// in sub-window order, over k sub-windows): for each rank, the change of
// its share of the ranks' requests from one sub-window to the next, whose
// variance is m (1 - m) (1/n + 1/n') under a binomial split at its median
// share m; the median of those Pearson terms over χ²₁'s median, floored at
// 1. The share, not the counts: sessions that stay on their rank spread
// what each is sent beyond a binomial split, while the pod's bursts, sent
// evenly, do not. Successive changes and a median, not the spread about
// the mean: a router's skew that began within the reference (a rolling one
// takes it in while no incident freezes one, and the skew grows as the
// other rank's sessions end) is a shift of the level, which would widen
// the test of that very skew (the self-exciting simulator at 50 %, seed
// 1: φ 24 about the median two minutes after the shift, 3 before); a rank
// sent more all along keeps its share steady.
func (ts *topoState) sentPhi(k int) float64 {
	if k < MinDispersionWindows {
		return DefaultDispersion
	}
	ts.scratch()
	sentD := ts.sentD
	// Each rank's entries in sub-window order, by a counting sort of their
	// indexes (a stable sort of the entries was a fifth of Observe on 4 ranks).
	ranks := 0
	for _, q := range sentD {
		ranks = max(ranks, int(q[0])+1)
	}
	at := slices.Grow(ts.rankAt[:0], ranks+1)[:ranks+1]
	clear(at)
	for _, q := range sentD {
		at[int(q[0])+1]++
	}
	for r := 1; r <= ranks; r++ {
		at[r] += at[r-1]
	}
	order := slices.Grow(ts.order[:0], len(sentD))[:len(sentD)]
	for i, q := range sentD {
		r := int(q[0])
		order[at[r]] = int32(i)
		at[r]++
	}
	ts.rankAt, ts.order = at, order
	terms := ts.terms[:0]
	for i := 0; i < len(order); {
		j := i
		for j < len(order) && sentD[order[j]][0] == sentD[order[i]][0] {
			j++
		}
		sh := ts.sh[:0]
		for _, o := range order[i:j] {
			sh = append(sh, sentD[o][1])
		}
		slices.Sort(sh)
		ts.sh = sh
		m := (sh[(len(sh)-1)/2] + sh[len(sh)/2]) / 2 // the rank's median share
		if v := m * (1 - m); j-i >= 2 && v > 0 {
			for l := i + 1; l < j; l++ {
				cur, prev := &sentD[order[l]], &sentD[order[l-1]]
				d := cur[1] - prev[1]
				terms = append(terms, d*d/(v*(1/cur[2]+1/prev[2])))
			}
		}
		i = j
	}
	ts.terms = terms
	if len(terms) < MinDispersionWindows {
		return DefaultDispersion
	}
	slices.Sort(terms)
	med := (terms[(len(terms)-1)/2] + terms[len(terms)/2]) / 2
	return max(1, med/chi2Median1)
}

// sentIn is the requests rank j was sent from in0 to in1 (rankSlot.in),
// NaN where unknown or dropped by a restart.
func sentIn(in0, in1 []float64, j int) float64 {
	if j >= len(in0) || j >= len(in1) || !(in1[j] >= in0[j]) {
		return math.NaN()
	}
	return in1[j] - in0[j]
}

// addPair adds one sub-window's pair of rank values x, y to q (rankSpread)
// and says whether it was used.
func addPair(q *[5]float64, x, y float64) bool {
	if !(x+y > 0) {
		return false
	}
	d := x - y
	q[0], q[1], q[2], q[3], q[4] = q[0]+1, q[1]+d, q[2]+d*d/(x+y), q[3]+d/(x+y), q[4]+1/(x+y)
	return true
}

// pairsPhi is the dispersion factor of rankSpread's pairs acc, measured on
// k sub-windows.
func pairsPhi(acc [][5]float64, k int) float64 {
	chi2, df := 0.0, 0.0
	for _, q := range acc {
		if q[0] < 2 {
			continue
		}
		m := q[1] / q[0]
		chi2, df = chi2+q[2]-2*m*q[3]+m*m*q[4], df+q[0]-1
	}
	if k < MinDispersionWindows || !(df > 0) {
		return DefaultDispersion
	}
	return max(1, chi2/df)
}

// prune drops the snapshots before the newest one at or before cut.
func (ts *topoState) prune(cut int64) {
	i := 0
	for i+1 < len(ts.snaps) && ts.snaps[i+1].t <= cut {
		i++
	}
	if i > 0 {
		ts.snaps = slices.Delete(ts.snaps, 0, i)
	}
}

// topoEval is one evaluation of the topology findings.
type topoEval struct {
	strict, hold causeSet // by record
	judged       causeSet // the page and the role feed the finding
	recent, base [numTopoSignals]float64
	ratio, p     [numTopoSignals]float64
	change       [numTopoSignals]Change
	queued, idle []string // ranks, for the sentence
	rankCovered  bool
	// gated: the finding holds with its own gate (Cause.gate), not only
	// because a named cause lifted it
	gated          causeSet
	backlogJudged  bool
	failuresBacked bool
	// opens: the finding's signal up beyond every sub-window at the
	// undivided α; shows: up by the minimum change, significant or not
	// (a refusal check's, checkRefusals)
	opens, shows causeSet
	// beyond: the signal up by the minimum change and beyond every
	// sub-window of the baseline, significant or not (staysBeyond)
	beyond causeSet
}

// ranks compares each rank that queues with each that idles over the
// recent window (t-w, t]: under an even spread, two ranks' mean numbers
// of requests in the system are alike Poisson counts, so given their sum
// the queueing rank's share is Binomial(n, 1/2). The test takes the window
// means, not the sum over scrapes (a queue persists from one scrape to the
// next), and is exact for the few requests of small ranks.
//
// The pod's own reference widens it: a pod whose sessions stay on their
// rank (its prefix cache holds their context) has one rank queueing for
// minutes every few minutes, as its normal. Both window means are divided
// by phi, the reference's spread of the ranks (rankSpread), as the
// signals' tests are widened by their dispersion.
//
// Where the page counts each engine's finished requests, a rank that
// queues because the router sends it more is told from one slowed by its
// own heavier sessions (their contexts fill its KV cache) by what each was
// sent over the window: the queueing rank is named only where it was sent
// more than an even share of the ranks' requests (Binomial(n, 1/ranks),
// the counts divided by phiSent, the reference's spread of the ranks'
// shares).
func (ts *topoState) ranks(e *topoEval, k int, t, w int64, minChange, alpha, holdAlpha, phi, phiSent float64, lifted bool) {
	e.recent[zImbalance] = math.NaN()
	if len(ts.snaps) == 0 || ts.snaps[0].t > t-w {
		return
	}
	type acc struct {
		name    string
		r, wait float64
		last    float64 // waiting at the latest scrape
		n       int
		// requests sent so far (sentSoFar) before the window and at its
		// latest scrape
		in0, in1 float64
	}
	by := map[string]*acc{}
	var order []*acc
	in0 := map[string]float64{}
	n := 0
	for _, s := range ts.snaps {
		if s.t <= t-w {
			clear(in0)
			for _, l := range s.loads {
				in0[l.Engine] = sentSoFar(l)
			}
			continue
		}
		n++
		for _, l := range s.loads {
			a := by[l.Engine]
			if a == nil {
				a = &acc{name: l.Engine, in0: math.NaN()}
				if v, ok := in0[l.Engine]; ok {
					a.in0 = v
				}
				by[l.Engine] = a
				order = append(order, a)
			}
			a.r += l.Running
			a.wait += l.Waiting
			a.last = l.Waiting
			a.in1 = sentSoFar(l)
			a.n++
		}
	}
	var es []*acc
	for _, a := range order {
		if a.n == n { // present all along: an engine that came or went is not compared
			a.r /= float64(n)
			a.wait /= float64(n)
			es = append(es, a)
		}
	}
	if n < 2 || len(es) < 2 {
		return
	}
	e.rankCovered, e.judged[k] = true, true
	slices.SortFunc(es, func(a, b *acc) int { return compareRank(a.name, b.name) })
	sum, top := 0.0, 0.0
	for _, a := range es {
		sum += a.r + a.wait
		top = math.Max(top, a.r+a.wait)
	}
	e.recent[zImbalance] = ratio(top, sum/float64(len(es)))
	pairs := float64(len(es) * (len(es) - 1) / 2)
	// what the ranks were sent over the window, NaN unless every rank's
	// page counts it and no restart dropped it
	all := 0.0
	for _, a := range es {
		all += a.in1 - a.in0
		if !(a.in1 >= a.in0) {
			all = math.NaN()
			break
		}
	}
	queued, idle := map[string]bool{}, map[string]bool{}
	heldQ, heldI := false, false
	e.p[zImbalance] = math.NaN()
	for _, q := range es {
		if q.wait < rankQueued {
			continue
		}
		// To name it, its queue must still be there at the latest scrape,
		// not draining (at least half its mean over the window): a rank
		// whose queue empties while the other idles is the pod's own burst
		// ending, read on the window's mean after it is gone (the bursty
		// simulator at 90 %, seeds 2 and 5: named 8-10 s at a time with no
		// latency moved). Holding does not ask it: a starved rank's queue
		// drains now and then while its load stays far above the others'.
		// While the incident names queueing on the pod's own evidence, the
		// queue is no burst of the pod ending: the gate is lifted, and the
		// finding so named clears with that queueing (Cause.gate, step).
		draining := q.last < max(rankQueued, q.wait/2)
		// sent more than an even share of the ranks' requests: the
		// router's skew, not the rank's own sessions
		pSent := 0.0
		if all >= 0 {
			x, n := math.Round((q.in1-q.in0)/phiSent), math.Round(all/phiSent)
			pSent = binomialTail(int(n), int(x), 1/float64(len(es)), +1)
		}
		for _, j := range es {
			if j == q || j.wait >= rankIdle || j.r > (1-minChange)*q.r {
				continue
			}
			lq, lj := math.Round((q.r+q.wait)/phi), math.Round((j.r+j.wait)/phi)
			p := binomialTail(int(lq+lj), int(lq), 0.5, +1)
			p = max(p, pSent)
			if !(p >= e.p[zImbalance]) {
				e.p[zImbalance] = p
			}
			if p <= alpha/pairs && (!draining || lifted) {
				queued[q.name], idle[j.name] = true, true
				e.gated[k] = e.gated[k] || !draining
			}
			if p <= holdAlpha {
				heldQ, heldI = true, true
			}
		}
	}
	for _, a := range es {
		if queued[a.name] {
			e.queued = append(e.queued, a.name)
		}
		if idle[a.name] {
			e.idle = append(e.idle, a.name)
		}
	}
	e.strict[k] = len(e.queued) > 0
	e.hold[k] = heldQ && heldI
	if e.recent[zImbalance] >= 1+minChange && e.strict[k] {
		e.change[zImbalance] = ChangeUp
	}
}

// compareRank orders engine labels as numbers where they are numbers.
func compareRank(a, b string) int {
	x, ex := strconv.Atoi(a)
	y, ey := strconv.Atoi(b)
	if ex == nil && ey == nil {
		return x - y
	}
	return strings.Compare(a, b)
}

// topoSignals computes the baseline-based signals of a window.
func topoSignals(s *stats) (v [numTopoSignals]float64) {
	v[zImbalance] = math.NaN()
	h := s.h[hKVTransfer]
	v[zXferP90] = histQuantile(s.bounds[hKVTransfer], h, signalQuantile)
	v[zXferFail] = math.NaN()
	if h != nil && s.c[cKVFailures] >= 0 {
		v[zXferFail] = ratio(s.c[cKVFailures], s.c[cKVFailures]+total(h))
	}
	v[zBacklog] = math.NaN()
	if rate := ratio(s.c[cPromptTokens], s.seconds); rate > 0 {
		v[zBacklog] = s.gMean[gWaiting] * s.v[sPromptMean] / rate
	}
	v[zRefused] = math.NaN()
	if k, n := s.refusals(); k >= 0 && s.started >= 0 {
		v[zRefused] = ratio(k, n)
	}
	return v
}

// admissionRefused: more of the attempted requests refused at admission
// (refused over refused plus started), on any role. It needs no latency
// symptom: a pod at its cap keeps its queue short and its latency flat
// while it turns clients away. A pod whose bursts already reach its cap
// refuses in bursts: the test is widened by the baseline's dispersion of
// the refused share, and naming asks the recent share beyond every
// sub-window's of the baseline, as the signals' tests do (dispersion.go).
func (ts *topoState) admissionRefused(x *topoInput, e *topoEval, k int) {
	recent, base := x.recent, x.base
	if !ts.rejSeen || !(recent.c[cRejections] >= 0) || !(base.c[cRejections] >= 0) || !(recent.started >= 0) || !(base.started >= 0) {
		return
	}
	e.judged[k] = true
	p, up, beyond := refusedTest(x.ru, recent, base)
	x.sig(e, zRefused, p)
	// Held on the longer scale too, where the pod's bursts of one window
	// average out: only while the recent window refuses more than the
	// baseline and no less than the span by the minimum change, so never
	// on windows that refuse nothing more (spanCarries).
	// Naming asks the recent window's own evidence, except within a
	// refusal episode that named it (an overload's dip cleared it): the
	// span, at the naming α, names it again. Named on the span outside an
	// episode, a steady pod at 95 % whose refusals rose for minutes against
	// a quiet reference was named (bursty seed 2).
	pl, sustained := math.NaN(), false
	for j := range refusalSpans {
		long := [2]float64{math.NaN(), math.NaN()}
		if (ts.hyst[k].on || x.episode[k]) && base.longWindows[j] >= MinDispersionWindows {
			long[0], long[1] = x.span.refusals(x.t, j) // only a named finding or its episode pays for its span
		}
		// either scale holds it: each at half the α (Bonferroni)
		if p, s := sustainedRefusals(x.ru, recent, long, base, j, x.alpha/float64(len(refusalSpans))); s || math.IsNaN(pl) {
			pl, sustained = p, s
			if s {
				break
			}
		}
	}
	onSpan := up && sustained
	sustained = onSpan && beyond
	held := up && p <= x.holdAlpha
	if sustained && !held {
		e.change[zRefused], e.p[zRefused] = ChangeUp, pl
	}
	e.strict[k], e.hold[k] = up && beyond && p <= x.alpha || x.episode[k] && onSpan, held || spanCarries(x, k, ts.hyst[k].on, onSpan)
	e.opens[k], e.shows[k], e.beyond[k] = held && beyond, up, up && beyond
}

// refusedTest tests the share of attempts refused at admission, recent
// against base, widened by the baseline's dispersion of that share: its
// p-value, whether the share rose by the minimum change, and whether
// beyond every sub-window's of the baseline (a burst of the size the
// baseline shows is not a change).
func refusedTest(ru *rules, recent, base *stats) (p float64, up, beyond bool) {
	k1, a1 := recent.refusals()
	k0, a0 := base.refusals()
	if !(a1 >= ru.minRequests && a0 >= ru.minRequests) {
		return 1, false, false
	}
	ch, _ := compare(k1/a1, k0/a0, ru.minChange)
	phi := max(1, base.phi[dRefused])
	return fisher(k1/phi, a1/phi, k0/phi, a0/phi, +1), ch == ChangeUp, beyondRange(dRefused, recent, base, +1)
}

// sustainedRefusals tests the share refused over the last refusalSpans[j]
// recent windows (long: refused and attempts, NaN when they do not all lie
// after the baseline)
// against the baseline's sub-windows merged as many at a time: widened by
// their dispersion factor, and beyond every one of them. An overload at
// the queue cap refuses for minutes, a pod's bursts for a window, which
// at that scale average out (issue 30: the bursty simulator at 90 %,
// seeds 10-12, refused under 45 % of a window where its baseline's bursts
// refused up to 33-45 %). It returns the test's p-value and whether it
// holds.
func sustainedRefusals(ru *rules, recent *stats, long [2]float64, base *stats, j int, alpha float64) (float64, bool) {
	if base.longWindows[j] < MinDispersionWindows {
		return math.NaN(), false
	}
	k1, a1 := long[0], long[1]
	k0, a0 := base.refusals()
	kr, ar := recent.refusals()
	if !(a1 >= ru.minRequests && a0 >= ru.minRequests && k1 >= 0 && k0 >= 0 && ar > 0 && kr >= 0) {
		return math.NaN(), false
	}
	if ch, _ := compare(k1/a1, k0/a0, ru.minChange); ch != ChangeUp {
		return math.NaN(), false
	}
	if ch, _ := compare(kr/ar, k1/a1, ru.minChange); ch == ChangeDown {
		return math.NaN(), false // the recent window fell back from the span's level
	}
	phi := max(1, base.longPhi[j])
	p := fisher(k1/phi, a1/phi, k0/phi, a0/phi, +1)
	return p, p <= alpha && k1/a1 > base.longHi[j]
}

// topoInput is what a topology finding's evaluation reads.
type topoInput struct {
	ru                 *rules
	t, w               int64
	recent, base       *stats
	span               spanReader // the counts over the last refusalSpans recent windows, read on demand
	alpha, holdAlpha   float64
	started1, started0 float64  // requests started in each window
	lifted             causeSet // the findings whose gate a named cause lifts (Cause.gate)
	episode            causeSet // the findings the running refusal episode named (findingTime)
}

// sig classifies topology signal i, recent against base, with the
// p-value p of its rise: significant at alpha to name, at holdAlpha to
// hold.
func (x *topoInput) sig(e *topoEval, i int, p float64) (strict, hold bool) {
	ch, r := compare(e.recent[i], e.base[i], x.ru.minChange)
	e.change[i], e.ratio[i] = ch, r
	if ch != ChangeUp {
		return false, false
	}
	e.p[i] = p
	if !(p <= x.alpha) {
		e.change[i] = ChangeFlat
	}
	return p <= x.alpha, p <= x.holdAlpha
}

// evaluate tests the topology findings, recent against base, at alpha to
// name and holdAlpha to hold.
func (ts *topoState) evaluate(ru *rules, t, w int64, recent, base *stats, span spanReader, alpha, holdAlpha float64, episode causeSet) topoEval {
	var e topoEval
	for i := range numTopoSignals {
		e.ratio[i], e.p[i], e.change[i] = math.NaN(), math.NaN(), ChangeUnknown
	}
	rv, bv := topoSignals(recent), topoSignals(base)
	for i := zXferP90; i < numTopoSignals; i++ {
		e.recent[i], e.base[i] = rv[i], bv[i]
	}
	e.recent[zImbalance], e.base[zImbalance] = math.NaN(), math.NaN()
	x := &topoInput{ru: ru, t: t, w: w, recent: recent, base: base, span: span, alpha: alpha, holdAlpha: holdAlpha,
		started1: firstPositive(recent.started, recent.requests), started0: firstPositive(base.started, base.requests), episode: episode}
	for k := range causes {
		x.lifted[k] = ts.lifted(k)
	}
	for k := range causes {
		if f := causes[k].finding; f != nil {
			f(ts, x, &e, k)
		}
	}
	if e.rankCovered && e.change[zImbalance] != ChangeUp {
		e.change[zImbalance] = ChangeFlat
	}
	return e
}

// transfersSlow: decode pulls the KV of each request from its prefill pod,
// so slower transfers show on the decode side (or a pod doing both).
func (ts *topoState) transfersSlow(x *topoInput, e *topoEval, k int) {
	recent, base := x.recent, x.base
	if !ts.xferSeen || ts.role == "prefill" || recent.h[hKVTransfer] == nil || base.h[hKVTransfer] == nil {
		return
	}
	e.judged[k] = true
	q := e.base[zXferP90]
	n1, n0 := total(recent.h[hKVTransfer]), total(base.h[hKVTransfer])
	k1, k0 := countAbove(recent.bounds[hKVTransfer], recent.h[hKVTransfer], q), countAbove(base.bounds[hKVTransfer], base.h[hKVTransfer], q)
	// Transfers come several per request (one per TP rank, pooled), and
	// a slow link slows them together: count requests, not transfers.
	f1, f0 := perRequest(n1, x.started1), perRequest(n0, x.started0)
	p := 1.0
	if n1*f1 >= x.ru.minRequests && n0*f0 >= x.ru.minRequests {
		p = fisher(k1*f1, n1*f1, k0*f0, n0*f0, +1)
	}
	e.strict[k], e.hold[k] = x.sig(e, zXferP90, p)
}

// transfersFail: more failed transfers per attempt, on any role.
func (ts *topoState) transfersFail(x *topoInput, e *topoEval, k int) {
	recent, base := x.recent, x.base
	if !ts.xferSeen || !ts.failSeen || recent.h[hKVTransfer] == nil || base.h[hKVTransfer] == nil ||
		!(recent.c[cKVFailures] >= 0) || !(base.c[cKVFailures] >= 0) {
		return
	}
	e.judged[k] = true
	a1 := recent.c[cKVFailures] + total(recent.h[hKVTransfer])
	a0 := base.c[cKVFailures] + total(base.h[hKVTransfer])
	// Enough transfers behind both ratios: as many attempts as the
	// requests each window needs.
	e.failuresBacked = a1 >= x.ru.minRequests && a0 >= x.ru.minRequests
	p := 1.0
	if e.failuresBacked {
		p = fisher(recent.c[cKVFailures], a1, base.c[cKVFailures], a0, +1)
	}
	e.strict[k], e.hold[k] = x.sig(e, zXferFail, p)
}

// prefillSaturated: a prefill pool is saturated when its backlog grows
// while KV usage does not: compute, not memory, is short (a prefill-only
// load that never moves KV usage).
func (ts *topoState) prefillSaturated(x *topoInput, e *topoEval, k int) {
	if ts.role != "prefill" {
		return
	}
	recent, base := x.recent, x.base
	e.judged[k] = true
	p := 1.0
	if !math.IsNaN(e.recent[zBacklog]) && !math.IsNaN(e.base[zBacklog]) {
		e.backlogJudged = true
		p = math.Min(testSignal(sWaiting, recent, base, +1), testSignal(sPromptMean, recent, base, +1))
	}
	s, h := x.sig(e, zBacklog, p)
	kvCh, kvR := compare(recent.v[sKV], base.v[sKV], x.ru.minChange)
	flat := kvCh != ChangeUnknown && kvCh != ChangeUp && !(kvR >= 1+x.ru.minChange)
	e.strict[k], e.hold[k] = s && flat, h && flat
}

// step advances the topology verdicts by one ready evaluation and
// returns which are named. ref is the reference the caller judges
// against (the incident's frozen baseline, or the rolling one); outside an
// incident the findings keep their own frozen one while they hold.
func (ts *topoState) step(d *Diagnoser, tr *track, t int64, now *point, recent, ref *stats, refStart, refEnd int64, incident bool) {
	w := int64(d.opts.Window)
	base, baseStart, baseEnd := ref, refStart, refEnd
	if ts.frozen && !incident {
		base, baseStart, baseEnd = ts.base, ts.baseStart, ts.baseEnd
	}
	alpha := d.opts.Significance / numTopoSignals
	var episode causeSet
	if ft := &tr.findings; ft.on && !incident {
		episode = ft.named
	}
	e := ts.evaluate(&d.rules, t, w, recent, base, spanReader{d: d, tr: tr, now: now, end: baseEnd}, alpha, d.opts.Significance, episode)
	checked := ts.checkRefusals(d, tr, t, now, recent, base, baseStart, baseEnd, alpha, &e, incident)
	baselined, fromCheck := false, false
	for k := range causes {
		if causes[k].finding == nil {
			continue
		}
		raw := e.strict[k] || checked[k]
		fromCheck = fromCheck || checked[k] && !e.strict[k]
		if ts.hyst[k].on {
			raw = e.hold[k]
			// kept through a time not ready, a finding whose evidence is
			// gone clears at once: its hysteresis is from before the gap;
			// one whose window still shows beyond the bursts has it
			if !raw && (ts.kept || causes[k].baselined && !causes[k].hysteretic && !staysBeyond(&e, k)) {
				// held by its own evidence against the baseline, at the
				// undivided α, and cleared as soon as that is gone, as the
				// incident's causes are: not HoldEvaluations later (the
				// bursty pod at its queue cap: admission named two polls
				// on windows that refused nothing)
				ts.hyst[k] = hysteresis{}
			}
		}
		gated := causes[k].gate != nil
		if gated && ts.gates[k].clears(e.gated[k], ts.lifted(k)) {
			// named on its lifted gate: cleared with the cause that lifted
			// it, unless the gate held as long as naming asks
			ts.hyst[k], raw = hysteresis{}, false
		}
		was := ts.hyst[k].on
		on := ts.hyst[k].step(raw)
		if gated {
			ts.gates[k].step(on, was)
		}
		baselined = baselined || causes[k].baselined && (on || e.strict[k])
	}
	switch {
	case incident:
		ts.frozen = false // the incident's frozen baseline is the reference
	case baselined && !ts.frozen && fromCheck:
		// shown against the check's reference: that is the time before
		// the refusals, the rolling one has them in
		ts.frozen, ts.base, ts.baseStart, ts.baseEnd, ts.frozenAt, ts.calm = true, ts.check, ts.checkStart, ts.checkEnd, t, 0
	case baselined && !ts.frozen:
		ts.frozen, ts.base, ts.baseStart, ts.baseEnd, ts.frozenAt, ts.calm = true, ref.cloned(), refStart, refEnd, t, 0
	case ts.frozen && !baselined:
		if ts.calm++; ts.calm >= HoldEvaluations {
			ts.frozen = false
		}
	case ts.frozen && t-ts.frozenAt >= int64(d.opts.MaxIncident):
		ts.frozen = false
		for k := range causes {
			if causes[k].baselined {
				ts.hyst[k] = hysteresis{}
			}
		}
	default:
		ts.calm = 0
	}
	ts.last, ts.kept = e, false
}

// checkRefusals keeps a refusal check, outside an incident and a refusal
// episode, and returns the findings its reference shows at the strict
// level. A check opens where admission's refused share is up beyond every
// sub-window at the undivided α against the reference the findings are
// judged against (ref, ending at end), which it keeps; from the next
// evaluation the share is also judged against that kept reference, and
// the strict tests there name it as they do against the findings' own
// (which still names as before: the check only adds evidence). It ends
// once the share is not up by the minimum change against it for
// HoldEvaluations evaluations, once admission is named (its episode keeps
// its own reference), or after a baseline (an unnamed incident a traffic
// cause opened lasts as long). Why (issue 30): an overload at a pod that
// already refuses in bursts read p = 0.002-0.04 a window against α / 5;
// the findings' baseline froze at most at one such window and thawed
// three later, and the rolling one took the refusals in within a minute
// (the self-exciting simulator at 80 %, seeds 7 and 9, 90 %, seed 4, 95 %,
// seed 1: never named in 11 minutes refusing 40-70 % against 6-24 %).
// Frozen in place of the findings' own, the kept reference hid as many
// overloads as it showed: its φ is set by the few bursts it holds, and a
// rolling one a burst had left named sooner.
func (ts *topoState) checkRefusals(d *Diagnoser, tr *track, t int64, now *point, recent, ref *stats, start, end int64, alpha float64, e *topoEval, incident bool) (strict causeSet) {
	k := causeIndex(CauseAdmission)
	if incident || tr.findings.on || ts.hyst[k].on || !e.judged[k] {
		ts.check = nil
		return strict
	}
	if ts.check == nil {
		if e.opens[k] {
			ts.check, ts.checkStart, ts.checkEnd, ts.checkAt, ts.checkCalm = ref.cloned(), start, end, t, 0
		}
		return strict
	}
	if t-ts.checkAt >= int64(d.opts.Baseline) {
		ts.check = nil
		return strict
	}
	if ts.frozen && ts.baseEnd == ts.checkEnd {
		return strict // judged against it already
	}
	var c topoEval
	rv, bv := topoSignals(recent), topoSignals(ts.check)
	c.recent[zRefused], c.base[zRefused] = rv[zRefused], bv[zRefused]
	x := &topoInput{ru: &d.rules, t: t, w: int64(d.opts.Window), recent: recent, base: ts.check, span: spanReader{d: d, tr: tr, now: now, end: ts.checkEnd},
		alpha: alpha, holdAlpha: d.opts.Significance}
	ts.admissionRefused(x, &c, k)
	if !c.shows[k] {
		if ts.checkCalm++; ts.checkCalm >= HoldEvaluations {
			ts.check = nil
		}
		return strict
	}
	ts.checkCalm = 0
	strict[k] = c.strict[k]
	return strict
}

// baselinedOn says whether a finding judged against the baseline is named.
func (ts *topoState) baselinedOn() bool {
	for k := range causes {
		if causes[k].baselined && ts.hyst[k].on {
			return true
		}
	}
	return false
}

// on reports the named topology findings, by record.
func (ts *topoState) on() (out causeSet) {
	for k := range causes {
		out[k] = causes[k].finding != nil && ts.hyst[k].on
	}
	return out
}

// reset forgets the verdicts (the model is not ready). A frozen baseline
// is kept, as an incident keeps its own through a gap in the scrapes: a
// restart during an overload at the queue cap would otherwise make the
// refusing time the reference (the bursty simulator at 90 %, seed 10:
// admission unnamed for the overload's last six minutes).
func (ts *topoState) reset() {
	ts.hyst = [maxCauses]hysteresis{}
	ts.gates = [maxCauses]gate{}
}

// keep keeps the findings through a time not ready, as an open named
// incident keeps its verdict: judged again by their evidence once ready.
func (ts *topoState) keep() { ts.kept = true }

func rankWord(names []string) string {
	if len(names) == 1 {
		return "Rank " + names[0]
	}
	return "Ranks " + strings.Join(names, ", ")
}

// rankSentence names the queueing and the idle ranks.
func rankSentence(e *topoEval) string {
	verb, be := "queues", "is"
	if len(e.queued) > 1 {
		verb = "queue"
	}
	if len(e.idle) > 1 {
		be = "are"
	}
	return fmt.Sprintf("%s %s while %s %s idle.", rankWord(e.queued), verb, strings.ToLower(rankWord(e.idle)[:1])+rankWord(e.idle)[1:], be)
}

// topoNotes say which topology findings the page cannot feed, and why.
func (d *Diagnoser) topoNotes(tr *track) []string {
	ts := &tr.topo
	var out, lacks, why []string
	withheld := tr.isWithheld(InputKVTransferTime)
	if !ts.xferSeen && !withheld {
		lacks = append(lacks, d.inputName(InputKVTransferTime))
	}
	if !ts.failSeen {
		lacks = append(lacks, d.inputName(InputKVTransferFailures))
	}
	if len(lacks) > 0 {
		why = append(why, fmt.Sprintf("this server does not print %s", strings.Join(lacks, ", ")))
	}
	if withheld {
		why = append(why, withheldSentence([]string{d.inputName(InputKVTransferTime)}))
	}
	if len(why) > 0 {
		out = append(out, upperFirst(strings.Join(why, "; "))+": no P/D finding.")
	}
	if ts.engines < 2 {
		out = append(out, "The page shows one engine for this model: no rank finding (it needs two data-parallel ranks or more).")
	}
	// A P/D pod that is not a prefill pod: say why that finding is never
	// made (a pod without the families has no P/D finding at all).
	if len(lacks) == 0 && ts.role != "prefill" {
		out = append(out, "The pod's role is not prefill (--upstream.role): no prefill-pool finding.")
	}
	return out
}

// spanReader reads a track's counts over the last refusalSpans recent
// windows to its latest point, when they all lie after end (the
// baseline's end): a finding held on that span reads it only while named.
type spanReader struct {
	d   *Diagnoser
	tr  *track
	now *point
	end int64
}

// refusalSpans are the spans, in recent windows, on which a named
// admission is also held (sustainedRefusals): each a multiple of the one
// before, as the baseline's sub-windows are merged (mergedRefusals).
var refusalSpans = [...]int64{HoldWindows, 2 * HoldWindows}

// refusals is span j's (refusalSpans) refusals and attempts at evaluation t (sinceWindows).
func (s spanReader) refusals(t int64, j int) (refused, attempts float64) {
	return s.d.sinceWindows(s.tr, t, s.end, s.now, j)
}

// sinceWindows is the refusals and attempts (refused or started) over
// the last refusalSpans[j] recent windows, to now, when they all lie after end
// (the baseline's), the scrapes covered them, and they are longer than the
// recent window; NaN otherwise. It runs only while admission is named.
func (d *Diagnoser) sinceWindows(tr *track, t, end int64, now *point, j int) (refused, attempts float64) {
	refused, attempts = math.NaN(), math.NaN()
	if now == nil {
		return refused, attempts
	}
	w, r, ts := int64(d.opts.Window), &tr.coarse, &tr.topo
	cut := t - refusalSpans[j]*w
	i, _ := slices.BinarySearch(r.pts, cut+1)
	i-- // the newest at or before cut
	if i < 0 || r.pts[i] < end || r.pts[i] < cut-d.slack(d.coarseRes) || now.t-r.pts[i] <= w ||
		float64(tr.unobserved(r.pts[i], now.t)) > MaxUnobserved*float64(now.t-r.pts[i]) {
		return refused, attempts
	}
	if ts.spanFrom[j] != r.pts[i] {
		p := r.at(i)
		ts.spanFrom[j], ts.spanRefused[j], ts.spanStarted[j] = p.t, p.c[cRejections], started(tr, p)
	}
	k, n := now.c[cRejections]-ts.spanRefused[j], started(tr, now)-ts.spanStarted[j]
	if !(k >= 0 && n >= 0) {
		return refused, attempts
	}
	return k, k + n
}

// started is the requests a point counts started (its TTFT observations),
// NaN without the histogram of the track's bounds.
func started(tr *track, p *point) float64 {
	h := p.h[hTTFT]
	if len(h) == 0 || len(h) != len(tr.bounds[hTTFT]) {
		return math.NaN()
	}
	return h[len(h)-1]
}
