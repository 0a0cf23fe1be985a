package diagnosis

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// A seeded, noisy simulation of a continuous-batching engine, in virtual
// time, for measuring the diagnosis as an on-call engineer meets it:
// Poisson arrivals, random per-request lengths and per-step latencies, rare
// background preemptions, engine restarts and failed scrapes. Each engine
// runs step by step: admit from the waiting queue while the batch and the
// KV cache allow, compute a chunk of each admitted prompt, decode one
// token of each started request. Nothing here sleeps.

// Histogram bounds as vLLM prints them.
var (
	simTTFTBounds = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560, math.Inf(1)}
	simITLBounds  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, math.Inf(1)}
	simLenBounds  = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, math.Inf(1)}
)

// simLoad is the traffic and engine shape of one phase.
type simLoad struct {
	rate         float64 // Poisson arrivals per second per engine
	promptMedian float64 // tokens, lognormal
	outputMedian float64
	hit          float64 // prefix-cache hit fraction
	maxRunning   int
	kvCapacity   float64 // tokens
	// skew sends more of the pod's arrivals to engine 0 and fewer to the
	// others (rate × (1 ± skew)), as a router blind to ranks does.
	skew float64
	// traffic, when set, shapes the arrivals (bursty, sim_bursty_test.go;
	// self-exciting, sim_hawkes_test.go) instead of Poisson, at the same
	// mean rate.
	traffic simTraffic
}

// simTraffic is a shape of the pod's arrivals other than Poisson; the
// engines and the judge are the same whatever the shape.
type simTraffic interface {
	// source is the pod's arrivals of this shape, drawn from rng
	source(rng *rand.Rand) simSource
}

// simSource sends the engines the pod's arrivals (simEngine.incoming).
type simSource interface {
	// generate sends the arrivals up to until under load l (its rate is
	// per engine, as for Poisson arrivals)
	generate(until float64, l *simLoad, engines []*simEngine)
}

// simArrival is a request a source sends an engine: pending of its
// prompt's tokens are not in the prefix cache (-1: the hit share of the
// load the engine admits it under, as for Poisson arrivals).
type simArrival struct {
	t                       float64
	prompt, output, pending int
}

// simRoute is the engine a source sends its next request: round the
// engines (next), or engine 0 more under a skew, as a router blind to
// ranks does.
func simRoute(rng *rand.Rand, l *simLoad, engines []*simEngine, next int) *simEngine {
	if l.skew > 0 && len(engines) > 1 {
		if rng.Float64() < (1+l.skew)/2 {
			return engines[0]
		}
		return engines[1+rng.IntN(len(engines)-1)]
	}
	return engines[next%len(engines)]
}

// Engine timing: a step costs a fixed part, a part per running request
// beyond the knee, and a part per prompt token computed; each request
// computes at most simChunk prompt tokens a step, all together at most
// simBudget.
const (
	simStepBase     = 0.02
	simKnee         = 16
	simStepPerSeq   = 0.00005
	simStepPerTok   = 0.00002
	simChunk        = 128
	simBudget       = 4096
	simMaxWaiting   = 150  // beyond, arrivals are refused at admission and counted (vLLM's --max-num-queued-reqs)
	simBackgroundPr = 0.02 // background preemptions per second per engine
)

var simSteady = simLoad{rate: 20, promptMedian: 350, outputMedian: 90, hit: 0.45, maxRunning: 256, kvCapacity: 400000}

// simScenario returns the load before and during a scenario's incident.
func simScenario(name string) (before, during simLoad) {
	before, during = simSteady, simSteady
	switch name {
	case "steady_low":
		before.rate, during.rate = 1, 1
	case CauseQueueing:
		before.maxRunning, during.maxRunning = 96, 96
		during.rate *= 2
	case CauseRankImbalance:
		// The same inflow, nearly all of it on rank 0, whose batch
		// limit then queues it while rank 1 idles.
		before.maxRunning, during.maxRunning = 96, 96
		during.skew = 0.95
	case CauseLongPrompts:
		during.promptMedian *= 3
	case CausePrefixCacheMisses:
		during.hit = 0
	case CauseBatchGrowth:
		during.rate *= 2.5
	case CausePreemptions:
		during.kvCapacity /= 30
	case CauseLongOutputs:
		during.outputMedian *= 3
	}
	return before, during
}

