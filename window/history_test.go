package window

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

var t0 = time.Unix(1_800_000_000, 0)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// unix is at(sec) in Unix seconds, as a start time is printed.
func unix(sec float64) float64 { return float64(at(sec).UnixNano()) / 1e9 }

var testInputs = NewInputs(map[string]Input{
	"c_total": {Key: 1, Kind: Counter},
	"g":       {Key: 2, Kind: Gauge},
})

// obs is one page: counter c_total per engine (absent when NaN), its
// _created times (none when nil), and process_start_time_seconds samples.
type obs struct {
	c         []float64
	created   []float64
	procStart []float64
}

func engineLabels(name string, e int) labels.Labels {
	return labels.FromStrings(model.MetricNameLabel, name, "engine", strconv.Itoa(e))
}

func (o obs) page() []exposition.Family {
	var fams []exposition.Family
	c := exposition.Family{Name: "c_total", Type: model.MetricTypeCounter}
	for e, v := range o.c {
		if !math.IsNaN(v) {
			c.Samples = append(c.Samples, exposition.Sample{Labels: engineLabels("c_total", e), Value: v})
		}
	}
	fams = append(fams, c)
	if o.created != nil {
		cr := exposition.Family{Name: "c_created", Type: model.MetricTypeGauge}
		for e, v := range o.created {
			cr.Samples = append(cr.Samples, exposition.Sample{Labels: engineLabels("c_created", e), Value: v})
		}
		fams = append(fams, cr)
	}
	if o.procStart != nil {
		ps := exposition.Family{Name: "process_start_time_seconds", Type: model.MetricTypeGauge}
		for i, v := range o.procStart {
			ps.Samples = append(ps.Samples, exposition.Sample{Labels: labels.FromStrings(model.MetricNameLabel, "process_start_time_seconds", "pid", strconv.Itoa(i)), Value: v})
		}
		fams = append(fams, ps)
	}
	return fams
}

// increases returns each engine's increase and seconds over window w as
// of now; absent engines are left out.
func increases(h *History, now time.Time, w time.Duration) map[string][2]float64 {
	out := map[string][2]float64{}
	h.Read(now, func(r *Reader) {
		rg, ok := r.Range(w)
		if !ok {
			return
		}
		for _, s := range r.Series() {
			if s.Kind() != Counter {
				continue
			}
			if inc, secs, _, ok := r.Increase(s, rg); ok {
				out[s.Labels().Get("engine")] = [2]float64{inc, secs}
			}
		}
	})
	return out
}

// TestCounterResets: a counter that goes down restarted from zero and
// counted its new value since (as PromQL's rate() reads it); an increase is
// never negative.
func TestCounterResets(t *testing.T) {
	h := New([]time.Duration{time.Minute}, time.Second, testInputs)
	for i, v := range []float64{10, 20, 5, 15, 0, 4} {
		h.Observe(at(float64(i)), obs{c: []float64{v}}.page())
	}
	// 10 + 5 (restart to 5) + 10 + 0 (restart to 0) + 4.
	if got := increases(h, at(5), time.Minute)["0"]; got != [2]float64{29, 5} {
		t.Errorf("increase, seconds = %v, want 29 over 5 s", got)
	}
	if n := h.LastObservation().Restarts; n != 0 {
		t.Errorf("%d restarts counted from values alone, want 0 (only start times that say so count)", n)
	}
}

