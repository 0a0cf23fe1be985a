package diagnosis

import (
	"math"
	"slices"
	"time"
)

// The reference a model is judged against is the latest baseline's length
// of time that was not in an incident, within the lookback: a relapse is
// judged against normal, never against the overload before it, and an
// early stretch of the day is the reference only until a baseline's length
// of incident-free time follows it. Points are cumulative, so the
// reference over several stretches is a sum of differences: per stretch,
// the difference of the points at its two ends is all that is kept, never
// hours of points.

// MaxStretches is how many closed stretches of incident-free time a model
// keeps (each at most a baseline long); beyond, the oldest is dropped.
const MaxStretches = 4

// DefaultBaselineLookback is how far back the incident-free baseline may
// reach: the incident-free time of longer ago is no longer the pod's normal.
const DefaultBaselineLookback = 6 * time.Hour

// stretch is a closed stretch of incident-free time, kept as the
// difference of the cumulative points at its ends (diff.t is its length),
// with its end's time and the histograms' bounds of the time, so that a
// change of bounds since leaves its buckets out.
type stretch struct {
	diff   point
	end    int64
	bounds [numHists][]float64
	spread burstiness
}

// burstiness is the dispersion estimate of a stretch (dispersion.go),
// measured on its sub-windows while the coarse ring still held them.
type burstiness struct {
	phi, lo, hi [numDispersed]float64
	windows     int
	split       bool // measured on sub-windows shorter than the recent window
	// the refused share's dispersion and greatest value over the
	// sub-windows merged refusalSpans[j] at a time (stats.longPhi)
	longPhi, longHi [len(refusalSpans)]float64
	longWindows     [len(refusalSpans)]int
	rankSentPhi     float64 // stats.rankSentPhi
}

func burstinessOf(s *stats) burstiness {
	return burstiness{phi: s.phi, lo: s.subLo, hi: s.subHi, windows: s.phiWindows, split: s.phiSplit,
		longPhi: s.longPhi, longHi: s.longHi, longWindows: s.longWindows, rankSentPhi: s.rankSentPhi}
}

// combine sets ref's dispersion from the parts it sums: each signal's
// largest measured factor and the widest range, DefaultDispersion when no
// part was measured. A part counts when measured on MinDispersionWindows
// sub-windows at least; one split into shorter sub-windows than the recent
// window (a stretch shorter than MinDispersionWindows recent windows) only
// when no part was measured at the recent window's length. Its 3 degrees of
// freedom at another time scale are no estimate to outweigh the others':
// an open stretch of 23 s in four sub-windows of 6 s read φ 137 on the TTFT
// share, a second later 36.5, and the largest factor left the overload's
// later bursts unnamed (the bursty simulator, seed 4).
func combine(ref *stats, parts []burstiness) {
	ref.phiWindows, ref.longWindows = 0, [len(refusalSpans)]int{}
	for j := range refusalSpans {
		ref.longPhi[j], ref.longHi[j] = math.NaN(), math.NaN()
	}
	ref.rankSentPhi = math.NaN()
	for i := range ref.phi {
		ref.phi[i], ref.subLo[i], ref.subHi[i] = math.NaN(), math.NaN(), math.NaN()
	}
	atLength := false
	for _, p := range parts {
		atLength = atLength || p.windows >= MinDispersionWindows && !p.split
	}
	for _, p := range parts {
		if p.windows < MinDispersionWindows || atLength && p.split {
			continue
		}
		ref.phiWindows += p.windows
		ref.rankSentPhi = nanMax(ref.rankSentPhi, p.rankSentPhi)
		for i := range ref.phi {
			ref.phi[i] = nanMax(ref.phi[i], p.phi[i])
			ref.subLo[i] = -nanMax(-ref.subLo[i], -p.lo[i])
			ref.subHi[i] = nanMax(ref.subHi[i], p.hi[i])
		}
		for j := range p.longWindows {
			if p.longWindows[j] >= MinDispersionWindows {
				ref.longWindows[j] += p.longWindows[j]
				ref.longPhi[j], ref.longHi[j] = nanMax(ref.longPhi[j], p.longPhi[j]), nanMax(ref.longHi[j], p.longHi[j])
			}
		}
	}
	for i := range ref.phi {
		if math.IsNaN(ref.phi[i]) {
			ref.phi[i], ref.subLo[i], ref.subHi[i] = DefaultDispersion, math.NaN(), math.NaN()
		}
	}
	if math.IsNaN(ref.rankSentPhi) {
		ref.rankSentPhi = DefaultDispersion
	}
}

