package diagnosis

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/internal/setting"
)

// Names of the families the Diagnoser exposes, a public contract.
const (
	FamilyChangeRatio = "vllm_diagnosis_change_ratio"
	FamilySymptom     = "vllm_diagnosis_symptom"
	FamilyCause       = "vllm_diagnosis_cause"
	FamilyReady       = "vllm_diagnosis_ready"
	FamilyIncident    = "vllm_diagnosis_incident_seconds"
)

// Defaults of Options.
const (
	DefaultWindow      = time.Minute
	DefaultBaseline    = 30 * time.Minute
	DefaultMinChange   = 0.25
	DefaultMinRequests = 20
	// DefaultSignificance is the level each change is tested at, before
	// the division by the number of signals.
	DefaultSignificance = 0.01
	// DefaultMaxIncident is how long an incident may last before its
	// level becomes the baseline: a shift of hours is the new normal.
	DefaultMaxIncident = 3 * time.Hour
	// ChartSpan is the least time the charts cover.
	ChartSpan = 30 * time.Minute
)

// Slots of each ring: the recent window is kept at window/fineSlots, the
// baseline at baseline/coarseSlots, whatever the scrape interval, so memory
// does not grow with a longer baseline or a shorter interval.
const (
	fineSlots   = 30
	coarseSlots = 60
	chartSlots  = 120
)

// Options configure a Diagnoser. New reads a field left 0 as its default
// (the Default constants; MaxIncident's and BaselineLookback's follow the
// windows), as WithDefaults does; Check reads every field as given, 0
// included, so a caller whose 0 is a value (a flag) checks its options with
// Check first.
type Options struct {
	Window    time.Duration // the recent window
	Baseline  time.Duration // the window before it, compared against
	MinChange float64       // minimum relative change, in (0, 1)
	// MinRequests is the number of finished requests each window needs
	// before anything is claimed, at least 1; New's default is
	// DefaultMinRequests.
	MinRequests float64
	// Interval is the scrape interval; both windows must cover at least
	// two of them. 0 skips that check.
	Interval time.Duration
	// Significance is the level at which a change must be significant,
	// in (0, 0.5); New's default is DefaultSignificance.
	Significance float64
	// MaxIncident is how long an incident lasts at most. It must exceed
	// the two windows; New's default is DefaultMaxIncident, or twice the
	// two windows if longer.
	MaxIncident time.Duration
	// BaselineLookback is how far back the incident-free baseline may
	// reach (baseline.go), at least the baseline; New's default is
	// DefaultBaselineLookback, or the baseline if longer.
	BaselineLookback time.Duration
	// SLO, when set, is compared with the recent percentiles.
	SLO SLO
}

// WithDefaults fills the options left 0 with their defaults, as New does:
// a caller (cmd's flags) checks what New will run with, never restating how
// a default follows from the windows.
func (opts Options) WithDefaults() Options {
	if opts.MinRequests == 0 {
		opts.MinRequests = DefaultMinRequests
	}
	if opts.Significance == 0 {
		opts.Significance = DefaultSignificance
	}
	if opts.MaxIncident == 0 {
		opts.MaxIncident = defaultMaxIncident(opts.Window, opts.Baseline)
	}
	if opts.BaselineLookback == 0 {
		opts.BaselineLookback = defaultLookback(opts.Baseline)
	}
	return opts
}

// defaultMaxIncident is MaxIncident's default for these windows, also the
// fix Check offers: an incident may outlast them twice.
func defaultMaxIncident(window, baseline time.Duration) time.Duration {
	return max(DefaultMaxIncident, 2*(window+baseline))
}

// defaultLookback is BaselineLookback's default for this baseline, also
// the fix Check offers: it is never shorter than the baseline.
func defaultLookback(baseline time.Duration) time.Duration {
	return max(DefaultBaselineLookback, baseline)
}

// SLO are latency targets; zero means none.
type SLO struct {
	TTFT, TPOT time.Duration
}

// Diagnoser keeps each model's history and diagnoses it at every
// observation. It is safe for concurrent use.
type Diagnoser struct {
	opts      Options
	fineRes   int64
	coarseRes int64
	chartRes  int64
	chartSpan int64
	rules     rules
	lenient   rules

	mu      sync.Mutex
	base    time.Time
	hasBase bool
	tracks  map[string]*track
	report  *Report // without charts
	// view is the page's and the API's report with its charts (at most
	// MaxChartedModels), drawn by their first reader after an
	// observation; nil until then.
	view  *Report
	lastT int64 // of the latest observation
	// inputNames are the inputs' names on the page (SetInputNames).
	inputNames map[string]string
	// gauges are the label sets the last scrape's gauges had, in the
	// order families adds them: mostly the same every scrape.
	gauges [gaugeFamilies]gaugeMemo
	// leftOut is what SetLeftOut last said, for the next observation.
	leftOut *LeftOut
}

