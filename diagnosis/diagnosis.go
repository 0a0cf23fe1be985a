package diagnosis

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/quantile"
)

// Names of the families the Diagnoser exposes, a public contract.
const (
	FamilyChangeRatio = "vllm_diagnosis_change_ratio"
	FamilySymptom     = "vllm_diagnosis_symptom"
	FamilyCause       = "vllm_diagnosis_cause"
)

// Defaults of Options.
const (
	DefaultWindow      = time.Minute
	DefaultBaseline    = 30 * time.Minute
	DefaultMinChange   = 0.25
	DefaultMinRequests = 20
)

// Slots of each ring: the recent window is kept at window/fineSlots, the
// baseline at baseline/coarseSlots, whatever the scrape interval, so memory
// does not grow with a longer baseline or a shorter interval.
const (
	fineSlots   = 30
	coarseSlots = 60
)

// Options configure a Diagnoser.
type Options struct {
	Window    time.Duration // the recent window
	Baseline  time.Duration // the window before it, compared against
	MinChange float64       // minimum relative change, in (0, 1)
	// MinRequests is the number of finished requests each window needs
	// before anything is claimed; 0 means DefaultMinRequests.
	MinRequests float64
	// Interval is the scrape interval; both windows must cover at least
	// two of them. 0 skips that check.
	Interval time.Duration
}

// Diagnoser keeps each model's history and diagnoses it at every
// observation. It is safe for concurrent use.
type Diagnoser struct {
	opts      Options
	fineRes   int64
	coarseRes int64

	mu      sync.Mutex
	base    time.Time
	hasBase bool
	tracks  map[string]*track
	report  *Report
	charted bool  // report's charts are filled in
	lastT   int64 // of the latest observation
	scratch []quantile.Bucket
}

// New checks opts and returns a Diagnoser without history.
func New(opts Options) (*Diagnoser, error) {
	if opts.MinRequests == 0 {
		opts.MinRequests = DefaultMinRequests
	}
	switch {
	case opts.Window <= 0:
		return nil, fmt.Errorf("diagnosis: the recent window must be positive, got %s", opts.Window)
	case opts.Baseline <= 0:
		return nil, fmt.Errorf("diagnosis: the baseline window must be positive, got %s", opts.Baseline)
	case opts.Interval > 0 && opts.Window < 2*opts.Interval:
		return nil, fmt.Errorf("diagnosis: the recent window %s is shorter than two scrape intervals (%s): a change needs two scrapes inside it; lengthen the window", model.Duration(opts.Window), 2*opts.Interval)
	case opts.Interval > 0 && opts.Baseline < 2*opts.Interval:
		return nil, fmt.Errorf("diagnosis: the baseline window %s is shorter than two scrape intervals (%s); lengthen the baseline", model.Duration(opts.Baseline), 2*opts.Interval)
	case !(opts.MinChange > 0 && opts.MinChange < 1):
		return nil, fmt.Errorf("diagnosis: the minimum relative change must be above 0 and below 1 (0.25 = 25 %%), got %v", opts.MinChange)
	case !(opts.MinRequests >= 1) || math.IsInf(opts.MinRequests, 0):
		return nil, errors.New("diagnosis: the minimum number of requests must be at least 1")
	}
	d := &Diagnoser{
		opts:      opts,
		fineRes:   max(int64(opts.Window/fineSlots), 1),
		coarseRes: max(int64(opts.Baseline/coarseSlots), 1),
		tracks:    map[string]*track{},
	}
	d.report, d.charted = d.emptyReport(time.Time{}, StatusNoScrape), true
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
			tr = &track{fine: ring{res: d.fineRes}, coarse: ring{res: d.coarseRes}, uncausedSince: -1}
			d.tracks[o.Model] = tr
		} else if t < tr.lastT {
			continue // time went backwards; keep the history as it is
		}
		tr.observe(t, o)
	}
	w, b := int64(d.opts.Window), int64(d.opts.Baseline)
	rep := d.emptyReport(now, StatusOK)
	models := make([]string, 0, len(d.tracks))
	for m, tr := range d.tracks {
		if t-tr.lastT > w+b {
			delete(d.tracks, m) // the model left the page long ago
			continue
		}
		tr.fine.prune(t - w)
		// The recent window may start up to slack before t-w (the newest
		// fine point at or before it), and its baseline starts b before
		// that: keep a coarse point at or before the earliest such start.
		tr.coarse.prune(t - w - b - d.slack(d.fineRes))
		if tr.lastT == t {
			models = append(models, m)
		}
	}
	slices.Sort(models)
	for _, m := range models {
		rep.Models = append(rep.Models, d.diagnose(m, d.tracks[m], t))
	}
	d.report, d.charted, d.lastT = rep, false, t
	return families(rep)
}