// TestStartTimes walks a counter growing by exactly 2 a second from 1000
// through every way its _created time or the process start time can move,
// and checks the increase of the last step, the restarts and the jitter
// counted there. A restart is a start time after the previous scrape (at
// 9 s) and not after this one (10 s) beyond 60 s of clock skew; for the
// process start time also more than 0.5 s after the one before.
func TestStartTimes(t *testing.T) {
	born := unix(-3600)
	for _, c := range []struct {
		name string
		// the start times at 0..9 s and at 10 s, and the value at 10 s
		created, created10 []float64
		start, start10     []float64
		v10                float64
		// the last step's increase, restarts and jitter
		inc            float64
		restarts, cJit int
		psJit          int
	}{
		{name: "unchanged _created", created: []float64{born}, created10: []float64{born}, v10: 1020, inc: 2},
		{name: "_created 1 ms later", created: []float64{born}, created10: []float64{born + 0.001}, v10: 1020, inc: 2, cJit: 1},
		{name: "_created 1 ms earlier", created: []float64{born}, created10: []float64{born - 0.001}, v10: 1020, inc: 2, cJit: 1},
		{name: "_created later, before the previous scrape", created: []float64{born}, created10: []float64{unix(8.5)}, v10: 1020, inc: 2, cJit: 1},
		{name: "_created between the scrapes, higher value", created: []float64{born}, created10: []float64{unix(9.5)}, v10: 1300, inc: 1300, restarts: 1},
		{name: "_created between the scrapes, lower value", created: []float64{born}, created10: []float64{unix(9.5)}, v10: 1, inc: 1},
		{name: "_created within the clock skew ahead", created: []float64{born}, created10: []float64{unix(10 + 59)}, v10: 1300, inc: 1300, restarts: 1},
		{name: "_created beyond the clock skew ahead", created: []float64{born}, created10: []float64{unix(10 + 61)}, v10: 1020, inc: 2, cJit: 1},
		{name: "process start 0.6 s later", start: []float64{born}, start10: []float64{born + 0.6}, v10: 1020, inc: 2, psJit: 1},
		{name: "process start earlier", start: []float64{born}, start10: []float64{born - 5}, v10: 1020, inc: 2, psJit: 1},
		{name: "process start between the scrapes", start: []float64{born}, start10: []float64{unix(9.5)}, v10: 1300, inc: 1300, restarts: 1},
		{name: "process start between the scrapes, under 0.5 s later", start: []float64{unix(8.8)}, start10: []float64{unix(9.2)}, v10: 1020, inc: 2, psJit: 1},
		{name: "two process start times", start: []float64{born, born}, start10: []float64{unix(9.5), unix(9.5)}, v10: 1300, inc: 1300 - 1018}, // not read: one process says nothing of the others
	} {
		t.Run(c.name, func(t *testing.T) {
			h := New([]time.Duration{time.Minute}, time.Second, testInputs)
			for sec := range 10 {
				h.Observe(at(float64(sec)), obs{c: []float64{1000 + 2*float64(sec)}, created: c.created, procStart: c.start}.page())
				if st := h.LastObservation(); st.Restarts+st.CreatedJitter+st.ProcessStartJitter != 0 {
					t.Fatalf("at %d s, unchanged start times: %+v", sec, st)
				}
			}
			before := increases(h, at(9), time.Minute)["0"][0]
			h.Observe(at(10), obs{c: []float64{c.v10}, created: c.created10, procStart: c.start10}.page())
			if got := increases(h, at(10), time.Minute)["0"][0] - before; got != c.inc {
				t.Errorf("last step increased %v, want %v", got, c.inc)
			}
			st := h.LastObservation()
			if st.Restarts != c.restarts || st.CreatedJitter != c.cJit || st.ProcessStartJitter != c.psJit {
				t.Errorf("restarts %d, _created jitter %d, process start jitter %d; want %d, %d, %d",
					st.Restarts, st.CreatedJitter, st.ProcessStartJitter, c.restarts, c.cJit, c.psJit)
			}
		})
	}
}

