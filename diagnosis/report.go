package diagnosis

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Report is the latest diagnosis, as /api/v1/diagnosis serves it.
type Report struct {
	Time        time.Time `json:"time"`
	Status      string    `json:"status"` // ok, no_scrape_yet, scrape_failed
	Window      string    `json:"window"`
	Baseline    string    `json:"baseline"`
	MinChange   float64   `json:"min_change"`
	MinRequests float64   `json:"min_requests"`
	// Significance is the level of each test, before its division by the
	// number of signals; MaxIncident the longest incident.
	Significance float64 `json:"significance"`
	MaxIncident  string  `json:"max_incident"`
	// Lookback is how far back the incident-free baseline may reach.
	Lookback string        `json:"baseline_lookback"`
	Models   []ModelReport `json:"models"`
	// SLO holds the latency targets, in seconds, when set.
	SLO *SLOReport `json:"slo,omitempty"`
	// ChartsLeftOut is how many models are listed without their charts,
	// beyond MaxChartedModels.
	ChartsLeftOut int `json:"charts_left_out,omitempty"`
	// ModelsLeftOut are the models on the page the sidecar keeps no
	// state for, so has no diagnosis of (SetLeftOut); nil when none.
	ModelsLeftOut *LeftOut `json:"models_left_out,omitempty"`
}

// LeftOut says which models have no diagnosis because the caller keeps no
// state for them, and why: a model missing from Models is otherwise
// indistinguishable from one that left the page.
type LeftOut struct {
	Count int `json:"count"`
	// Models are the first MaxListedLeftOut of them, in name order.
	Models []string `json:"models"`
	Reason string   `json:"reason"`
}

// MaxListedLeftOut is the most left-out models a report names: a pod of
// thousands of models over the bound would otherwise answer them all.
const MaxListedLeftOut = 16

// SLOReport is the targets the recent percentiles are compared with.
type SLOReport struct {
	TTFT *float64 `json:"ttft_seconds,omitempty"`
	TPOT *float64 `json:"tpot_seconds,omitempty"`
}

// ModelReport is the diagnosis of one model.
type ModelReport struct {
	Model  string `json:"model_name"`
	Server string `json:"server,omitempty"` // vllm, sglang, ...; empty when unknown
	// EnoughData is Readiness.State == "ready": until then no symptom or
	// cause is claimed, either way.
	EnoughData bool      `json:"enough_data"`
	Note       string    `json:"note,omitempty"` // Readiness.Message
	Readiness  Readiness `json:"readiness"`
	// Incident is the current incident, nil when none.
	Incident *Incident `json:"incident"`
	// Adopted says that an incident outlived --diagnosis.max-incident and
	// its level became the baseline; nil otherwise.
	Adopted *Adopted `json:"adopted,omitempty"`
	// Recovered is when the last incident ended, while the frozen
	// baseline is still the reference (the rolling one holds the incident).
	Recovered *time.Time `json:"recovered,omitempty"`
	// ChartStart and ChartEnd bound the charts (Unix seconds).
	ChartStart float64    `json:"chart_start"`
	ChartEnd   float64    `json:"chart_end"`
	Recent     WindowInfo `json:"recent"`
	Baseline   WindowInfo `json:"baseline"`
	Symptoms   []Finding  `json:"symptoms"`
	Causes     []Finding  `json:"causes"`
	Steps      []Step     `json:"steps"`
	// Topology are the topology findings named now (a rank queueing while
	// others idle, the prefill/decode findings), each with its sentence
	// and action, whether or not a latency incident is open.
	Topology    []Action `json:"topology"`
	RecentStart float64  `json:"recent_start"` // Unix seconds, where the charts' recent part begins

	share [maxCauses]float64 // each named cause's share, uncapped (explain.go)
}

// WindowInfo says what a window covered.
type WindowInfo struct {
	Start    *time.Time `json:"start"`
	Seconds  float64    `json:"seconds"`
	Requests *float64   `json:"requests"` // finished requests
	// Frozen is true for a baseline frozen at an incident's start.
	Frozen bool `json:"frozen,omitempty"`
	// Stretches is how many stretches of incident-free time the baseline
	// sums when it skips an incident (absent for one); Start is then the
	// oldest one's start, Seconds their total.
	Stretches int `json:"stretches,omitempty"`
	// Thin is true for a frozen baseline starved of incident-free time
	// (under half a baseline of it, begun more than a baseline ago): its
	// incident is reported only once a cause of its own or a symptom at
	// the dispersion's upper bound shows, so until then the diagnosis
	// says it cannot judge the change rather than naming the pod's bursts.
	Thin bool `json:"thin,omitempty"`
}

