package demo

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fos-study/vllm-normalizer/diagnosis"
)

// Scenarios: a steady load, or a steady load that after Options.ShiftAfter
// changes exactly one thing, so that the diagnosis has one cause to find.
// A shift is named by the cause it should be diagnosed as (the cause
// records of package diagnosis).
const (
	ScenarioSteady            = "steady"
	ScenarioQueueing          = diagnosis.CauseQueueing
	ScenarioLongPrompts       = diagnosis.CauseLongPrompts
	ScenarioPrefixCacheMisses = diagnosis.CausePrefixCacheMisses
	ScenarioBatchGrowth       = diagnosis.CauseBatchGrowth
	ScenarioPreemptions       = diagnosis.CausePreemptions
	ScenarioLongOutputs       = diagnosis.CauseLongOutputs
	ScenarioAdmission         = diagnosis.CauseAdmission
)

// Scenarios lists every scenario, steady first, then one per cause record
// that has one, in the records' order (TestScenarioPerCause).
var Scenarios = scenarioNames()

func scenarioNames() []string {
	out := []string{ScenarioSteady}
	for _, c := range diagnosis.Causes() {
		if c.NoDemo == "" {
			out = append(out, c.Name)
		}
	}
	return out
}

// DefaultShiftAfter is when a scenario shifts, counted from the start of
// the demo: long enough for a baseline to build up on a laptop.
const DefaultShiftAfter = 10 * time.Minute

// load is the shape of a scenario's traffic and engine. Unlike the default
// demo's wavy load, it does not drift: whatever the diagnosis finds comes
// from the shift.
type load struct {
	rate         float64 // arrivals per second (per engine, before its scale)
	promptMedian float64 // tokens
	outputMedian float64 // tokens, before max_tokens
	hit          float64 // prefix-cache hit fraction of a prompt
	maxRunning   int     // max_num_seqs
	kvCapacity   int     // tokens of KV cache
	// queuedCap is --max-num-queued-reqs (vLLM 0.29 on) per engine: the
	// API server refuses a request (HTTP 503) when waiting + running of
	// all its engines reach this times the engines. 0: no cap.
	queuedCap int
}

// steadyLoad runs at about a third of the batch limit and a fifth of the
// KV cache: nothing queues, nothing is preempted.
var steadyLoad = load{rate: 1.5, promptMedian: 350, outputMedian: 90, hit: 0.45, maxRunning: 64, kvCapacity: 65536}

// scenarioLoads says, per scenario, the load before and after the shift.
// Each shift changes one field; queueing runs, before and after, on a pod
// whose batch limit is near its steady batch, since a queue only grows
// when the batch cannot.
func scenarioLoads(name string) (before, after load) {
	before, after = steadyLoad, steadyLoad
	switch name {
	case ScenarioQueueing:
		before.maxRunning, after.maxRunning = 12, 12
		after.rate *= 2.5 // inflow above what 12 running requests can serve
	case ScenarioLongPrompts:
		after.promptMedian *= 3
	case ScenarioPrefixCacheMisses:
		after.hit = 0 // a routing change: requests land where their prefix is not cached
	case ScenarioBatchGrowth:
		after.rate *= 2.5 // more traffic, and room in the batch for it
	case ScenarioPreemptions:
		after.kvCapacity /= 30 // less KV cache (another process took GPU memory)
	case ScenarioAdmission:
		// The inflow rises 2.5 times onto a pod whose --max-num-queued-reqs
		// (6 an engine, about the steady batch; the batch holds 12) has
		// refused nothing before: now nothing queues, the batch stays at
		// the cap and its latency where it was, and most of the surplus is
		// refused. A cap that already refuses part of each burst before
		// the shift makes a baseline whose refusals come in bursts, which
		// the diagnosis' independent-count tests read as a change (issue
		// 30's overdispersion): the scenario keeps its steady phase clean.
		before.maxRunning, after.maxRunning = 12, 12
		after.queuedCap = 6
		after.rate *= 2.5
	case ScenarioLongOutputs:
		// On a pod with room in the batch for three times the outputs: at
		// the steady limit the batch fills and requests queue, which is
		// queueing too.
		before.maxRunning, after.maxRunning = 160, 160
		after.outputMedian *= 3
	}
	return before, after
}

// CheckScenario returns an error naming the valid scenarios if name is
// not one of them.
func CheckScenario(name string) error {
	if slices.Contains(Scenarios, name) {
		return nil
	}
	return fmt.Errorf("unknown demo scenario %q; valid: %s", name, strings.Join(Scenarios, ", "))
}
