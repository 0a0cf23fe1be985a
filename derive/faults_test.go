package derive

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/window"
)

// counterText is a page with one vllm:prompt_tokens_total series per
// engine value in vals (engine i has vals[i]), each with its _created time
// when created is not nil, and process_start_time_seconds when procStart
// is not 0.
func counterText(vals []float64, created []float64, procStart float64) string {
	var b strings.Builder
	b.WriteString("# TYPE vllm:prompt_tokens_total counter\n")
	for i, v := range vals {
		fmt.Fprintf(&b, "vllm:prompt_tokens_total{engine=\"%d\",model_name=\"m\"} %s\n", i, strconv.FormatFloat(v, 'g', -1, 64))
	}
	if created != nil {
		b.WriteString("# TYPE vllm:prompt_tokens_created gauge\n")
		for i, c := range created {
			fmt.Fprintf(&b, "vllm:prompt_tokens_created{engine=\"%d\",model_name=\"m\"} %s\n", i, strconv.FormatFloat(c, 'g', -1, 64))
		}
	}
	if procStart != 0 {
		fmt.Fprintf(&b, "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %s\n", strconv.FormatFloat(procStart, 'g', -1, 64))
	}
	return b.String()
}

func promptRate(t *testing.T, h testHistory, sec float64, w string, engine string) (float64, bool) {
	t.Helper()
	return lookupValue(h.Derive(at(sec), byModelEngine), DerivedPromptTokensPerSecond, "engine", engine, "model_name", "m", "window", w)
}

// TestGlitchLeavesNoTrace: one absurd value (1e17 … 1e308, or +Inf) on a
// counter growing by 7 per second is a reset each way while it is in the
// window; once it has left the window the rate is exactly 7 again, as
// Prometheus's is, however large the glitch was.
func TestGlitchLeavesNoTrace(t *testing.T) {
	for _, glitch := range []float64{1e17, 1e200, 1e308, math.Inf(1)} {
		t.Run(strconv.FormatFloat(glitch, 'g', -1, 64), func(t *testing.T) {
			h := NewHistory([]time.Duration{time.Minute, 5 * time.Minute}, time.Second)
			v := 1000.0
			for sec := 0; sec <= 700; sec++ {
				x := v
				if sec == 100 || sec == 101 {
					x = glitch // twice: two absurd values must not overflow either
				}
				h.Observe(at(float64(sec)), parsePage(t, counterText([]float64{x}, nil, 0)))
				// Truth: the counter's own growth, 7/s, except around the
				// glitch: a reset down from it counts the next value whole.
				if sec > 101+300 { // the glitch has left the 5m window
					for _, w := range []string{"1m", "5m"} {
						got, ok := promptRate(t, h, float64(sec), w, "0")
						if !ok || got != 7 {
							t.Fatalf("at %d s the %s rate is %v (present %v), want exactly 7", sec, w, got, ok)
						}
					}
				}
				if sec > 101+60 && sec <= 101+300 { // only in the 5m window
					if got, ok := promptRate(t, h, float64(sec), "1m", "0"); !ok || got != 7 {
						t.Fatalf("at %d s the 1m rate is %v (present %v), want exactly 7 (the glitch is out of that window)", sec, got, ok)
					}
				}
				v += 7
			}
		})
	}
}

// TestRestartSeenByCreated: vLLM restarts between two scrapes and its
// counter comes back higher than before (1000 -> 1300). Prometheus, blind
// to it, counts +300; the _created time, 5 s after the previous scrape,
// says the counter restarted, so the truth is +1300 (it counted from zero).
func TestRestartSeenByCreated(t *testing.T) {
	before, between := float64(at(-3600).Unix()), float64(at(5).Unix())
	for _, c := range []struct {
		name               string
		created1, created2 []float64
		start1, start2     float64
	}{
		{"_created", []float64{before}, []float64{between}, 0, 0},
		{"process_start_time_seconds", nil, nil, before, between},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := NewHistory([]time.Duration{time.Minute}, time.Second)
			h.Observe(at(0), parsePage(t, counterText([]float64{1000}, c.created1, c.start1)))
			h.Observe(at(10), parsePage(t, counterText([]float64{1300}, c.created2, c.start2)))
			if got, ok := promptRate(t, h, 10, "1m", "0"); !ok || got != 130 {
				t.Errorf("rate %v (present %v), want 1300/10 s = 130", got, ok)
			}
			if n := h.LastObservation().Restarts; n != 1 {
				t.Errorf("%d restarts counted, want 1", n)
			}
			// Without a restart, nothing changes: +50.
			h.Observe(at(20), parsePage(t, counterText([]float64{1350}, c.created2, c.start2)))
			if got, ok := promptRate(t, h, 20, "1m", "0"); !ok || got != (1300+50)/20.0 {
				t.Errorf("rate %v (present %v), want 1350/20 s", got, ok)
			}
		})
	}
}

