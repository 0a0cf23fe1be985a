package diagnosis

import (
	"math"
	"sort"
	"sync"
	"unsafe"
)

// subWindowsPool holds the sub-windows' buffers between evaluations.
var subWindowsPool = sync.Pool{New: func() any { return new(subWindowsBuf) }}

// The tests of signals.go assume independent events: Poisson counts,
// binomial shares, Welch with n = requests. Real traffic comes in
// correlated bursts (a client sending dozens of similar requests at once,
// a rate that switches between levels), so a window's counts, shares and
// means vary several times more than independence predicts, and a burst
// the pod shows every few minutes reads as significant (issue 30). So each
// signal's overdispersion is measured on the baseline itself and every
// test is widened by it (docs/diagnosis.md, "Bursts: the pod's own
// variability").

// MinDispersionWindows is how many sub-windows the baseline is split into
// at least for its overdispersion to be measured: of the recent window's
// length, or shorter when the baseline holds fewer recent windows. With
// fewer sub-windows that the scrapes covered, the spread of a signal
// across them says too little, and the tests take DefaultDispersion.
const MinDispersionWindows = 4

// DefaultDispersion is the dispersion factor taken when fewer than
// MinDispersionWindows sub-windows of the baseline were observed (gaps in
// the scrapes): the pod's burstiness cannot be measured, and independence
// would read every burst as a change.
const DefaultDispersion = 4

// baselineStats is between(from, a) with each signal's dispersion factor
// measured over sub-windows of w. keep: the rolling baseline's, whose
// sub-windows' ends are kept for the next evaluation (walkMemo); the
// others (an incident-free stretch's) read them where they fit, and keep
// nothing: their thresholds may lie in other buckets, and would drop the
// rolling baseline's ends at every evaluation.
func baselineStats(tr *track, from, a *point, w int64, keep bool) stats {
	s := between(tr, from, a)
	s.phiWindows = dispersions(tr, from, a, w, &s, keep)
	return s
}

// subWindow is what the dispersion estimates read of one sub-window of the
// baseline: the counts behind each test.
type subWindow struct {
	seconds float64
	// the share above the baseline's p90: k of n, for TTFT and ITL
	// (ITL's scaled to requests, as its test does)
	k, n [2]float64
	// obs are the TTFT and ITL observations, unscaled: the exact means'
	// counts
	obs [2]float64
	c   [numCounters]float64
	// gauges' sums and numbers of observations
	gsum, gn [numGauges]float64
	started  float64
}