// Check rejects options as given, a 0 included where it is no valid value,
// as *setting.Error naming the option (diagnosis.Options.X), so that cmd
// can name its flag. New checks its options after filling the fields left 0.
func (opts Options) Check() error {
	bad := func(name, value, rule, fix string) error {
		return &setting.Error{Setting: "diagnosis.Options." + name, Value: value, Rule: rule, Fix: fix}
	}
	switch {
	case opts.Window <= 0:
		return bad("Window", model.Duration(opts.Window).String(), "is not positive", "give the recent window, such as "+model.Duration(DefaultWindow).String())
	case opts.Baseline <= 0:
		return bad("Baseline", model.Duration(opts.Baseline).String(), "is not positive", "give the baseline window, such as "+model.Duration(DefaultBaseline).String())
	}
	if opts.Interval > 0 {
		if err := setting.TwoIntervals("diagnosis.Options.Window", opts.Window, opts.Interval); err != nil {
			return err
		}
		if err := setting.TwoIntervals("diagnosis.Options.Baseline", opts.Baseline, opts.Interval); err != nil {
			return err
		}
	}
	switch {
	case !(opts.MinChange > 0 && opts.MinChange < 1):
		return bad("MinChange", fmt.Sprint(opts.MinChange), "is not above 0 and below 1", fmt.Sprintf("give the smallest relative change that counts, such as %v (%v %%)", DefaultMinChange, 100*DefaultMinChange))
	case !(opts.MinRequests >= 1) || math.IsInf(opts.MinRequests, 0):
		return bad("MinRequests", fmt.Sprint(opts.MinRequests), "is below 1", fmt.Sprint("give the finished requests each window needs, such as ", DefaultMinRequests))
	case !(opts.Significance > 0 && opts.Significance < 0.5):
		return bad("Significance", fmt.Sprint(opts.Significance), "is not above 0 and below 0.5", fmt.Sprint("give the chance of calling noise a change you accept, such as ", DefaultSignificance))
	case opts.MaxIncident <= opts.Window+opts.Baseline:
		return bad("MaxIncident", model.Duration(opts.MaxIncident).String(),
			fmt.Sprintf("is not longer than the recent window plus the baseline (%s): an incident would end before its level fills the baseline", model.Duration(opts.Window+opts.Baseline)),
			"lengthen it, such as "+model.Duration(defaultMaxIncident(opts.Window, opts.Baseline)).String())
	case opts.BaselineLookback < opts.Baseline:
		return bad("BaselineLookback", model.Duration(opts.BaselineLookback).String(),
			fmt.Sprintf("is shorter than the baseline (%s): the incident-free baseline could never be whole", model.Duration(opts.Baseline)),
			"lengthen it to at least the baseline, such as "+model.Duration(defaultLookback(opts.Baseline)).String())
	}
	return nil
}

// New fills the options left 0 with their defaults, checks them and
// returns a Diagnoser without history.
func New(opts Options) (*Diagnoser, error) {
	opts = opts.WithDefaults()
	if err := opts.Check(); err != nil {
		return nil, err
	}
	d := &Diagnoser{
		opts:      opts,
		fineRes:   max(int64(opts.Window/fineSlots), 1),
		coarseRes: max(int64(opts.Baseline/coarseSlots), 1),
		tracks:    map[string]*track{},
		chartSpan: int64(max(ChartSpan, opts.Window+opts.Baseline)),
		rules: rules{minChange: opts.MinChange, minRequests: opts.MinRequests, alpha: opts.Significance / testedSignals,
			clearAlpha: opts.Significance, preemptionShare: MinPreemptionShare, queueShare: opts.MinChange, outsideBursts: true},
	}
	d.chartRes = d.chartSpan / chartSlots
	d.lenient = d.rules
	d.lenient.alpha, d.lenient.preemptionShare, d.lenient.queueShare, d.lenient.outsideBursts = d.rules.clearAlpha, MinPreemptionShare/4, opts.MinChange/4, false
	d.report = d.emptyReport(time.Time{}, StatusNoScrape)
	return d, nil
}

// Report statuses.
const (
	StatusOK           = "ok"
	StatusNoScrape     = "no_scrape_yet"
	StatusScrapeFailed = "scrape_failed"
)