// ttftText is a TTFT histogram child whose buckets are bounds[i] with
// cumulative counts counts[i] (the last bound is +Inf).
func ttftText(bounds []string, counts []float64) string {
	var b strings.Builder
	b.WriteString("# TYPE vllm:time_to_first_token_seconds histogram\n")
	for i, le := range bounds {
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=%q,model_name=\"m\"} %g\n", le, counts[i])
	}
	n := counts[len(counts)-1]
	fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"m\"} %g\nvllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"m\"} %g\n", n, n)
	return b.String()
}

// TestBucketLayoutChange: after an upgrade changes the TTFT bounds, the
// quantile is absent until the new layout has two points, then computed
// from the new layout alone: 10 new requests all in (0, 0.1] give p50 =
// 0.05 (never the highest old bound, as mixed layouts would).
func TestBucketLayoutChange(t *testing.T) {
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	old := []string{"1", "2560", "+Inf"}
	h.Observe(at(0), parsePage(t, ttftText(old, []float64{10, 20, 20})))
	h.Observe(at(1), parsePage(t, ttftText(old, []float64{10, 30, 30})))
	q := []string{"engine", "0", "model_name", "m", "q", "0.5", "window", "1m"}
	// 10 new in (1, 2560]: p50 = 1 + (2560-1)*5/10.
	wantValue(t, h.Derive(at(1), byModelEngine), 1+2559*0.5, DerivedTTFTSeconds, q...)

	neu := []string{"0.1", "0.5", "1", "+Inf"}
	h.Observe(at(2), parsePage(t, ttftText(neu, []float64{0, 0, 0, 0})))
	if n := h.LastObservation().LayoutChanges; n != 1 {
		t.Errorf("%d layout changes counted, want 1", n)
	}
	wantAbsent(t, h.Derive(at(2), byModelEngine), DerivedTTFTSeconds, q...)
	h.Observe(at(3), parsePage(t, ttftText(neu, []float64{10, 10, 10, 10})))
	wantValue(t, h.Derive(at(3), byModelEngine), 0.05, DerivedTTFTSeconds, q...)
	if n := h.LastObservation().LayoutChanges; n != 0 {
		t.Errorf("%d layout changes counted on an unchanged layout", n)
	}
}

// TestMaxSeries: with room for 3 series, a page of 5 engines keeps the
// first 3; the other 2 are counted each scrape, and their groups' gauges
// are absent (on the model-wide grouping too, which would miss them),
// never computed from part of the series.
func TestMaxSeries(t *testing.T) {
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	h.SetMaxSeries(3)
	for sec := 0; sec <= 10; sec++ {
		s := float64(sec)
		h.Observe(at(s), parsePage(t, counterText([]float64{s, 2 * s, 3 * s, 4 * s, 5 * s}, nil, 0)))
		if n := h.LastObservation().Unwindowed; n != 2 {
			t.Fatalf("at %d s %d samples counted unwindowed, want 2", sec, n)
		}
	}
	if n := h.storedSeries(); n != 3 {
		t.Errorf("%d series stored, want 3", n)
	}
	out := h.Derive(at(10), byModelEngine)
	for e := range 5 {
		l := []string{"engine", strconv.Itoa(e), "model_name", "m", "window", "1m"}
		if e < 3 {
			wantValue(t, out, float64(e+1), DerivedPromptTokensPerSecond, l...)
		} else {
			wantAbsent(t, out, DerivedPromptTokensPerSecond, l...)
		}
	}
	wantAbsent(t, h.Derive(at(10), byModel), DerivedPromptTokensPerSecond, "model_name", "m", "window", "1m")
}

// TestGlitchInCoarseWindow: the same with a 1h window (12 s slots, where
// observations replace each other): the 1m rate is exact once the glitch
// has left the 1m window, the 1h rate once it has left the 1h window.
func TestGlitchInCoarseWindow(t *testing.T) {
	h := NewHistory([]time.Duration{time.Minute, time.Hour}, time.Second)
	v := 1000.0
	for sec := 0; sec <= 3800; sec++ {
		x := v
		if sec == 100 {
			x = 1e300
		}
		h.Observe(at(float64(sec)), parsePage(t, counterText([]float64{x}, nil, 0)))
		if sec > 100+60 {
			if got, ok := promptRate(t, h, float64(sec), "1m", "0"); !ok || got != 7 {
				t.Fatalf("at %d s the 1m rate is %v (present %v), want exactly 7", sec, got, ok)
			}
		}
		if sec > 100+3600+12 {
			if got, ok := promptRate(t, h, float64(sec), "1h", "0"); !ok || got != 7 {
				t.Fatalf("at %d s the 1h rate is %v (present %v), want exactly 7", sec, got, ok)
			}
		}
		v += 7
	}
}