func nanMax(a, b float64) float64 {
	switch {
	case math.IsNaN(a):
		return b
	case math.IsNaN(b):
		return a
	}
	return max(a, b)
}

func (s *stretch) span() int64 { return s.diff.t }

// difference is b - a, point by point: counters' increases (NaN where
// unknown or decreasing), the gauges' sums, the buckets' increases (nil
// where either lacks them).
func difference(a, b *point) point {
	d := point{t: b.t - a.t}
	for i := range d.c {
		d.c[i] = inc(a, b, i)
	}
	for i := range numGauges {
		d.gsum[i], d.gsq[i], d.gn[i] = b.gsum[i]-a.gsum[i], b.gsq[i]-a.gsq[i], b.gn[i]-a.gn[i]
	}
	for w := range numHists {
		ha, hb := a.h[w], b.h[w]
		if len(ha) == 0 || len(ha) != len(hb) {
			continue
		}
		d.h[w] = make([]float64, len(hb))
		for i := range hb {
			d.h[w][i] = hb[i] - ha[i]
		}
	}
	return d
}

// incidentFree is one model's incident-free time: the open stretch (while
// no incident is named) and the closed ones before it, oldest first.
type incidentFree struct {
	// open: a stretch runs now. start is its first point, nil once it
	// is older than the rolling baseline reaches (the rolling baseline is
	// then the reference), startT where it began.
	open   bool
	start  *point
	startT int64
	closed []stretch
	// pending is the stretch an incident that just opened closes if it is
	// named (ending where its first symptom's recent window began); a
	// flash leaves the open stretch running.
	pending *stretch
}

// incidentPhase is what follow compares of the incident before and after
// an evaluation.
type incidentPhase struct {
	open, named, adopted bool
	adoptedAt            int64
}

func (in *incidentState) phase() incidentPhase {
	return incidentPhase{open: in.open, named: in.named, adopted: in.adopted, adoptedAt: in.adoptedAt}
}

// snapshot is a copy of p sharing no bucket slice with the rings, which
// reuse them.
func snapshot(p *point) point {
	q := *p
	for i := range q.h {
		q.h[i] = slices.Clone(p.h[i])
	}
	return q
}

// closing is the open stretch as it would close at end (a point of the
// track): at most the last baseline of it, from the coarse ring.
func (d *Diagnoser) closing(tr *track, f *incidentFree, end *point) *stretch {
	if !f.open || end == nil || end.t <= f.startT {
		return nil
	}
	from := tr.coarse.atOrBefore(end.t - int64(d.opts.Baseline))
	if from == nil {
		from = tr.coarse.atOrAfter(math.MinInt64) // a history shorter than the baseline
	}
	if f.start != nil && (from == nil || from.t < f.startT) {
		from = f.start
	}
	if from == nil || end.t <= from.t {
		return nil
	}
	st := baselineStats(tr, from, end, int64(d.opts.Window), false)
	return &stretch{diff: difference(from, end), end: end.t, bounds: tr.bounds, spread: burstinessOf(&st)}
}

