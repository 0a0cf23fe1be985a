package diagnosis

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bursty traffic for the simulator, as production request logs show it
// (docs/diagnosis-measured.md, "Bursty traffic"): a rate that switches
// between levels (a Markov-modulated Poisson process), a share of the
// requests coming in batches of dozens from one client with similar prompt
// and output lengths, and a prompt and output mix that drifts slowly. The
// mean rate is the load's rate, as for the Poisson arrivals; queueing and
// preemptions come from the engine's batch limit and KV cache.

// simBurst shapes the bursty arrivals.
type simBurst struct {
	// levels are the rate's multipliers; the process stays at one for an
	// exponential time of mean sojourn seconds, then jumps to another
	// drawn at random. Their mean is 1.
	levels  []float64
	sojourn float64
	// batchShare of the requests come in batches of batchMin to batchMax
	// requests arriving at once; a batch's lengths are drawn around its
	// own medians (the load's × exp(batchSpread N)), each request within
	// exp(0.1 N) of them.
	batchShare         float64
	batchMin, batchMax int
	batchSpread        float64
	// driftSD is the spread of the mix's slow drift (log of the length
	// multipliers, an Ornstein-Uhlenbeck process of time constant
	// driftTau seconds).
	driftSD, driftTau float64
}

func (b *simBurst) source(rng *rand.Rand) simSource { return &simBurstSource{rng: rng} }

// simBursty is the bursty traffic of the tests: three rate levels held
// about 20 s each, 25 % of the requests in batches of 12 to 48, a mix that
// drifts by about 15 % over ten minutes.
var simBursty = simBurst{
	levels: []float64{0.7, 1, 1.3}, sojourn: 20,
	batchShare: 0.25, batchMin: 12, batchMax: 48, batchSpread: 0.4,
	driftSD: 0.15, driftTau: 600,
}

// simBurstSource is the pod's bursty arrivals: the router spreads them
// over the engines (a batch's requests go round the engines, as a
// data-parallel balancer spreads them; a skew sends engine 0 more).
type simBurstSource struct {
	rng                      *rand.Rand
	started                  bool
	t                        float64 // generated up to
	level                    float64
	switchAt, single, batch  float64 // the next events
	driftAt, dPrompt, dOuput float64 // the drift's state at driftAt
	rr                       int     // the next engine of a batch
}

// generate sends the engines the arrivals up to until, under load l (the
// rate per engine, as for Poisson arrivals).
func (s *simBurstSource) generate(until float64, l *simLoad, engines []*simEngine) {
	b := l.traffic.(*simBurst)
	rate := l.rate * float64(len(engines))
	meanBatch := float64(b.batchMin+b.batchMax) / 2
	singleRate := func() float64 { return rate * s.level * (1 - b.batchShare) }
	batchRate := func() float64 { return rate * s.level * b.batchShare / meanBatch }
	if !s.started {
		s.started, s.level = true, 1
		s.switchAt = s.t + s.rng.ExpFloat64()*b.sojourn
		s.single = s.t + s.rng.ExpFloat64()/singleRate()
		s.batch = s.t + s.rng.ExpFloat64()/batchRate()
		s.driftAt = s.t
	}
	pick := func(next int) *simEngine { return simRoute(s.rng, l, engines, next) }
	for {
		next := min(s.switchAt, s.single, s.batch)
		if next > until {
			s.t = until
			return
		}
		s.drift(b, next)
		switch next {
		case s.switchAt:
			s.level = b.levels[s.rng.IntN(len(b.levels))]
			s.switchAt = next + s.rng.ExpFloat64()*b.sojourn
			// arrivals are memoryless: redraw them at the new rate
			s.single = next + s.rng.ExpFloat64()/singleRate()
			s.batch = next + s.rng.ExpFloat64()/batchRate()
		case s.single:
			e := pick(s.rng.IntN(len(engines)))
			e.incoming = append(e.incoming, simArrival{next, lognormalOf(s.rng, l.promptMedian*math.Exp(s.dPrompt)), lognormalOf(s.rng, l.outputMedian*math.Exp(s.dOuput)), -1})
			s.single = next + s.rng.ExpFloat64()/singleRate()
		default:
			n := b.batchMin + s.rng.IntN(b.batchMax-b.batchMin+1)
			pm := l.promptMedian * math.Exp(s.dPrompt+b.batchSpread*s.rng.NormFloat64())
			om := l.outputMedian * math.Exp(s.dOuput+b.batchSpread*s.rng.NormFloat64())
			for range n {
				e := pick(s.rr)
				s.rr++
				e.incoming = append(e.incoming, simArrival{next, max(1, int(pm*math.Exp(0.1*s.rng.NormFloat64()))), max(1, int(om*math.Exp(0.1*s.rng.NormFloat64()))), -1})
			}
			s.batch = next + s.rng.ExpFloat64()/batchRate()
		}
	}
}

func lognormalOf(rng *rand.Rand, median float64) int {
	return max(1, int(median*math.Exp(0.5*rng.NormFloat64())))
}

// drift moves the mix's drift to time t (an exact Ornstein-Uhlenbeck step).
func (s *simBurstSource) drift(b *simBurst, t float64) {
	dt := t - s.driftAt
	if dt <= 0 {
		return
	}
	a := math.Exp(-dt / b.driftTau)
	sd := b.driftSD * math.Sqrt(1-a*a)
	s.dPrompt = s.dPrompt*a + sd*s.rng.NormFloat64()
	s.dOuput = s.dOuput*a + sd*s.rng.NormFloat64()
	s.driftAt = t
}

// sourcedArrivals queues the arrivals the pod's source sent up to the
// engine's time, under load l, and sets e.next to the next one.
func (e *simEngine) sourcedArrivals(l *simLoad) {
	n := 0
	for n < len(e.incoming) && e.incoming[n].t <= e.t {
		r := e.incoming[n]
		if r.pending < 0 {
			r.pending = int(float64(r.prompt) * (1 - l.hit))
		}
		e.arrive(r.t, r.prompt, r.output, r.pending)
		n++
	}
	e.incoming = e.incoming[n:]
	e.next = math.Inf(1)
	if len(e.incoming) > 0 {
		e.next = e.incoming[0].t
	}
}

// simBurstySetting are the windows the bursty simulator runs at: a
// recent window of 10 s and a baseline of 30 of them, as many as the
// default windows (1m / 30m) give the dispersion estimate.
var simBurstySetting = simSetting{"10s / 5m", 10 * time.Second, 5 * time.Minute}

// simBurstyScenarios are the steady bursty pod, each shift of the Poisson
// scenarios on bursty traffic, an overload where queueing and preemptions
// come together, and a relapse after a long incident.
var simBurstyScenarios = []string{"steady", CauseQueueing, CauseLongPrompts, CausePrefixCacheMisses, CauseBatchGrowth, CausePreemptions, CauseLongOutputs, CauseRankImbalance, simOverload, simRelapse}

const (
	simOverload = "overload"
	simRelapse  = "relapse"
)

// simOverloadPod is a pod whose batch limit and KV cache fill together
// when its inflow doubles: requests queue and the newest are preempted.
var simOverloadPod = simLoad{rate: 20, promptMedian: 350, outputMedian: 90, hit: 0.45, maxRunning: 96, kvCapacity: 44000}