// Fail records a failed scrape at now: the diagnosis is withdrawn until
// the next success (the history stays).
func (d *Diagnoser) Fail(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.report, d.charted = d.emptyReport(now, StatusScrapeFailed), true
}

// Report returns the latest diagnosis, charts included. It must not be
// modified. The charts are drawn on the first call after an observation,
// so that scrapes nobody looks at do not pay for them.
func (d *Diagnoser) Report() *Report {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.charted {
		for i := range d.report.Models {
			mr := &d.report.Models[i]
			if tr := d.tracks[mr.Model]; tr != nil {
				if from, a, now, _ := d.windows(tr, d.lastT); a != nil {
					mr.chart(d, tr, from, a, now)
				}
			}
		}
		d.charted = true
	}
	return d.report
}

// storedBytes estimates the memory the histories hold.
func (d *Diagnoser) storedBytes() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, tr := range d.tracks {
		n += tr.bytes()
	}
	return n
}

func (d *Diagnoser) emptyReport(now time.Time, status string) *Report {
	return &Report{
		Time:        now,
		Status:      status,
		Window:      model.Duration(d.opts.Window).String(),
		Baseline:    model.Duration(d.opts.Baseline).String(),
		MinChange:   d.opts.MinChange,
		MinRequests: d.opts.MinRequests,
		Models:      []ModelReport{},
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

// windows returns the points that bound the recent window (a to now) and
// the baseline (from to a). The recent window needs history reaching back
// to its start; the baseline takes what history there is before that, as
// long as it covers minBaseline.
func (d *Diagnoser) windows(tr *track, t int64) (from, a, now *point, ok bool) {
	if len(tr.fine.pts) == 0 {
		return nil, nil, nil, false
	}
	now = &tr.fine.pts[len(tr.fine.pts)-1]
	// A bound older than its window's start by more than the slack means
	// no point was kept there, as after an outage: the
	// span would cover the outage and call it a change. Nothing is then
	// claimed until the window is covered again.
	a = tr.fine.atOrBefore(t - int64(d.opts.Window))
	if a == nil || a.t < t-int64(d.opts.Window)-d.slack(d.fineRes) {
		return nil, nil, now, false
	}
	from = tr.coarse.atOrBefore(a.t - int64(d.opts.Baseline))
	if from != nil && from.t < a.t-int64(d.opts.Baseline)-d.slack(d.coarseRes) {
		return nil, a, now, false
	}
	if from == nil && len(tr.coarse.pts) > 0 {
		if oldest := &tr.coarse.pts[0]; a.t-oldest.t >= int64(d.minBaseline()) {
			from = oldest
		}
	}
	return from, a, now, from != nil
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
	mr := ModelReport{Model: m}
	from, a, now, ok := d.windows(tr, t)
	var recent, base spanValues
	for i := range numSignals {
		recent.v[i], base.v[i] = math.NaN(), math.NaN()
	}
	recent.requests, base.requests = math.NaN(), math.NaN()
	if a != nil {
		recent, d.scratch = between(tr, a, now, d.scratch)
	}
	if ok {
		base, d.scratch = between(tr, from, a, d.scratch)
	}
	ev := evaluate(recent, base, d.opts.MinChange, d.opts.MinRequests)
	// A latency percentile reacts to a shift as soon as a tenth of the
	// window's requests are affected; the means that explain it (lengths,
	// hit ratio) move in proportion to the affected share, and lengths are
	// only known as requests progress. So a symptom is called unexplained
	// only once it has gone a whole recent window without any cause.
	if ev.causes[kUnexplained] {
		if tr.uncausedSince < 0 {
			tr.uncausedSince = t
		}
		ev.causes[kUnexplained] = t-tr.uncausedSince >= int64(d.opts.Window)
	} else {
		tr.uncausedSince = -1
	}
	switch {
	case a == nil:
		mr.Note = fmt.Sprintf("too little history: the recent window (%s) is not covered yet", model.Duration(d.opts.Window))
	case !ok:
		mr.Note = fmt.Sprintf("too little history: the baseline needs %s before the recent window", model.Duration(d.minBaseline()))
	case !ev.enough:
		mr.Note = fmt.Sprintf("too little data: each window needs at least %v finished requests", d.opts.MinRequests)
	}
	mr.EnoughData = ev.enough
	mr.Recent = windowInfo(d.wall(a), recent)
	mr.Baseline = windowInfo(d.wall(from), base)
	mr.fill(ev, recent, base)
	return mr
}

func (d *Diagnoser) wall(p *point) time.Time {
	if p == nil {
		return time.Time{}
	}
	return d.base.Add(time.Duration(p.t))
}

// chart fills every signal's chart with its value between consecutive
// stored points: the coarse ones over the baseline, the fine ones over the
// recent window.
func (mr *ModelReport) chart(d *Diagnoser, tr *track, from, a, _ *point) {
	var seq []*point
	if from != nil {
		for i := range tr.coarse.pts {
			if p := &tr.coarse.pts[i]; p.t >= from.t && p.t < a.t {
				seq = append(seq, p)
			}
		}
	}
	seq = append(seq, a)
	for i := range tr.fine.pts {
		if p := &tr.fine.pts[i]; p.t > a.t {
			seq = append(seq, p)
		}
	}
	mr.RecentStart = unixSeconds(d.wall(a))
	for k := 1; k < len(seq); k++ {
		var sv spanValues
		sv, d.scratch = between(tr, seq[k-1], seq[k], d.scratch)
		at := unixSeconds(d.wall(seq[k]))
		for si := range mr.Steps {
			for j := range mr.Steps[si].Signals {
				s := &mr.Steps[si].Signals[j]
				s.Chart = append(s.Chart, ChartPoint{T: at, V: finite(sv.v[s.index])})
			}
		}
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// families turns a report into the gauge families: nothing for a model
// with too little data (no claim either way), else every symptom and cause
// as 0 or 1 and the ratio of every signal that has one.
func families(rep *Report) []exposition.Family {
	ratio := exposition.Family{Name: FamilyChangeRatio, Type: model.MetricTypeGauge,
		Help: "Diagnosis: a signal over the recent window divided by the same signal over the baseline window that ends where the recent one starts, per model with engines collapsed. +Inf: up from 0. Absent with too little data or no ratio (both 0)."}
	symptom := exposition.Family{Name: FamilySymptom, Type: model.MetricTypeGauge,
		Help: "Diagnosis: 1 if the symptom holds (ttft_up, itl_up: the 90th percentile rose by the minimum change; throughput_down: fewer tokens per second without fewer requests running), else 0. Absent with too little data."}
	cause := exposition.Family{Name: FamilyCause, Type: model.MetricTypeGauge,
		Help: "Diagnosis: 1 if the cause explains a symptom, else 0; unexplained = a symptom with none of the others (look at parallelism and hardware). Absent with too little data. See docs/diagnosis.md for each rule."}
	for i := range rep.Models {
		mr := &rep.Models[i]
		if !mr.EnoughData {
			continue
		}
		add := func(f *exposition.Family, label, value string, v float64) {
			l := labels.NewScratchBuilder(3)
			l.Add(model.MetricNameLabel, f.Name)
			if mr.Model != "" {
				l.Add("model_name", mr.Model)
			}
			l.Add(label, value)
			l.Sort()
			f.Samples = append(f.Samples, exposition.Sample{Labels: l.Labels(), Value: v})
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
	var out []exposition.Family
	for _, f := range []exposition.Family{cause, ratio, symptom} { // sorted by name
		if len(f.Samples) > 0 {
			slices.SortFunc(f.Samples, func(a, b exposition.Sample) int { return labels.Compare(a.Labels, b.Labels) })
			out = append(out, f)
		}
	}
	return out
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
