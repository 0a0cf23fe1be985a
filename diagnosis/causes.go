package diagnosis

import "fmt"

// Cause names: the values of the cause label, a public contract. Each is
// the Name of one record of causes.
const (
	CauseQueueing          = "queueing"
	CauseLongPrompts       = "long_prompts"
	CausePrefixCacheMisses = "prefix_cache_misses"
	CauseBatchGrowth       = "batch_growth"
	CausePreemptions       = "preemptions"
	CauseLongOutputs       = "long_outputs"
	CauseUnexplained       = "unexplained"

	CauseRankImbalance      = "rank_imbalance"
	CauseKVTransferSlow     = "kv_transfer_slow"
	CauseKVTransferFailures = "kv_transfer_failures"
	CausePrefillSaturated   = "prefill_saturated"
	CauseAdmission          = "admission"
	CauseAborts             = "aborts"
)

// Cause is one diagnosis cause or topology finding: everything the rules,
// the report, the page and the docs say of it, in one record. The rules
// iterate causes; nothing else lists them (docs/develop.md, "Add a
// diagnosis cause").
type Cause struct {
	Name string // the cause label's value
	// Step is the number of the operators' step that decides it (Step.Number
	// in the report, the step column of docs/diagnosis.md).
	Step int
	// Short is the cause in the step's verdict ("found: requests queueing");
	// Sentence says what it means and Action what to do, in the incident's
	// list and on the page.
	Short, Sentence, Action string
	// PromQL is the query a user checks it with, as docs/diagnosis.md's row
	// for it shows it (written with that page's shorthands, upstream
	// families as {role}: mapping.Roles.Expand names them).
	PromQL string
	// NoDemo says why the demo has no scenario of this name; empty when
	// it has one (demo.Scenarios), which must name this cause.
	NoDemo string

	// rule says whether the cause holds on a latency incident's symptoms.
	rule func(x *causeInput) bool
	// factor is how many times the cause's own change alone would make
	// the time a request spends on the symptom's side; it orders the
	// named causes by the share of the symptom each explains (explain.go).
	// nil for a finding that explains nothing (an effect, the residual).
	factor func(x *shareInput) float64
	// residual marks the cause named when a symptom has no other cause
	// for a whole recent window (the incident decides it, not a rule).
	residual bool
	// effect marks a finding that follows from the symptom rather than
	// explains it: named beside the causes, it leaves the symptom
	// unexplained when nothing else is.
	effect bool
	// finding evaluates a topology finding, which needs no symptom: it
	// sets e.judged, e.strict (to name) and e.hold (to keep it named).
	finding func(ts *topoState, x *topoInput, e *topoEval, k int)
	// signal is the topology signal the finding reads (the report shows it
	// in the topology step while the finding is judged).
	signal int
	// baselined marks a topology finding judged against the baseline:
	// outside an incident it freezes its own while it shows.
	baselined bool
	// hysteretic marks a baselined finding cleared through the hysteresis
	// (HoldEvaluations), not as soon as its evidence is gone
	hysteretic bool
	// load marks a topology finding that is the load's, as the causes of
	// the steps before the traffic's are: an incident naming it is loaded
	// (incidentState.loaded), its end explaining the latency's return.
	load bool
	// sentenceOf, when set, writes the sentence from the evaluation.
	sentenceOf func(e *topoEval) string
	// probation, when set, keeps the calm after an incident that named the
	// cause that incident's for a while, so that its return resumes it
	// (incidentState.probations).
	probation *probationRule
	// gate, when set, is a topology finding's own gate to name that a cause
	// named by the model's incident lifts (gateRule).
	gate *gateRule
}

// gateRule is a topology finding's own gate to name (the rank finding's:
// the queueing rank's queue still there, not draining) that a cause named
// by the model's incident lifts: while it is named the finding is named
// without the gate, and a finding so named clears with that cause unless
// it held with its gate for HoldEvaluations since (topoState.step). The
// finding's evaluation reads topoState.lifted and sets topoEval.gated.
type gateRule struct {
	// liftedBy says whether the causes the incident names lift the gate.
	liftedBy func(named *causeSet) bool
}