// simBurstyPlan is the run of a bursty scenario: steady for ten minutes
// once the windows are covered (an hour for steady), the shift for two
// baselines and four windows (and a minute), steady again for twice both
// windows. The relapse runs an overload of a baseline and a half, a
// minute of calm with a flash of five seconds at three times the inflow,
// then the inflow × 1.8 for three minutes.
//
// At load (a share of capacity, 0 for the scenarios' own rates) the pod
// before the shift runs at that share of what its engine serves saturated
// (simCapacity); the shift keeps its own ratio to it (the overload doubles
// it). The arrivals are tr's (simBursty, or simSelfExciting).
func simBurstyPlan(tr simTraffic, sc string, seed uint64, load float64) simPlan {
	s := simBurstySetting
	pl := simPlan{scenario: sc, seed: seed, window: s.window, baseline: s.baseline, truth: true}
	pl.shift = s.window + s.baseline + 10*time.Minute
	pl.back = pl.shift + 2*s.baseline + 4*s.window + time.Minute
	pl.end = pl.back + 2*(s.window+s.baseline) + time.Minute
	if sc == "steady" {
		pl.shift = s.window + s.baseline + 60*time.Minute
		pl.back, pl.end = pl.shift, pl.shift
	}
	pl.restarts = []time.Duration{pl.shift / 2, pl.shift + (pl.back-pl.shift)/2}
	var before, during simLoad
	switch sc {
	case simOverload, simRelapse:
		// the relapse runs on the overload's pod, at the load too: at its
		// own 20 requests/s the self-exciting pod (6.4 saturated) was
		// overloaded before, between and after its overloads
		before = simOverloadPod
		before.traffic = tr
		if load > 0 {
			before.rate = load * simCapacity(before)
		}
		during = before
		during.rate *= 2
		if sc == simRelapse {
			pl.restarts = pl.restarts[:1]
		}
	default:
		before, during = simScenario(sc)
		before.traffic = tr
		if load > 0 {
			ratio := during.rate / before.rate
			before.rate = load * simCapacity(before)
			during.rate = before.rate * ratio
		}
		if sc == CauseBatchGrowth || sc == CauseLongOutputs {
			// room in the batch for the bursts on top of the shift, so that
			// nothing queues: the shift's cause is the only one
			before.maxRunning, during.maxRunning = 1024, 1024
		}
	}
	before.traffic, during.traffic = tr, tr

	if sc == simRelapse {
		over, flash, relapse := before, before, before
		over.rate *= 2
		flash.rate *= 3
		relapse.rate *= 1.8
		long := pl.shift + 3*s.baseline/2
		flashAt := long + s.window + 50*time.Second
		pl.back = flashAt + 5*time.Second + 10*time.Second // the relapse's start
		relapseEnd := pl.back + 3*time.Minute
		pl.end = relapseEnd + 2*(s.window+s.baseline)
		pl.load = func(at time.Duration) *simLoad {
			switch {
			case at > pl.shift && at <= long:
				return &over
			case at > flashAt && at <= flashAt+5*time.Second:
				return &flash
			case at > pl.back && at <= relapseEnd:
				return &relapse
			}
			return &before
		}
		return pl
	}
	pl.load = func(at time.Duration) *simLoad {
		if sc != "steady" && at > pl.shift && at <= pl.back {
			return &during
		}
		return &before
	}
	return pl
}

// simCapacities holds simCapacity's measurements, by engine shape.
var simCapacities sync.Map

// simCapacity is how many requests a second one engine of l's shape (its
// batch limit, KV cache, lengths and prefix-cache hits) finishes when
// saturated: Poisson arrivals far beyond it, so that a queue always waits,
// over five minutes after one of warm-up. Measured once per shape (about
// 0.1 s): the steady pod (batch limit 256) serves 57.8 requests/s an
// engine, the overload's pod (96, KV cache 44 000 tokens) 31.7, so that
// their 20 requests/s are 35 % and 63 % of capacity. Issue 30 measured
// production at 65 % and 90 % of it.
//
// A traffic with lengths of its own (simSelfExciting's heavy tails and
// sessions) floods the engine with its own arrivals, so that its load is a
// share of what the engine serves of it.
func simCapacity(l simLoad) float64 {
	l.rate, l.skew = 0, 0
	if _, own := l.traffic.(*simHawkes); !own {
		l.traffic = nil
	}
	if c, ok := simCapacities.Load(l); ok {
		return c.(float64)
	}
	e := newSimEngine(1, 0)
	flood := l
	flood.rate = 200
	run := e.run
	if l.traffic != nil {
		src := l.traffic.source(rand.New(rand.NewPCG(1, 77)))
		run = func(until float64, l *simLoad) {
			for t := math.Floor(e.t) + 1; t <= until; t++ {
				src.generate(t, l, []*simEngine{e})
				e.run(t, l)
			}
		}
	}
	run(60, &flood)
	n := e.finished
	run(360, &flood)
	c := (e.finished - n) / 300
	simCapacities.Store(l, c)
	return c
}

// simLoadShare is DIAGNOSIS_LOAD, a percentage of capacity (simCapacity),
// as a share: the load the bursty steady pod and overload run at; 0 when
// unset (the scenarios' own rates).
func simLoadShare() float64 {
	if p, err := strconv.ParseFloat(os.Getenv("DIAGNOSIS_LOAD"), 64); err == nil && p > 0 {
		return p / 100
	}
	return 0
}

// simTrafficShape is DIAGNOSIS_TRAFFIC: the arrivals TestSimulatorBursty
// runs on, "selfexciting" (simSelfExciting) or bursty (simBursty, unset).
func simTrafficShape() simTraffic {
	if os.Getenv("DIAGNOSIS_TRAFFIC") == "selfexciting" {
		return &simSelfExciting
	}
	return &simBursty
}

// simTrafficCauses are the causes read from the traffic's exact means.
var simTrafficCauses = []string{CauseLongPrompts, CausePrefixCacheMisses, CauseLongOutputs}

// simBurstyResult is what the bursty table shows for one run. Steady polls
// and the clearing are judged against the truth, as issue 30 counts them:
// a claim is false where no latency truly moved by the minimum change
// (simTruth.judge); the pod's real bursts may be named.
type simBurstyResult struct {
	simResult
	// steady polls naming a cause, a symptom, where nothing truly moved
	// (falseShare is the causes'), and naming one at all
	symptomShare             float64
	namedShare, namedSymptom float64
	// changes of the named causes per 10 minutes of steady polls, where
	// nothing truly moved for a whole recent window before; and all
	flips, allFlips float64
	// for the relapse: when it was first named after it began, and the
	// share of its polls (from the recent window + 15 s on) with a true
	// latency symptom naming queueing
	relapseNamed time.Duration
	relapseHeld  float64
	// steadyPolls are the steady polls judged: before the shift, and
	// after the incident's verdict cleared
	steadyPolls int
	// queueingFirst: the KV cut's judged polls naming queueing beside
	// preemptions that list queueing first
	queueingFirst int
	// namedMoved and clearedMoved time the verdict from the later of the
	// load's change and the latency's (latencyMoved, latencyBack): the
	// diagnosis' own delay, which the targets bound; -1 never
	namedMoved, clearedMoved time.Duration
}

// latencyMoved is when the latency truly moved after the shift: the last
// poll before the first whose recent window truly moved (simTruth.claim),
// not before the shift, nor after at (the verdict's own time). A doubled
// inflow that begins in the rate's low level queues nothing for seconds
// (bursty seed 1 at 65 %: the first request waited 23 s after the shift):
// no diagnosis can name a latency before it moves.
// moved says whether poll p's recent window truly moved against the time
// without a claim before it: its latency, or the share refused at
// admission (a pod at its queue cap turns clients away, its latency flat).
func (p *simPoll) moved() bool { return p.trueMoved || p.refusedMoved }

func latencyMoved(polls []simPoll, shift, back, at time.Duration) time.Duration {
	for _, p := range polls {
		if p.at > shift && p.at <= back && p.moved() {
			return min(max(shift, p.at-time.Second), at)
		}
	}
	return min(shift, at)
}