type simRequest struct {
	arrival        float64
	prompt, output int
	pending        int // prompt tokens still to compute
	generated      int
	started        bool
	admitted       bool // once admitted to the batch: its wait is counted (trueQueue)
}

type simEngine struct {
	rng     *rand.Rand
	t       float64
	next    float64 // next arrival
	waiting []*simRequest
	running []*simRequest
	// cumulative counters, as a reset-correcting caller would keep them
	finished, preempt, promptTok, genTok, hitTok, queryTok float64
	promptSum, genSum                                      float64   // of the finished requests' lengths
	ttft, itl, promptLen, genLen                           []float64 // per-bucket (not cumulative) counts
	nextBackground                                         float64
	// refused counts the arrivals turned away at the queue's cap (vLLM's
	// admission_rejections_total), accepted those queued
	refused, accepted float64
	incoming          []simArrival // from the pod's source (simLoad.traffic), oldest first
	// trueTTFT and trueITL count the exact latencies in fine bins
	// (simTrueBin), for the truth a poll is judged against; their last
	// element (simTrueSum) is the latencies' exact sum
	trueTTFT, trueITL []float64
	// trueQueue counts each request's exact time in the queue, from its
	// arrival to its first admission to the batch (vLLM's queue time; a
	// preempted request's second wait is not counted again)
	trueQueue []float64
	// ttftSum and itlSum are the histograms' sums, as vLLM prints them
	ttftSum, itlSum float64
	// kvCapacity is the KV cache of the load the engine last ran under,
	// in tokens: its gauge reads its own cache, not the steady one
	kvCapacity float64
}

func newSimEngine(seed uint64, i int) *simEngine {
	e := &simEngine{rng: rand.New(rand.NewPCG(seed, uint64(i)+1))}
	e.ttft = make([]float64, len(simTTFTBounds))
	e.itl = make([]float64, len(simITLBounds))
	e.promptLen = make([]float64, len(simLenBounds))
	e.genLen = make([]float64, len(simLenBounds))
	e.trueTTFT, e.trueITL, e.trueQueue = make([]float64, simTrueBins+1), make([]float64, simTrueBins+1), make([]float64, simTrueBins+1)
	e.next = e.rng.ExpFloat64() / simSteady.rate
	e.nextBackground = e.rng.ExpFloat64() / simBackgroundPr
	return e
}

func bucketOf(bounds []float64, v float64) int {
	i, _ := slices.BinarySearch(bounds, v)
	return min(i, len(bounds)-1)
}

func (e *simEngine) lognormal(median float64) int {
	return max(1, int(median*math.Exp(0.5*e.rng.NormFloat64())))
}

func (e *simEngine) kvUsed() float64 {
	u := 0.0
	for _, r := range e.running {
		u += float64(r.prompt - r.pending + r.generated)
	}
	return u
}

// restart drops every request in flight, as a restarted engine does.
func (e *simEngine) restart() {
	e.waiting, e.running = nil, nil
}

