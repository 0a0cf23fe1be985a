package demo

import (
	"math"
	"math/rand/v2"
)

// Shape of the simulated engine: a continuous-batching scheduler with a
// bounded batch and a small KV cache, so that peaks of load queue up, fill
// the cache and now and then preempt.
const (
	maxRunning     = 32      // requests in one batch
	maxWaiting     = 400     // beyond this, arrivals are aborted at once
	blockSize      = 16      // tokens per KV block (the dump's block_size)
	kvCapacity     = 16384   // tokens of KV cache
	admitWatermark = 0.97    // admit while the cache stays below this
	stepBase       = 0.012   // seconds per engine step, fixed part
	stepPerSeq     = 0.0006  // seconds per step per running request
	stepPerPrefill = 0.00005 // seconds per step per prompt token computed
	kvBytesPerTok  = 22528   // TinyLlama: 22 layers x (K,V) x 4 heads x 64 dims x fp16
	nixlDescPerBlk = 44      // NIXL descriptors per KV block transferred
)

type request struct {
	arrival, scheduled, firstToken, lastToken float64

	prompt, maxTokens, output int // output: tokens it will generate
	reason                    string
	generated                 int
	admitted                  bool // scheduled at least once
	started                   bool // first token produced
	pending                   int  // prompt tokens still to (re)compute
	computing                 int  // prompt tokens computed in the current step
}

// engine simulates one vLLM engine core. Its clock t is in simulated seconds.
type engine struct {
	rng    *rand.Rand
	shared *sharedMetrics
	m      engineMetrics

	t           float64
	nextArrival float64
	waiting     []*request // FIFO; preempted requests go back to the front
	running     []*request

	// Load shape: arrivals per second = scale*(5 + 3*sin(2πt/period + phase)).
	scale, period, phase float64
	// Prefix cache hit fraction around hitBase, drifting with hitPeriod.
	hitBase, hitPeriod float64

	// sc, when set, replaces the wavy load by a scenario's steady load
	// and its shift at simulated time shiftAt.
	sc *scenarioRun

	// routed: the Upstream draws this engine's arrival stream
	// (nextArrival) as one share of the inflow and puts each request in
	// the least loaded engine's inbox, in time order.
	routed bool
	inbox  []*request

	// gate is the API server's admission control, shared by the engines.
	gate *admissionGate
}

// admissionGate is vLLM's admission control (--max-num-queued-reqs): a
// request that arrives while waiting + running over every engine stand at
// the cap is refused with HTTP 503 before an engine sees it, and counted
// per model, without engine.
type admissionGate struct {
	engines  []*engine
	rejected counter // vllm:admission_rejections_total{reason="max_num_queued_reqs"}
	http503  counter // the API server's http_requests_total{status="5xx"}
}

// refuses reports whether a request arriving now is refused, counting it
// if so. perEngine is the scenario's cap for one engine: the server's is
// that times its engines, as the batch limit is.
func (g *admissionGate) refuses(perEngine int) bool {
	if g == nil || perEngine <= 0 {
		return false
	}
	n := 0
	for _, e := range g.engines {
		n += len(e.waiting) + len(e.running) + len(e.inbox)
	}
	if n < perEngine*len(g.engines) {
		return false
	}
	g.rejected.add(1)
	g.http503.add(1)
	return true
}

// scenarioRun is a scenario as one engine runs it.
type scenarioRun struct {
	before, after load
	shiftAt       float64 // simulated seconds
}

func (e *engine) load() *load {
	if e.t >= e.sc.shiftAt {
		return &e.sc.after
	}
	return &e.sc.before
}

// Engine shape in scenario mode. Decoding is bound by memory bandwidth, so
// a step takes about as long for one request as for a dozen; beyond
// scBatchKnee requests it grows with each. It also grows with the KV cache
// read and the prompt tokens computed. A steady load's decode steps sit
// inside one inter-token-latency bucket; a batch twice past the knee
// leaves it.
const (
	scStepBase       = 0.035
	scBatchKnee      = 10
	scStepPerSeq     = 0.002
	scStepPerKVTok   = 0.25e-6
	scStepPerPrefill = 0.0001
)

func (e *engine) maxRunning() int {
	if e.sc != nil {
		return e.load().maxRunning
	}
	return maxRunning
}