// Readiness states.
const (
	ReadyOK         = "ready"
	ReadyWarmingUp  = "warming_up"
	ReadyLowTraffic = "too_little_traffic"
	ReadyNoInputs   = "no_inputs"
)

// Readiness says whether the diagnosis can judge the model, and why not.
type Readiness struct {
	State   string `json:"state"` // ready, warming_up, too_little_traffic, no_inputs
	Message string `json:"message,omitempty"`
	// SecondsLeft is how long until the windows are covered, warming up.
	SecondsLeft *float64 `json:"seconds_left,omitempty"`
	// Missing are the inputs without which nothing is judged; NotJudged
	// the ones whose absence leaves some causes unjudged.
	Missing   []string `json:"missing,omitempty"`
	NotJudged []string `json:"not_judged,omitempty"`
	// Withheld are the inputs the server prints but not whole (withheldWhy),
	// required or not; neither Missing nor NotJudged lists them.
	Withheld []string `json:"withheld,omitempty"`
	// Topology says which topology findings (ranks, prefill/decode) the
	// page cannot feed, and why.
	Topology []string `json:"topology,omitempty"`
	// Stall: too_little_traffic because the pod stopped finishing
	// requests while requests wait (Diagnoser.stalled), not a quiet pod.
	Stall bool `json:"stall,omitempty"`
}

// Incident is a change that holds against the frozen baseline.
type Incident struct {
	Start    time.Time `json:"start"`
	Seconds  float64   `json:"seconds"`
	Sentence string    `json:"sentence"`
	Causes   []Action  `json:"causes"`
	// Held is "stall" while the incident is held through a stall: its
	// symptoms and causes are those named before it, not judged again.
	Held string `json:"held,omitempty"`
}

// Action is what a cause means and what to do about it.
type Action struct {
	Cause    string `json:"cause"`
	Sentence string `json:"sentence"`
	Action   string `json:"action"`
	// Explains is the cause's share of the symptom (Finding.Explains);
	// the incident lists its causes by it, largest first.
	Explains *float64 `json:"explains,omitempty"`
}

// Adopted is an incident that became the baseline.
type Adopted struct {
	Since   time.Time `json:"since"` // when the incident began
	At      time.Time `json:"at"`    // when its level became the baseline
	Message string    `json:"message"`
}

// Finding is one symptom or cause.
type Finding struct {
	Name   string `json:"name"`
	Active bool   `json:"active"`
	// Explains is a named cause's share of the symptom, 0 to 1
	// (explain.go); absent for the others and for findings without one.
	Explains *float64 `json:"explains,omitempty"`
}

// Step is one of the five steps, in the order operators take them.
type Step struct {
	Number   int            `json:"step"`
	Title    string         `json:"title"`
	Question string         `json:"question"`
	Verdict  string         `json:"verdict"`
	Signals  []SignalReport `json:"signals"`
	Findings []Finding      `json:"findings"` // the symptoms or causes this step decides
}

// SignalReport is one signal's evidence.
type SignalReport struct {
	Signal      string   `json:"signal"`
	Description string   `json:"description"`
	Unit        string   `json:"unit"`
	Recent      *float64 `json:"recent"`
	Baseline    *float64 `json:"baseline"`
	// Ratio is recent/baseline; null when undefined or infinite (a rise
	// from 0, which Change says).
	Ratio *float64 `json:"ratio"`
	// RatioLow and RatioHigh, for a quantile, are the lowest and highest
	// ratio the buckets allow (each window's quantile anywhere in its
	// bucket), beside Ratio, which interpolates inside them. Absent for
	// other signals; RatioHigh is absent where unbounded (+Inf).
	RatioLow  *float64 `json:"ratio_low,omitempty"`
	RatioHigh *float64 `json:"ratio_high,omitempty"`
	Change    Change   `json:"change"` // up and down only when significant
	// PValue is the test's p-value for the change the ratio points to
	// (null within the minimum change); Bad is a significant change in the
	// direction that hurts.
	PValue *float64     `json:"p_value"`
	Bad    bool         `json:"bad"`
	Chart  []ChartPoint `json:"chart"`

	index int
	ratio float64 // with +Inf, for the gauges
}