// run advances the engine to until under load l.
func (e *simEngine) run(until float64, l *simLoad) {
	e.kvCapacity = l.kvCapacity
	for e.t < until {
		if l.traffic != nil {
			e.sourcedArrivals(l)
		}
		for l.traffic == nil && e.next <= e.t {
			if len(e.waiting) < simMaxWaiting {
				p := e.lognormal(l.promptMedian)
				e.arrive(e.next, p, e.lognormal(l.outputMedian), int(float64(p)*(1-l.hit)))
			} else {
				e.refused++ // drawn no lengths: the arrivals' draws stay those of a silent cap
			}
			e.next += e.rng.ExpFloat64() / l.rate
		}
		used := e.kvUsed()
		for len(e.waiting) > 0 && len(e.running) < l.maxRunning {
			r := e.waiting[0]
			if used+float64(r.prompt) > 0.97*l.kvCapacity && len(e.running) > 0 {
				break
			}
			e.waiting = e.waiting[1:]
			used += float64(r.prompt)
			if !r.admitted {
				r.admitted = true
				e.trueQueue[simTrueBin(e.t-r.arrival)]++
				e.trueQueue[simTrueSum] += e.t - r.arrival
			}
			e.running = append(e.running, r)
		}
		if len(e.running) == 0 {
			e.t = math.Min(until, math.Max(e.next, e.t+0.001))
			continue
		}
		budget, prefill, decoding := simBudget, 0, 0
		for _, r := range e.running {
			if r.pending > 0 {
				c := min(r.pending, simChunk, budget)
				budget -= c
				prefill += c
			} else {
				decoding++
			}
		}
		step := (simStepBase + simStepPerSeq*float64(max(len(e.running)-simKnee, 0)) + simStepPerTok*float64(prefill)) *
			math.Exp(0.1*e.rng.NormFloat64())
		e.t += step
		if decoding > 0 {
			e.itl[bucketOf(simITLBounds, step)] += float64(decoding)
			e.trueITL[simTrueBin(step)] += float64(decoding)
			e.itlSum += step * float64(decoding)
			e.trueITL[simTrueSum] += step * float64(decoding)
		}
		budget = simBudget
		kept := e.running[:0]
		for _, r := range e.running {
			if r.pending > 0 {
				c := min(r.pending, simChunk, budget)
				budget -= c
				r.pending -= c
				if r.pending == 0 && !r.started {
					r.started = true
					e.ttft[bucketOf(simTTFTBounds, e.t-r.arrival)]++
					e.trueTTFT[simTrueBin(e.t-r.arrival)]++
					e.ttftSum += e.t - r.arrival
					e.trueTTFT[simTrueSum] += e.t - r.arrival
					e.promptTok += float64(r.prompt) // vLLM counts the whole prompt, cached or not, at the first token
					r.generated = 1
					e.genTok++
				}
			} else if r.generated < r.output {
				r.generated++
				e.genTok++
			}
			if r.started && r.generated >= r.output {
				e.finished++
				e.promptSum += float64(r.prompt)
				e.genSum += float64(r.generated)
				e.promptLen[bucketOf(simLenBounds, float64(r.prompt))]++
				e.genLen[bucketOf(simLenBounds, float64(r.generated))]++
				continue
			}
			kept = append(kept, r)
		}
		e.running = kept
		// The KV cache overflows: preempt the newest request; it
		// recomputes its whole prompt and what it generated.
		for len(e.running) > 1 && e.kvUsed() > l.kvCapacity {
			e.preemptNewest()
		}
		for e.nextBackground <= e.t {
			// A rare preemption that has nothing to do with the load.
			if len(e.running) > 0 {
				e.preemptNewest()
			}
			e.nextBackground += e.rng.ExpFloat64() / simBackgroundPr
		}
	}
}

// arrive queues a request arriving at t, pending of its prompt's tokens
// not in the prefix cache, unless the queue is full: then it is refused at
// admission (HTTP 503) and counted, as vLLM 0.29 on does at its
// --max-num-queued-reqs.
func (e *simEngine) arrive(t float64, prompt, output, pending int) {
	if len(e.waiting) >= simMaxWaiting {
		e.refused++
		return
	}
	e.accepted++
	r := &simRequest{arrival: t, prompt: prompt, output: output, pending: pending}
	e.hitTok += float64(r.prompt - r.pending)
	e.queryTok += float64(r.prompt)
	e.waiting = append(e.waiting, r)
}

func (e *simEngine) preemptNewest() {
	r := e.running[len(e.running)-1]
	e.running = e.running[:len(e.running)-1]
	r.pending = r.prompt
	e.preempt++
	e.waiting = append([]*simRequest{r}, e.waiting...)
}

// simPod is the engines of one model, observed as the adapter would.
type simPod struct {
	engines []*simEngine
	src     simSource // the arrivals of a shaped traffic, from its first load
}

func cumulate(bounds []float64, engines []*simEngine, get func(*simEngine) []float64) Histogram {
	h := Histogram{Bounds: bounds, Counts: make([]float64, len(bounds))}
	for _, e := range engines {
		c := 0.0
		for i, v := range get(e) {
			c += v
			h.Counts[i] += c
		}
	}
	return h
}