func (e *engine) kvCapacity() int {
	if e.sc != nil {
		return e.load().kvCapacity
	}
	return kvCapacity
}

func newEngine(i int, seed int64, shared *sharedMetrics, sc *scenarioRun) *engine {
	e := &engine{
		rng:    rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15+uint64(i))),
		shared: shared,
		sc:     sc,
		scale:  1, period: 240, phase: 0,
		hitBase: 0.45, hitPeriod: 420,
	}
	if i > 0 {
		// Data-parallel engines behind one API server share one inflow,
		// which vLLM spreads by queue length: the same wave, a few per cent
		// apart. Waves out of phase would be a real rank imbalance.
		e.scale = 0.95 + 0.1*e.rng.Float64()
		e.phase = 0.2 * (e.rng.Float64() - 0.5)
		e.hitBase = 0.42 + 0.06*e.rng.Float64()
		e.hitPeriod = 360 + 120*e.rng.Float64()
	}
	e.nextArrival = e.rng.ExpFloat64() / e.rate(0)
	return e
}

// gap draws the time to the next arrival: exponential (Poisson arrivals)
// for the wavy default load; for a scenario, spread evenly around the mean
// (uniform between half and one and a half of it), so that the steady
// phase is steady in every window and only the shift shows.
func (e *engine) gap() float64 {
	if e.sc != nil {
		return (0.5 + e.rng.Float64()) / e.rate(e.nextArrival)
	}
	return e.rng.ExpFloat64() / max(e.rate(e.nextArrival), 0.5)
}

func (e *engine) rate(t float64) float64 {
	if e.sc != nil {
		l := &e.sc.before
		if t >= e.sc.shiftAt {
			l = &e.sc.after
		}
		return e.scale * l.rate
	}
	return e.scale * (5 + 3*math.Sin(2*math.Pi*t/e.period+e.phase))
}

// restart drops every request, as a server restart loses them.
func (e *engine) restart() {
	e.waiting, e.running, e.inbox = nil, nil, nil
	e.setGauges()
}

// advance runs the engine until its clock reaches until.
func (e *engine) advance(until float64) {
	for e.t < until {
		e.arrive()
		if len(e.running) == 0 && len(e.waiting) == 0 {
			e.t = min(e.nextArrivalTime(), until)
			continue
		}
		e.step()
	}
	e.setGauges()
}

func (e *engine) setGauges() {
	e.m.running.set(float64(len(e.running)))
	e.m.waiting.set(float64(len(e.waiting)))
	e.m.kvUsage.set(min(float64(e.kvUsed())/float64(e.kvCapacity()), 1))
}

func (e *engine) kvUsed() int {
	n := 0
	for _, r := range e.running {
		n += r.prompt + r.generated
	}
	return n
}

// nextArrivalTime is when the next request reaches this engine.
func (e *engine) nextArrivalTime() float64 {
	if !e.routed {
		return e.nextArrival
	}
	if len(e.inbox) > 0 {
		return e.inbox[0].arrival
	}
	return math.Inf(1)
}

// arrive queues the requests that arrived by e.t. Like vLLM's scheduler,
// an engine sees them between steps, not during one.
func (e *engine) arrive() {
	if e.routed {
		n := 0
		for n < len(e.inbox) && e.inbox[n].arrival <= e.t {
			e.enqueue(e.inbox[n])
			n++
		}
		e.inbox = e.inbox[n:]
		return
	}
	for e.nextArrival <= e.t {
		r := e.newRequest(e.nextArrival)
		e.nextArrival += e.gap()
		e.enqueue(r)
	}
}

// enqueue queues an arrived request, refuses it at admission when the
// server is at its cap, or aborts it when the queue is full.
func (e *engine) enqueue(r *request) {
	if e.sc != nil && e.gate.refuses(e.load().queuedCap) {
		return
	}
	if len(e.waiting) >= maxWaiting {
		// The server is overloaded: the client gives up at once.
		e.m.success["abort"].add(1)
		return
	}
	e.waiting = append(e.waiting, r)
}

// score is the load vLLM's data-parallel balancer compares across engines.
// The balancer counts what it sent and the engine has not seen yet as
// waiting.
func (e *engine) score() int { return 4*(len(e.waiting)+len(e.inbox)) + len(e.running) }