// follow moves the incident-free time along the incident's transitions at
// this evaluation: an incident opened (its stretch pending), was named (the
// stretch closes), was a flash (the stretch runs on), ended (a stretch
// starts now) or was adopted (its level is the normal: the rolling
// baseline). a is the recent window's start, now the newest point.
func (d *Diagnoser) follow(tr *track, f *incidentFree, before incidentPhase, a, now *point, t int64) {
	in := &tr.inc
	switch {
	case in.adopted && (!before.adopted || before.adoptedAt != in.adoptedAt):
		*f = incidentFree{open: true, startT: math.MinInt64}
	case !before.open && in.open:
		f.pending = nil
		if a != nil && !d.onProbation(f, a.t) {
			f.pending = d.closing(tr, f, a)
		}
		if in.named {
			d.closeStretch(f)
		}
	case in.open && in.named && !before.named:
		d.closeStretch(f)
	case before.open && !in.open && !before.named:
		f.pending = nil // a flash: the stretch runs on
	case before.open && !in.open && in.ended && !f.open && now != nil:
		p := snapshot(now)
		f.open, f.start, f.startT = true, &p, now.t
	}
	d.pruneStretches(f, t)
}

// findingPhase is what followFindings compares of the topology findings
// judged against the baseline before and after an evaluation.
type findingPhase struct {
	frozen, named bool
	frozenAt      int64
}

func (ts *topoState) phase() findingPhase {
	// a refusal check's time is the findings' pending time as a frozen
	// baseline's is (checkRefusals): named, it was the refusals'
	return findingPhase{frozen: ts.frozen || ts.check != nil, named: ts.frozen && ts.baselinedOn(), frozenAt: ts.frozenAt}
}

// findingTime is the reference time of the topology findings judged
// against the baseline: the incident-free time less their own episodes,
// kept apart only while it differs (split, from a finding's freeze to the
// episode's end). An episode is a finding's named time outside a latency
// incident, the lulls within it and a calm too short to end it
// (followFindings).
type findingTime struct {
	split bool
	free  incidentFree
	on    bool  // an episode
	start int64 // when it was first named
	// base is the findings' frozen baseline, named the findings it named
	base  *stats
	named causeSet
	// up is when the current run of evaluations naming a finding it named,
	// or with that finding's own signal up by the minimum change against
	// base, began (-1: calm); calm when the latest such run ended; longest
	// the longest run
	up, calm, longest int64
}

// cloneFree is a copy of f sharing no slice with it.
func cloneFree(f *incidentFree) incidentFree {
	g := *f
	g.closed = slices.Clone(f.closed)
	return g
}

// followFindings moves the findings' own reference along their frozen
// baseline, outside a latency incident, as follow moves the incident-free
// time along an incident's: a finding named is an incident without a
// latency symptom, and to the findings its time is not normal. A pod at its
// queue cap refuses with its latency flat; once admission cleared in a lull
// of the overload, its frozen baseline thawed, the reference took in the
// refusing time and the overload was never named again (issue 30: the
// bursty simulator at 90 %, seeds 10-12). Frozen (a finding showed), the
// stretch up to its recent window is pending; named, it closes and an
// episode begins; a flash leaves it running. The episode lasts while a
// finding it named is named or shows its own signal up by the minimum
// change against the frozen baseline (an overload's lull, which refuses
// less but still more than before), and through a calm after it shorter
// than the longest such run less two recent windows (each run is read a
// window longer than the refusals lasted, each calm a window shorter): an
// overload refuses for longer than its lulls last, a pod's bursts for less
// than the calm between them, and a reference without its bursts named
// each one (20 of 20 in TestAdmissionBurstsAfterACalmStart). Ended, its
// time is the findings' normal again (the incident-free time). An episode
// that lasts MaxIncident leaves its level the normal, as an incident is
// adopted. The latency's reference keeps the finding's time: at the cap
// it is the pod's own queue.
func (d *Diagnoser) followFindings(tr *track, before findingPhase, a, now *point, recent *stats, t int64) {
	ts, ft := &tr.topo, &tr.findings
	if tr.inc.open {
		return // the incident's frozen baseline is the findings' reference (topoState.step)
	}
	f := &ft.free
	after := ts.phase()
	maxInc := int64(d.opts.MaxIncident)
	switch {
	case before.frozen && !after.frozen && before.named && t-before.frozenAt >= maxInc, ft.on && t-ft.start >= maxInc:
		*ft = findingTime{} // adopted: the incident-free time, its level and all
		return
	case !ft.on && after.frozen && !before.frozen:
		if !ft.split {
			*ft = findingTime{split: true, free: cloneFree(&tr.free)}
		}
		f.pending = nil
		if a != nil && !d.onProbation(f, a.t) {
			f.pending = d.closing(tr, f, a)
		}
	}
	if after.named && !ft.on {
		d.closeStretch(f)
		ft.on, ft.start, ft.up = true, t, t
	}
	if !ft.on {
		if !after.frozen {
			*ft = findingTime{} // a flash, or thawed by an incident: the stretch ran on
		}
		return
	}
	f.open, f.start, f.pending = false, nil, nil
	if after.named {
		ft.base = ts.base
		for k := range causes {
			ft.named[k] = ft.named[k] || causes[k].baselined && ts.hyst[k].on
		}
	}
	switch {
	case after.named || ft.shows(d, recent):
		if ft.up < 0 {
			ft.up = t
		}
		ft.longest = max(ft.longest, t-ft.up)
	case ft.up >= 0:
		ft.up, ft.calm = -1, t
	}
	// a run shorter than the calm after it: one of the pod's bursts
	w := int64(d.opts.Window)
	if !after.frozen && ft.up < 0 && t-ft.calm >= ft.longest-2*w {
		*ft = findingTime{}
		return
	}
	d.pruneStretches(f, t)
}