func (p *simPod) observe() Observation {
	o := Observation{Model: "sim", Server: "vllm", KVTransferFailures: math.NaN()}
	for i, e := range p.engines {
		// each engine's finished requests, as vLLM V1 labels request_success_total by engine
		o.Engines = append(o.Engines, EngineLoad{Engine: strconv.Itoa(i), Running: float64(len(e.running)), Waiting: float64(len(e.waiting)),
			Finished: e.finished, Counted: true})
		o.Running += float64(len(e.running))
		o.Waiting += float64(len(e.waiting))
		o.Finished += e.finished
		o.PromptLenSum += e.promptSum
		o.GenLenSum += e.genSum
		o.Preemptions += e.preempt
		o.PromptTokens += e.promptTok
		o.GenerationTokens += e.genTok
		o.PrefixHits += e.hitTok
		o.PrefixQueries += e.queryTok
		o.TTFTSum += e.ttftSum
		o.ITLSum += e.itlSum
		o.Rejections += e.refused
	}
	o.KVUsage = p.kvUsage()
	o.TTFT = cumulate(simTTFTBounds, p.engines, func(e *simEngine) []float64 { return e.ttft })
	o.ITL = cumulate(simITLBounds, p.engines, func(e *simEngine) []float64 { return e.itl })
	o.PromptLen = cumulate(simLenBounds, p.engines, func(e *simEngine) []float64 { return e.promptLen })
	o.GenLen = cumulate(simLenBounds, p.engines, func(e *simEngine) []float64 { return e.genLen })
	o.PromptLenCount, o.GenLenCount = o.Finished, o.Finished
	return o
}

// kvUsage is the pod's KV-cache usage as the collector reads a real vLLM
// page: each engine prints its own used share of its own cache
// (kv_cache_usage_perc, 0..1), and the collector takes their mean weighted
// by each engine's num_gpu_blocks (routing's kvByModel), here its capacity.
func (p *simPod) kvUsage() float64 {
	used, capacity := 0.0, 0.0
	for _, e := range p.engines {
		used += min(e.kvUsed(), e.kvCapacity) // a lone request past a cut cache still reads full, not more
		capacity += e.kvCapacity
	}
	return used / capacity
}

// simRun is one scenario's run and what the diagnosis said along it.
type simRun struct {
	scenario                  string
	window, baseline          time.Duration
	shift, back, end          time.Duration // incident from shift to back
	polls                     []simPoll
	steadyPolls, steadyClaims int // before the shift (all of steady), once ready
	// steadySymptoms are the steady polls naming a symptom; steadyFlips
	// the changes of the named causes from one ready steady poll to the
	// next.
	steadySymptoms, steadyFlips int
	// named is the cause whose first naming is timed, right whether a
	// poll's causes are the incident's right verdict; by default the
	// scenario's cause and exactly simExpected.
	named string
	// namedOrRefused: admission named where the refusals truly rose beyond
	// the pod's bursts is the first naming too (an overload at the
	// engines' queue cap turns clients away before its latency moves)
	namedOrRefused bool
	right          func(p *simPoll) bool
	// truth: the incident's polls are judged only where the recent window
	// truly shows a latency symptom (simPoll.trueSymptom)
	truth bool
}