// Observe records one successful scrape at now and returns the diagnosis
// gauges for it, one series per model and signal, symptom or cause.
func (d *Diagnoser) Observe(now time.Time, obs []Observation) []exposition.Family {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.hasBase {
		d.base, d.hasBase = now, true
	}
	t := int64(now.Sub(d.base))
	for i := range obs {
		o := &obs[i]
		tr := d.tracks[o.Model]
		if tr == nil {
			tr = &track{fine: ring{res: d.fineRes}, coarse: ring{res: d.coarseRes}, chart: ring{res: d.chartRes}, firstT: t, since: t,
				free: incidentFree{open: true, startT: math.MinInt64}}
			tr.inc.uncausedSince = -1
			d.tracks[o.Model] = tr
		} else if t < tr.lastT {
			continue // time went backwards; keep the history as it is
		} else if t-tr.lastT > d.slack(d.fineRes) {
			tr.since = t // after a gap, the windows fill again from here
			tr.gaps = append(tr.gaps, gap{tr.lastT, t})
		}
		tr.observe(t, o)
	}
	w, b := int64(d.opts.Window), int64(d.opts.Baseline)
	rep := d.emptyReport(now, StatusOK)
	rep.ModelsLeftOut = d.leftOut
	models := make([]string, 0, len(d.tracks))
	for m, tr := range d.tracks {
		if t-tr.lastT > w+b {
			delete(d.tracks, m) // the model left the page long ago
			continue
		}
		tr.fine.prune(t - w)
		tr.topo.prune(t - w)
		// The recent window may start up to slack before t-w (the newest
		// fine point at or before it), and its baseline starts b before
		// that: keep a coarse point at or before the earliest such start.
		tr.coarse.prune(t - w - b - d.slack(d.fineRes))
		tr.topo.pruneSlots(t-w-b-d.slack(d.fineRes), d.coarseRes)
		tr.chart.prune(t - d.chartSpan)
		for len(tr.gaps) > 0 && tr.gaps[0].to < t-w-b-d.slack(d.fineRes)-d.slack(d.coarseRes) {
			tr.gaps = tr.gaps[1:]
		}
		if tr.lastT == t {
			models = append(models, m)
		}
	}
	slices.Sort(models)
	if len(models) > 0 {
		rep.Models = make([]ModelReport, 0, len(models)) // kept until the next scrape: no room to grow
	}
	for _, m := range models {
		rep.Models = append(rep.Models, d.diagnose(m, d.tracks[m], t))
	}
	d.report, d.view, d.lastT = rep, nil, t
	return d.families(rep)
}

// SetLeftOut tells the diagnosis which models of the page the caller
// keeps no state for (none when models is empty), and why; the next
// observation's report lists them. models need not be sorted.
func (d *Diagnoser) SetLeftOut(models []string, reason string) {
	var lo *LeftOut
	if len(models) > 0 {
		listed := slices.Sorted(slices.Values(models))
		lo = &LeftOut{Count: len(models), Models: listed[:min(len(listed), MaxListedLeftOut)], Reason: reason}
	}
	d.mu.Lock()
	d.leftOut = lo
	d.mu.Unlock()
}

// Forget drops all the diagnosis keeps of model, as when it has been off
// the page for the window and baseline: the caller's bound on the models
// it keeps state for gave the model's place to another.
func (d *Diagnoser) Forget(model string) {
	d.mu.Lock()
	delete(d.tracks, model)
	d.mu.Unlock()
}

// Fail records a failed scrape at now: the diagnosis is withdrawn until
// the next success (the history stays).
func (d *Diagnoser) Fail(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// The verdicts of the last success stay, marked: an incident does
	// not end because one scrape failed, but no number is passed as fresh.
	rep := *d.report
	rep.Status, rep.Time = StatusScrapeFailed, now
	d.report, d.view = &rep, nil
}

// Report returns the latest diagnosis with every model's charts, drawn
// for this call. It must not be modified.
func (d *Diagnoser) Report() *Report {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.charted(nil, 0)
}

// MaxChartedModels is the most models the page and the API draw charts
// for: a model's charts are 40 KB of JSON (150 KB indented) once full, so
// a pod of a thousand models answered 170 MB a request and kept 38 MB of
// charts between scrapes. The others are listed with their verdicts and
// signals, without charts (Report.ChartsLeftOut); ?model= asks for any.
const MaxChartedModels = 8

// View returns the latest diagnosis of the models named (every model when
// none), with the charts of the first MaxChartedModels of them. It must
// not be modified. The view of every model is drawn on its first call
// after an observation, so that scrapes nobody looks at do not pay for it.
func (d *Diagnoser) View(models []string) *Report {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(models) > 0 {
		named := make(map[string]bool, len(models))
		for _, m := range models {
			named[m] = true
		}
		return d.charted(named, MaxChartedModels)
	}
	if d.view == nil {
		d.view = d.charted(nil, MaxChartedModels)
	}
	return d.view
}

// charted returns a copy of the report holding the models named (every
// one when named is nil), the first limit of them (0: all) with their
// charts; the report itself keeps none.
func (d *Diagnoser) charted(named map[string]bool, limit int) *Report {
	rep := *d.report
	rep.Models = make([]ModelReport, 0, len(d.report.Models))
	drawn := 0
	for _, mr := range d.report.Models {
		if named != nil && !named[mr.Model] {
			continue
		}
		if tr := d.tracks[mr.Model]; tr != nil {
			if limit > 0 && drawn >= limit {
				rep.ChartsLeftOut++
			} else {
				mr.Steps = slices.Clone(mr.Steps)
				for si := range mr.Steps {
					mr.Steps[si].Signals = slices.Clone(mr.Steps[si].Signals)
				}
				mr.chart(d, tr)
				drawn++
			}
		}
		rep.Models = append(rep.Models, mr)
	}
	return &rep
}