// dispersions sets base.phi, each signal's dispersion factor φ: the
// observed variance of its statistic across the baseline's sub-windows of
// the recent window's length over what independence predicts (Pearson's
// χ² over its degrees of freedom), floored at 1. It returns the number of
// sub-windows measured; with fewer than MinDispersionWindows, every φ is
// DefaultDispersion.
func dispersions(tr *track, from, a *point, w int64, base *stats, keep bool) int {
	for i := range base.phi {
		base.phi[i], base.subLo[i], base.subHi[i] = DefaultDispersion, math.NaN(), math.NaN()
	}
	base.phiSplit, base.longWindows = false, [len(refusalSpans)]int{}
	if from == nil || a == nil || w <= 0 || base.seconds <= 0 {
		return 0
	}
	k := int((a.t - from.t) / w)
	if k < MinDispersionWindows {
		// A baseline shorter than MinDispersionWindows recent windows (the
		// demo's 60 s against 20 s) is split into that many shorter ones:
		// a shorter sub-window spreads its statistic more, not less.
		k = MinDispersionWindows
		w = (a.t - from.t) / int64(k)
		if w <= 0 {
			return 0
		}
		base.phiSplit = true
	}
	// Sub-windows aligned on the baseline's end, from the coarse ring's
	// points (the nearest at or before each bound); those the scrapes did
	// not cover are left out.
	buf := subWindowsPool.Get().(*subWindowsBuf)
	defer subWindowsPool.Put(buf)
	subs, ends := buf.subs[:0], buf.ends[:0]
	r := &tr.coarse
	// the newest coarse point at or before cut, -1 if none
	atOrBefore := func(cut int64) int {
		return sort.Search(len(r.pts), func(i int) bool { return r.pts[i] > cut }) - 1
	}
	// Each sub-window's ends, as indexes of the coarse ring (fromEnd: from,
	// aEnd: a); prev is where the next one starts.
	prev, prevT := atOrBefore(a.t-int64(k)*w), from.t
	if prev < 0 || r.pts[prev] < from.t {
		prev = fromEnd
	} else {
		prevT = r.pts[prev]
	}
	for j := k - 1; j >= 0; j-- {
		end, endT := aEnd, a.t
		if j > 0 {
			if end = atOrBefore(a.t - int64(j)*w); end < 0 {
				continue
			}
			endT = r.pts[end]
		}
		if endT <= prevT {
			continue
		}
		if float64(tr.unobserved(prevT, endT)) <= MaxUnobserved*float64(endT-prevT) {
			ends = append(ends, [2]int{prev, end})
		}
		prev, prevT = end, endT
	}
	// the buckets the share above the baseline's p90 is interpolated in
	var stop [2]int
	for j, h := range [2]int{hTTFT, hITL} {
		stop[j] = stopBucket(tr.bounds[h], base.v[signalOfHist(j)])
	}
	// a model's memo is allocated only while it keeps ends (keep): one
	// that does not pays nothing for it
	var none walkMemo
	m := tr.memo
	if m != nil && !keep && !m.fits(stop) {
		m.wish, m.wished = stop, true
		m = &none
	}
	if m == nil {
		m = &none
	}
	lo := m.lo // where the ends kept fit
	if keep || m == &none {
		lo = m.window(stop)
	}
	fromB, aB := boundOf(tr, from, [2]bool{}, lo), boundOf(tr, a, [2]bool{}, lo)
	bs := m.bounds(tr, ends, lo, buf.bounds[:0], keep)
	switch {
	case !keep:
	case m == &none && len(none.pts) > 0:
		tr.memo = &walkMemo{lo: none.lo, pts: none.pts}
	case m != &none && m.pts == nil:
		tr.memo = nil
	}
	// the ring's ends, in the order bounds read them
	read, readT := -1, int64(math.MinInt64)
	at := func(i int) *bound {
		switch i {
		case fromEnd:
			return &fromB
		case aEnd:
			return &aB
		}
		if r.pts[i] != readT {
			read, readT = read+1, r.pts[i]
		}
		return &bs[read]
	}
	for _, e := range ends {
		if sw, ok := subWindowOf(tr, at(e[0]), at(e[1]), base, stop, lo); ok {
			subs = append(subs, sw)
		}
	}
	buf.subs, buf.ends, buf.bounds = subs, ends, bs
	if len(subs) < MinDispersionWindows {
		return len(subs)
	}
	for i := range numDispersed {
		phi, lo, hi := pearson(subs, measureOf(i, base))
		base.phi[i], base.subLo[i], base.subHi[i] = max(1, phi), lo, hi
	}
	if tr.topo.slots != nil {
		base.phi[dRank], base.rankSentPhi = tr.topo.rankSpread(r, ends, from.t, a.t)
	}
	if !base.phiSplit {
		mergedRefusals(subs, base)
	}
	return len(subs)
}

// mergedRefusals sets base's refused share's dispersion factor and
// greatest value over the sub-windows merged refusalSpans[j] at a time,
// from the newest (an older rest too short is left out): the scales of an
// overload that refuses for minutes, where the pod's bursts of one window
// average out. Each scale merges the one before's groups, in place, into
// the tail of subs (each group after the ones it overwrites were read):
// the sub-windows are scratch by then, and a slice of their own cost ten
// allocations per evaluation.
func mergedRefusals(subs []subWindow, base *stats) {
	n, from, prev := len(subs), 0, int64(1)
	for j, span := range refusalSpans {
		k, m := int(span/prev), 0
		for end := n; end-k >= from; end -= k {
			var g subWindow
			g.c[cRejections] = 0
			for i := end - k; i < end; i++ {
				g.seconds += subs[i].seconds
				g.c[cRejections] += subs[i].c[cRejections]
				g.started += subs[i].started
			}
			subs[n-1-m] = g
			m++
		}
		// the groups lie oldest first up to the tail, as the sub-windows
		// did: the next scale merges them from the newest alike
		from, prev = n-m, span
		phi, _, hi := pearson(subs[from:], measure{i: dRefused})
		if !math.IsNaN(hi) {
			base.longPhi[j], base.longHi[j], base.longWindows[j] = max(1, phi), hi, m
		}
	}
}

