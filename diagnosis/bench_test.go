package diagnosis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkObserve measures the diagnosis's own CPU per scrape: one
// Observe (windows, tests, rules, incident, report and gauges; charts not
// drawn) of the simulator's two-engine pod with the default windows, once
// 32 minutes of scrapes every second have filled both rings. In queueing
// the shift falls a minute before the timed scrapes, so an incident is
// open. The simulation runs outside the timer.
//
//	go test -run '^$' -bench Observe -cpu 1 -count 6 ./diagnosis
func BenchmarkObserve(b *testing.B) {
	for _, sc := range []string{"steady", CauseQueueing} {
		b.Run(sc, func(b *testing.B) {
			d, err := New(Options{Window: DefaultWindow, Baseline: DefaultBaseline, MinChange: DefaultMinChange, Interval: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			before, during := simScenario(sc)
			pod := &simPod{engines: []*simEngine{newSimEngine(1, 0), newSimEngine(1, 1)}}
			shift := 31 * time.Minute
			at := time.Duration(0)
			observe := func() []Observation {
				at += time.Second
				l := &before
				if sc != "steady" && at > shift {
					l = &during
				}
				for _, e := range pod.engines {
					e.run(at.Seconds(), l)
				}
				return []Observation{pod.observe()}
			}
			for range 32 * 60 {
				d.Observe(t0.Add(at), observe())
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				obs := observe()
				b.StartTimer()
				d.Observe(t0.Add(at), obs)
			}
		})
	}
}

// BenchmarkBaselineStats measures what the dispersion estimate adds to an
// evaluation: the baseline's stats alone (between) against with each
// signal's dispersion factor over its 30 sub-windows (baselineStats), on
// the simulator's steady pod with the default windows after 32 minutes.
//
//	go test -run '^$' -bench BaselineStats -cpu 1 -count 10 ./diagnosis
func BenchmarkBaselineStats(b *testing.B) {
	d, err := New(Options{Window: DefaultWindow, Baseline: DefaultBaseline, MinChange: DefaultMinChange, Interval: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	before, _ := simScenario("steady")
	pod := &simPod{engines: []*simEngine{newSimEngine(1, 0), newSimEngine(1, 1)}}
	for at := time.Second; at <= 32*time.Minute; at += time.Second {
		for _, e := range pod.engines {
			e.run(at.Seconds(), &before)
		}
		d.Observe(t0.Add(at), []Observation{pod.observe()})
	}
	tr := d.tracks["sim"]
	from, a, _, ok := d.windows(tr, tr.lastT)
	if !ok {
		b.Fatal("no baseline")
	}
	b.Run("between", func(b *testing.B) {
		for range b.N {
			between(tr, from, a)
		}
	})
	b.Run("with-dispersion", func(b *testing.B) {
		for range b.N {
			if s := baselineStats(tr, from, a, int64(DefaultWindow), true); s.phiWindows < MinDispersionWindows {
				b.Fatalf("%d sub-windows", s.phiWindows)
			}
		}
	})
}

// BenchmarkSentPhi measures the rank finding's spread of what the ranks
// were sent (sentPhi) over the 30 sub-windows of the default baseline,
// every rank counted in each, as rankSpread leaves them (in sub-window
// order) at every evaluation of a data-parallel pod. cpu-ns/op is the
// process's CPU time, steadier than ns/op on a shared machine.
//
//	go test -run '^$' -bench SentPhi -cpu 1 -count 8 ./diagnosis
func BenchmarkSentPhi(b *testing.B) {
	for _, ranks := range []int{2, 4, 16, 64} {
		b.Run(fmt.Sprintf("ranks=%d", ranks), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, uint64(ranks)))
			ts := topoState{rankScratch: new(rankScratch)}
			for range 30 {
				for r := range ranks {
					sent := 100 + float64(rng.IntN(40))
					ts.sentD = append(ts.sentD, [3]float64{float64(r), sent / (120 * float64(ranks)), 120 * float64(ranks)})
				}
			}
			inOrder := slices.Clone(ts.sentD)
			b.ReportAllocs()
			cpu0 := cpuNow(b)
			for b.Loop() {
				copy(ts.sentD, inOrder)
				if phi := ts.sentPhi(30); !(phi >= 1) {
					b.Fatalf("sentPhi %v", phi)
				}
			}
			b.ReportMetric(float64(cpuNow(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuNow is the CPU time the whole process has used so far.
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