// lognormal draws exp(N(ln median, sigma)), clamped to [lo, hi].
func (e *engine) lognormal(median, sigma float64, lo, hi int) int {
	v := int(math.Round(median * math.Exp(sigma*e.rng.NormFloat64())))
	return min(max(v, lo), hi)
}

func (e *engine) newRequest(at float64) *request {
	r := &request{arrival: at}
	promptMedian, outputMedian, promptSigma, promptMax := 350.0, 120.0, 0.8, 3000
	if e.sc != nil {
		// Narrower and without the long tail: a few huge prompts would
		// move a minute's mean as much as a shift does.
		l := e.load()
		promptMedian, outputMedian, promptSigma, promptMax = l.promptMedian, l.outputMedian, 0.5, int(6*l.promptMedian)
	}
	r.prompt = e.lognormal(promptMedian, promptSigma, 8, promptMax)
	r.maxTokens = []int{64, 128, 256, 256, 512, 1024}[e.rng.IntN(6)]
	if e.sc != nil && outputMedian > steadyLoad.outputMedian {
		// Longer outputs are asked for, and allowed.
		r.maxTokens *= int(math.Ceil(outputMedian / steadyLoad.outputMedian))
	}
	natural := e.lognormal(outputMedian, 0.9, 1, 4000*int(math.Ceil(outputMedian/steadyLoad.outputMedian)))
	switch {
	case e.rng.Float64() < 0.01:
		r.reason, r.output = "abort", 1+e.rng.IntN(min(natural, r.maxTokens))
	case natural >= r.maxTokens:
		r.reason, r.output = "length", r.maxTokens
	default:
		r.reason, r.output = "stop", natural
	}
	return r
}

// admit does the prefix cache lookup of a request scheduled for the first
// time and returns the prompt tokens its prefill must compute.
func (e *engine) admit(r *request) int {
	var frac float64
	if e.sc != nil {
		frac = e.load().hit + 0.25*(e.rng.Float64()-0.5)
	} else {
		frac = e.hitBase + 0.12*math.Sin(2*math.Pi*e.t/e.hitPeriod) + 0.25*(e.rng.Float64()-0.5)
	}
	frac = min(max(frac, 0), 1)
	hit := int(float64(r.prompt)*frac) / blockSize * blockSize
	rest := r.prompt - hit
	ext := 0
	if e.rng.Float64() < 0.3 {
		// Part of the prompt is pulled from another instance over NIXL.
		ext = int(float64(rest)*0.8*e.rng.Float64()) / blockSize * blockSize
	}
	computed, recomputed := rest-ext, 0
	if computed == 0 {
		// A fully cached prompt still computes its last token.
		computed, recomputed = 1, 1
	}
	m := &e.m
	m.promptTokens.add(float64(r.prompt))
	m.pcQueries.add(float64(r.prompt))
	m.pcHits.add(float64(hit))
	m.extQueries.add(float64(rest))
	m.extHits.add(float64(ext))
	m.cached.add(float64(hit + ext - recomputed))
	m.recomputed.add(float64(recomputed))
	m.srcCompute.add(float64(computed))
	m.srcCacheHit.add(float64(hit))
	m.srcExternal.add(float64(ext))
	m.kvComputed.observe(float64(computed), 1)
	if ext > 0 {
		bytes := float64(ext * kvBytesPerTok)
		m.nixlBytes.observe(bytes, 1)
		m.nixlDesc.observe(float64((ext+blockSize-1)/blockSize*nixlDescPerBlk), 1)
		m.nixlXfer.observe(0.0008+bytes/12e9*(0.8+0.4*e.rng.Float64()), 1)
		m.nixlPost.observe(0.0003+0.0012*e.rng.Float64(), 1)
	}
	return computed
}