// Ends of a sub-window that are not points of the coarse ring.
const (
	fromEnd = -1 - iota // the baseline's start
	aEnd                // the baseline's end
)

// subWindowsBuf holds an evaluation's sub-windows and their ends.
type subWindowsBuf struct {
	subs   []subWindow
	ends   [][2]int
	bounds []bound
}

// bound is what the dispersion estimates read of a sub-window's end: the
// point's time, gauges and the counters they read, and for TTFT and ITL
// the cumulative counts of windowBuckets buckets around the one the
// baseline's p90 lies in (the walkMemo's window), from which countAbove's
// three counts are read (aboveIn), and of all.
type bound struct {
	t        int64
	c        [len(endCounters)]float64
	gsum, gn [numGauges]float64
	// h[j][x] is bucket lo[j]+x's count, 0 outside the histogram
	h [2][windowBuckets]float64
	// all is NaN where the point has no such histogram (or one of other
	// bounds): a count is never NaN (validHistogram)
	all [2]float64
}

// windowBuckets is how many buckets' counts an end keeps of each
// histogram: thresholds in four neighbouring buckets' (the rolling
// baseline's p90 and the incident-free stretch's, read one after the
// other, lay up to three buckets apart on the demo).
const windowBuckets = 5

// endCounters are the counters the sub-windows' measures read (measure's
// get and term): an end keeps those alone, the others read as NaN.
var endCounters = [...]int{cPreemptions, cPrefixQueries, cPrefixHits, cPromptTokens, cGenerationTokens,
	cPromptLenSum, cPromptLenCount, cGenLenSum, cGenLenCount, cFinished, cTTFTSum, cITLSum, cRejections}

// signalOfHist is the 90th percentile's signal of TTFT (j 0) or ITL (1).
func signalOfHist(j int) int {
	if j == 1 {
		return sITL
	}
	return sTTFT
}

// boundOf reads p as a sub-window's end with the buckets from lo, its
// TTFT (ITL) histogram read as absent where skip[0] (skip[1]).
func boundOf(tr *track, p *point, skip [2]bool, lo [2]int) bound {
	b := bound{t: p.t, gsum: p.gsum, gn: p.gn}
	for k, c := range endCounters {
		b.c[k] = p.c[c]
	}
	for j, w := range [2]int{hTTFT, hITL} {
		bounds, h := tr.bounds[w], p.h[w]
		b.all[j] = math.NaN()
		if skip[j] || len(h) != len(bounds) || len(bounds) == 0 {
			continue
		}
		b.all[j] = h[len(h)-1]
		for x := range windowBuckets {
			if i := lo[j] + x; i >= 0 && i < len(h) {
				b.h[j][x] = h[i]
			}
		}
	}
	return b
}

// walkMemo keeps the sub-windows' ends read from the coarse ring, oldest
// first, for the next evaluation: they are the same coarse points for
// coarse res / interval scrapes (30 at the defaults and 1 s), and reading
// them again decoded the whole baseline every scrape (a tenth of a
// scrape's CPU, docs/performance.md). A kept end holds while its point
// does: not the newest (which a later observation replaces), its
// histograms' bounds unchanged (track.histogram drops the memo), and while
// the thresholds lie in buckets its window holds.
type walkMemo struct {
	// lo is the first bucket of the ends' window of each histogram
	lo [2]int
	// wish: the buckets of an evaluation that read ends without keeping
	// them (an incident-free stretch's baseline) found none kept it could
	// read: the next window holds them too where it can
	wish   [2]int
	wished bool
	pts    []bound
}