// probationRule is how the calm after an incident that named a cause stays
// on probation, and how an incident opened in it resumes the one that
// ended: the same shift back, not a new one to name from scratch.
type probationRule struct {
	// age is how many recent windows the incident must have lasted to
	// leave one; young: a younger one leaves a young probation (the
	// incident may have been one of the pod's bursts), which resumes it
	// only on the evidence that names it and keeps the calm out of the
	// reference only if its incident had resumed one (Diagnoser.lull); a
	// resumed incident is as old as the one it resumed.
	age   int64
	young bool
	// lastHeld: the cause named while a symptom last held leaves one too,
	// as a hold with no symptom (keepsQueued) clears every other cause.
	lastHeld bool
	// holds, judged at the end of each evaluation (Diagnoser.lull), says
	// whether the calm is still on probation; while it is, the calm is no
	// incident-free time. nil: it lasts HoldWindows recent windows.
	holds func(lenient *evaluation, minChange float64) bool
	// resumes is the cause's evidence that the incident opening in the
	// probation is the same one (nil: none needed); shows, the symptoms
	// the cause's own strong evidence shows, whatever their test reads.
	resumes func(x *probationInput) bool
	shows   func(ev *evaluation) [numSymptoms]bool
	// atOnce: resumed, the incident is named at once on those symptoms;
	// otherwise it is named as a lull's is, after HoldEvaluations, its
	// cause carried and held on its own evidence meanwhile, and no traffic
	// cause opens an incident in the probation.
	atOnce bool
	// waits: an incident opened in it that did not resume it stays in it
	// and resumes it once named with the evidence; such a chain ends after
	// the longest incident (MaxIncident), as a chain of lulls does.
	waits bool
	// had: a probation that is not young resumes on every symptom the
	// incident named (and the one it resumed had), not only on those it
	// ended with: a cause that explains either side had them all.
	had bool
}

// probationInput is what a probation's evidence reads: the evaluations of
// step, the symptoms the ended incident had, and whether it was young.
type probationInput struct {
	ev, naming, lenient *evaluation
	sym                 [numSymptoms]bool
	young               bool
	records             []Cause // causes (the evidence reaches them through here)
}