type simPoll struct {
	at       time.Duration
	causes   []string
	symptoms []string
	ready    bool
	// trueSymptom: with a plan's truth, the recent window's exact TTFT or
	// ITL p90 is at least 1 + the minimum change times the baseline's
	// before the shift, and beyond the pod's own bursts (simTruth.judge)
	trueSymptom bool
	// bucketShown: the true symptom is one vLLM's buckets can show at
	// their conservative end (issue 30: a change counts only there): the
	// lower bound of the true recent p90's bucket is at least 1 + the
	// minimum change times the upper bound of the baseline's
	bucketShown bool
	// trueMoved: with a plan's truth, the recent window's exact TTFT or
	// ITL p90 is at least 1 + the minimum change times that of the time
	// without a claim before it (simTruth.claim)
	trueMoved bool
	// trueQueueUp: with a plan's truth, the exact time in the queue of the
	// requests admitted in the recent window truly rose: their mean by the
	// minimum change, and their p90 by the minimum change of the
	// baseline's TTFT p90 (a queue that can move it), both against the
	// baseline before the shift (simTruth.judge)
	trueQueueUp bool
	// queueingFirst: queueing and preemptions are both named, and
	// queueing explains as much of the symptom or more (explain.go)
	queueingFirst bool
	// refusedUp: after the shift, the share of the recent window's
	// arrivals refused at admission (simEngine.refused) rose by the
	// minimum change against the baseline's before the shift (any refused
	// where none were); refusedBeyond: and beyond the share the pod's own
	// bursts reach (with a plan's truth: simTruth.refusedUp); refusedMoved:
	// with a plan's truth, it rose so against the time without a claim
	// before the recent window (simTruth.claim), as trueMoved for latency
	refusedUp, refusedBeyond, refusedMoved bool
	// truePreemptUp: with a plan's truth, after the shift, the pod's
	// preemptions in the recent window, or in the windows a named cause is
	// held by, truly rose: by the minimum change against the baseline's
	// rate before the shift and beyond the count the pod's own bursts
	// reach over as long (simTruth.preemptUp)
	truePreemptUp bool
	// trueBatchUp: with a plan's truth, after the shift, the pod's mean
	// batch over the recent window truly grew by the minimum change
	// against the baseline's before the shift (simTruth.batchUp)
	trueBatchUp bool
	// gapWindow: the poll is not ready within a recent window (and a
	// scrape) of the end of a gap in the scrapes, which the diagnosis
	// does not judge (the window is under-observed).
	gapWindow bool
}

// simPlan is a run to simulate: the load at each second, when engine 1
// restarts, and the phases the results are judged by (steady polls are
// those before shift, or all of a steady scenario's).
type simPlan struct {
	scenario         string
	seed             uint64
	window, baseline time.Duration
	shift, back, end time.Duration
	load             func(at time.Duration) *simLoad
	restarts         []time.Duration
	// truth, when set, judges each poll's recent window against the exact
	// latencies (simTruth)
	truth bool
}

// simulate runs a scenario: steady until shift, the scenario's load until
// back, steady again until end; one scrape a second, failing now and then;
// engine 1 restarts once during the incident and once before it.
func simulate(scenario string, seed uint64, window, baseline time.Duration, shift, back, end time.Duration) simRun {
	before, during := simScenario(scenario)
	return simulatePlan(simPlan{scenario: scenario, seed: seed, window: window, baseline: baseline, shift: shift, back: back, end: end,
		restarts: []time.Duration{shift / 2, shift + (back-shift)/2},
		load: func(at time.Duration) *simLoad {
			if !strings.HasPrefix(scenario, "steady") && at > shift && at <= back {
				return &during
			}
			return &before
		}})
}