// latencyBack is when the latency truly returned after the load did: the
// start of the first recent window after back that truly did not move,
// not before back, nor after at. The queue an overload leaves drains for
// minutes at 90 % of capacity (the pod's own bursts reach 117 % of it), its
// latency truly up all along: a verdict that holds there is right (issue
// 30: keep naming it while the incident lasts), one held beyond it is not.
func latencyBack(polls []simPoll, back, window, at time.Duration) time.Duration {
	for _, p := range polls {
		if p.at > back && !p.moved() {
			return min(max(back, p.at-window), at)
		}
	}
	return at
}

func simBurstyRun(tr simTraffic, sc string, seed uint64, load float64) (simRun, simBurstyResult) {
	pl := simBurstyPlan(tr, sc, seed, load)
	run := simulatePlan(pl)
	switch sc {
	case simOverload:
		// Queueing is truly there (waiting and queue time up); the
		// preemptions that come with it may be named beside it. At a pod
		// already at its queue cap (90 % of capacity) the latency cannot
		// move, but the clients turned away can: admission names it there
		// (simRun.rightAt).
		run.named, run.namedOrRefused = CauseQueueing, true
		run.right = func(p *simPoll) bool { return slices.Contains(p.causes, CauseQueueing) }
	case simRelapse:
		run.named = CauseQueueing
		run.right = func(p *simPoll) bool { return slices.Contains(p.causes, CauseQueueing) }
		run.back = pl.shift + 3*pl.baseline/2 // the long incident's end
	default:
		// The scenario's causes, and beside them only traffic causes: their
		// signals are exact means (no buckets), named only past the
		// minimum change and beyond every sub-window of the baseline, so
		// the window's traffic truly changed (a client's batch of longer
		// prompts is what makes the pod near its batch limit queue
		// hardest); issue 30 asks every cause whose own change is
		// significant to be named.
		//
		// A KV cache cut serves fewer at the same inflow, so requests truly
		// wait: where the exact queue time of the window's requests rose
		// (simPoll.trueQueueUp), queueing is right beside preemptions, as
		// preemptions are beside queueing in the overload (issue 30:
		// preemptions never hide queueing when waiting and queue time
		// moved). Never in place of them: the cut is the cause. So beside
		// any shift whose requests truly waited: long_outputs at 3x filled
		// seed 10's KV cache (requests waited 2.8 s at p90 against 22 ms).
		//
		// A batch 2.5x whose bursts fill the pod truly queues (seeds 9 and
		// 10: the KV cache, 92-95 % used, holds the batch at about 700
		// requests an engine and the rest wait, TTFT 6-10x): where the
		// exact queue time rose, queueing is right, in place of
		// batch_growth too, which is named only when nothing else
		// explains the batch (its rule).
		//
		// A rate 2.5x on a pod whose KV cache already holds its batch (the
		// self-exciting pod at 80-90 %: 337 running and 241 waiting before
		// the shift, 332 and 295 after, seed 4 at 90 %) cannot grow the
		// batch: where the batch did not truly grow (simPoll.trueBatchUp),
		// the shift is an overload at the cache, and queueing is right in
		// place of batch_growth, as for the overload.
		want := simExpected(sc)
		run.right = func(p *simPoll) bool {
			overflow := sc == CauseBatchGrowth && (p.trueQueueUp || !p.trueBatchUp) && slices.Contains(p.causes, CauseQueueing)
			for _, w := range want {
				if !slices.Contains(p.causes, w) && !overflow {
					return false
				}
			}
			for _, x := range p.causes {
				queued := x == CauseQueueing && p.trueQueueUp
				// a shift that overflows the KV cache truly preempts (the
				// self-exciting pod's contexts: long_prompts at 65 %, seed 3;
				// the prefix cache's misses at 65 %, 0.03 -> 8.6 a second)
				preempted := x == CausePreemptions && p.truePreemptUp
				if !slices.Contains(want, x) && !slices.Contains(simTrafficCauses, x) && !queued && !preempted {
					return false
				}
			}
			return true
		}
	}
	r := simBurstyResult{simResult: run.result(), relapseNamed: -1}
	r.namedMoved = r.firstNamed
	if r.firstNamed >= 0 {
		at := pl.shift + r.firstNamed
		r.namedMoved = at - latencyMoved(run.polls, pl.shift, run.back, at)
	}
	back := run.back
	if sc == simRelapse {
		back = pl.back + 3*time.Minute // the relapse's end
	}
	r.judgeSteady(&run, pl, back)
	if sc == CausePreemptions {
		// Beside the cut, queueing explains less of the symptom: the
		// cache holds back the batch at the same inflow.
		for _, p := range run.polls {
			if p.at > pl.shift+pl.window+15*time.Second && p.at <= pl.back && p.trueSymptom && !p.gapWindow && p.queueingFirst {
				r.queueingFirst++
			}
		}
	}
	if sc == simRelapse {
		start, end := pl.back, pl.back+3*time.Minute
		held, n := 0, 0
		for _, p := range run.polls {
			if p.at <= start || p.at > end {
				continue
			}
			if r.relapseNamed < 0 && slices.Contains(p.causes, CauseQueueing) {
				r.relapseNamed = p.at - start
			}
			if p.at > start+pl.window+15*time.Second && p.trueSymptom && !p.gapWindow {
				n++
				if slices.Contains(p.causes, CauseQueueing) {
					held++
				}
			}
		}
		r.relapseHeld = math.NaN()
		if n > 0 {
			r.relapseHeld = float64(held) / float64(n)
		}
	}
	return run, r
}

// judgeSteady sets the steady figures and the clearing against the truth.
// The load returned at back; the incident's verdict cleared at the first
// poll after it naming no cause, and from then on the pod is steady again.
// Steady are the ready polls before the shift (all of a steady run) and
// those after the clearing: the share of them naming a cause or a symptom
// where no latency truly moved, and the changes of the named causes while
// nothing truly moved for a whole recent window.
func (r *simBurstyResult) judgeSteady(run *simRun, pl simPlan, back time.Duration) {
	clearedAt := time.Duration(-1)
	if pl.scenario != "steady" {
		for _, p := range run.polls {
			if p.at > back && len(p.causes) == 0 {
				clearedAt = p.at
				break
			}
		}
		r.cleared, r.clearedMoved = -1, -1
		if clearedAt >= 0 {
			r.cleared = clearedAt - back
			r.clearedMoved = clearedAt - latencyBack(run.polls, back, pl.window, clearedAt)
		}
	}
	steady := func(p *simPoll) bool {
		return p.ready && (pl.scenario == "steady" || p.at <= pl.shift || clearedAt >= 0 && p.at >= clearedAt)
	}
	var n, claims, symptoms, named, namedSym, flips, allFlips int
	var last []string
	lastMoved := time.Duration(math.MinInt64)
	for i := range run.polls {
		p := &run.polls[i]
		if p.moved() {
			lastMoved = p.at
		}
		if !steady(p) {
			last = nil
			continue
		}
		n++
		if len(p.causes) > 0 {
			named++
			// admission is judged by the refusals, the others by the latency
			adm := slices.Contains(p.causes, CauseAdmission)
			if adm && !p.refusedMoved || len(p.causes) > 1 && !p.trueMoved || !adm && !p.trueMoved {
				claims++
			}
		}
		if len(p.symptoms) > 0 {
			namedSym++
			if !p.trueMoved {
				symptoms++
			}
		}
		if last != nil && !slices.Equal(last, p.causes) {
			allFlips++
			if p.at-lastMoved > pl.window {
				flips++
			}
		}
		last = p.causes
	}
	r.steadyPolls = n
	if n > 0 {
		perTen := float64(n) / 600
		r.falseShare, r.symptomShare = float64(claims)/float64(n), float64(symptoms)/float64(n)
		r.namedShare, r.namedSymptom = float64(named)/float64(n), float64(namedSym)/float64(n)
		r.flips, r.allFlips = float64(flips)/perTen, float64(allFlips)/perTen
	}
}