// causes are the causes and then the topology findings, in the order the
// report lists them (each step lists its own in this order).
var causes = []Cause{
	{Name: CauseQueueing, Step: 2, Short: "requests queueing",
		Sentence: "Requests are queueing: inflow is above what the pod can serve.",
		Action:   "Add replicas or shed load; check that the router spreads requests across pods.",
		PromQL:   "prefill and up(waiting)",
		// Named on its own evidence, never hidden by another cause: the
		// waiting requests rose significantly, by more than memory
		// accounts for (preempted requests go back to the queue, a
		// shrunken batch leaves requests waiting), and so did the time in
		// the queue. Issue 30: 11 preemptions while 751 waited named
		// preemptions alone, and the pod needed replicas.
		rule: func(x *causeInput) bool {
			return x.prefill && x.up(sWaiting) && x.e.inflowQueueUp && x.e.queueTimeUp && x.e.queueP90Share() >= x.e.queueShare
		},
		factor: func(x *shareInput) float64 {
			// the inflow's part of the queue time's rise, against the
			// baseline's TTFT p90
			return 1 + x.queueRise()*x.queueSplit(false)/x.base.v[sTTFT]
		},
		// An overload that held queueing to its end may resume for
		// HoldWindows recent windows after it: bursty traffic drains its
		// queue for a few seconds at a time. The TTFT test widened by the
		// pod's bursts sees a resumed overload late: its queue shows it.
		probation: &probationRule{age: HoldWindows,
			shows: func(ev *evaluation) (s [numSymptoms]bool) { s[yTTFT] = ev.queued; return s }}},
	{Name: CauseLongPrompts, Step: 4, Short: "longer prompts",
		Sentence: "Prompts got longer: each prefill does more work.",
		Action:   "Find the client or feature that sends longer prompts; add prefill capacity or cap the prompt length.",
		PromQL:   "prefill and up(prompt_tokens_mean)",
		rule:     func(x *causeInput) bool { return x.prefill && x.up(sPromptMean) },
		// prefill work grows with the prompt
		factor: func(x *shareInput) float64 { return x.e.ratio[sPromptMean] }},
	{Name: CausePrefixCacheMisses, Step: 4, Short: "prefix-cache misses",
		Sentence: "The prefix cache hits less: prompt work it used to skip is recomputed.",
		Action:   "Check the routing (prefix-aware routing, new or restarted pods) before touching the server.",
		PromQL:   "prefill and down(prefix_cache_hit_ratio)",
		rule:     func(x *causeInput) bool { return x.prefill && x.down(sHitRatio) },
		// prefill work grows with the tokens the cache does not hold
		factor: func(x *shareInput) float64 { return (1 - x.recent.v[sHitRatio]) / (1 - x.base.v[sHitRatio]) }},
	{Name: CauseBatchGrowth, Step: 2, Short: "a larger batch",
		Sentence: "More requests run at once: every step takes longer.",
		Action:   "Traffic grew within the batch limit: add replicas, or lower max_num_seqs to trade throughput for latency.",
		PromQL:   "(prefill or decode) and up(running) unless up(waiting) unless ((up(prompt_tokens_mean) or up(generation_tokens_mean) or down(prefix_cache_hit_ratio)) unless ratio(running) >= (1 + m) * clamp_min(ratio(generation_tokens_mean), 1) * clamp_min(ratio(itl_mean), 1) * clamp_min(ratio(prompt_tokens_mean), 1) * clamp_min((1 - recent(prefix_cache_hit_ratio)) / (1 - baseline(prefix_cache_hit_ratio)), 1) unless sum by (namespace, pod, model_name) (rate({ttft}_count[3m])) / sum by (namespace, pod, model_name) (rate({ttft}_count[30m] offset 1m)) >= 1 + m)",
		// More requests in the batch make every step slower, prefill steps
		// included, so a grown batch explains either side; but a batch
		// that grew while requests queued reached its limit (queueing), and
		// one that grew with the work per request (longer prompts or
		// outputs, fewer prefix-cache hits) holds each request longer: more
		// requests at once is then the effect, unless the batch grew by
		// the minimum change beyond all that work accounts for
		// (batchBeyondWork: then more requests arrived; the bursty
		// simulator's rate 2.5x ran 3-8x the requests while its drifting
		// mix's outputs were 1.3x, and batch_growth went unnamed beside
		// long_outputs). Once named, it also stays named beside that work
		// while a latency symptom shows and the requests started per second
		// are up by the minimum change over the windows a named cause is
		// held by, significantly and beyond the pod's bursts (arrivalsUp:
		// more requests arrived,
		// read directly; seed 5's rate 2.5x ran 2.1-2.4x the requests with
		// prompts 1.3-1.45x, within what the work accounts for, prefill
		// counted whole, and long_prompts replaced it; naming it so too
		// named it beside the pod's own bursts of starts against a calm
		// frozen reference, bursty seed 10's prefix misses 0 -> 6.5 %
		// wrong; holding a quiet incident so, the self-exciting pod at 50 %,
		// seed 8, 5.40 -> 6.80 % false after the load returned). Output
		// lengths show in the
		// finished requests a request's duration late: while tokens per
		// request started rose, the outputs may be growing, and batch
		// growth waits to be named; once named it is held through such a
		// rise, as a bursty pod's lull of starts makes while the larger
		// batch keeps generating.
		rule: func(x *causeInput) bool {
			work := x.exUp(sPromptMean) || x.exUp(sGenMean) || x.exDown(sHitRatio) ||
				x.named[kLongPrompts] || x.named[kLongOutputs] || x.named[kPrefixMisses]
			return (x.prefill || x.decode) && x.up(sRunning) && !(x.exUp(sWaiting) && x.ex.queueP90Share() >= x.ex.queueShare) &&
				!(work && !x.e.batchBeyondWork && !(x.e.arrivalsUp && x.named[kBatchGrowth] && (x.e.symptoms[yTTFT] || x.e.symptoms[yITL]))) &&
				!(x.ex.tokensPerStartUp && !x.named[kBatchGrowth]) &&
				!x.named[kQueueing]
		},
		// a step's time grows with the batch
		factor: func(x *shareInput) float64 { return x.e.ratio[sRunning] },
		// While the batch stays beyond the minimum change, significant or
		// not, the calm after it is no normal (on the bursty simulator a
		// rate 2.5x kept 1.3-1.6x the requests running between its
		// incidents, and the exact ITL mean, 1.3x the pre-shift one, read
		// 1.2x against a reference that took that in); a symptom it had
		// back, with the batch's own evidence, resumes it named at once.
		// Its TTFT, named in the incident and cleared before its steps
		// were back, resumes it too (bursty seed 20: TTFT 1.42x at p =
		// 0.005 with the batch 2x went unnamed; the probation knew itl_up
		// alone).
		probation: &probationRule{age: HoldWindows - 1, young: true, atOnce: true, had: true,
			holds:   func(e *evaluation, minChange float64) bool { return e.ratio[sRunning] >= 1+minChange },
			resumes: batchResumes}},
	{Name: CausePreemptions, Step: 3, Short: "preemptions",
		Sentence: "Requests are being preempted: the KV cache is too small for the load, and each preemption redoes a prefill.",
		Action:   "Free GPU memory for the KV cache (gpu_memory_utilization, another process on the GPU), lower max_num_seqs, or add replicas.",
		PromQL:   "(prefill or decode) and up(preemptions_per_second)",
		// A preemption recomputes a whole prefill (prefill work) and stalls
		// a running request (decode), so it explains either side, if there
		// are enough of them to; few as they are, they are a cause too
		// when they come with a batch the cache held back whose queue alone
		// moves the TTFT p90 by the minimum change (read as queueing's is:
		// splitQueue).
		rule: func(x *causeInput) bool {
			return (x.prefill || x.decode) && x.up(sPreempt) &&
				(x.e.excessPreemptions >= x.e.preemptionShare || x.prefill && x.e.memoryP90Share() >= x.e.queueShare)
		},
		// the recomputed tokens against the batch's, and on the prefill
		// side the part of the queue time's rise that memory accounts for
		factor: func(x *shareInput) float64 {
			f := 1 + x.recomputed()
			if x.sym[yTTFT] {
				f *= 1 + x.queueRise()*x.queueSplit(true)/x.base.v[sTTFT]
			}
			return f
		},
		// While the KV cache's usage stays up against the reference, the
		// calm after preemptions is on probation (seed 7's KV cut: between
		// bursts the cache stayed at 8x its baseline with no request
		// waiting, and each burst's first seconds were read as a new
		// incident); a symptom it had with the cache full again
		// (evaluation.cacheFull) resumes it, named at once with
		// preemptions carried: the memory limit never left, only the burst
		// did. The gauge alone never names them.
		probation: &probationRule{lastHeld: true, atOnce: true, waits: true,
			holds:   func(e *evaluation, _ float64) bool { return e.change[sKV] == ChangeUp },
			resumes: func(x *probationInput) bool { return x.lenient.cacheFull() }}},
	{Name: CauseLongOutputs, Step: 4, Short: "longer outputs",
		Sentence: "Outputs got longer: each request stays in the batch longer.",
		Action:   "Check the clients' max_tokens; add decode capacity.",
		PromQL:   "(prefill or decode) and up(generation_tokens_mean)",
		// Longer outputs keep each request in the batch longer, so the
		// batch grows and every step slows, prefill steps included.
		rule: func(x *causeInput) bool { return (x.prefill || x.decode) && x.up(sGenMean) },
		// each request stays in the batch as many times longer
		factor: func(x *shareInput) float64 { return x.e.ratio[sGenMean] }},
	{Name: CauseAborts, Step: 2, Short: "clients giving up while they wait",
		Sentence: "Clients are giving up while they wait: the share of requests aborted rose with time to first token.",
		Action:   "Relieve the queue (add replicas, or route requests away from this pod) rather than chase the aborts: they are the clients' answer to the wait.",
		PromQL:   `ttft_up and (sum by (namespace, pod, model_name) (increase({requests_finished}{finished_reason="abort"}[1m])) / sum by (namespace, pod, model_name) (increase({requests_finished}[1m]))) / (sum by (namespace, pod, model_name) (increase({requests_finished}{finished_reason="abort"}[30m] offset 1m)) / sum by (namespace, pod, model_name) (increase({requests_finished}[30m] offset 1m))) >= 1.25`,
		NoDemo:   "the demo's clients abort a fixed 1 % of their requests whatever they wait (and all of them only at a full queue); the diagnosis unit tests shift the aborts with and without a TTFT rise",
		// Aborts are the clients' reading of the wait, so only a TTFT
		// rise makes them a finding: more aborts at a flat TTFT are a
		// client's change, not the server's.
		rule:   func(x *causeInput) bool { return x.sym[yTTFT] && x.e.abortsUp },
		effect: true},
	{Name: CauseUnexplained, Step: 6, Short: "no cause in load, queue, memory or traffic",
		Sentence: "Latency rose with no change in load, queue, memory or traffic.",
		Action:   "Look at the configuration (tensor parallelism, max_num_batched_tokens) and the hardware (throttling, a failing GPU, a noisy neighbour).",
		PromQL:   "min_over_time((any_symptom unless any_cause)[1m:])",
		NoDemo:   "the demo simulates no configuration or hardware fault",
		residual: true},

	{Name: CauseRankImbalance, Step: topologyStepNumber, Short: "a rank queueing while others idle",
		Action: "The data-parallel load balancer is not spreading requests: check the router's rank awareness (data-parallel balancing, per-rank endpoints such as /metrics/routing/engines/{engine}) and whether requests are pinned to one rank.",
		PromQL: "(max by (namespace, pod, model_name) (avg_over_time({requests_waiting}[1m])) >= 1) and (min by (namespace, pod, model_name) (avg_over_time({requests_waiting}[1m])) < 0.5)",
		NoDemo: "the demo's ranks share one inflow; the simulator of diagnosis/sim_test.go has the scenario",
		finding: func(ts *topoState, x *topoInput, e *topoEval, k int) {
			ts.ranks(e, k, x.t, x.w, x.ru.minChange, x.alpha, x.holdAlpha, max(1, x.base.phi[dRank]), max(1, x.base.rankSentPhi), x.lifted[k])
		},
		// judged against the reference's spread of the ranks: it freezes
		// that reference while it holds, as the P/D findings do, but a
		// starved rank's queue drains now and then: cleared as before
		signal: zImbalance, sentenceOf: rankSentence, baselined: true, hysteretic: true,
		// While the incident names queueing on the pod's own evidence, a
		// draining queue is no burst of the pod ending.
		gate: &gateRule{liftedBy: func(named *causeSet) bool { return named[kQueueing] }}},
	{Name: CauseKVTransferSlow, Step: topologyStepNumber, Short: "slow KV transfers",
		Sentence: "Decode is slow to pull KV from prefill: KV-transfer time rose against the baseline.",
		Action:   "Check the transfer path between the prefill and decode pods (NIXL/UCX backend, RDMA or its TCP fallback, network congestion, pods placed across racks).",
		PromQL:   `histogram_quantile(0.9, sum by (namespace, pod, model_name, le) (rate({kv_transfer_time}_bucket{role!="prefill"}[1m]))) / histogram_quantile(0.9, sum by (namespace, pod, model_name, le) (rate({kv_transfer_time}_bucket{role!="prefill"}[30m] offset 1m))) >= 1.25`,
		NoDemo:   "the demo is not disaggregated; collector/diagnosis_topology_test.go shifts constructed pages",
		finding:  (*topoState).transfersSlow, signal: zXferP90, baselined: true},
	{Name: CauseKVTransferFailures, Step: topologyStepNumber, Short: "failing KV transfers",
		Sentence: "KV transfers fail more often: requests wait for KV that does not arrive and are recomputed or dropped.",
		Action:   "Look at the KV connector's logs on both pods (expired KV on the prefill side, timeouts, a restarted peer) and at the link between them.",
		PromQL:   `avg_over_time(vllm_derived_kv_transfer_failure_ratio[1m]) / avg_over_time(vllm_derived_kv_transfer_failure_ratio[30m] offset 1m) >= 1.25`,
		NoDemo:   "the demo is not disaggregated; collector/diagnosis_topology_test.go shifts constructed pages",
		finding:  (*topoState).transfersFail, signal: zXferFail, baselined: true},
	{Name: CausePrefillSaturated, Step: topologyStepNumber, Short: "a saturated prefill pool",
		Sentence: "The prefill pool is saturated: its backlog of prompt work grew while KV usage stayed flat, so compute is short, not memory.",
		Action:   "Add prefill replicas (scale the prefill pool on vllm_derived_prefill_backlog_seconds), or lower the prefill share of each step only if decode is idle.",
		PromQL:   `avg_over_time(vllm_derived_prefill_backlog_seconds{role="prefill"}[1m]) / avg_over_time(vllm_derived_prefill_backlog_seconds{role="prefill"}[30m] offset 1m) >= 1.25 unless on (namespace, pod, model_name) (avg by (namespace, pod, model_name) (avg_over_time({kv_cache_usage}[1m])) / avg by (namespace, pod, model_name) (avg_over_time({kv_cache_usage}[30m] offset 1m)) >= 1.25)`,
		NoDemo:   "the demo is not disaggregated; collector/diagnosis_topology_test.go shifts constructed pages",
		finding:  (*topoState).prefillSaturated, signal: zBacklog, baselined: true},
	{Name: CauseAdmission, Step: topologyStepNumber, Short: "requests refused",
		Sentence: "The server refuses requests at admission (HTTP 503 at its --max-num-queued-reqs or --max-num-queued-tokens cap): its queue looks short and its latency may not move while clients are turned away.",
		Action:   "Add replicas if every pod refuses; if peers have room (the fleet rule of deploy/prometheus/admission.yml), make the router send this pod less; raise the cap only if the pod can hold more requests at once.",
		PromQL:   `avg_over_time(vllm_derived_admission_rejected_ratio[1m]) / avg_over_time(vllm_derived_admission_rejected_ratio[30m] offset 1m) >= 1.25`,
		finding:  (*topoState).admissionRefused, signal: zRefused, baselined: true, load: true},
}

