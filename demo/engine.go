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
	pending                   int  // tokens to (re)compute in its next step
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
}

func newEngine(i int, seed int64, shared *sharedMetrics) *engine {
	e := &engine{
		rng:    rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15+uint64(i))),
		shared: shared,
		scale:  1, period: 240, phase: 0,
		hitBase: 0.45, hitPeriod: 420,
	}
	if i > 0 {
		e.scale = 0.75 + 0.3*e.rng.Float64()
		e.period = 180 + 120*e.rng.Float64()
		e.phase = 2 * math.Pi * e.rng.Float64()
		e.hitBase = 0.38 + 0.14*e.rng.Float64()
		e.hitPeriod = 300 + 300*e.rng.Float64()
	}
	e.nextArrival = e.rng.ExpFloat64() / e.rate(0)
	return e
}

func (e *engine) rate(t float64) float64 {
	return e.scale * (5 + 3*math.Sin(2*math.Pi*t/e.period+e.phase))
}

// restart drops every request, as a server restart loses them.
func (e *engine) restart() {
	e.waiting, e.running = nil, nil
	e.setGauges()
}

// advance runs the engine until its clock reaches until.
func (e *engine) advance(until float64) {
	for e.t < until {
		e.arrive()
		if len(e.running) == 0 && len(e.waiting) == 0 {
			e.t = min(e.nextArrival, until)
			continue
		}
		e.step()
	}
	e.setGauges()
}

func (e *engine) setGauges() {
	e.m.running.set(float64(len(e.running)))
	e.m.waiting.set(float64(len(e.waiting)))
	e.m.kvUsage.set(min(float64(e.kvUsed())/kvCapacity, 1))
}

func (e *engine) kvUsed() int {
	n := 0
	for _, r := range e.running {
		n += r.prompt + r.generated
	}
	return n
}

// arrive queues the requests that arrived by e.t.
func (e *engine) arrive() {
	for e.nextArrival <= e.t {
		r := e.newRequest(e.nextArrival)
		e.nextArrival += e.rng.ExpFloat64() / max(e.rate(e.nextArrival), 0.5)
		if len(e.waiting) >= maxWaiting {
			// The server is overloaded: the client gives up at once.
			e.m.success["abort"].add(1)
			continue
		}
		e.waiting = append(e.waiting, r)
	}
}

// lognormal draws exp(N(ln median, sigma)), clamped to [lo, hi].
func (e *engine) lognormal(median, sigma float64, lo, hi int) int {
	v := int(math.Round(median * math.Exp(sigma*e.rng.NormFloat64())))
	return min(max(v, lo), hi)
}

func (e *engine) newRequest(at float64) *request {
	r := &request{arrival: at}
	r.prompt = e.lognormal(350, 0.8, 8, 3000)
	r.maxTokens = []int{64, 128, 256, 256, 512, 1024}[e.rng.IntN(6)]
	natural := e.lognormal(120, 0.9, 1, 4000)
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
	frac := e.hitBase + 0.12*math.Sin(2*math.Pi*e.t/e.hitPeriod) + 0.25*(e.rng.Float64()-0.5)
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
	prefill, admitted := 0, 0
	for len(e.waiting) > 0 && len(e.running) < maxRunning {
		r := e.waiting[0]
		need := r.prompt + r.generated
		if len(e.running) > 0 && float64(kv+need+blockSize) > admitWatermark*kvCapacity {
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
		prefill += r.pending
		kv += need
		admitted++
		e.running = append(e.running, r)
	}
	decoding := len(e.running) - admitted
	d := (stepBase + stepPerSeq*float64(len(e.running)) + stepPerPrefill*float64(prefill)) * (0.9 + 0.2*e.rng.Float64())
	e.t += d
	m.iterTokens.observe(float64(prefill+decoding), 1)

	gen := 0
	keep := e.running[:0]
	for _, r := range e.running {
		gen++
		r.generated++
		switch {
		case r.pending == 0:
			// Plain decode step; counted with the others below.
		case !r.started:
			r.started, r.firstToken = true, e.t
			m.queue.observe(r.scheduled-r.arrival, 1)
			m.prefill.observe(e.t-r.scheduled, 1)
			m.ttft.observe(e.t-r.arrival, 1)
		default:
			m.itl.observe(e.t-r.lastToken, 1)
		}
		r.pending = 0
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
	for kv = e.kvUsed(); kv > kvCapacity && len(e.running) > 1; kv = e.kvUsed() {
		r := e.running[len(e.running)-1]
		e.running = e.running[:len(e.running)-1]
		e.waiting = append([]*request{r}, e.waiting...)
		m.preemptions.add(1)
	}
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