// fits says whether the ends kept hold the counts countAbove reads at
// thresholds in buckets stop.
func (m *walkMemo) fits(stop [2]int) bool {
	for j, i := range stop {
		if i-1 < m.lo[j] || i > m.lo[j]+windowBuckets-1 {
			return false
		}
	}
	return true
}

// window returns the first bucket of the window of each histogram that
// holds the counts countAbove reads at thresholds in buckets stop (the one
// below too), and those another baseline wished for where both fit;
// moving it, and dropping the ends kept, where it does not.
func (m *walkMemo) window(stop [2]int) [2]int {
	for j, i := range stop {
		lo, hi := i, i // the stops to hold
		if m.wished && max(hi, m.wish[j])-min(lo, m.wish[j]) <= windowBuckets-2 {
			lo, hi = min(lo, m.wish[j]), max(hi, m.wish[j])
		}
		if len(m.pts) == 0 || lo-1 < m.lo[j] || hi > m.lo[j]+windowBuckets-1 {
			// about in the middle
			m.lo[j], m.pts = lo-1-(windowBuckets-2-(hi-lo))/2, m.pts[:0]
		}
	}
	m.wished = false
	return m.lo
}

// bounds appends to out the coarse ring's points that ends names, oldest
// first, read with the window from lo (the memo's): kept from an
// evaluation before where they are, decoded otherwise (from the ring's
// cursor when every one missing lies after it); keep: and keeps them for
// the next.
func (m *walkMemo) bounds(tr *track, ends [][2]int, lo [2]int, out []bound, keep bool) []bound {
	r := &tr.coarse
	var wk *walker
	k := 0 // m.pts before k are older than the end looked for
	last := int64(math.MinInt64)
	for _, e := range ends {
		for _, i := range e {
			if i < 0 || r.pts[i] <= last {
				continue
			}
			t := r.pts[i]
			last = t
			for k < len(m.pts) && m.pts[k].t < t {
				k++
			}
			if k < len(m.pts) && m.pts[k].t == t {
				out = append(out, m.pts[k])
				continue
			}
			if wk == nil {
				wk = r.walkFrom(i)
			}
			p := wk.to(i)
			out = append(out, boundOf(tr, p, [2]bool{i < r.hFrom[hTTFT], i < r.hFrom[hITL]}, lo))
		}
	}
	if keep {
		m.keep(r, out)
	}
	return out
}

// keep makes the memo the ends read, but the newest point of the ring
// (a later observation replaces it), after those kept older than the
// first (a longer baseline's, at the same alignment), when that pays:
// the ends of a model whose points encode in fewer bytes than the memo
// would take cost little to decode, and the memo would more than double
// what such a model keeps.
func (m *walkMemo) keep(r *ring, ends []bound) {
	if len(ends) == 0 {
		return
	}
	if len(r.pts) > 0 && ends[len(ends)-1].t == r.pts[len(r.pts)-1] {
		ends = ends[:len(ends)-1]
	}
	// the kept ones the ring still has, older than the first read
	lo, hi := 0, 0
	for lo < len(m.pts) && len(r.pts) > 0 && m.pts[lo].t < r.pts[0] {
		lo++
	}
	hi = lo
	for hi < len(m.pts) && len(ends) > 0 && m.pts[hi].t < ends[0].t {
		hi++
	}
	n := hi - lo + len(ends)
	if uintptr(len(r.enc)) < uintptr(n)*unsafe.Sizeof(bound{}) {
		m.pts = nil
		return
	}
	if cap(m.pts) < n {
		// as many as needed: append's growth would keep half as many more
		m.pts = append(append(make([]bound, 0, n), m.pts[lo:hi]...), ends...)
		return
	}
	kept := copy(m.pts, m.pts[lo:hi])
	m.pts = append(m.pts[:kept], ends...)
}