// step runs one engine iteration: schedule, compute, emit one token per
// running request, finish and preempt.
func (e *engine) step() {
	m := &e.m
	kv := e.kvUsed()
	admitted := 0
	maxRun, kvCap := e.maxRunning(), e.kvCapacity()
	for len(e.waiting) > 0 && len(e.running) < maxRun {
		r := e.waiting[0]
		need := r.prompt + r.generated
		if len(e.running) > 0 && float64(kv+need+blockSize) > admitWatermark*float64(kvCap) {
			break
		}
		e.waiting = e.waiting[1:]
		if !r.admitted {
			r.admitted, r.scheduled = true, e.t
			r.pending = e.admit(r)
		} else {
			// Resumed after preemption: its KV was freed, recompute it all.
			r.pending = need
		}
		kv += need
		admitted++
		e.running = append(e.running, r)
	}
	// Prompt tokens computed in this step, at most the step's token budget
	// (chunked prefill): a longer prefill goes on in the next steps.
	prefill, budget := 0, e.tokenBudget()
	for _, r := range e.running {
		r.computing = min(r.pending, budget)
		r.pending -= r.computing
		budget -= r.computing
		prefill += r.computing
	}
	decoding := 0
	for _, r := range e.running {
		if r.computing == 0 && r.pending == 0 {
			decoding++
		}
	}
	var d float64
	if e.sc != nil {
		d = scStepBase + scStepPerSeq*float64(max(len(e.running)-scBatchKnee, 0)) + scStepPerKVTok*float64(kv) + scStepPerPrefill*float64(prefill)
	} else {
		d = stepBase + stepPerSeq*float64(len(e.running)) + stepPerPrefill*float64(prefill)
	}
	d *= 0.9 + 0.2*e.rng.Float64()
	e.t += d
	m.iterTokens.observe(float64(prefill+decoding), 1)

	gen := 0
	keep := e.running[:0]
	for _, r := range e.running {
		if r.pending > 0 {
			keep = append(keep, r) // its prefill is not done: no token yet
			continue
		}
		gen++
		r.generated++
		switch {
		case r.computing == 0:
			// Plain decode step; counted with the others below.
		case !r.started:
			r.started, r.firstToken = true, e.t
			m.queue.observe(r.scheduled-r.arrival, 1)
			m.prefill.observe(e.t-r.scheduled, 1)
			m.ttft.observe(e.t-r.arrival, 1)
		default:
			m.itl.observe(e.t-r.lastToken, 1)
		}
		r.computing = 0
		r.lastToken = e.t
		if r.generated >= r.output {
			e.finish(r)
			continue
		}
		keep = append(keep, r)
	}
	clear(e.running[len(keep):])
	e.running = keep
	m.itl.observe(d, float64(decoding))
	m.genTokens.add(float64(gen))

	// The running requests grew by one token each; if the cache overflows,
	// preempt the most recently scheduled ones.
	for kv = e.kvUsed(); kv > kvCap && len(e.running) > 1; kv = e.kvUsed() {
		r := e.running[len(e.running)-1]
		e.running = e.running[:len(e.running)-1]
		r.pending, r.computing = 0, 0
		e.waiting = append([]*request{r}, e.waiting...)
		m.preemptions.add(1)
	}
}

// scTokenBudget is max_num_batched_tokens in scenario mode. The default
// demo computes every prefill in one step.
const scTokenBudget = 2048

func (e *engine) tokenBudget() int {
	if e.sc != nil {
		return scTokenBudget
	}
	return math.MaxInt
}

func (e *engine) finish(r *request) {
	m := &e.m
	decode := e.t - r.firstToken
	e2e := e.t - r.arrival
	tpot := 0.0
	if r.generated > 1 {
		tpot = decode / float64(r.generated-1)
	}
	m.decode.observe(decode, 1)
	m.inference.observe(e.t-r.scheduled, 1)
	m.e2e.observe(e2e, 1)
	m.tpot.observe(tpot, 1)
	m.promptLen.observe(float64(r.prompt), 1)
	m.genLen.observe(float64(r.generated), 1)
	m.maxGen.observe(float64(r.generated), 1)
	m.paramsN.observe(1, 1)
	m.maxTok.observe(float64(r.maxTokens), 1)
	m.success[r.reason].add(1)

	s := e.shared
	s.httpChat.add(1)
	dur := e2e + 0.002
	s.httpChatDur.observe(dur, 1)
	s.httpHighr.observe(dur, 1)
	s.httpReqSz.observe(0)
	s.httpRespSz.observe(float64(250 + 4*r.generated))
}