func (d *Diagnoser) emptyReport(now time.Time, status string) *Report {
	var slo *SLOReport
	if d.opts.SLO.TTFT > 0 || d.opts.SLO.TPOT > 0 {
		slo = &SLOReport{}
		if d.opts.SLO.TTFT > 0 {
			v := d.opts.SLO.TTFT.Seconds()
			slo.TTFT = &v
		}
		if d.opts.SLO.TPOT > 0 {
			v := d.opts.SLO.TPOT.Seconds()
			slo.TPOT = &v
		}
	}
	return &Report{
		SLO:          slo,
		Time:         now,
		Status:       status,
		Window:       model.Duration(d.opts.Window).String(),
		Baseline:     model.Duration(d.opts.Baseline).String(),
		MinChange:    d.opts.MinChange,
		MinRequests:  d.opts.MinRequests,
		Significance: d.opts.Significance,
		MaxIncident:  model.Duration(d.opts.MaxIncident).String(),
		Lookback:     model.Duration(d.opts.BaselineLookback).String(),
		Models:       []ModelReport{},
	}
}

// minBaseline is the shortest history before the recent window that is
// taken as a baseline while the full one builds up: five recent windows
// (or the whole baseline, if shorter). A baseline as short as the recent
// window would be as noisy as it, and flag noise as change.
func (d *Diagnoser) minBaseline() time.Duration {
	return min(d.opts.Baseline, MinBaselineWindows*d.opts.Window)
}

// MinBaselineWindows is how many recent windows of history the baseline
// needs, at least, before anything is claimed.
const MinBaselineWindows = 5

// MaxUnobserved is the largest share of a window that gaps in the scrapes
// may cover: a recent window with more is not judged; a baseline with more
// starts after the latest gap, if that leaves minBaseline of it.
const MaxUnobserved = 0.1

// windows returns the points that bound the recent window (a to now) and
// the baseline (from to a). The recent window needs history reaching back
// to its start, gaps covering at most MaxUnobserved of it: after an outage
// its span would cover the outage, its gauges would be the means of a few
// scrapes, and a counter's rate would read the outage as a collapse.
// Nothing is then claimed until the window is observed again. The baseline
// takes what history there is before that, as long as it covers
// minBaseline and gaps cover at most MaxUnobserved of it.
func (d *Diagnoser) windows(tr *track, t int64) (from, a, now *point, ok bool) {
	if len(tr.fine.pts) == 0 {
		return nil, nil, nil, false
	}
	now = tr.fine.newest()
	a = tr.fine.atOrBefore(t - int64(d.opts.Window))
	if a == nil || a.t < t-int64(d.opts.Window)-d.slack(d.fineRes) ||
		float64(tr.unobserved(a.t, now.t)) > MaxUnobserved*float64(now.t-a.t) {
		return nil, nil, now, false
	}
	from, ok = d.baselineStart(tr, a.t)
	return from, a, now, ok
}

// baselineStart is the point the baseline ending at end starts from.
func (d *Diagnoser) baselineStart(tr *track, end int64) (*point, bool) {
	start := end - int64(d.opts.Baseline)
	from := tr.coarse.atOrBefore(start)
	if from != nil && from.t >= start-d.slack(d.coarseRes) &&
		float64(tr.unobserved(from.t, end)) <= MaxUnobserved*float64(end-from.t) {
		return from, true
	}
	// A shorter baseline: from the end of the latest gap, or the history's
	// start, whichever is later.
	after := int64(math.MinInt64)
	for _, g := range tr.gaps {
		if g.to <= end {
			after = g.to
		}
	}
	from = tr.coarse.atOrAfter(max(after, start))
	if from == nil || end-from.t < int64(d.minBaseline()) {
		return nil, false
	}
	return from, true
}

// slack is how far before its nominal start a window's first point may lie
// in a ring of slots of res while no scrape is lost. A ring keeps the newest
// observation of each slot, so two kept points lie up to a slot and a scrape
// interval apart, more when a scrape comes late: a slot and two intervals,
// or two slots when scrapes are denser than slots (or the interval is not
// known).
func (d *Diagnoser) slack(res int64) int64 {
	return res + max(res, 2*int64(d.opts.Interval))
}