// TestProcessStartJitter: a start time that moves by less than half a
// second is the same process; the counter's +300 is growth.
func TestProcessStartJitter(t *testing.T) {
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	h.Observe(at(0), parsePage(t, counterText([]float64{1000}, nil, 1_700_000_000.25)))
	h.Observe(at(10), parsePage(t, counterText([]float64{1300}, nil, 1_700_000_000.5)))
	if got, ok := promptRate(t, h, 10, "1m", "0"); !ok || got != 30 {
		t.Errorf("rate %v (present %v), want 300/10 s = 30", got, ok)
	}
	if n := h.LastObservation().Restarts; n != 0 {
		t.Errorf("%d restarts counted, want 0", n)
	}
}

// TestMaxSeriesBoundsLabelBytes: series few in number but with huge label
// values (one changing every scrape) are bounded too: with room for 10
// series, labels beyond 5 KiB in all are refused and counted.
func TestMaxSeriesBoundsLabelBytes(t *testing.T) {
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	h.SetMaxSeries(10)
	unwindowed := 0
	for sec := range 10 {
		big := strings.Repeat(strconv.Itoa(sec), 1500) // 1.5 KB, new every scrape
		page := "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{engine=\"0\",model_name=\"" + big + "\"} 1\n"
		h.Observe(at(float64(sec)), parsePage(t, page))
		unwindowed += h.LastObservation().Unwindowed
	}
	// 1.5 KB a series: 3 fit in 5 KiB, the other 7 are refused.
	if n := h.storedSeries(); n != 3 {
		t.Errorf("%d series stored, want 3", n)
	}
	if unwindowed != 7 {
		t.Errorf("%d samples counted unwindowed, want 7", unwindowed)
	}
}

// TestStartTimeJitterIsNoRestart: a counter counting exactly 2 a second
// whose _created time jitters (1 ms either way, or a step of seconds that
// stays before the previous scrape, or a time far in the future), or whose
// process_start_time_seconds steps 0.6 s forward every other scrape, has a
// rate of exactly 2: none of these is a start between two scrapes. Each
// change is counted as jitter, none as a restart. On the rule before, any
// change of _created was a restart (rates of 18 to 1052 times the truth).
func TestStartTimeJitterIsNoRestart(t *testing.T) {
	born := float64(at(-3600).UnixNano()) / 1e9
	for _, c := range []struct {
		name    string
		created func(sec int) float64 // 0: no _created
		start   func(sec int) float64 // 0: no process start time
		jitter  func(s window.ObserveStats) int
	}{
		{"_created ±1ms", func(sec int) float64 { return born + 0.001*float64(sec%3-1) }, nil, createdJitter},
		{"_created forward by seconds, before the previous scrape", func(sec int) float64 { return born + float64(sec) }, nil, createdJitter},
		{"_created in the future", func(sec int) float64 {
			if sec%2 == 1 {
				return float64(at(float64(sec) + 3600).Unix())
			}
			return born
		}, nil, createdJitter},
		{"process start +0.6s every other scrape", nil, func(sec int) float64 { return born + 0.6*float64(sec%2) }, processJitter},
		{"process start forward by seconds, before the previous scrape", nil, func(sec int) float64 { return born + float64(sec) }, processJitter},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := NewHistory([]time.Duration{time.Minute}, time.Second)
			jitter := 0
			for sec := 0; sec <= 120; sec++ {
				var created []float64
				var start float64
				if c.created != nil {
					created = []float64{c.created(sec)}
				}
				if c.start != nil {
					start = c.start(sec)
				}
				h.Observe(at(float64(sec)), parsePage(t, counterText([]float64{1000 + 2*float64(sec)}, created, start)))
				obs := h.LastObservation()
				if obs.Restarts != 0 {
					t.Fatalf("at %d s %d restarts counted, want 0", sec, obs.Restarts)
				}
				jitter += c.jitter(obs)
				if sec >= 2 {
					if got, ok := promptRate(t, h, float64(sec), "1m", "0"); !ok || got != 2 {
						t.Fatalf("at %d s the rate is %v (present %v), want exactly 2", sec, got, ok)
					}
				}
			}
			if jitter == 0 {
				t.Errorf("no jitter counted")
			}
		})
	}
}

func createdJitter(s window.ObserveStats) int { return s.CreatedJitter }
func processJitter(s window.ObserveStats) int { return s.ProcessStartJitter }