// subWindowOf reads the counts of the sub-window from a to b, the share
// above the baseline's p90 in buckets stop, a and b read from buckets lo.
func subWindowOf(tr *track, a, b *bound, base *stats, stop, lo [2]int) (subWindow, bool) {
	sw := subWindow{seconds: float64(b.t-a.t) / nanosPerSecond}
	for c := range sw.c {
		sw.c[c] = math.NaN()
	}
	for k, c := range endCounters {
		// inc's
		if sw.c[c] = b.c[k] - a.c[k]; sw.c[c] < 0 {
			sw.c[c] = math.NaN()
		}
	}
	for g := range sw.gsum {
		sw.gsum[g], sw.gn[g] = b.gsum[g]-a.gsum[g], b.gn[g]-a.gn[g]
	}
	sw.started = math.NaN()
	for j, h := range [2]int{hTTFT, hITL} {
		bounds := tr.bounds[h]
		sw.k[j], sw.n[j], sw.obs[j] = math.NaN(), math.NaN(), math.NaN()
		if math.IsNaN(a.all[j]) || math.IsNaN(b.all[j]) {
			continue
		}
		// countAbove is linear in the counts: the count above q in the
		// sub-window is the difference of the cumulative counts above it.
		q, i, x := base.v[signalOfHist(j)], stop[j], stop[j]-lo[j]
		sw.n[j] = b.all[j] - a.all[j]
		sw.obs[j] = sw.n[j]
		sw.k[j] = aboveIn(bounds, i, b.h[j][x-1], b.h[j][x], b.all[j], q) -
			aboveIn(bounds, i, a.h[j][x-1], a.h[j][x], a.all[j], q)
		if j == 0 {
			sw.started = sw.n[0]
		}
	}
	if f := perRequest(sw.n[1], sw.started); f != 1 {
		sw.n[1], sw.k[1] = sw.n[1]*f, sw.k[1]*f
	}
	return sw, sw.seconds > 0
}

// measure is how signal i's statistic is read from a sub-window (get: x
// and n, the statistic being x / n: a share, a rate, a mean) and what it
// adds to Pearson's χ² at the pooled x / n (term); disp and v are what
// they need of the baseline. A value, not closures: it runs for every
// signal at every evaluation, and allocates nothing.
type measure struct {
	i       int
	disp, v float64 // the generation tokens' length dispersion; a mean's variance per observation
}

// measureOf is signal i's measure against the baseline base.
func measureOf(i int, base *stats) measure {
	m := measure{i: i, disp: 1}
	switch i {
	case sGenTPS:
		m.disp = dispersion(base)
	case sRunning, sWaiting, sKV:
		g := gaugeOf(i)
		m.v = base.gVar[g] + gaugeFloor(g)
	case sPromptMean:
		m.v = lengthVar(base, hPromptLen, base.v[i])
	case sGenMean:
		m.v = lengthVar(base, hGenLen, base.v[i])
	case sTTFTMean:
		m.v = histVarBound(base.bounds[hTTFT], base.h[hTTFT], base.c[cTTFTSum])
	case sITLMean:
		m.v = histVarBound(base.bounds[hITL], base.h[hITL], base.c[cITLSum])
	}
	return m
}

func (m measure) get(s *subWindow) (x, n float64) {
	switch m.i {
	case sTTFT:
		return s.k[0], s.n[0]
	case sITL:
		return s.k[1], s.n[1]
	case sGenTPS:
		return s.c[cGenerationTokens] / m.disp, s.seconds
	case sPreempt:
		return s.c[cPreemptions], s.seconds
	case sRunning, sWaiting, sKV:
		g := gaugeOf(m.i)
		return s.gsum[g], s.gn[g]
	case sPromptMean:
		if math.IsNaN(s.c[cPromptLenCount]) {
			return s.c[cPromptTokens], s.started // the prompt mean without its histogram
		}
		return s.c[cPromptLenSum], s.c[cPromptLenCount]
	case sGenMean:
		return s.c[cGenLenSum], s.c[cGenLenCount]
	case sTTFTMean:
		return s.c[cTTFTSum], s.obs[0]
	case sITLMean:
		return s.c[cITLSum], s.obs[1]
	case dRefused:
		// refused of the attempts (refused or started), as the finding reads them
		return s.c[cRejections], s.c[cRejections] + s.started
	case dStarted:
		return s.started, s.seconds
	case dRank:
		return math.NaN(), 0 // not a ratio of counts: rankSpread measures it
	}
	return s.c[cPrefixHits], s.c[cPrefixQueries]
}