func (d *Diagnoser) diagnose(m string, tr *track, t int64) ModelReport {
	mr := ModelReport{Model: m, Server: tr.server}
	from, a, now, ok := d.windows(tr, t)
	recent, roll := nanStats(), nanStats()
	if a != nil {
		recent = between(tr, a, now)
	}
	if ok {
		roll = baselineStats(tr, from, a, int64(d.opts.Window), true)
	}
	in := &tr.inc
	w, b := int64(d.opts.Window), int64(d.opts.Baseline)
	// The reference: the frozen baseline during an incident, the
	// incident-free one otherwise (baseline.go).
	var refStart, refEnd int64
	var stretches int
	var ref *stats
	freeOK, frozen, starved, holding := false, false, false, false
	if in.open {
		// a copy: the incident's end or adoption below resets in.base,
		// and this evaluation still reports against it
		frozenBase := *in.base
		ref, refStart, refEnd, frozen, stretches = &frozenBase, in.baseStart, in.baseEnd, true, in.baseStretches
	} else {
		ref, refStart, refEnd, stretches, freeOK = d.reference(tr, &tr.free, from, a, &roll, ok)
		if r, s, e, n, ok := d.refusingReference(tr, from, a, &roll, ok); ok {
			ref, refStart, refEnd, stretches, freeOK = r, s, e, n, ok
		}
		starved = stretches > 0 && a != nil && isStarved(ref, refStart, a.t, b)
		if in.ended && t-w-b >= in.endedAt {
			in.ended = false // the rolling baseline no longer holds it
		}
	}
	ev := d.rules.evaluate(&recent, ref)
	lenient := d.lenient.evaluate(&recent, ref)
	growth := queueGrowth(&tr.fine, a, now)
	ev.splitQueue(&recent, ref, growth, d.opts.MinChange)
	lenient.splitQueue(&recent, ref, growth, d.opts.MinChange)
	naming := lenient.naming(&ev)
	naming.splitQueue(&recent, ref, growth, d.opts.MinChange)
	ev.ledBy(&lenient, &recent, ref, d.opts.MinChange)
	mr.Readiness = d.readiness(tr, t, a != nil && (freeOK || frozen), &recent, ref)
	stalled := d.stalled(mr.Readiness.State, &ev, &recent, ref, a)
	// A stall whose output fell beyond the pod's bursts is judged on it
	// (evaluation.stall), strict to name and held at the undivided level
	// once named: a KV cache cut at 90 % finished 2 % of its requests for
	// minutes while 300 waited, and nothing could be named.
	judgedStall := stalled && (ev.symptoms[yThroughput] || in.open && in.sym[yThroughput].on && lenient.symptoms[yThroughput])
	if judgedStall {
		mr.Readiness.State, mr.Readiness.Stall = ReadyOK, true
		mr.Readiness.Message = stallJudged(&recent, d.opts.MinRequests)
	}
	ready := mr.Readiness.State == ReadyOK
	var long *evaluation
	span := &recent // the windows a named cause is held by (long's), else the recent one
	if ready {
		// The windows a named cause is held by: the last HoldWindows, or
		// all since the reference ended when that is less (an incident
		// younger than them), if longer than the recent window. Outside an
		// incident the reference ends where the recent window starts: no
		// point is decoded for that.
		p := tr.coarse.atOrBefore(t - HoldWindows*w)
		if (p == nil || p.t <= refEnd) && in.open {
			p = tr.coarse.atOrAfter(refEnd + 1)
		}
		if p != nil && now != nil && p.t > refEnd && now.t-p.t > w {
			ls := between(tr, p, now)
			e := d.lenient.evaluate(&ls, ref)
			// the queue's growth of the recent window: the longer span
			// starts at a coarse point, whose slot mean is no value then
			e.splitQueue(&ls, ref, growth, d.opts.MinChange)
			// the recent window's preemptions against the older windows'
			older := ls.seconds - recent.seconds
			e.preemptsFit = older > 0 && poissonRates(recent.c[cPreemptions], recent.seconds,
				ls.c[cPreemptions]-recent.c[cPreemptions], older, -1) > d.rules.clearAlpha
			e.arrivalsUp = d.lenient.startsRose(&ls, ref)
			long, span = &e, &ls
		}
		// more requests arrived: the recent window's starts up by the
		// minimum change, significantly over that span
		up := startsRatio(&recent, ref) >= 1+d.opts.MinChange
		ev.arrivalsUp, lenient.arrivalsUp = up && d.rules.startsRose(span, ref), up && d.lenient.startsRose(span, ref)
		naming.arrivalsUp = ev.arrivalsUp
		before := in.phase()
		in.drift = nil
		if anyTrue(in.late[:]) && ok {
			drift := d.lenient.evaluate(&recent, &roll)
			in.drift = &drift
		}
		in.step(t, w, b, &ev, &naming, &lenient, long, &recent, ref, refStart, refEnd, int64(d.opts.MaxIncident))
		if in.open && !before.open {
			in.baseStretches, in.thin = stretches, starved
		}
		for _, f := range tr.frees() {
			d.follow(tr, f, before, a, now, t)
		}
		if judgedStall {
			d.stall(tr, true, a) // no calm either, incident or not
		} else {
			d.resume(tr, now)
		}
		d.lull(tr, &recent, ref, &lenient, now, t)
		tr.topo.named = causeSet{}
		for k := range causes {
			tr.topo.named[k] = in.open && in.named && in.cause[k].on
		}
		findings := tr.topo.phase()
		// the findings' own reference, while their episodes leave it apart,
		// in an incident too: one opened in an episode's lull froze the
		// refusing time as its reference
		topoRef, topoStart, topoEnd := ref, refStart, refEnd
		if tr.findings.split {
			if r, s, e, _, ok := d.reference(tr, &tr.findings.free, from, a, &roll, ok); ok {
				topoRef, topoStart, topoEnd = r, s, e
			}
		}
		tr.topo.step(d, tr, t, now, &recent, topoRef, topoStart, topoEnd, in.open)
		for k := range causes {
			// refusals at the queue cap are the load's too: their end
			// explains the latency's return (Cause.load)
			in.loaded = in.loaded || in.open && causes[k].load && tr.topo.hyst[k].on
		}
		d.followFindings(tr, findings, a, now, &recent, t)
		if in.open && in.thin && !in.shown {
			// a cause is evidence of its own; a lone symptom is judged at
			// the dispersion's upper bound (isStarved)
			for k := range causes {
				in.shown = in.shown || k != kUnexplained && (in.cause[k].on || tr.topo.hyst[k].on)
			}
			if !in.shown {
				up := d.rules.evaluate(&recent, thinned(ref))
				in.shown = anyTrue(up.symptoms[:])
			}
		}
	} else {
		if in.open && in.named || !in.open && tr.findings.on && tr.topo.baselinedOn() {
			// kept with the incident's own verdict, or the refusal
			// episode's, and held by their evidence once ready again (the
			// self-exciting rank_imbalance at 50 %, seed 3: named again 2
			// polls after queueing)
			tr.topo.keep()
		} else {
			tr.topo.reset()
		}
		d.stall(tr, stalled, a)
		mr.Readiness.Stall = stalled
		// An incident whose requests stop finishing while requests wait has
		// not ended: its verdict is held, not judged again, until the stall
		// ends or the incident outlives the maximum.
		holding = stalled && in.open && in.named && (!in.thin || in.shown) && t-in.start < int64(d.opts.MaxIncident)
		if stalled {
			mr.Readiness.Message += stallNote(&recent, holding)
		}
	}
	var topoOn causeSet
	if ready || holding {
		// kept through a gap, not shown while not ready; held through a
		// stall with the incident's verdict they were named in
		topoOn = tr.topo.on()
	}
	if in.adopted && t-in.adoptedAt > w+b {
		in.adopted = false // the page said so for a baseline's length
	}
	mr.EnoughData = ready
	mr.Note = mr.Readiness.Message
	mr.Recent = windowInfo(d.wall(a), &recent)
	if frozen || stretches > 0 {
		mr.Baseline = windowInfo(d.wall(&point{t: refStart}), ref)
		mr.Baseline.Frozen = frozen
		mr.Baseline.Thin = in.open && in.thin
		if stretches > 1 {
			mr.Baseline.Stretches = stretches
		}
	} else {
		mr.Baseline = windowInfo(d.wall(from), ref)
	}
	var sym [numSymptoms]bool
	var named causeSet
	// an incident on a starved reference names nothing until a symptom
	// shows at its dispersion's upper bound (starved)
	reported := in.open && in.named && (!in.thin || in.shown) && (ready || holding)
	if reported {
		for y := range sym {
			sym[y] = in.sym[y].on
		}
		for k := range causes {
			named[k] = in.cause[k].on
		}
	}
	var held *evaluation
	if reported && ready {
		held = &lenient
	}
	if anyTrue(topoOn[:]) {
		named[kUnexplained] = false // a topology finding explains the symptom
	}
	for k := range causes {
		named[k] = named[k] || topoOn[k]
	}
	if named[kPreemptions] && long != nil && long.memoryShown >= 0 {
		// Named, memory's part of the queue is read over the windows the
		// cause is held by too, where those show more of it: a rare
		// event's count in one window says little (preemptsFit), and the
		// inflow did not take the queue the cache held back.
		if g := long.memoryQueue + long.inflowQueue; g > 0 {
			ev.memoryShown = max(ev.memoryShown, (ev.memoryQueue+ev.inflowQueue)*min(max(long.memoryShown/g, 0), 1))
		}
	}
	if named[kPreemptions] && lenient.cacheFull() {
		// Named and held by a full cache (cacheFull): memory's part of
		// the queue is the one the cache holds (splitQueue), not the
		// inflow's (seed 7's KV cut listed queueing first where no
		// preemption fell in 10 s).
		ev.memoryShown = max(ev.memoryShown, ev.memoryFullShown)
	}
	share := explains(&recent, ref, &ev, sym, &named)
	mr.fill(ready, reported, &ev, held, sym, named, &share, &recent, ref)
	mr.fillTopology(ready, &tr.topo, topoOn)
	mr.Readiness.Topology = d.topoNotes(tr)
	if reported {
		mr.Incident = d.incidentReport(in, t, &mr)
	}

	if in.adopted {
		at, of := d.base.Add(time.Duration(in.adoptedAt)), d.base.Add(time.Duration(in.adoptedOf))
		mr.Adopted = &Adopted{Since: of, At: at, Message: fmt.Sprintf("The change that began at %s lasted longer than %s (--diagnosis.max-incident): since %s its level is the baseline.",
			of.UTC().Format("15:04:05"), model.Duration(d.opts.MaxIncident), at.UTC().Format("15:04:05"))}
	}
	if in.ended && !in.open {
		e := d.base.Add(time.Duration(in.endedAt))
		mr.Recovered = &e
	}
	return mr
}