// refusingReference is the latency's reference while a refusal episode's
// finding is named outside an incident: the findings' own, the
// incident-free time less the episode, if it holds a baseline of time (ok
// false otherwise, and in the episode's lulls). Refusals named beyond the
// pod's bursts are an overload, not its normal: the rolling baseline took
// them in and the latency never read the overload (the self-exciting
// simulator at 80 %, seed 1: TTFT p90 reference 13 -> 38 s in four
// minutes, 0.86-1.12x at a true 2.4-2.8x). Its lulls, and a reference
// shorter than a baseline (a young pod at its cap from the start), leave
// the latency's as it was: the pod's queue at its cap is its own, and the
// drain after the load returned, judged against the time before, named
// queueing past the latency's return.
func (d *Diagnoser) refusingReference(tr *track, from, a *point, roll *stats, rollOK bool) (ref *stats, start, end int64, n int, ok bool) {
	if !tr.findings.split || !tr.findings.on || !tr.topo.phase().named {
		return nil, 0, 0, 0, false
	}
	ref, start, end, n, ok = d.reference(tr, &tr.findings.free, from, a, roll, rollOK)
	if !ok || !(ref.seconds*nanosPerSecond >= float64(d.opts.Baseline)) {
		return nil, 0, 0, 0, false
	}
	return ref, start, end, n, true
}

// shows says whether a finding the episode named still shows its own
// signal up by the minimum change against the episode's frozen baseline.
func (ft *findingTime) shows(d *Diagnoser, recent *stats) bool {
	if ft.base == nil || recent == nil {
		return false
	}
	rv, bv := topoSignals(recent), topoSignals(ft.base)
	for k := range causes {
		if ft.named[k] {
			if ch, _ := compare(rv[causes[k].signal], bv[causes[k].signal], d.opts.MinChange); ch == ChangeUp {
				return true
			}
		}
	}
	return false
}

// onProbation says whether the calm since an incident ended is too young
// to be incident-free time, at a (the recent window's start): until it
// holds HoldWindows - 1 recent windows before the recent one. Bursty
// traffic has lulls that end an incident whose shift goes on; the shift's
// level would join the reference and the incident would never be named
// again (issue 30: incidents that vanish). An incident that opens within it
// is judged against the incident-free time before the one that ended.
func (d *Diagnoser) onProbation(f *incidentFree, a int64) bool {
	return f.open && f.startT != math.MinInt64 && a-f.startT < (HoldWindows-1)*int64(d.opts.Window)
}

// trafficStep is the operators' step of the causes that describe what the
// requests are (their lengths, their prefix-cache hits), not how many.
const trafficStep = 4