// simBurstyGaps are the targets of issue 30 the bursty simulator does not
// meet yet on this branch, by scenario, and why: each is still measured
// and reported (a skip naming it and its figure), and the test fails on
// any other. Remove an entry when its target is met.
var simBurstyGaps = map[string]map[string]string{}

// Why the gaps remain (docs/diagnosis-measured.md, "What is still missed").
const (
	// simBurstyBucket: the shift's latency rises inside one of vLLM's
	// buckets (inter-token 25-50 ms, TTFT 0.1-0.25 s and just past it):
	// the interpolated p90 reads it below the minimum change, and at the
	// conservative end of what the buckets allow (issue 30's own rule) it
	// is no change at all: of the judged polls, the buckets show the change
	// in 11 % for batch_growth and in none for long_outputs. The exact
	// means and the batch's own evidence name most of the rest (seed 1:
	// 69.7 -> 28.9 -> 10.4 % wrong or missing); about half the polls still
	// missed name nothing where the exact ITL mean rose under 1.25x even
	// the pre-shift one, a third wait for the naming's 3 evaluations.
	// Over seeds 1-12 (branch batchg: 325 polls still missed of 5,906):
	// 171 with no incident open (a young incident ended in a dip, or an
	// older one's batch was no longer significant at α), 93 of them where
	// the true p90 is under 1.30x and the exact means read under 1.25x or
	// within the pod's bursts; 56 waiting the 3 evaluations of an incident
	// opened again; 54 naming long_prompts or long_outputs alone (a client's
	// batch 1.3-1.45x, or the long requests that finish as an overflow
	// drains); 30 at the starts and ends of the batch's overflows into
	// queueing (nothing named while one cause waits for the other's 3
	// evaluations); 14 a named incident whose cause waits its own.
	simBurstyBucket = "the shift's latency rises inside one of vLLM's buckets: the interpolated p90 reads it below the minimum change, and in the polls still missed the exact mean rose below the minimum change (ITL) or within the pod's bursts (TTFT)"
	// simBurstyTruth: the exact latencies of long_outputs move beyond the
	// pod's own bursts in only half of its polls: the scenario barely
	// tests its shift on bursty traffic.
	simBurstyTruth = "the shift's exact latencies move beyond the pod's own bursts in only half of its polls"
)

func init() {
	for _, sc := range simBurstyScenarios {
		simBurstyGaps[sc] = map[string]string{}
	}
	simBurstyGaps[CauseBatchGrowth]["held"] = simBurstyBucket
	// long_outputs' "held" is met on seeds 1 and 2 since a young incident
	// on a current reference is held through the lulls too (0.0 %, 4.0 %)
	simBurstyGaps[CauseLongOutputs]["truth"] = simBurstyTruth
}

// TestSimulatorBursty runs every bursty scenario (10 s / 5 m windows, two
// engines at 20 requests/s each on average) and checks the targets of
// issue 30, judged as the issue counts them, against the exact latencies
// (simTruth): steady, a cause or a symptom named where no latency truly
// moved by the minimum change in at most 1 % of the judged polls, and the
// named causes changing at most once per 10 minutes where nothing truly
// moved; every shift named within the recent window + 15 s and right in
// at least 95 % of the incident's polls whose latency truly moved beyond
// the pod's own bursts (within them, a change cannot be told from chance
// in one window: those polls are not judged), and cleared within the
// recent window + 20 s (both timed from the later of the load's change and
// the latency's: latencyMoved, latencyBack); queueing named in at least 90 % of an overload's
// such polls, preemptions with it or not; admission judged by the arrivals
// the engines refused at their queue cap (simRun.rightAt: wrong where the
// share refused did not truly rise, needed where only it rose beyond the
// pod's bursts); a relapse after a long incident
// named within the recent window + 15 s and held in at least 95 % of its
// such polls. Targets listed in simBurstyGaps are reported, not failed.
// DIAGNOSIS_TABLE=1 prints the table of docs/diagnosis.md;
// DIAGNOSIS_TRAFFIC=selfexciting runs it on simSelfExciting's arrivals,
// every scenario at DIAGNOSIS_LOAD.
func TestSimulatorBursty(t *testing.T) {
	var table strings.Builder
	s := simBurstySetting
	load := simLoadShare()
	traffic := simTrafficShape()
	for _, sc := range simBurstyScenarios {
		if load > 0 && sc != "steady" && sc != simOverload && traffic == simTraffic(&simBursty) {
			continue // the bursty sweeps run only these at a load
		}
		if raceEnabled && sc != "steady" && sc != simOverload {
			// The race detector makes the simulation ten times slower; two
			// scenarios keep it covered under -race, all run without it.
			continue
		}
		t.Run(sc, func(t *testing.T) {
			run, r := simBurstyRun(traffic, sc, simSeed(), load)
			var gaps []string
			expect := func(target string, ok bool, format string, args ...any) {
				if ok {
					return
				}
				msg := fmt.Sprintf(format, args...)
				if why := simBurstyGaps[sc][target]; why != "" {
					gaps = append(gaps, msg+" ("+why+")")
					return
				}
				t.Error(msg)
			}
			expect("steady", r.falseShare <= 0.01 && r.symptomShare <= 0.01,
				"steady, a cause named where no latency truly moved in %.2f %% and a symptom in %.2f %% of the judged polls, want at most 1 %%", 100*r.falseShare, 100*r.symptomShare)
			expect("flicker", r.flips <= 1, "steady, the named causes changed %.1f times per 10 minutes where no latency truly moved for a recent window, want at most 1", r.flips)
			expect("ready", r.steadyPolls >= int((run.shift-s.window-s.baseline).Seconds())/2, "only %d steady polls were judged (ready)", r.steadyPolls)
			grace := s.window + 15*time.Second
			switch sc {
			case "steady":
			case simRelapse:
				expect("named", r.relapseNamed >= 0 && r.relapseNamed <= grace, "queueing first named %s after the relapse began, want within %s", r.relapseNamed, grace)
				expect("held", r.relapseHeld >= 0.95, "queueing named in %.1f %% of the relapse's polls with a true latency symptom, want at least 95 %%", 100*r.relapseHeld)
			default:
				want := 0.05
				if sc == simOverload {
					want = 0.1
				}
				expect("named", r.namedMoved >= 0 && r.namedMoved <= grace, "first named %s after the shift, %s after the latency truly moved, want within %s", r.firstNamed, r.namedMoved, grace)
				expect("held", r.wrongShare <= want, "a wrong or missing verdict in %.1f %% of the incident's polls with a true latency symptom, want at most %.0f %%", 100*r.wrongShare, 100*want)
				expect("truth", r.truePolls >= r.incidentPolls/2, "only %d of the incident's %d polls truly show a latency symptom: the scenario does not test its shift", r.truePolls, r.incidentPolls)
				expect("order", r.queueingFirst == 0, "queueing listed before preemptions in %d of the KV cut's judged polls, want none", r.queueingFirst)
				if sc != simOverload {
					expect("blamed", r.preemptionBlamed == 0, "preemptions blamed in %d polls with only background preemptions", r.preemptionBlamed)
				}
				limit := s.window + 20*time.Second
				expect("cleared", r.clearedMoved >= 0 && r.clearedMoved <= limit, "cleared %s after the load returned, %s after the latency truly returned, want within %s", r.cleared, r.clearedMoved, limit)
			}
			first, right, moved := dur(r.firstNamed, sc), pct(r.wrongShare, sc), dur(r.namedMoved, sc)
			if sc == simRelapse {
				first, right, moved = dur(r.relapseNamed, sc), fmt.Sprintf("%.1f %%", 100*(1-r.relapseHeld)), "–"
			}
			truly := "–"
			if r.incidentPolls > 0 {
				truly = fmt.Sprintf("%.0f %%", 100*float64(r.truePolls)/float64(r.incidentPolls))
			}
			shown := "–"
			if r.truePolls > 0 && sc != simRelapse {
				shown = fmt.Sprintf("%.0f %%", 100*float64(r.shownPolls)/float64(r.truePolls))
				if r.shownPolls > 0 {
					shown += fmt.Sprintf(" (%.1f %%)", 100*float64(r.shownWrong)/float64(r.shownPolls))
				}
			}
			name := "`" + sc + "`"
			if load > 0 {
				name += fmt.Sprintf(" at %.0f %%", 100*load)
			}
			fmt.Fprintf(&table, "| %s | %s | %s | %s | %s | %.2f %% / %.2f %% (%.2f %% / %.2f %%) of %d | %.1f (%.1f) | %s | %s | %s | %s |\n", s.name, name, truly, right, shown,
				100*r.falseShare, 100*r.symptomShare, 100*r.namedShare, 100*r.namedSymptom, r.steadyPolls, r.flips, r.allFlips, first, dur(r.cleared, sc), moved, dur(r.clearedMoved, sc))
			if len(gaps) > 0 {
				t.Skipf("%s: known gaps:\n%s", sc, strings.Join(gaps, "\n"))
			}
		})
	}
	if os.Getenv("DIAGNOSIS_TABLE") != "" {
		fmt.Print("| windows | scenario | incident polls with a true latency symptom beyond the pod's bursts | wrong or missing among them | of them, a change the buckets show at their conservative end (wrong or missing among those) | false causes / symptoms, steady (named at all) | changes of the causes per 10 min where nothing truly moved, steady (all) | first named after the shift | cleared after the load returned | first named after the latency truly moved | cleared after the latency truly returned |\n|---|---|---|---|---|---|---|---|---|---|---|\n" + table.String())
	}
}