func simulatePlan(pl simPlan) simRun {
	scenario, window := pl.scenario, pl.window
	d, err := New(Options{Window: window, Baseline: pl.baseline, MinChange: 0.25, Interval: time.Second})
	if err != nil {
		panic(err)
	}
	pod := &simPod{engines: []*simEngine{newSimEngine(pl.seed, 0), newSimEngine(pl.seed, 1)}}
	rng := rand.New(rand.NewPCG(pl.seed, 99))
	run := simRun{scenario: scenario, window: window, baseline: pl.baseline, shift: pl.shift, back: pl.back, end: pl.end, truth: pl.truth}
	var causes, symptoms []string
	var fromMean [2]bool
	ready, queueingFirst := false, false
	// a gap is spacing beyond the slack of the recent window's ring
	res := window / fineSlots
	gapSlack := res + max(res, 2*time.Second)
	lastGood, gapEnd := time.Duration(0), time.Duration(-1)
	var lastSteady []string
	var traces []string // DIAGNOSIS_TRACE=2: each poll's verdict and signals
	truth := &simTruth{window: window, shift: pl.shift, baseline: pl.baseline}
	for at := time.Second; at <= pl.end; at += time.Second {
		l := pl.load(at)
		if l.traffic != nil {
			if pod.src == nil {
				pod.src = l.traffic.source(rand.New(rand.NewPCG(pl.seed, 77)))
			}
			pod.src.generate(at.Seconds(), l, pod.engines)
		}
		for i, e := range pod.engines {
			le := *l
			if i == 0 {
				le.rate *= 1 + l.skew
			} else {
				le.rate *= 1 - l.skew
			}
			e.run(at.Seconds(), &le)
		}
		truth.refused(pod.engines)
		if pl.truth {
			truth.observe(at, pod.engines)
		}
		down := false
		for _, r := range pl.restarts {
			if at == r {
				pod.engines[1].restart()
			}
			// the restarting engine's process answers no scrape for 3 s
			down = down || at >= r && at < r+3*time.Second
		}
		now := t0.Add(at)
		if down || rng.Float64() < 0.01 {
			// The report keeps the last verdict, marked; the poll reads it.
			d.Fail(now)
		} else {
			if lastGood > 0 && at-lastGood > gapSlack {
				gapEnd = at
			}
			lastGood = at
			fams := d.Observe(now, []Observation{pod.observe()})
			causes, symptoms = named(fams, FamilyCause, "cause"), named(fams, FamilySymptom, "symptom")
			queueingFirst = false
			if slices.Contains(causes, CauseQueueing) && slices.Contains(causes, CausePreemptions) {
				// the order the incident lists them in (only then: a
				// report costs more than a poll)
				m := &d.Report().Models[0]
				queueingFirst = m.share[causeIndex(CauseQueueing)] >= m.share[causeIndex(CausePreemptions)]
			}
			ready = values(fams, FamilyReady, "")[""] == 1
			fromMean = meanClaims(d.report)
		}
		if simTrace {
			line := fmt.Sprint(at, " ", causes, symptoms, " no_scrape_yet")
			if rep := d.Report(); len(rep.Models) > 0 {
				var b strings.Builder
				for _, st := range rep.Models[0].Steps {
					for _, s := range st.Signals {
						fmt.Fprintf(&b, " %s=%s/%s(%s,%s)", s.Signal, formatNumber(s.Recent), formatNumber(s.Baseline), formatRatio(&s), formatP(s.PValue))
					}
				}
				m := &rep.Models[0]
				for _, c := range m.Causes {
					if c.Active {
						// the uncapped share that orders the named causes
						fmt.Fprintf(&b, " explains:%s=%.3g", c.Name, m.share[causeIndex(c.Name)])
					}
				}
				for _, e := range pod.engines {
					fmt.Fprintf(&b, " rank=%d/%d", len(e.running), len(e.waiting))
				}
				for _, tr := range d.tracks {
					// the incident's state: open, named, its age, and how it
					// began or is held (resumed a batch, on its probation, quiet)
					in := &tr.inc
					fmt.Fprintf(&b, " inc=%t/%t/%ds/fb=%t/bt=%t/q=%t", in.open, in.named, (int64(at)-int64(d.base.Sub(t0))-in.start)/int64(time.Second), in.probationOf(kBatchGrowth).from, in.batched(), in.quiet)
				}
				if bs := m.Baseline.Start; bs != nil {
					// the reference: how long ago it starts, its seconds,
					// its stretches of incident-free time, frozen
					fmt.Fprintf(&b, " ref=%ds/%.0fs/%d/%t", int(now.Sub(*bs).Seconds()), m.Baseline.Seconds, m.Baseline.Stretches, m.Baseline.Frozen)
				}
				line = fmt.Sprint(at, " ", causes, symptoms, " ", m.Readiness.State, b.String())
			}
			traces = append(traces, line)
		}
		if pl.truth {
			truth.claim(len(symptoms) > 0, slices.Contains(causes, CauseAdmission), fromMean)
		}
		run.polls = append(run.polls, simPoll{at: at, causes: causes, symptoms: symptoms, ready: ready, queueingFirst: queueingFirst,
			gapWindow: !ready && gapEnd >= 0 && at < gapEnd+window+2*time.Second})
		if ready && (strings.HasPrefix(scenario, "steady") || at <= pl.shift) {
			run.steadyPolls++
			if len(causes) > 0 {
				run.steadyClaims++
			}
			if len(symptoms) > 0 {
				run.steadySymptoms++
			}
			if lastSteady != nil && !slices.Equal(lastSteady, causes) {
				run.steadyFlips++
			}
			lastSteady = causes
		}
	}
	if pl.truth {
		symptom, shown := truth.judge()
		for i, s := range symptom {
			run.polls[i].trueSymptom, run.polls[i].trueMoved, run.polls[i].bucketShown = s, truth.moved[i], shown[i]
			run.polls[i].trueQueueUp = truth.queueUp(i)
			run.polls[i].refusedMoved = truth.rMoved[i]
			run.polls[i].truePreemptUp = truth.preemptUp(i)
			run.polls[i].trueBatchUp = truth.batchUp(i)
		}
	}
	for i := range run.polls {
		run.polls[i].refusedUp, run.polls[i].refusedBeyond = truth.refusedUp(i, pl.truth)
	}
	for i, tr := range traces {
		// the truth's marks: S a true symptom beyond the bursts, M truly moved,
		// B a change the buckets show at their conservative end, Q the
		// requests truly waited longer (simTruth.queueUp)
		mark := [6]byte{'-', '-', '-', '-', '-', '-'}
		if run.polls[i].trueSymptom {
			mark[0] = 'S'
		}
		if run.polls[i].trueMoved {
			mark[1] = 'M'
		}
		if run.polls[i].bucketShown {
			mark[2] = 'B'
		}
		if run.polls[i].trueQueueUp {
			mark[3] = 'Q'
		}
		// R the share refused at admission truly rose beyond the pod's
		// bursts (r: by the minimum change only), F against the free time
		if run.polls[i].refusedBeyond {
			mark[4] = 'R'
		} else if run.polls[i].refusedUp {
			mark[4] = 'r'
		}
		if run.polls[i].refusedMoved {
			mark[5] = 'F'
		}
		r, q, f := [2]float64{math.NaN(), math.NaN()}, [2]float64{math.NaN(), math.NaN()}, [2]float64{math.NaN(), math.NaN()}
		if pl.truth {
			r, q, f = truth.recent[i], truth.qRecent[i], truth.freeQ[i]
		}
		rf := truth.refusedRecent(i)
		fm, bm := [2]float64{math.NaN(), math.NaN()}, [2]float64{math.NaN(), math.NaN()}
		if pl.truth {
			fm = truth.freeM[i]
			bm = [2]float64{truth.recentMean[i][0] / truth.baseMean[0], truth.recentMean[i][1] / truth.baseMean[1]}
		}
		fmt.Printf("%s true %.2f/%.2f q %.3g/%.3g free %.3g/%.3g refused %.0f/%.0f %s freemean %.3g/%.3g basemean %.3g/%.3g\n", mark[:], r[0]/truth.base[0], r[1]/truth.base[1], q[0], q[1], r[0]/f[0], r[1]/f[1], rf[0], rf[1], tr, fm[0], fm[1], bm[0], bm[1])
	}
	return run
}