// lull keeps the calm after an incident on probation, restarting it at
// now, while a traffic cause the incident named still shows its own
// evidence at the undivided level (lenient, against the reference without
// the calm): the latency came back in a lull of the traffic, but the
// requests are still not the normal ones, so that time must not become the
// reference (on the bursty simulator the prefix cache's misses joined it
// in the lulls, and the resumed shift was read against itself). Load
// causes (queueing, a larger batch, preemptions) follow the rate, and the
// pauses between a bursty pod's incidents are its normal at their own
// level: they leave no lull. Nor does what is left of the shift once its
// cause's factor falls below half way (in log) to the largest the incident
// showed: after the load returned, a mix that drifted 1.5x from a stale
// reference kept the lull and named long_prompts again and again. A chain
// of lulls ends after the longest incident, as an incident is adopted then.
// A probation the incident left (Cause.probation) kept by its cause's
// evidence is judged here, and keeps the calm on probation too while it
// holds: a calm the cause's own signal shows is not the pod's normal
// level. A young one keeps it only if its incident had resumed one: the
// same shift back, no lone burst (on the bursty simulator a rate 2.5x
// opened batch incidents 5-11 s long, each resuming the one before, whose
// calms, the batch 1.5-2.5x, joined the reference). After a lone young
// incident the calm joins as any calm does: kept out, the self-exciting
// pod's own batch bursts left its reference 2 % low and the level it kept
// after a shift was named in 10.9 % of its steady polls (seed 2).
func (d *Diagnoser) lull(tr *track, recent, ref *stats, lenient *evaluation, now *point, t int64) {
	in := &tr.inc
	if in.open && in.named {
		// the traffic causes' largest factor while named
		x := shareInput{recent: recent, base: ref, e: lenient}
		for k := range causes {
			if in.cause[k].on && causes[k].Step == trafficStep && causes[k].factor != nil {
				in.peak[k] = nanMax(in.peak[k], causes[k].factor(&x))
			}
		}
	}
	kept := false
	for i, k := range probationCauses {
		r, p := causes[k].probation, &in.probations[i]
		if p.on && !in.open && r.holds != nil {
			p.on = r.holds(lenient, d.opts.MinChange) && t < p.until
			kept = kept || p.on && (!p.young || p.again)
		}
	}
	if kept {
		tr.restart(now)
	}
	if !in.inLull() {
		return
	}
	holds := false
	if t-in.chainStart < int64(d.opts.MaxIncident) {
		var none causeSet
		still := causesFor(lenient, lenient, in.lullSym, &none)
		x := shareInput{recent: recent, base: ref, e: lenient, sym: in.lullSym}
		for k := range in.lull {
			// the same shift: its own evidence, and a factor at least half
			// way (in log) to the largest the incident showed; what is left
			// after the load returned is the pod's mix, not the shift
			holds = holds || in.lull[k] && still[k] && !(causes[k].factor(&x) < math.Sqrt(in.lullPeak[k]))
		}
	}
	if !holds {
		in.lull = causeSet{}
		return
	}
	tr.restart(now)
}

// restart starts the open stretch of incident-free time again at now, and
// the findings' own while it differs (followFindings).
func (tr *track) restart(now *point) {
	for _, f := range tr.frees() {
		if f.open && now != nil {
			p := snapshot(now)
			f.start, f.startT = &p, now.t
		}
	}
}

// frees are the incident-free times the incidents move: the track's, and
// the findings' own while it differs.
func (tr *track) frees() []*incidentFree {
	if tr.findings.split {
		return []*incidentFree{&tr.free, &tr.findings.free}
	}
	return []*incidentFree{&tr.free}
}

// stall closes the incident-free time where the recent window starts when
// the pod stops finishing requests while its queue does not empty
// (too_little_traffic, the finished requests' rate down significantly
// against the reference's, requests waiting and not fewer by the minimum
// change): that is no quiet pod but one that serves nothing, and no
// incident can open while it is not judged. Taken in, a KV cache cut's
// first minute (300 waiting, 36 preemptions a second, few requests
// finished) became the reference and the cut was read against itself:
// preemptions 0.3x, unexplained (the self-exciting simulator at 65 %,
// seed 1; at 90 % its queue was as long before the cut, 276 waiting). A
// quiet pod, its queue empty or shorter, keeps its time as before.
func (d *Diagnoser) stall(tr *track, stalled bool, a *point) {
	if !stalled || tr.inc.open {
		return
	}
	for _, f := range tr.frees() {
		f.pending = nil
		if !d.onProbation(f, a.t) {
			f.pending = d.closing(tr, f, a)
		}
		d.closeStretch(f)
	}
	tr.stalled = true
}