// The truth a bursty run's incident polls are judged against: the exact
// TTFT and inter-token latencies, in bins 2 % wide from 0.1 ms up.
const (
	simTrueBins  = 940
	simTrueFirst = 1e-4
	simTrueStep  = 1.02
	// simTrueSum is where the bins' slices keep the latencies' exact sum,
	// after the bins
	simTrueSum = simTrueBins
)

func simTrueBin(v float64) int {
	if !(v > simTrueFirst) {
		return 0
	}
	return min(int(math.Log(v/simTrueFirst)/math.Log(simTrueStep)), simTrueBins-1)
}

// simTrueQuantile is the q-quantile of the exact latencies counted in
// cumulative bins b minus a (the bin's upper edge); NaN without any.
func simTrueQuantile(a, b []float64, q float64) float64 {
	total := 0.0
	for i := range simTrueBins {
		total += b[i] - a[i]
	}
	if !(total > 0) {
		return math.NaN()
	}
	c := 0.0
	for i := range simTrueBins {
		if c += b[i] - a[i]; c >= q*total {
			return simTrueFirst * math.Pow(simTrueStep, float64(i+1))
		}
	}
	return math.NaN()
}

// simTrueMean is the exact mean of the latencies counted in cumulative
// bins b minus a; NaN without any.
func simTrueMean(a, b []float64) float64 {
	n := 0.0
	for i := range simTrueBins {
		n += b[i] - a[i]
	}
	if !(n > 0) {
		return math.NaN()
	}
	return (b[simTrueSum] - a[simTrueSum]) / n
}

// simTruth keeps the pod's exact latencies over each poll's recent window,
// over the time without a claim before it (as the diagnosis' incident-free
// baseline) and over the baseline before the shift, to judge each poll's
// recent window against them (judge).
type simTruth struct {
	window, shift, baseline time.Duration
	ring                    [][2][]float64 // per second, the pod's cumulative bins, the last window + 2
	baseFrom, baseTo        [2][]float64
	// recent are the polls' recent-window p90s (TTFT, ITL), in order,
	// recentMean their exact means; moved whether each truly moved (claim)
	recent     [][2]float64
	recentMean [][2]float64
	moved      []bool
	freeQ      [][2]float64 // the free time's exact p90s at each poll (DIAGNOSIS_TRACE)
	freeM      [][2]float64 // the recent window's exact means over the free time's (DIAGNOSIS_TRACE)
	at         []time.Duration
	// refusing are the last window + 1 polls' claims (a symptom or
	// admission named); free sums the seconds (their bins, oldest first in
	// freeSecs) of the last baseline of time no claim's recent window
	// covered
	refusing []bool
	free     [2][]float64
	freeSecs [][2][]float64
	// base is the baseline's p90s before the shift (judge), baseMean its
	// exact means
	base, baseMean [2]float64
	// The exact queue times (simEngine.trueQueue) alike: per second the
	// pod's cumulative bins over the last window + 2, the baseline's
	// before the shift, and each poll's recent-window p90 and mean.
	qring              [][]float64
	qBaseFrom, qBaseTo []float64
	qRecent            [][2]float64
	qBase              [2]float64
	// The arrivals refused at admission and attempted (refused or
	// queued): rlog the pod's cumulative counts at each second, rFree
	// those of the free time (rFreeSecs its seconds', oldest first) and
	// rMoved whether each poll's recent window refused a share larger by
	// the minimum change than the free time's (claim).
	rlog      [][2]float64
	rFree     [2]float64
	rFreeSecs [][2]float64
	rMoved    []bool
	rBurst    *float64 // the share refused that the pod's own bursts reach (refusedUp)
	// plog is the pod's cumulative preemptions at each second, pBurst the
	// count one span of each length (seconds) before the shift in
	// simBurstQuantile reaches (preemptUpOver)
	plog   []float64
	pBurst map[int]float64
	// blog is the pod's cumulative requests running, sampled each second
	// (batchUp)
	blog []float64
}

// refused logs the pod's cumulative refused and attempted arrivals, once a
// second (every run: the Poisson table judges admission too).
func (tr *simTruth) refused(engines []*simEngine) {
	var c [2]float64
	for _, e := range engines {
		c[0] += e.refused
		c[1] += e.refused + e.accepted
	}
	tr.rlog = append(tr.rlog, c)
	p := 0.0
	for _, e := range engines {
		p += e.preempt
	}
	tr.plog = append(tr.plog, p)
	n := 0.0
	for _, e := range engines {
		n += float64(len(e.running))
	}
	if k := len(tr.blog); k > 0 {
		n += tr.blog[k-1]
	}
	tr.blog = append(tr.blog, n)
}

// batchUp says whether poll i's recent window (after the shift) truly ran
// a larger batch than the baseline before the shift: its mean of the
// requests running, sampled each second, at least 1 + the minimum change
// times the baseline's.
func (tr *simTruth) batchUp(i int) bool {
	b, w := int(tr.baseline/time.Second), int(tr.window/time.Second)
	s := int(tr.shift / time.Second)
	if time.Duration(i+1)*time.Second <= tr.shift || i < w || s-1 >= len(tr.blog) || s-1-b < 0 {
		return false
	}
	recent := (tr.blog[i] - tr.blog[i-w]) / float64(w)
	base := (tr.blog[s-1] - tr.blog[s-1-b]) / float64(b)
	return recent >= 1.25*base
}