// Causes returns a copy of the cause records, in the report's order.
func Causes() []Cause { return append([]Cause(nil), causes...) }

// maxCauses bounds the records, so that the per-cause verdicts are arrays
// copied with the incident rather than slices allocated per evaluation.
const maxCauses = 24

// causeSet holds one flag per record, by index.
type causeSet [maxCauses]bool

// Indexes of the records a rule names; set by init from the names, so
// that the records may be reordered.
var kQueueing, kLongPrompts, kPrefixMisses, kLongOutputs, kUnexplained, kPreemptions, kBatchGrowth int

// maxProbations bounds the causes with a probation rule, whose records
// (incidentState.probations) are an array copied with the incident.
const maxProbations = 4

// probationCauses are the indexes of the causes with a probation rule, in
// the order of incidentState.probations.
var probationCauses []int

func init() {
	for _, k := range []struct {
		at   *int
		name string
	}{{&kQueueing, CauseQueueing}, {&kLongPrompts, CauseLongPrompts}, {&kPrefixMisses, CausePrefixCacheMisses},
		{&kLongOutputs, CauseLongOutputs}, {&kUnexplained, CauseUnexplained}, {&kPreemptions, CausePreemptions},
		{&kBatchGrowth, CauseBatchGrowth}} {
		*k.at = causeIndex(k.name)
	}
	if len(causes) > maxCauses {
		panic(fmt.Sprintf("diagnosis: %d cause records, more than maxCauses (%d): raise it", len(causes), maxCauses))
	}
	for k := range causes {
		if causes[k].probation != nil {
			probationCauses = append(probationCauses, k)
		}
	}
	if len(probationCauses) > maxProbations {
		panic(fmt.Sprintf("diagnosis: %d causes with a probation rule, more than maxProbations (%d): raise it", len(probationCauses), maxProbations))
	}
}