func (m measure) term(x, n, p float64, s *subWindow) float64 {
	switch m.i {
	case sTTFT, sITL, dRefused:
		return shareTerm(x, n, p)
	case sGenTPS, sPreempt, dStarted:
		return countTerm(x, n, p)
	case sHitRatio:
		// weighted by the requests started, as the test counts them
		r := firstPositive(s.started, s.c[cFinished])
		if !(r > 0) || !(p > 0 && p < 1) {
			return math.NaN()
		}
		d := x/n - p
		return r * d * d / (p * (1 - p))
	}
	// a mean of n observations, each of variance v
	if !(m.v > 0) {
		return math.NaN()
	}
	d := x/n - p
	return n * d * d / m.v
}

// pearson sums m's term over the sub-windows whose (x, n) are known,
// n > 0, with the pooled ratio p = Σx / Σn, and divides by the degrees of
// freedom: the dispersion factor, 1 when fewer than MinDispersionWindows
// sub-windows carry data. lo and hi are the least and greatest statistic
// x / n of those sub-windows (NaN with too few).
func pearson(subs []subWindow, m measure) (phi, lo, hi float64) {
	sx, sn, k := 0.0, 0.0, 0
	lo, hi = math.Inf(1), math.Inf(-1)
	for i := range subs {
		x, n := m.get(&subs[i])
		if n > 0 && x >= 0 {
			sx, sn, k = sx+x, sn+n, k+1
			lo, hi = math.Min(lo, x/n), math.Max(hi, x/n)
		}
	}
	if k < MinDispersionWindows || !(sn > 0) {
		return 1, math.NaN(), math.NaN()
	}
	p := sx / sn
	chi2, used := 0.0, 0
	for i := range subs {
		x, n := m.get(&subs[i])
		if !(n > 0 && x >= 0) {
			continue
		}
		if t := m.term(x, n, p, &subs[i]); !math.IsNaN(t) && !math.IsInf(t, 0) {
			chi2 += t
			used++
		}
	}
	if used < MinDispersionWindows {
		return 1, lo, hi
	}
	return chi2 / float64(used-1), lo, hi
}

// beyondRange says whether the recent window's statistic of signal i lies
// beyond every one of the baseline's sub-windows in direction dir: a burst
// of a size the baseline itself shows is not a change. True when the
// baseline's range is unknown (too few sub-windows).
func beyondRange(i int, r, base *stats, dir int) bool {
	lo, hi := base.subLo[i], base.subHi[i]
	if math.IsNaN(lo) || math.IsNaN(hi) || base.phiWindows < MinDispersionWindows {
		return true
	}
	sw := subWindowOfStats(r, base)
	x, n := measureOf(i, base).get(&sw)
	if !(n > 0) {
		return true
	}
	if dir > 0 {
		return x/n > hi
	}
	return x/n < lo
}

// subWindowOfStats is a window's stats read as a sub-window, so that its
// statistic is the sub-windows' own.
func subWindowOfStats(r, base *stats) subWindow {
	sw := subWindow{seconds: r.seconds, c: r.c, started: r.started}
	for g := range sw.gsum {
		sw.gsum[g], sw.gn[g] = r.gMean[g]*r.gN[g], r.gN[g]
	}
	for j, h := range [2]int{hTTFT, hITL} {
		q := base.v[sTTFT]
		if j == 1 {
			q = base.v[sITL]
		}
		sw.n[j], sw.k[j] = total(r.h[h]), countAbove(r.bounds[h], r.h[h], q)
		sw.obs[j] = sw.n[j]
	}
	return sw
}

// shareTerm is a binomial count's: k of n, at the pooled share p.
func shareTerm(k, n, p float64) float64 {
	if !(p > 0 && p < 1) {
		return math.NaN()
	}
	d := k - n*p
	return d * d / (n * p * (1 - p))
}

// countTerm is a Poisson count's: x events over n seconds, at the pooled
// rate p.
func countTerm(x, n, p float64) float64 {
	if !(p > 0) {
		return math.NaN()
	}
	d := x - n*p
	return d * d / (n * p)
}
