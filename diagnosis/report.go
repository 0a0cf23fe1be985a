package diagnosis

import (
	"math"
	"time"
)

// Report is the latest diagnosis, as /api/v1/diagnosis serves it.
type Report struct {
	Time        time.Time     `json:"time"`
	Status      string        `json:"status"` // ok, no_scrape_yet, scrape_failed
	Window      string        `json:"window"`
	Baseline    string        `json:"baseline"`
	MinChange   float64       `json:"min_change"`
	MinRequests float64       `json:"min_requests"`
	Models      []ModelReport `json:"models"`
}

// ModelReport is the diagnosis of one model.
type ModelReport struct {
	Model string `json:"model_name"`
	// EnoughData is false until both windows hold enough history and
	// requests; until then no symptom or cause is claimed, either way.
	EnoughData  bool       `json:"enough_data"`
	Note        string     `json:"note,omitempty"`
	Recent      WindowInfo `json:"recent"`
	Baseline    WindowInfo `json:"baseline"`
	Symptoms    []Finding  `json:"symptoms"`
	Causes      []Finding  `json:"causes"`
	Steps       []Step     `json:"steps"`
	RecentStart float64    `json:"recent_start"` // Unix seconds, where the charts' recent part begins
}

// WindowInfo says what a window covered.
type WindowInfo struct {
	Start    *time.Time `json:"start"`
	Seconds  float64    `json:"seconds"`
	Requests *float64   `json:"requests"` // finished requests
}

// Finding is one symptom or cause.
type Finding struct {
	Name   string `json:"name"`
	Active bool   `json:"active"`
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
	Ratio  *float64     `json:"ratio"`
	Change Change       `json:"change"`
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

func windowInfo(start time.Time, sv spanValues) WindowInfo {
	w := WindowInfo{Seconds: sv.seconds, Requests: finite(sv.requests)}
	if !start.IsZero() {
		w.Start = &start
	}
	return w
}

// steps lays the signals and findings out in the operators' order.
var steps = []struct {
	title, question string
	signals         []int
	symptoms        []int
	causes          []int
}{
	{"Prefill or decode", "Did time to first token rise, inter-token latency, or both? Prefill and decode problems have no causes in common.",
		[]int{sTTFT, sITL, sGenTPS}, []int{yTTFT, yITL, yThroughput}, nil},
	{"Saturation", "Did more requests wait (inflow above capacity), or did the running batch grow (more work per step)?",
		[]int{sWaiting, sRunning}, nil, []int{kQueueing, kBatchGrowth}},
	{"Memory", "Did preemptions rise? Each one recomputes a whole prefill. KV usage alone is no problem.",
		[]int{sKV, sPreempt}, nil, []int{kPreemptions}},
	{"Traffic", "Did prompts or outputs get longer, or the prefix-cache hit ratio fall (a routing change, new instances)?",
		[]int{sPromptMean, sGenMean, sHitRatio}, nil, []int{kLongPrompts, kLongOutputs, kPrefixMisses}},
	{"Configuration and hardware", "A symptom none of the above explains: look at tensor-parallel configuration, max_num_batched_tokens and the hardware.",
		nil, nil, []int{kUnexplained}},
}

// fill writes the evaluation into the report.
func (mr *ModelReport) fill(ev evaluation, recent, base spanValues) {
	mr.Symptoms, mr.Causes = []Finding{}, []Finding{}
	for i, n := range symptomNames {
		mr.Symptoms = append(mr.Symptoms, Finding{n, ev.enough && ev.symptoms[i]})
	}
	for i, n := range causeNames {
		mr.Causes = append(mr.Causes, Finding{n, ev.enough && ev.causes[i]})
	}
	for n, st := range steps {
		s := Step{Number: n + 1, Title: st.title, Question: st.question, Signals: []SignalReport{}, Findings: []Finding{}}
		for _, i := range st.signals {
			r := ev.ratio[i]
			s.Signals = append(s.Signals, SignalReport{
				Signal: signalInfo[i].name, Description: signalInfo[i].what, Unit: signalInfo[i].unit,
				Recent: finite(recent.v[i]), Baseline: finite(base.v[i]), Ratio: finite(r), Change: ev.change[i],
				Chart: []ChartPoint{}, index: i, ratio: r,
			})
		}
		var active []string
		for _, y := range st.symptoms {
			s.Findings = append(s.Findings, mr.Symptoms[y])
			if mr.Symptoms[y].Active {
				active = append(active, mr.Symptoms[y].Name)
			}
		}
		for _, k := range st.causes {
			s.Findings = append(s.Findings, mr.Causes[k])
			if mr.Causes[k].Active {
				active = append(active, mr.Causes[k].Name)
			}
		}
		s.Verdict = verdict(n, ev, active)
		mr.Steps = append(mr.Steps, s)
	}
}

func verdict(step int, ev evaluation, active []string) string {
	if !ev.enough {
		return "too little data"
	}
	if step == 0 {
		t, i := ev.symptoms[yTTFT], ev.symptoms[yITL]
		switch {
		case t && i:
			return "both sides slower: look at both prefill and decode causes"
		case t:
			return "prefill side: time to first token rose, inter-token latency did not"
		case i:
			return "decode side: inter-token latency rose, time to first token did not"
		case ev.symptoms[yThroughput]:
			return "throughput fell with as many requests running, latencies flat: look at both sides"
		}
		return "healthy: no latency or throughput regression against the baseline"
	}
	if len(active) == 0 {
		return "nothing here"
	}
	out := "found: "
	for k, a := range active {
		if k > 0 {
			out += ", "
		}
		out += a
	}
	return out
}