func causeIndex(name string) int {
	for k := range causes {
		if causes[k].Name == name {
			return k
		}
	}
	panic("diagnosis: no cause record named " + name)
}

// causeInput is what a cause's rule reads: the evaluation it is judged on
// (strict to name, lenient to hold), the lenient one for what excludes it
// (a cause is named on strong evidence of its own only while the competing
// explanation does not even look present), the side the symptoms point to,
// and the causes already named, which keep excluding those they explain.
type causeInput struct {
	e, ex           *evaluation
	sym             [numSymptoms]bool
	prefill, decode bool
	named           *causeSet
	records         []Cause         // causes (a rule reaches them through here)
	memo            [maxCauses]int8 // 0 not evaluated, 1 false, 2 true
}

func (x *causeInput) up(s int) bool     { return x.e.change[s] == ChangeUp }
func (x *causeInput) down(s int) bool   { return x.e.change[s] == ChangeDown }
func (x *causeInput) exUp(s int) bool   { return x.ex.change[s] == ChangeUp }
func (x *causeInput) exDown(s int) bool { return x.ex.change[s] == ChangeDown }

// holds is cause k's rule on the same input, evaluated once.
func (x *causeInput) holds(k int) bool {
	if x.memo[k] == 0 {
		x.memo[k] = 1
		if r := x.records[k].rule; r != nil && r(x) {
			x.memo[k] = 2
		}
	}
	return x.memo[k] == 2
}

// causesFor applies the rules of the symptom-bound causes to e, given the
// symptoms that hold (those of the incident, which outlive a noisy
// evaluation) and the causes already named; ex is the lenient evaluation.
func causesFor(e, ex *evaluation, sym [numSymptoms]bool, named *causeSet) causeSet {
	return causesOf(causes, e, ex, sym, named)
}

// causesOf is causesFor on the records given: a record's own functions
// reach the records so, not through causes, which their literals are part of.
func causesOf(records []Cause, e, ex *evaluation, sym [numSymptoms]bool, named *causeSet) causeSet {
	// Prefill and decode problems have no causes in common, so each side's
	// causes are looked for only when that side got slower. When only
	// throughput fell, the split says nothing and both sides are looked at.
	split := sym[yTTFT] || sym[yITL]
	x := causeInput{e: e, ex: ex, sym: sym, named: named, records: records,
		prefill: sym[yTTFT] || (!split && sym[yThroughput]),
		decode:  sym[yITL] || (!split && sym[yThroughput])}
	var c causeSet
	for k := range records {
		c[k] = x.holds(k)
	}
	return c
}