// TestJitterEveryScrape: _created jittering at every scrape and the process
// start time stepping forward every other one leave the rate at exactly 2
// for ten minutes; each change is counted once (the histogram children's
// bucket series share one _created: here one counter per engine, each with
// its own).
func TestJitterEveryScrape(t *testing.T) {
	born := unix(-3600)
	h := New([]time.Duration{time.Minute, 5 * time.Minute}, time.Second, testInputs)
	var cJit, psJit int
	for sec := 0; sec <= 600; sec++ {
		v := 1000 + 2*float64(sec)
		j := 0.001 * float64(sec%3-1)
		h.Observe(at(float64(sec)), obs{
			c:         []float64{v, v},
			created:   []float64{born + j, born - j},
			procStart: []float64{born + 0.6*float64(sec%2)},
		}.page())
		st := h.LastObservation()
		if st.Restarts != 0 {
			t.Fatalf("at %d s: %d restarts", sec, st.Restarts)
		}
		cJit += st.CreatedJitter
		psJit += st.ProcessStartJitter
		if sec < 2 {
			continue
		}
		for _, w := range []time.Duration{time.Minute, 5 * time.Minute} {
			for e, got := range increases(h, at(float64(sec)), w) {
				if got[0]/got[1] != 2 {
					t.Fatalf("at %d s engine %s: %v over %v s, a rate of %v; want exactly 2", sec, e, got[0], got[1], got[0]/got[1])
				}
			}
		}
	}
	// j changes at every scrape (-1, 0, 1 ms in turn), for both engines;
	// the process start time at every scrape after the first.
	if cJit != 2*600 || psJit != 600 {
		t.Errorf("jitter counted: _created %d, process start %d; want %d and %d", cJit, psJit, 2*600, 600)
	}
}

// TestSeriesCap: beyond MaxSeries new series are refused, counted, and
// listed for Reader.Unwindowed (all of them once there are too many to
// list); series already kept stay; a refused series is kept once room is
// made by a forgotten one. Labels beyond 512 bytes a series on average are
// refused too.
func TestSeriesCap(t *testing.T) {
	h := New([]time.Duration{time.Minute}, time.Second, testInputs)
	h.SetMaxSeries(3)
	vals := []float64{1, 2, 3, 4, 5}
	h.Observe(at(0), obs{c: vals}.page())
	if n, st := h.StoredSeries(), h.LastObservation(); n != 3 || st.Unwindowed != 2 {
		t.Fatalf("kept %d series, %d unwindowed; want 3 and 2", n, st.Unwindowed)
	}
	var listed []string
	h.Read(at(0), func(r *Reader) {
		lsets, all := r.Unwindowed()
		if all {
			t.Errorf("all unwindowed, want a list")
		}
		for _, l := range lsets {
			listed = append(listed, l.Get("engine"))
		}
	})
	if strings.Join(listed, ",") != "3,4" {
		t.Errorf("unwindowed engines %v, want 3,4", listed)
	}
	// Engine 0 goes away for longer than the window: forgotten, it makes
	// room for engine 3.
	nan := math.NaN()
	for sec := 1; sec <= 61; sec++ {
		h.Observe(at(float64(sec)), obs{c: []float64{nan, 2, 3, 4, 5}}.page())
	}
	h.Observe(at(62), obs{c: []float64{nan, 2, 3, 4, 5}}.page())
	kept := map[string]bool{}
	h.Read(at(62), func(r *Reader) {
		for _, s := range r.Series() {
			kept[s.Labels().Get("engine")] = true
		}
	})
	if len(kept) != 3 || kept["0"] || !kept["3"] {
		t.Errorf("kept engines %v, want 1, 2, 3", kept)
	}
	if st := h.LastObservation(); st.Unwindowed != 1 {
		t.Errorf("%d unwindowed, want 1 (engine 4)", st.Unwindowed)
	}

	// More refused series than are listed: all.
	h2 := New([]time.Duration{time.Minute}, time.Second, testInputs)
	h2.SetMaxSeries(1)
	h2.Observe(at(0), obs{c: make([]float64, maxUnwindowed+2)}.page())
	h2.Read(at(0), func(r *Reader) {
		if lsets, all := r.Unwindowed(); !all || lsets != nil {
			t.Errorf("%d refused series listed (all %v), want all", len(lsets), all)
		}
	})

	// Two series of 600-byte labels exceed 2 x 512 bytes: the second is refused.
	h3 := New([]time.Duration{time.Minute}, time.Second, testInputs)
	h3.SetMaxSeries(2)
	big := exposition.Family{Name: "c_total", Type: model.MetricTypeCounter}
	for e := range 2 {
		big.Samples = append(big.Samples, exposition.Sample{Labels: labels.FromStrings(model.MetricNameLabel, "c_total", "engine", strconv.Itoa(e), "pad", strings.Repeat("x", 600)), Value: 1})
	}
	h3.Observe(at(0), []exposition.Family{big})
	if n, st := h3.StoredSeries(), h3.LastObservation(); n != 1 || st.Unwindowed != 1 {
		t.Errorf("600-byte labels: kept %d, unwindowed %d; want 1 and 1", n, st.Unwindowed)
	}
}

