package diagnosis

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Inputs of the diagnosis, the keys of Options.InputNames.
const (
	InputFinished         = "finished"
	InputTTFT             = "ttft"
	InputITL              = "itl"
	InputPreemptions      = "preemptions"
	InputPrefixCache      = "prefix_cache"
	InputPromptTokens     = "prompt_tokens"
	InputGenerationTokens = "generation_tokens"
	InputRunning          = "running"
	InputWaiting          = "waiting"
	InputKVUsage          = "kv_usage"
)

// inputWhat describes each input, for a page that does not name it.
var inputWhat = map[string]string{
	InputFinished:         "a finished-request counter",
	InputTTFT:             "a time-to-first-token histogram",
	InputITL:              "an inter-token latency histogram",
	InputPreemptions:      "a preemption counter",
	InputPrefixCache:      "prefix-cache query and hit counters",
	InputPromptTokens:     "a prompt-token counter",
	InputGenerationTokens: "a generation-token counter",
	InputRunning:          "a running-requests gauge",
	InputWaiting:          "a waiting-requests gauge",
	InputKVUsage:          "a KV-cache usage gauge",
}

// requiredInputs are the inputs without which nothing is judged: the
// request count each test's power rests on, and the prefill latency.
var requiredInputs = []string{InputFinished, InputTTFT}

// missingInputs lists the inputs o lacks, required ones first.
func missingInputs(o *Observation) []string {
	// in the order the page lists them; an array, not a map: this runs
	// for every model at every scrape
	lacks := [...]struct {
		k    string
		lack bool
	}{
		{InputFinished, math.IsNaN(o.Finished)},
		{InputTTFT, !validHistogram(o.TTFT)},
		{InputITL, !validHistogram(o.ITL)},
		{InputPreemptions, math.IsNaN(o.Preemptions)},
		{InputPrefixCache, math.IsNaN(o.PrefixQueries) || math.IsNaN(o.PrefixHits)},
		{InputPromptTokens, math.IsNaN(o.PromptTokens) && math.IsNaN(o.PromptLenSum)},
		{InputGenerationTokens, math.IsNaN(o.GenerationTokens)},
		{InputRunning, math.IsNaN(o.Running)},
		{InputWaiting, math.IsNaN(o.Waiting)},
		{InputKVUsage, math.IsNaN(o.KVUsage)},
	}
	var out []string
	for _, l := range lacks {
		if l.lack {
			out = append(out, l.k)
		}
	}
	return out
}

// SetInputNames names the inputs (Input* keys) as the page prints them, for
// "this server does not print ...": the adapter knows their names, the
// diagnosis does not.
func (d *Diagnoser) SetInputNames(names map[string]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inputNames = names
}

func (d *Diagnoser) inputName(k string) string {
	if n := d.inputNames[k]; n != "" {
		return n
	}
	return inputWhat[k]
}

// withheldWhy is why an input the server prints is withheld
// (Observation.Withheld), for the page and the readiness message.
const withheldWhy = "a histogram child (an engine or rank) is printed without its +Inf bucket, so the histogram has no total count until a page prints every child whole"

// withheldSentence says that the inputs named are withheld, and why.
func withheldSentence(names []string) string {
	return fmt.Sprintf("this server prints %s, withheld as %s", strings.Join(names, ", "), withheldWhy)
}

// readiness says whether the model can be judged now: covered is whether
// the windows hold enough history.
func (d *Diagnoser) readiness(tr *track, t int64, covered bool, recent, base *stats) Readiness {
	var r Readiness
	var withheld []string // the required ones
	for _, k := range tr.missing {
		required := slices.Contains(requiredInputs, k)
		switch {
		case tr.isWithheld(k):
			r.Withheld = append(r.Withheld, d.inputName(k))
			if required {
				withheld = append(withheld, d.inputName(k))
			}
		case required:
			r.Missing = append(r.Missing, d.inputName(k))
		default:
			r.NotJudged = append(r.NotJudged, d.inputName(k))
		}
	}
	// the KV-transfer time is a topology input, never among the missing:
	// withheld, it is listed too, so that withheld names every input held back
	if tr.isWithheld(InputKVTransferTime) {
		r.Withheld = append(r.Withheld, d.inputName(InputKVTransferTime))
	}
	switch {
	case len(r.Missing) > 0 || len(withheld) > 0:
		r.State = ReadyNoInputs
		var why []string
		if len(r.Missing) > 0 {
			why = append(why, fmt.Sprintf("this server does not print %s", strings.Join(r.Missing, ", ")))
		}
		if len(withheld) > 0 {
			why = append(why, withheldSentence(withheld))
		}
		r.Message = upperFirst(strings.Join(why, "; ")) + ": no diagnosis."
	case !covered:
		r.State = ReadyWarmingUp
		// The recent window fills from the start or the latest gap (whose
		// span at the window's start would read as a collapse); the
		// baseline then too, unless the history before the gap serves.
		need := tr.since + int64(d.opts.Window)
		if _, ok := d.baselineStart(tr, tr.since); !ok {
			need += int64(d.minBaseline())
		}
		left := math.Max(float64(need-t)/nanosPerSecond, 0)
		r.SecondsLeft = &left
		r.Message = fmt.Sprintf("Warming up: the recent window (%s) and a baseline of at least %s are covered in %s.",
			model.Duration(d.opts.Window), model.Duration(d.minBaseline()), roundDuration(left))
	case !(recent.requests >= d.opts.MinRequests && base.requests >= d.opts.MinRequests):
		r.State = ReadyLowTraffic
		r.Message = fmt.Sprintf("Too little traffic: the recent window holds %s finished requests and the baseline %s; each needs at least %v.",
			formatNumber(finite(recent.requests)), formatNumber(finite(base.requests)), d.opts.MinRequests)
	default:
		r.State = ReadyOK
	}
	return r
}