// meanClaims says whether the TTFT and the ITL exact means are part of
// the claim the report makes: significantly up, or holding the incident
// (Bad), as the truth judges a claim made from them against the true mean.
func meanClaims(rep *Report) (out [2]bool) {
	if len(rep.Models) == 0 || len(rep.Models[0].Steps) == 0 {
		return out
	}
	for _, s := range rep.Models[0].Steps[0].Signals {
		switch s.index {
		case sTTFTMean:
			out[0] = s.Bad
		case sITLMean:
			out[1] = s.Bad
		}
	}
	return out
}

// named are the label values of a family's series at 1, sorted.
func named(fams []exposition.Family, family, label string) []string {
	out := []string{}
	for k, v := range values(fams, family, label) {
		if v == 1 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// simResult is what the docs' table shows for one run.
type simResult struct {
	wrongShare       float64       // during the incident, from window + 15 s after the shift: polls without exactly the cause
	falseShare       float64       // steady polls naming anything
	firstNamed       time.Duration // after the shift; -1 never
	cleared          time.Duration // after the load returned, from when nothing is named to the end; -1 never
	preemptionBlamed int           // polls naming preemptions where there are only background ones (none truly rose: truePreemptUp)
	notJudged        int           // incident polls not ready after a gap in the scrapes, not counted in wrongShare
	// incidentPolls are the incident's polls judged (from window + 15 s);
	// truePolls those of them with a true latency symptom (all without a
	// truth), the only ones wrongShare counts
	incidentPolls, truePolls int
	// shownPolls are the truePolls whose change the buckets show at their
	// conservative end, shownWrong those of them wrong or missing
	shownPolls, shownWrong int
}

// simExpected is what a scenario's incident is named: its cause, and for
// a starved rank also the queueing it causes (the pod's queue grows).
func simExpected(sc string) []string {
	if sc == CauseRankImbalance {
		return []string{CauseQueueing, CauseRankImbalance}
	}
	return []string{sc}
}

// rightAt says whether poll p's causes are right, p judged (a true
// latency symptom, or its refusals beyond the pod's bursts). Admission is
// judged by the refusals alone: named, it is wrong where the share refused
// did not truly rise (refusedUp), and required where they rose beyond the
// pod's bursts while the latency did not truly move, unless a queue
// scenario's own cause is named where its requests truly waited longer
// (trueQueueUp: the refusals are its overflow at the cap); beside a true latency
// symptom the scenario's own rule (right, or exactly simExpected) judges
// the other causes. Where only the refusals moved, the others must be ones
// the shift truly brings: its own cause (an overload's is queueing), a
// traffic cause (exact means), queueing where the requests truly waited
// or a rate shift's batch did not truly grow (an overload at the cache),
// preemptions in an overload or where they truly rose.
func (r *simRun) rightAt(p *simPoll) bool {
	adm := slices.Contains(p.causes, CauseAdmission)
	if adm && !p.refusedUp {
		return false
	}
	q := *p
	q.causes = slices.DeleteFunc(slices.Clone(p.causes), func(c string) bool { return c == CauseAdmission })
	if r.truth && !p.trueSymptom {
		// the queue the scenario names, its requests truly waiting longer,
		// stands in for the refusals it overflows into at its cap
		queued := cmp.Or(r.named, r.scenario) == CauseQueueing && p.trueQueueUp && slices.Contains(q.causes, CauseQueueing)
		if !adm && !queued {
			return false
		}
		for _, c := range q.causes {
			ok := slices.Contains(simExpected(r.scenario), c) || c == r.named || slices.Contains(simTrafficCauses, c) ||
				c == CauseQueueing && (p.trueQueueUp || r.scenario == CauseBatchGrowth && !p.trueBatchUp) ||
				c == CausePreemptions && (r.scenario == simOverload || r.scenario == simRelapse || p.truePreemptUp)
			if !ok {
				return false
			}
		}
		return true
	}
	if r.right != nil {
		return r.right(&q)
	}
	return slices.Equal(q.causes, simExpected(r.scenario))
}

func (r *simRun) result() simResult {
	res := simResult{firstNamed: -1, cleared: -1}
	if r.steadyPolls > 0 {
		res.falseShare = float64(r.steadyClaims) / float64(r.steadyPolls)
	}
	grace := r.shift + r.window + 15*time.Second
	wrong, n := 0, 0
	lastNamed := time.Duration(-1)
	for _, p := range r.polls {
		if r.scenario != CausePreemptions && slices.Contains(p.causes, CausePreemptions) && !p.truePreemptUp {
			res.preemptionBlamed++
		}
		if strings.HasPrefix(r.scenario, "steady") {
			continue
		}
		if p.at > r.shift && p.at <= r.back && res.firstNamed < 0 && (slices.Contains(p.causes, cmp.Or(r.named, r.scenario)) || r.namedOrRefused && p.refusedBeyond && slices.Contains(p.causes, CauseAdmission)) {
			res.firstNamed = p.at - r.shift
		}
		if p.at > grace && p.at <= r.back {
			if p.gapWindow {
				res.notJudged++
				continue
			}
			res.incidentPolls++
			if r.truth && !p.trueSymptom && !p.refusedBeyond {
				continue // neither the latency nor the refusals truly moved: nothing to name
			}
			res.truePolls++
			n++
			bad := !r.rightAt(&p)
			if bad {
				wrong++
			}
			if p.bucketShown {
				res.shownPolls++
				if bad {
					res.shownWrong++
				}
			}
		}
		if p.at > r.back && len(p.causes) > 0 {
			lastNamed = p.at
		}
	}
	if n > 0 {
		res.wrongShare = float64(wrong) / float64(n)
	}
	if !strings.HasPrefix(r.scenario, "steady") {
		switch {
		case lastNamed < 0:
			res.cleared = 0
		case lastNamed < r.end:
			res.cleared = lastNamed + time.Second - r.back
		}
	}
	return res
}

var simTrace = os.Getenv("DIAGNOSIS_TRACE") == "2"