// preemptUp says whether poll i (after the shift) truly preempted more
// than the baseline before the shift, over its recent window or over the
// windows a named cause is held by (HoldWindows recent windows, all after
// the shift): preemptions are rare, and the diagnosis holds them over
// those windows while their count there is significant (issue 30: holds
// with evidence, over the windows a cause is held by). One window of 4
// after 0-2 is the pod's preempting for those windows, not a false claim.
func (tr *simTruth) preemptUp(i int) bool {
	w := int(tr.window / time.Second)
	return tr.preemptUpOver(i, w, false) || tr.preemptUpOver(i, HoldWindows*w, true)
}

// preemptUpOver says whether the span seconds ending at poll i truly
// preempted more than the baseline before the shift: its count at least 1 +
// the minimum change times the baseline's rate over as long (any where
// none were), and beyond the count the pod's own bursts reach (one span of
// that length in simBurstQuantile before the shift), as refusedUp reads the
// refusals. The background preemptions (simBackgroundPr) are in both. With
// after, the span must lie after the shift.
func (tr *simTruth) preemptUpOver(i, span int, after bool) bool {
	b := int(tr.baseline / time.Second)
	s := int(tr.shift / time.Second)
	if time.Duration(i+1)*time.Second <= tr.shift || i < span || s-1 >= len(tr.plog) || s-1-b < 0 || after && i-span < s-1 {
		return false
	}
	r := tr.plog[i] - tr.plog[i-span]
	base := (tr.plog[s-1] - tr.plog[s-1-b]) * float64(span) / float64(b)
	if !(r > 0) || r < 1.25*base {
		return false
	}
	burst, ok := tr.pBurst[span]
	if !ok {
		var ws []float64
		for j := span; j < s && j < len(tr.plog); j++ {
			ws = append(ws, tr.plog[j]-tr.plog[j-span])
		}
		slices.Sort(ws)
		burst = math.Inf(1)
		if len(ws) > 0 {
			burst = ws[min(int(simBurstQuantile*float64(len(ws))), len(ws)-1)]
		}
		if tr.pBurst == nil {
			tr.pBurst = map[int]float64{}
		}
		tr.pBurst[span] = burst
		if simTruthTrace {
			fmt.Printf("truth preemptions over %d s: baseline %.3g, bursts %.3g\n", span, base, burst)
		}
	}
	return r > burst
}

// refusedRecent is the refused and attempted arrivals of poll i's recent
// window; zero before a window is covered.
func (tr *simTruth) refusedRecent(i int) [2]float64 {
	w := int(tr.window / time.Second)
	if i < w {
		return [2]float64{}
	}
	a, b := tr.rlog[i-w], tr.rlog[i]
	return [2]float64{b[0] - a[0], b[1] - a[1]}
}

// refusedRose says whether recent refused a share of its attempts larger by
// the minimum change than ref's (refused k of n each): any refused where
// none were.
func refusedRose(recent, ref [2]float64) bool {
	if !(recent[1] > 0) || !(recent[0] > 0) {
		return false
	}
	if !(ref[1] > 0) || ref[0] == 0 {
		return true
	}
	return recent[0]/recent[1] >= 1.25*ref[0]/ref[1]
}

// refusedUp says whether poll i's recent window (after the shift) truly
// refused more of its attempts than the baseline before the shift, and,
// with beyond (a plan's truth), whether it also refused a larger share than
// the pod's own bursts reach: the share that one recent window in
// simBurstQuantile before the shift reaches, as for the latencies (judge).
func (tr *simTruth) refusedUp(i int, beyond bool) (up, past bool) {
	polls := time.Duration(i+1) * time.Second
	b, w := int(tr.baseline/time.Second), int(tr.window/time.Second)
	s := int(tr.shift / time.Second)
	if polls <= tr.shift || s-1 >= len(tr.rlog) || s-1-b < 0 {
		return false, false
	}
	from, to := tr.rlog[s-1-b], tr.rlog[s-1]
	r := tr.refusedRecent(i)
	up = refusedRose(r, [2]float64{to[0] - from[0], to[1] - from[1]})
	if !up || !beyond {
		return up, false
	}
	if tr.rBurst == nil {
		var ws []float64
		for j := w; j < s && j < len(tr.rlog); j++ {
			if x := tr.refusedRecent(j); x[1] > 0 {
				ws = append(ws, x[0]/x[1])
			}
		}
		slices.Sort(ws)
		burst := math.Inf(1)
		if len(ws) > 0 {
			burst = ws[min(int(simBurstQuantile*float64(len(ws))), len(ws)-1)]
		}
		tr.rBurst = &burst
	}
	return up, r[0]/r[1] > *tr.rBurst
}

func (tr *simTruth) observe(at time.Duration, engines []*simEngine) {
	w := int(tr.window / time.Second)
	var snap [2][]float64
	if len(tr.ring) == w+2 {
		// reuse the oldest snapshot's bins
		snap, tr.ring = tr.ring[0], tr.ring[1:]
		clear(snap[0])
		clear(snap[1])
	} else {
		snap = [2][]float64{make([]float64, simTrueBins+1), make([]float64, simTrueBins+1)}
	}
	for j := range snap {
		for _, e := range engines {
			src := e.trueTTFT
			if j == 1 {
				src = e.trueITL
			}
			for i, v := range src {
				snap[j][i] += v
			}
		}
	}
	if at == tr.shift-tr.baseline {
		tr.baseFrom = [2][]float64{slices.Clone(snap[0]), slices.Clone(snap[1])}
	}
	if at == tr.shift {
		tr.baseTo = [2][]float64{slices.Clone(snap[0]), slices.Clone(snap[1])}
	}
	tr.ring = append(tr.ring, snap)
	recent, mean := [2]float64{math.NaN(), math.NaN()}, [2]float64{math.NaN(), math.NaN()}
	if n := len(tr.ring); n > w {
		for j := range snap {
			recent[j] = simTrueQuantile(tr.ring[n-1-w][j], snap[j], signalQuantile)
			mean[j] = simTrueMean(tr.ring[n-1-w][j], snap[j])
		}
	}
	tr.recent, tr.recentMean, tr.at = append(tr.recent, recent), append(tr.recentMean, mean), append(tr.at, at)

	var q []float64
	if len(tr.qring) == w+2 {
		q, tr.qring = tr.qring[0], tr.qring[1:]
		clear(q)
	} else {
		q = make([]float64, simTrueBins+1)
	}
	for _, e := range engines {
		for i, v := range e.trueQueue {
			q[i] += v
		}
	}
	if at == tr.shift-tr.baseline {
		tr.qBaseFrom = slices.Clone(q)
	}
	if at == tr.shift {
		tr.qBaseTo = slices.Clone(q)
	}
	tr.qring = append(tr.qring, q)
	qr := [2]float64{math.NaN(), math.NaN()}
	if n := len(tr.qring); n > w {
		qr = [2]float64{simTrueQuantile(tr.qring[n-1-w], q, signalQuantile), simTrueMean(tr.qring[n-1-w], q)}
	}
	tr.qRecent = append(tr.qRecent, qr)
}