// HeldStall is Incident.Held while the incident is held through a stall.
const HeldStall = "stall"

// stallNote is what the readiness message adds during a stall: why it is
// no quiet pod, and whether the incident is held through it.
func stallNote(recent *stats, held bool) string {
	s := fmt.Sprintf(" This is a stall, not a quiet pod: fewer requests finish than in the baseline while %s wait.", formatNumber(finite(recent.v[sWaiting])))
	if held {
		s += " The incident open before it is held, not judged again, until the stall ends."
	}
	return s
}

// stallJudged is the readiness message of a stall judged on its throughput.
func stallJudged(recent *stats, minRequests float64) string {
	return fmt.Sprintf("A stall: the recent window holds %s finished requests, too few to test a latency (each window needs %v), while %s wait and fewer finish than in the baseline; judged on the throughput, the latency symptoms named before it stand.",
		formatNumber(finite(recent.requests)), minRequests, formatNumber(finite(recent.v[sWaiting])))
}

func roundDuration(seconds float64) string {
	d := time.Duration(math.Ceil(seconds)) * time.Second
	if d == 0 {
		return "a moment"
	}
	return model.Duration(d).String()
}

// incidentReport says the incident in words: one sentence of what
// changed, and per cause what it means and what to do.
func (d *Diagnoser) incidentReport(in *incidentState, t int64, mr *ModelReport) *Incident {
	start := d.base.Add(time.Duration(in.start))
	inc := &Incident{Start: start, Seconds: float64(t-in.start) / nanosPerSecond, Causes: []Action{}}
	var parts []string
	for _, st := range mr.Steps[:1] {
		for _, s := range st.Signals {
			if !s.Bad {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s is %s the baseline (%s %s against %s %s)",
				signalInfo[s.index].what, ratioWords(&s), formatNumber(s.Recent), s.Unit, formatNumber(s.Baseline), s.Unit))
		}
	}
	// by the share of the symptom each explains, largest first
	var named []int
	for k, c := range mr.Causes {
		if c.Active && causes[k].finding == nil {
			named = append(named, k)
		}
	}
	byExplains(named, &mr.share)
	for _, k := range named {
		r := &causes[k]
		inc.Causes = append(inc.Causes, Action{Cause: r.Name, Sentence: r.Sentence, Action: r.Action, Explains: mr.Causes[k].Explains})
	}
	inc.Causes = append(inc.Causes, mr.Topology...)
	what := "latency or throughput changed against the baseline"
	switch {
	case in.quiet && len(parts) == 0 && in.cause[kQueueing].on:
		// held by the queue's own evidence (incidentState.keepsQueued)
		what = "latency is back within the baseline for now, but requests still queue"
	case in.quiet && len(parts) == 0 && in.cause[kBatchGrowth].on:
		// held by the batch's own evidence (incidentState.keepsBatched)
		what = "latency is back within the baseline for now, but more requests still run at once"
	case in.quiet && len(parts) == 0:
		// held by a traffic cause's own evidence (incidentState.keepsQuiet)
		what = "latency is back within the baseline for now, but the requests that explained its change have not changed back"
	}
	if len(parts) > 0 {
		what = strings.Join(parts, "; ")
	}
	if !mr.EnoughData {
		// held through a stall (Diagnoser.stalled): nothing judged again
		inc.Held = HeldStall
		what = "held through a stall: the pod finishes too few requests to judge while requests wait, so the causes named before it stand until it ends"
	}
	inc.Sentence = fmt.Sprintf("Since %s (%s): %s.", start.UTC().Format("15:04:05"),
		roundDuration(inc.Seconds), upperFirst(what))
	if len(inc.Causes) == 0 {
		inc.Sentence += " No cause is named yet."
	}
	return inc
}

func ratioWords(s *SignalReport) string {
	// a quantile's reading is interpolated: say what its buckets allow
	switch {
	case s.Ratio != nil && s.RatioLow != nil && s.RatioHigh != nil:
		return fmt.Sprintf("%.2f× (the buckets allow %.2f–%.2f×)", *s.Ratio, *s.RatioLow, *s.RatioHigh)
	case s.Ratio != nil && s.RatioLow != nil:
		return fmt.Sprintf("%.2f× (the buckets allow at least %.2f×)", *s.Ratio, *s.RatioLow)
	case s.Ratio != nil:
		return fmt.Sprintf("%.2f×", *s.Ratio)
	}
	return "up from 0 against"
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