// stalled says whether the pod stalls (stall): too_little_traffic with
// the finished requests' rate down significantly against the reference's
// and requests waiting, not fewer by the minimum change.
func (d *Diagnoser) stalled(state string, ev *evaluation, recent, ref *stats, a *point) bool {
	if state != ReadyLowTraffic || a == nil || !(ref.requests >= d.opts.MinRequests) {
		return false
	}
	slower := poissonRates(recent.requests, recent.seconds, ref.requests, ref.seconds, -1) <= d.rules.alpha
	return slower && recent.v[sWaiting] > 0 && !(ev.ratio[sWaiting] < 1/(1+d.opts.MinChange))
}

// resume starts the incident-free time again, on probation, at the first
// judged evaluation after a stall that opened no incident (an incident's
// end starts it otherwise, as follow does).
func (d *Diagnoser) resume(tr *track, now *point) {
	if !tr.stalled || tr.inc.open || now == nil {
		return
	}
	for _, f := range tr.frees() {
		if !f.open {
			p := snapshot(now)
			f.open, f.start, f.startT = true, &p, now.t
		}
	}
	tr.stalled = false
}

func (d *Diagnoser) closeStretch(f *incidentFree) {
	if f.pending != nil {
		f.closed = append(f.closed, *f.pending)
	}
	f.open, f.start, f.pending = false, nil, nil
}

// pruneStretches drops what no reference can need again: stretches that
// ended before the lookback, those beyond MaxStretches, and the ones older
// than a baseline of newer incident-free time.
func (d *Diagnoser) pruneStretches(f *incidentFree, t int64) {
	w, b := int64(d.opts.Window), int64(d.opts.Baseline)
	if f.open && f.start != nil && t-f.startT > w+b+d.slack(d.fineRes)+d.slack(d.coarseRes) {
		f.start = nil // the rolling baseline, slack and all, lies in it from now on
	}
	var newer int64
	if f.open {
		if f.start == nil {
			f.closed = nil
			return
		}
		newer = max(t-w-f.startT, 0) // the part before the recent window
	}
	keep := 0
	for i := len(f.closed) - 1; i >= 0; i-- {
		s := &f.closed[i]
		if newer >= b || s.end < t-int64(d.opts.BaselineLookback) || len(f.closed)-i > MaxStretches {
			break
		}
		keep = len(f.closed) - i
		newer += s.span()
	}
	if drop := len(f.closed) - keep; drop > 0 {
		f.closed = slices.Delete(f.closed, 0, drop)
	}
}