// claim records whether the poll just observed named a symptom (claimed)
// and whether it named admission (refusing), and says whether its recent
// window truly moved: its exact TTFT or ITL p90 is at least 1 + the minimum
// change times that of the time without a claim before it (the last
// baseline of seconds that no claiming poll's recent window covered, as the
// diagnosis' reference skips its incidents and is frozen during one); or,
// where the claim was made from that latency's exact mean (fromMean: its
// signal named or held the symptom), its exact mean is, against the same
// time's. Both free times also skip the seconds a poll naming admission
// covered, as the finding's own reference skips its episodes and the
// latency's the time admission is named.
func (tr *simTruth) claim(claimed, refusing bool, fromMean [2]bool) {
	w, b := int(tr.window/time.Second), int(tr.baseline/time.Second)
	if tr.free[0] == nil {
		tr.free = [2][]float64{make([]float64, simTrueBins+1), make([]float64, simTrueBins+1)}
	}
	tr.refusing = append(tr.refusing, claimed || refusing)
	if len(tr.refusing) > w+1 {
		tr.refusing = tr.refusing[1:]
	}
	// the second leaving the recent window joins the free time unless a
	// claiming poll's window covered it, or one naming admission: refusals
	// named beyond the pod's bursts are an overload, not its normal, as the
	// latency's reference skips them (refusingReference)
	n := len(tr.ring)
	if n == w+2 && !slices.Contains(tr.refusing, true) {
		var sec [2][]float64
		if len(tr.freeSecs) == b {
			sec, tr.freeSecs = tr.freeSecs[0], tr.freeSecs[1:]
			for j := range sec {
				for i, v := range sec[j] {
					tr.free[j][i] -= v
				}
			}
		} else {
			sec = [2][]float64{make([]float64, simTrueBins+1), make([]float64, simTrueBins+1)}
		}
		for j := range sec {
			for i := range sec[j] {
				sec[j][i] = tr.ring[1][j][i] - tr.ring[0][j][i]
				tr.free[j][i] += sec[j][i]
			}
		}
		tr.freeSecs = append(tr.freeSecs, sec)
	}
	// the refusals of the same second, unless a poll naming a symptom or
	// admission covered it
	if n == w+2 && !slices.Contains(tr.refusing, true) {
		if len(tr.rFreeSecs) == b {
			tr.rFree[0] -= tr.rFreeSecs[0][0]
			tr.rFree[1] -= tr.rFreeSecs[0][1]
			tr.rFreeSecs = tr.rFreeSecs[1:]
		}
		a, c := tr.rlog[len(tr.rlog)-2-w], tr.rlog[len(tr.rlog)-1-w]
		rs := [2]float64{c[0] - a[0], c[1] - a[1]}
		tr.rFree[0] += rs[0]
		tr.rFree[1] += rs[1]
		tr.rFreeSecs = append(tr.rFreeSecs, rs)
	}
	moved := true // too little free time to judge: not counted as false
	rMoved := true
	fq := [2]float64{math.NaN(), math.NaN()}
	fm := [2]float64{math.NaN(), math.NaN()}
	if r := tr.recent[len(tr.recent)-1]; len(tr.freeSecs) >= MinBaselineWindows*w && !math.IsNaN(r[0]) {
		zero := make([]float64, simTrueBins+1)
		moved = false
		m := tr.recentMean[len(tr.recentMean)-1]
		for j := range r {
			fq[j] = simTrueQuantile(zero, tr.free[j], signalQuantile)
			fm[j] = m[j] / simTrueMean(zero, tr.free[j])
			moved = moved || r[j] >= 1.25*simTrueQuantile(zero, tr.free[j], signalQuantile) ||
				fromMean[j] && m[j] >= 1.25*simTrueMean(zero, tr.free[j])
		}
	}
	if len(tr.rFreeSecs) >= MinBaselineWindows*w && len(tr.rlog) > w {
		rMoved = refusedRose(tr.refusedRecent(len(tr.rlog)-1), tr.rFree)
	}
	tr.moved = append(tr.moved, moved)
	tr.rMoved = append(tr.rMoved, rMoved)
	tr.freeQ = append(tr.freeQ, fq)
	tr.freeM = append(tr.freeM, fm)
}

// queueUp says whether poll i's requests truly waited longer than the
// baseline's before the shift: the mean of their exact queue times (from
// arrival to first admission) by the minimum change, and their p90 by the
// minimum change of the baseline's TTFT p90, so that the queue alone can
// move the TTFT p90 by it. After judge.
func (tr *simTruth) queueUp(i int) bool {
	q := tr.qRecent[i]
	return tr.at[i] > tr.shift && q[1] >= 1.25*tr.qBase[1] && q[0]-tr.qBase[0] >= 0.25*tr.base[0]
}

// simBurstQuantile is the size of the pod's own bursts the truth reads: the
// TTFT or ITL p90 that one recent window in a baseline's worth of them
// (30) reaches on the steady pod, as the diagnosis' range check reads the
// largest of the baseline's 30 sub-windows.
var simBurstQuantile = 1 - 1.0/30

// judge says, once the run is over, which polls' recent windows truly show
// a latency symptom (and which of those the buckets show at their
// conservative end, bucketsShow): (the polls after the shift) an exact TTFT or ITL p90
// at least 1 + the minimum change times the baseline's before the shift,
// and beyond the size of the pod's own bursts (the p90 that one steady
// window in simBurstQuantile reaches: a change within them cannot be told
// from chance in one window, so the poll is not judged).
func (tr *simTruth) judge() (symptom, shown []bool) {
	symptom, shown = make([]bool, len(tr.recent)), make([]bool, len(tr.recent))
	if tr.baseTo[0] == nil {
		return symptom, shown
	}
	var base, burst [2]float64
	for j := range base {
		base[j] = simTrueQuantile(tr.baseFrom[j], tr.baseTo[j], signalQuantile)
		var ws []float64
		for i, r := range tr.recent {
			if tr.at[i] <= tr.shift && !math.IsNaN(r[j]) {
				ws = append(ws, r[j])
			}
		}
		slices.Sort(ws)
		burst[j] = math.Inf(1)
		if len(ws) > 0 {
			burst[j] = ws[min(int(simBurstQuantile*float64(len(ws))), len(ws)-1)]
		}
		if simTruthTrace {
			fmt.Printf("truth %d: baseline %.4g, bursts %.4g (%.2fx)\n", j, base[j], burst[j], burst[j]/base[j])
		}
	}
	tr.base = base
	for j := range base {
		tr.baseMean[j] = simTrueMean(tr.baseFrom[j], tr.baseTo[j])
	}
	tr.qBase = [2]float64{simTrueQuantile(tr.qBaseFrom, tr.qBaseTo, signalQuantile), simTrueMean(tr.qBaseFrom, tr.qBaseTo)}
	if simTruthTrace {
		fmt.Printf("truth queue: baseline p90 %.4g, mean %.4g\n", tr.qBase[0], tr.qBase[1])
	}
	for i, r := range tr.recent {
		for j := range r {
			on := tr.at[i] > tr.shift && r[j] >= 1.25*base[j] && r[j] > burst[j]
			symptom[i] = symptom[i] || on
			shown[i] = shown[i] || on && bucketsShow(simBounds[j], r[j], base[j])
		}
	}
	return symptom, shown
}

// simBounds are the buckets of the TTFT and the inter-token latency.
var simBounds = [2][]float64{simTTFTBounds, simITLBounds}

// bucketsShow says whether a p90 of recent against one of base is a rise
// by the minimum change at the conservative end of what the buckets allow:
// the lower bound of recent's bucket over the upper bound of base's.
func bucketsShow(bounds []float64, recent, base float64) bool {
	i, k := bucketOf(bounds, recent), bucketOf(bounds, base)
	if i == 0 {
		return false
	}
	return bounds[i-1] >= 1.25*bounds[k]
}

var simTruthTrace = os.Getenv("DIAGNOSIS_TRACE") != ""

