package diagnosis

import (
	"testing"
)

// TestSimulatorKVGauge checks the simulated pod's KV-cache gauge against
// what a real vLLM prints: each engine's used share of its own cache. A
// cache too small for the load is full while requests wait (the cut
// preempts, the overload's pod stops admitting), so the gauge must read
// near 1 then (the old simulator divided by the steady cache and read 0.03
// in the cut, 0.1 in the overload's pod), and the steady pod's cache is
// mostly free.
func TestSimulatorKVGauge(t *testing.T) {
	_, cut := simScenario(CausePreemptions)
	overload := simOverloadPod
	overload.rate *= 2 // the overload scenario's inflow
	for _, c := range []struct {
		name   string
		load   simLoad
		lo, hi float64 // the mean gauge over the seconds with requests waiting
	}{
		{"kv cut", cut, 0.85, 1},
		{"overload pod at 2x", overload, 0.85, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := &simPod{engines: []*simEngine{newSimEngine(1, 0), newSimEngine(1, 1)}}
			sum, n, preempted := 0.0, 0, 0.0
			for s := 1; s <= 120; s++ {
				for _, e := range pod.engines {
					e.run(float64(s), &c.load)
				}
				o := pod.observe()
				if o.KVUsage < 0 || o.KVUsage > 1 {
					t.Fatalf("second %d: the gauge reads %.3f, outside 0..1 (vLLM's kv_cache_usage_perc): divide each engine's used tokens by its own capacity", s, o.KVUsage)
				}
				if s > 30 && o.Waiting > 0 {
					sum += o.KVUsage
					n++
				}
				preempted = o.Preemptions
			}
			if n < 80 || preempted == 0 {
				t.Fatalf("%d of 90 seconds had requests waiting, %.0f preemptions in all: the load no longer fills its cache", n, preempted)
			}
			if mean := sum / float64(n); mean < c.lo || mean > c.hi {
				t.Errorf("the KV gauge averaged %.3f over the %d seconds with requests waiting, want %.2f-%.2f: a cache that holds them back is full, and vLLM reads it against the engine's own capacity", mean, n, c.lo, c.hi)
			}
		})
	}
	t.Run("steady", func(t *testing.T) {
		pod := &simPod{engines: []*simEngine{newSimEngine(1, 0), newSimEngine(1, 1)}}
		l := simSteady
		sum, n := 0.0, 0
		for s := 1; s <= 120; s++ {
			for _, e := range pod.engines {
				e.run(float64(s), &l)
			}
			if s > 30 {
				sum += pod.observe().KVUsage
				n++
			}
		}
		// 20 requests a second of about 300 tokens each, a few seconds
		// in the batch: some ten thousand of 400 000 tokens an engine
		if mean := sum / float64(n); mean <= 0 || mean > 0.2 {
			t.Errorf("the steady pod's KV gauge averaged %.3f, want above 0 and at most 0.2: its cache is mostly free", mean)
		}
	})
}
