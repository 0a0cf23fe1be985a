package diagnosis

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// busyModel is a vLLM model with every input the diagnosis reads and
// vLLM's buckets (the simulator's), its requests random every scrape: the
// most a model's points can hold.
type busyModel struct {
	rng *rand.Rand
	o   Observation
}

func newBusyModel(name string, seed uint64) *busyModel {
	m := &busyModel{rng: rand.New(rand.NewPCG(seed, 1))}
	m.o = Observation{Model: name, Server: "vllm", Aborted: 0, KVTransferFailures: math.NaN(), Rejections: math.NaN()}
	for _, h := range []struct {
		h      *Histogram
		bounds []float64
	}{{&m.o.TTFT, simTTFTBounds}, {&m.o.ITL, simITLBounds}, {&m.o.PromptLen, simLenBounds}, {&m.o.GenLen, simLenBounds}} {
		*h.h = Histogram{Bounds: h.bounds, Counts: make([]float64, len(h.bounds))}
	}
	return m
}

// next is the model's observation after another scrape interval.
func (m *busyModel) next() Observation {
	o, r := &m.o, m.rng
	requests := float64(r.IntN(20))
	prompt, output := float64(100+r.IntN(2000)), float64(10+r.IntN(500))
	o.Running, o.Waiting, o.KVUsage = float64(r.IntN(64)), float64(r.IntN(8)), r.Float64()
	o.Finished += requests
	o.Aborted += float64(r.IntN(2))
	o.Preemptions += float64(r.IntN(2))
	o.PromptLenSum += requests * prompt
	o.PromptLenCount += requests
	o.GenLenSum += requests * output
	o.GenLenCount += requests
	o.PromptTokens += requests * prompt
	o.GenerationTokens += requests * output
	o.PrefixQueries += requests * prompt
	o.PrefixHits += math.Floor(requests * prompt * r.Float64())
	for range int(requests) {
		observeInto(&o.TTFT, r.ExpFloat64()*0.2, 1)
		observeInto(&o.ITL, r.ExpFloat64()*0.03, output)
		observeInto(&o.PromptLen, prompt, 1)
		observeInto(&o.GenLen, output, 1)
	}
	out := *o
	for _, h := range []*Histogram{&out.TTFT, &out.ITL, &out.PromptLen, &out.GenLen} {
		h.Counts = append([]float64(nil), h.Counts...)
	}
	return out
}

// BenchmarkModelHistoryMemory measures what the diagnosis keeps per model
// once 32 minutes of scrapes every 2 s at the default windows have filled
// its rings: the heap retained, after a forced GC, less the same without
// the Diagnoser, per model. busy models have every input and histogram of
// vLLM and random traffic every scrape; idle ones print the same values
// every scrape; charts: with the report's charts drawn (a reader of the
// diagnosis page or API). Run it once:
// go test -run '^$' -bench ModelHistoryMemory -benchtime 1x ./diagnosis
func BenchmarkModelHistoryMemory(b *testing.B) {
	const models = 100
	for _, busy := range []bool{true, false} {
		for _, charts := range []bool{false, true} {
			b.Run(fmt.Sprintf("busy=%v/charts=%v", busy, charts), func(b *testing.B) {
				for range b.N {
					d, _ := fullRings(b, models, busy)
					if charts {
						d.Report()
					}
					var held, released runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&held)
					runtime.KeepAlive(d)
					d = nil
					runtime.GC()
					runtime.ReadMemStats(&released)
					b.ReportMetric((float64(held.HeapAlloc)-float64(released.HeapAlloc))/models, "retained-B/model")
				}
			})
		}
	}
}

// BenchmarkObserveFullRings measures one Observe of 100 busy models once
// 32 minutes of scrapes every 2 s have filled their rings: what reading
// the encoded points costs the diagnosis every scrape.
func BenchmarkObserveFullRings(b *testing.B) {
	d, observe := fullRings(b, 100, true)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		at, obs := observe()
		b.StartTimer()
		d.Observe(at, obs)
	}
}

// fullRings returns a Diagnoser at the default windows that has observed
// n models every 2 s for 32 minutes (busy: new traffic every scrape, else
// the same values), and observe, which returns the next scrape's time and
// observations.
func fullRings(b *testing.B, n int, busy bool) (*Diagnoser, func() (time.Time, []Observation)) {
	d, err := New(Options{Window: DefaultWindow, Baseline: DefaultBaseline, MinChange: DefaultMinChange, Interval: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ms := make([]*busyModel, n)
	obs := make([]Observation, n)
	for i := range ms {
		ms[i] = newBusyModel(fmt.Sprintf("org/m-%05d", i), uint64(i))
		obs[i] = ms[i].next()
	}
	s := 0
	observe := func() (time.Time, []Observation) {
		if busy {
			for i := range ms {
				obs[i] = ms[i].next()
			}
		}
		s++
		return t0.Add(time.Duration(s) * 2 * time.Second), obs
	}
	for range 32 * 30 {
		d.Observe(observe())
	}
	return d, observe
}