// TestGaps: a series missing from some pages goes on from its last value
// when it is back (its increase is counted across the gap, as Prometheus's
// rate reads the points it has); one missing for longer than every window
// is forgotten and comes back new, its old value no part of any increase.
func TestGaps(t *testing.T) {
	nan := math.NaN()
	h := New([]time.Duration{30 * time.Second}, time.Second, testInputs)
	for sec := 0; sec <= 10; sec++ {
		v := 2 * float64(sec)
		if sec >= 4 && sec <= 7 {
			v = nan // missing for four pages
		}
		h.Observe(at(float64(sec)), obs{c: []float64{v, float64(sec)}}.page())
	}
	if got := increases(h, at(10), 30*time.Second)["0"]; got != [2]float64{20, 10} {
		t.Errorf("across the gap: %v, want 20 over 10 s", got)
	}
	// Engine 0 gone for 40 s (beyond the 30 s window), then back at 7.
	for sec := 11; sec <= 50; sec++ {
		h.Observe(at(float64(sec)), obs{c: []float64{nan, float64(sec)}}.page())
	}
	if n := h.StoredSeries(); n != 1 {
		t.Errorf("%d series kept after engine 0 left every window, want 1", n)
	}
	h.Observe(at(51), obs{c: []float64{7, 51}}.page())
	h.Observe(at(52), obs{c: []float64{9, 52}}.page())
	if got := increases(h, at(52), 30*time.Second)["0"]; got != [2]float64{2, 1} {
		t.Errorf("back as new: %v, want 2 over 1 s (7 is its first value)", got)
	}
	// The window (22 s, 52 s] holds the points from 23 s on.
	if got := increases(h, at(52), 30*time.Second)["1"]; got != [2]float64{29, 29} {
		t.Errorf("engine 1: %v, want 29 over 29 s", got)
	}
}