func (d *Diagnoser) wall(p *point) time.Time {
	if p == nil {
		return time.Time{}
	}
	return d.base.Add(time.Duration(p.t))
}

// chart fills every signal's chart with its value between consecutive
// stored points: the chart ring's over the last ChartSpan (or both windows,
// if longer), the fine ones over the recent window.
func (mr *ModelReport) chart(d *Diagnoser, tr *track) {
	var seq []*point
	fine, charted := tr.fine.points(), tr.chart.points()
	a := tr.fine.atOrBefore(d.lastT - int64(d.opts.Window))
	if a == nil && len(fine) > 0 {
		a = &fine[0]
	}
	for i := range charted {
		if p := &charted[i]; a == nil || p.t < a.t {
			seq = append(seq, p)
		}
	}
	for i := range fine {
		if p := &fine[i]; a == nil || p.t >= a.t {
			seq = append(seq, p)
		}
	}
	if a != nil {
		mr.RecentStart = unixSeconds(d.wall(a))
	}
	mr.ChartStart = unixSeconds(d.base.Add(time.Duration(d.lastT - d.chartSpan)))
	if len(seq) > 0 {
		// a younger history is drawn over what there is, not squeezed
		// into the right edge of the span
		mr.ChartStart = max(mr.ChartStart, unixSeconds(d.wall(seq[0])))
	}
	mr.ChartEnd = unixSeconds(d.base.Add(time.Duration(d.lastT)))
	// Each chart and its values in memory sized once: a model's charts
	// were a third of what it held, most of it slack and one allocation a value.
	charts := 0
	for si := range mr.Steps {
		for j := range mr.Steps[si].Signals {
			if s := &mr.Steps[si].Signals[j]; s.index >= 0 && len(seq) > 1 {
				s.Chart = make([]ChartPoint, 0, len(seq)-1)
				charts++
			}
		}
	}
	values := make([]float64, 0, charts*max(len(seq)-1, 0))
	finite := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		values = append(values, v)
		return &values[len(values)-1]
	}
	for k := 1; k < len(seq); k++ {
		if seq[k].t-seq[k-1].t > 3*d.chartRes+d.slack(d.fineRes) {
			// an outage: no value, a gap in the line
			at := unixSeconds(d.wall(seq[k]))
			for si := range mr.Steps {
				for j := range mr.Steps[si].Signals {
					if s := &mr.Steps[si].Signals[j]; s.index >= 0 {
						s.Chart = append(s.Chart, ChartPoint{T: at})
					}
				}
			}
			continue
		}
		sv := between(tr, seq[k-1], seq[k])
		at := unixSeconds(d.wall(seq[k]))
		for si := range mr.Steps {
			for j := range mr.Steps[si].Signals {
				s := &mr.Steps[si].Signals[j]
				if s.index < 0 {
					continue // a topology signal: no chart
				}
				s.Chart = append(s.Chart, ChartPoint{T: at, V: finite(sv.v[s.index])})
			}
		}
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// families turns a report into the gauge families: readiness and the
// incident's age for every model; for a ready model every symptom and
// cause as 0 or 1 (following the incident) and the ratio of every signal
// that has one; nothing of those otherwise (no claim either way).
func (d *Diagnoser) families(rep *Report) []exposition.Family {
	ratio := exposition.Family{Name: FamilyChangeRatio, Type: model.MetricTypeGauge,
		Help: "Diagnosis: a signal over the recent window divided by the same signal over the baseline (frozen during an incident), per model with engines collapsed. +Inf: up from 0. Absent when not ready or without a ratio (both 0)."}
	symptom := exposition.Family{Name: FamilySymptom, Type: model.MetricTypeGauge,
		Help: "Diagnosis: 1 while the incident's symptom holds (ttft_up, itl_up: the 90th percentile or the exact mean, sum over count, rose significantly by the minimum change; throughput_down: fewer tokens per second without fewer requests running, or with more requests waiting; in a stall fewer tokens per second), else 0. Absent when not ready, except while an incident is held through a stall (ready 0): its symptoms as named before the stall."}
	cause := exposition.Family{Name: FamilyCause, Type: model.MetricTypeGauge,
		Help: "Diagnosis: 1 while the incident's cause holds, else 0; the topology causes (rank_imbalance, kv_transfer_slow, kv_transfer_failures, prefill_saturated, admission) also without an incident; unexplained = a symptom with none of the others (look at parallelism and hardware). Absent when not ready, except while an incident is held through a stall (ready 0, requests waiting and too few finishing): its causes as named before the stall. See docs/diagnosis.md for each rule."}
	ready := exposition.Family{Name: FamilyReady, Type: model.MetricTypeGauge,
		Help: "Diagnosis: 1 when both windows are covered, the server prints the inputs and traffic suffices, else 0; /api/v1/diagnosis says why."}
	incident := exposition.Family{Name: FamilyIncident, Type: model.MetricTypeGauge,
		Help: "Diagnosis: age in seconds of the current incident (a named symptom against the frozen baseline), 0 when none."}
	l := labels.NewScratchBuilder(3) // one for every sample: a builder each was 40 allocations a scrape
	for i := range d.gauges {
		d.gauges[i].n = 0
	}
	for i := range rep.Models {
		mr := &rep.Models[i]
		add := func(f *exposition.Family, label, value string, v float64) {
			memo := &d.gauges[gaugeFamily(f.Name)]
			if lb, ok := memo.get(mr.Model, value); ok {
				f.Samples = append(f.Samples, exposition.Sample{Labels: lb, Value: v})
				return
			}
			l.Reset()
			l.Add(model.MetricNameLabel, f.Name)
			if mr.Model != "" {
				l.Add("model_name", mr.Model)
			}
			if label != "" {
				l.Add(label, value)
			}
			l.Sort()
			lb := l.Labels()
			memo.put(mr.Model, value, lb)
			f.Samples = append(f.Samples, exposition.Sample{Labels: lb, Value: v})
		}
		add(&ready, "", "", boolValue(mr.EnoughData))
		age := 0.0
		if mr.Incident != nil {
			age = mr.Incident.Seconds
		}
		add(&incident, "", "", age)
		if !mr.EnoughData {
			if mr.Incident != nil && mr.Incident.Held != "" {
				// held through a stall: the incident's record, no ratio
				for _, f := range mr.Symptoms {
					add(&symptom, "symptom", f.Name, boolValue(f.Active))
				}
				for _, f := range mr.Causes {
					add(&cause, "cause", f.Name, boolValue(f.Active))
				}
			}
			continue
		}
		for _, st := range mr.Steps {
			for _, s := range st.Signals {
				if !math.IsNaN(s.ratio) {
					add(&ratio, "signal", s.Signal, s.ratio)
				}
			}
		}
		for _, f := range mr.Symptoms {
			add(&symptom, "symptom", f.Name, boolValue(f.Active))
		}
		for _, f := range mr.Causes {
			add(&cause, "cause", f.Name, boolValue(f.Active))
		}
	}
	for i := range d.gauges { // none kept of a model or signal gone
		m := &d.gauges[i]
		m.keys, m.labels = m.keys[:m.n], m.labels[:m.n]
	}
	var out []exposition.Family
	for _, f := range []exposition.Family{cause, ratio, incident, ready, symptom} { // sorted by name
		if len(f.Samples) > 0 {
			slices.SortFunc(f.Samples, func(a, b exposition.Sample) int { return labels.Compare(a.Labels, b.Labels) })
			out = append(out, f)
		}
	}
	return out
}

// gaugeFamilies is how many gauge families families writes.
const gaugeFamilies = 5

func gaugeFamily(name string) int {
	switch name {
	case FamilyChangeRatio:
		return 0
	case FamilySymptom:
		return 1
	case FamilyCause:
		return 2
	case FamilyReady:
		return 3
	}
	return 4 // FamilyIncident
}

// gaugeMemo is one gauge family's label sets, in the order they were
// added: the n-th sample of a scrape reuses the last one's n-th set when
// its model and label value are the same (a set costs an allocation).
type gaugeMemo struct {
	keys   []gaugeKey
	labels []labels.Labels
	n      int // sets this scrape
}

type gaugeKey struct{ model, value string }

func (m *gaugeMemo) get(model, value string) (labels.Labels, bool) {
	if m.n < len(m.keys) && m.keys[m.n] == (gaugeKey{model, value}) {
		m.n++
		return m.labels[m.n-1], true
	}
	return labels.Labels{}, false
}

// put records the n-th set, dropping the last scrape's from n on: the
// sequence changed there.
func (m *gaugeMemo) put(model, value string, l labels.Labels) {
	m.keys = append(m.keys[:m.n], gaugeKey{model, value})
	m.labels = append(m.labels[:m.n], l)
	m.n++
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