// simBurstySteadyRun is the steady pod of traffic tr at load (a share of
// capacity) for d after the windows are covered, judged as
// TestSimulatorBursty judges steady.
func simBurstySteadyRun(tr simTraffic, seed uint64, load float64, d time.Duration) simBurstyResult {
	s := simBurstySetting
	pl := simBurstyPlan(tr, "steady", seed, load)
	pl.shift = s.window + s.baseline + d
	pl.back, pl.end = pl.shift, pl.shift
	pl.restarts = []time.Duration{pl.shift / 2, pl.shift}
	run := simulatePlan(pl)
	r := simBurstyResult{simResult: run.result(), relapseNamed: -1}
	r.judgeSteady(&run, pl, run.back)
	return r
}

// simSteadyLoadGaps are the steady targets not met at a load and seed
// (percent of capacity, seed), and why: reported by a skip, not failed.
var simSteadyLoadGaps = map[[2]int]string{}

// TestSimulatorBurstySteadyLoads checks the steady targets of issue 30 (a
// cause or symptom named where no latency truly moved in at most 1 % of
// the judged polls, the named causes changing at most once per 10 minutes
// there) on the steady bursty pod at 65 % and 90 % of capacity
// (simCapacity), as issue 30 measured production, over seeds 1 to 6:
// twenty minutes each once the windows are covered, in parallel (about
// 3 s on two cores), so that a regression on a seed or a load other than
// TestSimulatorBursty's fails. The hour-long runs: DIAGNOSIS_LOAD=65 or 90
// with TestSimulatorBursty.
func TestSimulatorBurstySteadyLoads(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes the simulation ten times slower; TestSimulatorBursty keeps the steady pod covered under -race")
	}
	for _, load := range []int{65, 90} {
		for seed := 1; seed <= 6; seed++ {
			t.Run(fmt.Sprintf("%d%%/seed%d", load, seed), func(t *testing.T) {
				t.Parallel()
				checkSteadyRun(t, &simBursty, load, seed, simSteadyLoadGaps)
			})
		}
	}
}

// checkSteadyRun runs the steady pod of traffic tr at load (percent of
// capacity) for twenty minutes once the windows are covered, and fails t
// where it misses the steady targets of issue 30, unless gaps names why
// (then it skips).
func checkSteadyRun(t *testing.T, tr simTraffic, load, seed int, gaps map[[2]int]string) {
	r := simBurstySteadyRun(tr, uint64(seed), float64(load)/100, 20*time.Minute)
	var bad []string
	if r.falseShare > 0.01 || r.symptomShare > 0.01 {
		bad = append(bad, fmt.Sprintf("a cause named where no latency truly moved in %.2f %% and a symptom in %.2f %% of %d judged polls, want at most 1 %%", 100*r.falseShare, 100*r.symptomShare, r.steadyPolls))
	}
	if r.flips > 1 {
		bad = append(bad, fmt.Sprintf("the named causes changed %.1f times per 10 minutes where no latency truly moved for a recent window, want at most 1", r.flips))
	}
	if r.steadyPolls < 20*60/2 {
		bad = append(bad, fmt.Sprintf("only %d steady polls judged (ready)", r.steadyPolls))
	}
	t.Logf("at %d %%, seed %d: false causes %.2f %%, symptoms %.2f %% (named at all %.2f %%, %.2f %%) of %d; flicker %.1f (%.1f) per 10 min",
		load, seed, 100*r.falseShare, 100*r.symptomShare, 100*r.namedShare, 100*r.namedSymptom, r.steadyPolls, r.flips, r.allFlips)
	if len(bad) == 0 {
		return
	}
	if why := gaps[[2]int{load, seed}]; why != "" {
		t.Skipf("known gap: %s (%s)", strings.Join(bad, "; "), why)
	}
	t.Error(strings.Join(bad, "; "))
}

// TestLatencyYardsticks: the naming and the clearing are timed from the
// latency's own move and return, and only while it truly stays moved.
func TestLatencyYardsticks(t *testing.T) {
	s := time.Second
	// polls at 1..60 s; the shift at 10 s, the load back at 30 s
	polls := func(moved func(at time.Duration) bool) []simPoll {
		var ps []simPoll
		for at := s; at <= 60*s; at += s {
			ps = append(ps, simPoll{at: at, trueMoved: moved(at)})
		}
		return ps
	}
	// the latency moves 12 s after the shift and stays up until 45 s
	late := polls(func(at time.Duration) bool { return at >= 22*s && at < 45*s })
	if got := latencyMoved(late, 10*s, 30*s, 25*s); got != 21*s {
		t.Errorf("latency moved at %s, want 21s (the poll before the first truly moved)", got)
	}
	if got := latencyMoved(late, 10*s, 30*s, 15*s); got != 15*s {
		t.Errorf("a verdict at 15s before the latency moved: origin %s, want 15s (never after the verdict)", got)
	}
	if got := latencyBack(late, 30*s, 10*s, 50*s); got != 35*s {
		t.Errorf("latency back at %s, want 35s (the first unmoved window, 45s, less the window)", got)
	}
	// the latency returns with the load: the yardstick is the load's return
	prompt := polls(func(at time.Duration) bool { return at >= 11*s && at < 36*s })
	if got := latencyBack(prompt, 30*s, 10*s, 50*s); got != 30*s {
		t.Errorf("latency back at %s, want the load's return, 30s", got)
	}
	if got := latencyMoved(prompt, 10*s, 30*s, 14*s); got != 10*s {
		t.Errorf("latency moved at %s, want the shift, 10s", got)
	}
	// a verdict held past the latency's return is timed from it
	if got := 58*s - latencyBack(late, 30*s, 10*s, 58*s); got != 23*s {
		t.Errorf("held %s past the latency's return, want 23s", got)
	}
}

// TestJudgeQueueStandsForAdmission: where only the refusals rose beyond the
// pod's bursts, a queue scenario's own cause named on a queue that truly
// grew is right without admission (the refusals are that queue's overflow
// at its cap); admission alone stays right, and a queue that did not truly
// grow, or another scenario's queueing, still needs admission.
func TestJudgeQueueStandsForAdmission(t *testing.T) {
	overload := simRun{scenario: simOverload, named: CauseQueueing, namedOrRefused: true, truth: true,
		right: func(p *simPoll) bool { return slices.Contains(p.causes, CauseQueueing) }}
	queueing := simRun{scenario: CauseQueueing, truth: true}
	prompts := simRun{scenario: CauseLongPrompts, truth: true}
	// the latency moved within the pod's bursts, the refusals beyond them
	poll := func(queueUp bool, causes ...string) *simPoll {
		return &simPoll{causes: causes, symptoms: []string{"ttft_up"}, refusedUp: true, refusedBeyond: true, trueQueueUp: queueUp}
	}
	for _, c := range []struct {
		name string
		run  simRun
		p    *simPoll
		want bool
	}{
		{"overload, queueing on a queue truly longer", overload, poll(true, CauseQueueing), true},
		{"overload, queueing and preemptions", overload, poll(true, CausePreemptions, CauseQueueing), true},
		{"queueing scenario, queueing on a queue truly longer", queueing, poll(true, CauseQueueing), true},
		{"overload, admission alone", overload, poll(false, CauseAdmission), true},
		{"overload, queueing on a queue that did not truly grow", overload, poll(false, CauseQueueing), false},
		{"overload, nothing named", overload, poll(true), false},
		{"long_prompts, queueing on a queue truly longer", prompts, poll(true, CauseLongPrompts, CauseQueueing), false},
	} {
		if got := c.run.rightAt(c.p); got != c.want {
			t.Errorf("%s: right %v, want %v", c.name, got, c.want)
		}
	}
}