// TestObserveReadConcurrent: one goroutine observes a counter per engine
// growing by exactly 20 a second (2 per 100 ms step) and a gauge, while
// four read: every read sees each engine's rate at exactly 20 or no rate
// yet, the gauge at a value some observation wrote, and never more series
// than the pages hold. Run with -race.
func TestObserveReadConcurrent(t *testing.T) {
	const engines, steps = 8, 400
	h := New([]time.Duration{10 * time.Second, time.Minute}, 100*time.Millisecond, testInputs)
	// Whole nanoseconds: at(i/10) rounds some steps a nanosecond short,
	// which moves a rate over 10 s by up to 2e-9.
	step := func(i int) time.Time { return t0.Add(time.Duration(i) * 100 * time.Millisecond) }
	pages := make([][]exposition.Family, steps)
	for i := range pages {
		vals := make([]float64, engines)
		for e := range vals {
			vals[e] = 2 * float64(i)
		}
		p := obs{c: vals}.page()
		p = append(p, exposition.Family{Name: "g", Type: model.MetricTypeGauge, Samples: []exposition.Sample{{Labels: labels.FromStrings(model.MetricNameLabel, "g"), Value: float64(i % 7)}}})
		pages[i] = p
	}
	var (
		wg   sync.WaitGroup
		done = make(chan struct{})
		mu   sync.Mutex
		errs []string
		read [4]int
	)
	fail := func(s string) {
		mu.Lock()
		if len(errs) < 5 {
			errs = append(errs, s)
		}
		mu.Unlock()
	}
	wg.Go(func() {
		defer close(done)
		for i := range steps {
			h.Observe(step(i), pages[i])
		}
	})
	for r := range read {
		wg.Go(func() {
			// Read at least once, however soon the observer is done
			// (Read calls nothing before the first observation).
			for {
				select {
				case <-done:
					if read[r] > 0 {
						return
					}
				default:
				}
				now := step(steps)
				h.Read(now, func(rd *Reader) {
					read[r]++
					if n := len(rd.Series()); n > engines+1 {
						fail("more series than the pages hold: " + strconv.Itoa(n))
					}
					for _, w := range rd.Windows() {
						rg, ok := rd.Range(w)
						if !ok {
							continue
						}
						for _, s := range rd.Series() {
							if s.Kind() == Gauge {
								rd.Values(s, rg, func(v float64) {
									if v != math.Trunc(v) || v < 0 || v > 6 {
										fail("gauge value never written: " + strconv.FormatFloat(v, 'g', -1, 64))
									}
								})
								continue
							}
							inc, secs, _, ok := rd.Increase(s, rg)
							if ok && math.Abs(inc/secs-20) > 1e-9 {
								fail(s.Labels().String() + " rate " + strconv.FormatFloat(inc/secs, 'g', -1, 64))
							}
						}
					}
				})
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	if n := h.StoredSeries(); n != engines+1 {
		t.Errorf("%d series kept, want %d", n, engines+1)
	}
	got := increases(h, step(steps-1), 10*time.Second)
	if len(got) != engines {
		t.Fatalf("rates for %d engines, want %d", len(got), engines)
	}
	for e, g := range got {
		if math.Abs(g[0]/g[1]-20) > 1e-9 {
			t.Errorf("engine %s: %v over %v s, want a rate of 20", e, g[0], g[1])
		}
	}
	for r, n := range read {
		if n == 0 {
			t.Errorf("reader %d never read", r)
		}
	}
}

// TestTypeChangeIsALayoutChange: a family printed as a gauge, then as a
// counter under the same sample name (TensorRT-LLM's spec-decode families
// after #12545), is read with no increase across the change: the gauge's
// last value is not a counter value, and reading it as one would count the
// counter's whole total (or a reset) in the window. The change is counted.
func TestTypeChangeIsALayoutChange(t *testing.T) {
	page := func(typ model.MetricType, v float64) []exposition.Family {
		return []exposition.Family{{Name: "c_total", Type: typ, Samples: []exposition.Sample{{Labels: engineLabels("c_total", 0), Value: v}}}}
	}
	h := New([]time.Duration{time.Minute}, time.Second, testInputs)
	h.Observe(at(0), page(model.MetricTypeGauge, 7))
	h.Observe(at(1), page(model.MetricTypeGauge, 3))
	if n := h.LastObservation().LayoutChanges; n != 0 {
		t.Fatalf("%d layout changes while the type stays, want 0", n)
	}
	h.Observe(at(2), page(model.MetricTypeCounter, 100))
	if n := h.LastObservation().LayoutChanges; n != 1 {
		t.Errorf("%d layout changes at the change of type, want 1", n)
	}
	if got, ok := increases(h, at(2), time.Minute)["0"]; ok {
		t.Errorf("an increase %v reads across the change of type; want none until the counter has two points", got)
	}
	h.Observe(at(3), page(model.MetricTypeCounter, 104))
	if got := increases(h, at(3), time.Minute)["0"]; got != [2]float64{4, 1} {
		t.Errorf("after the change: increase, seconds = %v, want 4 over 1 s", got)
	}
	if n := h.LastObservation().LayoutChanges; n != 0 {
		t.Errorf("%d layout changes once the new type stays, want 0", n)
	}
}