// ChartPoint is the signal's value over the stretch of history ending at T
// (Unix seconds); V is null where it is undefined.
type ChartPoint struct {
	T float64  `json:"t"`
	V *float64 `json:"v"`
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func windowInfo(start time.Time, sv *stats) WindowInfo {
	w := WindowInfo{Seconds: sv.seconds, Requests: finite(sv.requests)}
	if !start.IsZero() {
		w.Start = &start
	}
	return w
}

// steps lays the signals and symptoms out in the operators' order; the
// causes each step decides are the records of that Step.
var steps = []struct {
	title, question string
	signals         []int
	symptoms        []int
}{
	{"Prefill or decode", "Did time to first token rise, inter-token latency, or both? Prefill and decode problems have no causes in common.",
		[]int{sTTFT, sTTFTMean, sITL, sITLMean, sGenTPS}, []int{yTTFT, yITL, yThroughput}},
	{"Saturation", "Did more requests wait (inflow above capacity), or did the running batch grow (more work per step)?",
		[]int{sWaiting, sRunning}, nil},
	{"Memory", "Did preemptions rise? Each one recomputes a whole prefill. KV usage alone is no problem.",
		[]int{sKV, sPreempt}, nil},
	{"Traffic", "Did prompts or outputs get longer, or the prefix-cache hit ratio fall (a routing change, new instances)?",
		[]int{sPromptMean, sGenMean, sHitRatio}, nil},
	{"Topology", "Does one data-parallel rank queue while others idle? On a prefill/decode pair: is KV slower to arrive, do transfers fail, is the prefill pool saturated?",
		nil, nil},
	{"Configuration and hardware", "A symptom none of the above explains: look at tensor-parallel configuration, max_num_batched_tokens and the hardware.",
		nil, nil},
}

// topologyStep is the index of the topology step, whose signals
// fillTopology adds; topologyStepNumber its number.
const (
	topologyStep       = 4
	topologyStepNumber = topologyStep + 1
)

// fillTopology writes the topology findings' evidence into the report:
// the topology step's signals (while ready), and the sentences of the
// findings on (while ready, or held through a stall with its incident).
func (mr *ModelReport) fillTopology(ready bool, ts *topoState, on causeSet) {
	e := &ts.last
	mr.Topology = []Action{}
	st := &mr.Steps[topologyStep]
	for k := range causes {
		c := &causes[k]
		if c.finding == nil {
			continue
		}
		if on[k] {
			sentence := c.Sentence
			if c.sentenceOf != nil {
				sentence = c.sentenceOf(e)
			}
			mr.Topology = append(mr.Topology, Action{Cause: c.Name, Sentence: sentence, Action: c.Action})
		}
		i := c.signal
		if !ready || !e.judged[k] {
			continue // the page or the role cannot feed it
		}
		info := topoSignalInfo[i]
		ch := e.change[i]
		st.Signals = append(st.Signals, SignalReport{
			Signal: info.name, Description: info.what, Unit: info.unit,
			Recent: finite(e.recent[i]), Baseline: finite(e.base[i]), Ratio: finite(e.ratio[i]), Change: ch,
			PValue: finite(e.p[i]), Bad: ch == ChangeUp, Chart: []ChartPoint{}, index: -1, ratio: e.ratio[i],
		})
	}
}

// hurts says, per signal, which change is painted bad. KV usage has none
// (""): high use without preemption is a well-used cache, so the
// preemption rate carries the judgement.
var hurts = [numSignals]Change{sTTFT: ChangeUp, sITL: ChangeUp, sGenTPS: ChangeDown, sWaiting: ChangeUp, sRunning: ChangeUp,
	sPreempt: ChangeUp, sPromptMean: ChangeUp, sGenMean: ChangeUp, sHitRatio: ChangeDown, sTTFTMean: ChangeUp, sITLMean: ChangeUp}

// fill writes the evaluation and the incident's verdicts into the report:
// named are the causes and topology findings named, by record. During an
// incident, held is the lenient evaluation: a signal that holds the
// incident is marked bad while it does; nil otherwise.
//
// reported says the incident's symptoms and causes are reported: judged
// when ready, else held through a stall (the incident's record, no share).
func (mr *ModelReport) fill(ready, reported bool, ev, held *evaluation, sym [numSymptoms]bool, named causeSet, share *[maxCauses]float64, recent, base *stats) {
	// Every slice at its final length: growing them was half of fill's
	// CPU (BenchmarkScrapeCycle's profile).
	mr.Symptoms, mr.Causes, mr.share = make([]Finding, 0, len(symptomNames)), make([]Finding, 0, len(causes)), *share
	mr.Steps = slices.Grow(mr.Steps, len(steps))
	// The report's numbers in one array (finite allocated each: 60 of a
	// one-engine scrape's 600 allocations, BenchmarkScrapeCycle). A
	// pointer stays valid if append moves the array.
	nums := make([]float64, 0, numReportNumbers)
	finite := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		nums = append(nums, v)
		return &nums[len(nums)-1]
	}
	for i, n := range symptomNames {
		mr.Symptoms = append(mr.Symptoms, Finding{Name: n, Active: (ready || reported) && sym[i]})
	}
	for k := range causes {
		f := Finding{Name: causes[k].Name, Active: (ready || reported) && named[k]}
		if f.Active && ready {
			f.Explains = finite(math.Min(share[k], 1))
		}
		mr.Causes = append(mr.Causes, f)
	}
	for n, st := range steps {
		s := Step{Number: n + 1, Title: st.title, Question: st.question, Signals: make([]SignalReport, 0, len(st.signals)), Findings: make([]Finding, 0, len(st.symptoms)+stepCauses[n])}
		for _, i := range st.signals {
			r := ev.ratio[i]
			ch := ev.change[i]
			bad := ready && hurts[i] != "" && (ch == hurts[i] || held != nil && held.change[i] == hurts[i])
			s.Signals = append(s.Signals, SignalReport{
				Signal: signalInfo[i].name, Description: signalInfo[i].what, Unit: signalInfo[i].unit,
				Recent: finite(recent.v[i]), Baseline: finite(base.v[i]), Ratio: finite(r), Change: ch,
				RatioLow: finite(ev.ratioLow[i]), RatioHigh: finite(ev.ratioHigh[i]),
				PValue: finite(ev.p[i]), Bad: bad, Chart: []ChartPoint{}, index: i, ratio: r,
			})
		}
		for _, y := range st.symptoms {
			s.Findings = append(s.Findings, mr.Symptoms[y])
		}
		var active []int
		for k := range causes {
			if causes[k].Step != s.Number {
				continue
			}
			s.Findings = append(s.Findings, mr.Causes[k])
			if mr.Causes[k].Active {
				active = append(active, k)
			}
		}
		byExplains(active, share)
		s.Verdict = verdict(n, ready, sym, active)
		mr.Steps = append(mr.Steps, s)
	}
}