// reference is the incident-free baseline ending at a, the recent window's
// start: the open stretch up to a, then the closed stretches newest first,
// until they cover a baseline (the oldest one used scaled to the part
// needed, as if its time were alike throughout). roll is the rolling
// baseline (from to a), the reference while it lies in the open stretch,
// or when the incident-free time within the lookback is
// shorter than minBaseline. n is the number of stretches used, 0 for the
// rolling baseline.
func (d *Diagnoser) reference(tr *track, f *incidentFree, from, a *point, roll *stats, rollOK bool) (ref *stats, start, end int64, n int, ok bool) {
	rolling := func() (*stats, int64, int64, int, bool) {
		if from == nil || a == nil {
			return roll, 0, 0, 0, rollOK
		}
		return roll, from.t, a.t, 0, rollOK
	}
	b := int64(d.opts.Baseline)
	if a == nil || f.open && (f.start == nil || from != nil && from.t >= f.startT) || !f.open && len(f.closed) == 0 {
		return rolling() // it lies in the open stretch
	}
	var sum point
	for w := range numHists {
		if len(tr.bounds[w]) > 0 {
			sum.h[w] = make([]float64, len(tr.bounds[w]))
		}
	}
	var have int64
	start, end = a.t, a.t
	add := func(x *point, fraction float64, bs *[numHists][]float64) {
		sum.t += int64(float64(x.t) * fraction)
		for i := range sum.c {
			sum.c[i] += x.c[i] * fraction
		}
		for i := range numGauges {
			sum.gsum[i] += x.gsum[i] * fraction
			sum.gsq[i] += x.gsq[i] * fraction
			sum.gn[i] += x.gn[i] * fraction
		}
		for w := range numHists {
			if sum.h[w] == nil || len(x.h[w]) != len(sum.h[w]) || !slices.Equal(bs[w], tr.bounds[w]) {
				sum.h[w] = nil
				continue
			}
			for i, v := range x.h[w] {
				sum.h[w][i] += v * fraction
			}
		}
		n++
	}
	var parts []burstiness
	if f.open && f.startT < a.t && !d.onProbation(f, a.t) {
		open := difference(f.start, a)
		add(&open, 1, &tr.bounds)
		have, start = a.t-f.startT, f.startT
		st := baselineStats(tr, f.start, a, int64(d.opts.Window), false)
		parts = append(parts, burstinessOf(&st))
	}
	for i := len(f.closed) - 1; i >= 0 && have < b; i-- {
		s := &f.closed[i]
		if n == 0 {
			end = s.end
		}
		fraction := min(1, float64(b-have)/float64(s.span()))
		add(&s.diff, fraction, &s.bounds)
		parts = append(parts, s.spread)
		have += int64(float64(s.span()) * fraction)
		start = s.end - int64(float64(s.span())*fraction)
	}
	if n == 0 || have < int64(d.minBaseline()) {
		return rolling()
	}
	var zero point
	for w := range numHists {
		if sum.h[w] != nil {
			zero.h[w] = make([]float64, len(sum.h[w]))
		}
	}
	// between reads the histograms' bounds from the track: the sum's are
	// the track's, or its buckets were left out above.
	summed := between(tr, &zero, &sum)
	ref = &summed
	// Each stretch's burstiness was measured on its own sub-windows.
	combine(ref, parts)
	return ref, start, end, n, true
}

// isStarved says whether an incident-free reference of ref's time, starting
// at start, is starved at a (the recent window's start): under half a
// baseline of time although a baseline had passed since it began. The pod
// named its own bursts so often that the calm between them never outlasted
// the probation (bursty seed 12 at 65 %: 115 s in three stretches over 22
// minutes, five sub-windows), and its dispersion rests on a handful of
// degrees of freedom. A young pod's short reference is measured as it is.
func isStarved(ref *stats, start, a, b int64) bool {
	return ref.seconds*nanosPerSecond < float64(b)/2 && a-start > b
}

// ThinPhiLevel is the lower tail of χ² whose quantile bounds a starved
// reference's dispersion factors from above: their one-sided 70 % bound.
const ThinPhiLevel = 0.3

// thinned is a copy of a starved reference with each dispersion factor at
// the upper bound of what its few sub-windows allow: φ is a χ² over its
// degrees of freedom, and on four of them the pod's bursts may well be
// twice what it read. It only says whether a change is shown: widening the
// test that opens incidents let them go unnamed and join the reference
// (bursty seed 3 at 95 %: the overload became its own reference).
func thinned(ref *stats) *stats {
	out := *ref // the buckets are only read
	if ref.phiWindows < MinDispersionWindows {
		return &out // DefaultDispersion already
	}
	f := phiUpper(ref.phiWindows - 1)
	for i := range out.phi {
		out.phi[i] *= f
	}
	return &out
}

// phiUpper is df over χ²'s ThinPhiLevel quantile on df degrees of freedom:
// the factor from a dispersion estimate to its upper bound.
func phiUpper(df int) float64 {
	if df < len(phiUpperTable) {
		return phiUpperTable[df]
	}
	return chi2UpperFactor(df, ThinPhiLevel)
}

var phiUpperTable = func() (t [64]float64) {
	for df := 1; df < len(t); df++ {
		t[df] = chi2UpperFactor(df, ThinPhiLevel)
	}
	return t
}()