// numReportNumbers is how many numbers fill gives a model at most: six a
// signal, one a cause.
var numReportNumbers = func() int {
	n := len(causes)
	for _, st := range steps {
		n += 6 * len(st.signals)
	}
	return n
}()

// stepCauses counts the causes each step lists.
var stepCauses = func() []int {
	n := make([]int, len(steps))
	for k := range causes {
		if s := causes[k].Step - 1; s >= 0 && s < len(n) {
			n[s]++
		}
	}
	return n
}()

func verdict(step int, ready bool, sym [numSymptoms]bool, active []int) string {
	if !ready {
		return "not judged"
	}
	if step == 0 {
		t, i := sym[yTTFT], sym[yITL]
		switch {
		case t && i:
			return "both sides slower: look at both prefill and decode causes"
		case t:
			return "prefill side: time to first token rose, inter-token latency did not"
		case i:
			return "decode side: inter-token latency rose, time to first token did not"
		case sym[yThroughput]:
			return "throughput fell with as many requests running, latencies flat: look at both sides"
		}
		return "no change against the baseline: no latency or throughput regression"
	}
	if len(active) == 0 {
		return "nothing changed here"
	}
	shorts := make([]string, len(active))
	for i, k := range active {
		shorts[i] = causes[k].Short
	}
	return "found: " + strings.Join(shorts, ", ")
}
