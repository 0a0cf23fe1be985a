package derive

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/window"
)

var t0 = time.Unix(1_800_000_000, 0)

// at returns t0 plus sec seconds.
func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// parsePage parses a text-format page the way the collector will.
func parsePage(tb testing.TB, text string) []exposition.Family {
	tb.Helper()
	fams, _, err := exposition.Parse([]byte(text), "text/plain; version=0.0.4", exposition.ParseOptions{})
	if err != nil {
		tb.Fatalf("parse: %v\n%s", err, text)
	}
	return fams
}

// lookupValue returns the value of the derived series name{kv...}; the
// series' labels other than __name__ must be exactly kv.
func lookupValue(fams []exposition.Family, name string, kv ...string) (float64, bool) {
	want := labels.FromStrings(append([]string{model.MetricNameLabel, name}, kv...)...)
	for _, f := range fams {
		if f.Name != name {
			continue
		}
		for _, s := range f.Samples {
			if labels.Equal(s.Labels, want) {
				return s.Value, true
			}
		}
	}
	return 0, false
}

func wantValue(t *testing.T, fams []exposition.Family, want float64, name string, kv ...string) {
	t.Helper()
	got, ok := lookupValue(fams, name, kv...)
	if !ok {
		t.Errorf("%s%v: absent, want %v\n%s", name, kv, want, dump(fams))
		return
	}
	if !sameFloat(got, want) {
		t.Errorf("%s%v = %v, want %v", name, kv, got, want)
	}
}

func wantAbsent(t *testing.T, fams []exposition.Family, name string, kv ...string) {
	t.Helper()
	if got, ok := lookupValue(fams, name, kv...); ok {
		t.Errorf("%s%v = %v, want absent", name, kv, got)
	}
}

// seriesCount returns how many series family name has.
func seriesCount(fams []exposition.Family, name string) int {
	for _, f := range fams {
		if f.Name == name {
			return len(f.Samples)
		}
	}
	return 0
}

func dump(fams []exposition.Family) string {
	var b strings.Builder
	for _, f := range fams {
		for _, s := range f.Samples {
			fmt.Fprintf(&b, "  %s %v\n", s.Labels, s.Value)
		}
	}
	return b.String()
}

// page is the upstream state of one model/engine at one moment, written the
// way vLLM V1 prints it.
type page struct {
	lbls string // e.g. `model_name="m",engine="0"`

	preempt, pcHits, pcQueries, extHits, extQueries float64
	promptTok, genTok, stop, length, abort          float64
	queueSum, queueCount, prefillSum, prefillCount  float64
	decodeSum, decodeCount                          float64
	promptLenSum, promptLenCount                    float64
	genLenSum, genLenCount                          float64

	// Histogram buckets: bounds as printed and cumulative counts.
	ttftLE, itlLE, e2eLE, tpotLE []string
	ttft, itl, e2e, tpot         []float64

	hasRunning bool // print vllm:num_requests_running
	running    float64

	noPrefixCounters bool     // leave out vllm:prefix_cache_* (V0)
	skipFamilies     []string // families to leave out
	extraLine        string   // appended verbatim
}

func (p page) text() string {
	var b strings.Builder
	counter := func(name string, v float64) {
		if slices.Contains(p.skipFamilies, name) {
			return
		}
		fmt.Fprintf(&b, "# TYPE %s counter\n%s{%s} %v\n", name, name, p.lbls, v)
	}
	hist := func(name string, les []string, counts []float64, sum, count float64) {
		if slices.Contains(p.skipFamilies, name) {
			return
		}
		fmt.Fprintf(&b, "# TYPE %s histogram\n", name)
		for i, le := range les {
			fmt.Fprintf(&b, "%s_bucket{%s,le=%q} %v\n", name, p.lbls, le, counts[i])
		}
		fmt.Fprintf(&b, "%s_sum{%s} %v\n%s_count{%s} %v\n", name, p.lbls, sum, name, p.lbls, count)
	}
	counter("vllm:num_preemptions_total", p.preempt)
	if !p.noPrefixCounters {
		counter("vllm:prefix_cache_queries_total", p.pcQueries)
		counter("vllm:prefix_cache_hits_total", p.pcHits)
	}
	counter("vllm:external_prefix_cache_queries_total", p.extQueries)
	counter("vllm:external_prefix_cache_hits_total", p.extHits)
	counter("vllm:prompt_tokens_total", p.promptTok)
	counter("vllm:generation_tokens_total", p.genTok)
	if !slices.Contains(p.skipFamilies, "vllm:request_success_total") {
		b.WriteString("# TYPE vllm:request_success_total counter\n")
		for _, r := range []struct {
			reason string
			v      float64
		}{{"stop", p.stop}, {"length", p.length}, {"abort", p.abort}} {
			fmt.Fprintf(&b, "vllm:request_success_total{%s,finished_reason=%q} %v\n", p.lbls, r.reason, r.v)
		}
	}
	hist("vllm:request_queue_time_seconds", nil, nil, p.queueSum, p.queueCount)
	hist("vllm:request_prefill_time_seconds", nil, nil, p.prefillSum, p.prefillCount)
	hist("vllm:request_decode_time_seconds", nil, nil, p.decodeSum, p.decodeCount)
	hist("vllm:request_prompt_tokens", nil, nil, p.promptLenSum, p.promptLenCount)
	hist("vllm:request_generation_tokens", nil, nil, p.genLenSum, p.genLenCount)
	if len(p.ttftLE) > 0 {
		hist("vllm:time_to_first_token_seconds", p.ttftLE, p.ttft, 0, p.ttft[len(p.ttft)-1])
	}
	if len(p.itlLE) > 0 {
		hist("vllm:inter_token_latency_seconds", p.itlLE, p.itl, 0, p.itl[len(p.itl)-1])
	}
	if len(p.e2eLE) > 0 {
		hist("vllm:e2e_request_latency_seconds", p.e2eLE, p.e2e, 0, p.e2e[len(p.e2e)-1])
	}
	if len(p.tpotLE) > 0 {
		hist("vllm:request_time_per_output_token_seconds", p.tpotLE, p.tpot, 0, p.tpot[len(p.tpot)-1])
	}
	if p.hasRunning {
		fmt.Fprintf(&b, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{%s} %v\n", p.lbls, p.running)
	}
	b.WriteString(p.extraLine)
	return b.String()
}

var byModelEngine = []string{"model_name", "engine"}
var byModel = []string{"model_name"}

// One engine, every derivation, two scrapes 20 s apart (with one in
// between) inside a 1m window.
func TestDeriveEveryFamily(t *testing.T) {
	start := page{
		lbls:    `model_name="m",engine="0"`,
		preempt: 1, pcHits: 100, pcQueries: 400, extHits: 0, extQueries: 0,
		promptTok: 1000, genTok: 5000, stop: 10, length: 2, abort: 0,
		queueSum: 5, queueCount: 10, prefillSum: 2, prefillCount: 10, decodeSum: 30, decodeCount: 10,
		promptLenSum: 1000, promptLenCount: 10, genLenSum: 5000, genLenCount: 10,
		ttftLE: []string{"0.1", "0.5", "1.0", "+Inf"}, ttft: []float64{4, 8, 10, 10},
		itlLE: []string{"0.01", "0.025", "+Inf"}, itl: []float64{100, 100, 100},
		e2eLE: []string{"1.0", "5.0", "+Inf"}, e2e: []float64{0, 0, 10},
		tpotLE: []string{"0.025", "0.05", "+Inf"}, tpot: []float64{1, 2, 2},
		hasRunning: true, running: 4,
	}
	end := start
	end.preempt = 3                                 // +2 over 20 s: 0.1/s
	end.pcHits, end.pcQueries = 160, 500            // +60 / +100: 0.6
	end.extHits, end.extQueries = 5, 20             // +5 / +20: 0.25
	end.promptTok, end.genTok = 3000, 9000          // +2000/20 s = 100/s; +4000/20 s = 200/s
	end.stop, end.length = 20, 6                    // +10/20 s = 0.5/s; +4/20 s = 0.2/s; abort +0 = 0/s
	end.queueSum, end.queueCount = 11, 14           // +6 s / +4 = 1.5 s
	end.prefillSum, end.prefillCount = 4, 14        // +2 s / +4 = 0.5 s; queue ratio 1.5/(1.5+0.5) = 0.75
	end.decodeSum, end.decodeCount = 42, 14         // +12 s / +4 = 3 s
	end.promptLenSum, end.promptLenCount = 1800, 14 // +800 / +4 = 200 tokens
	end.genLenSum, end.genLenCount = 6000, 14       // +1000 / +4 = 250 tokens
	// TTFT increases 0.1:2, 0.5:6, 1:10, +Inf:10.
	//   q.5: rank 5 in (0.1,0.5]: 0.1 + 0.4*(5-2)/(6-2) = 0.4
	//   q.9: rank 9 in (0.5,1]: 0.5 + 0.5*(9-6)/(10-6) = 0.875
	//   q.99: rank 9.9 in (0.5,1]: 0.5 + 0.5*3.9/4 = 0.9875
	end.ttft = []float64{6, 14, 20, 20}
	// ITL increases 0.01:50, 0.025:100, +Inf:100.
	//   q.5: rank 50 in (0,0.01]: 0.01*50/50 = 0.01
	//   q.9: rank 90 in (0.01,0.025]: 0.01 + 0.015*40/50 = 0.022
	//   q.99: rank 99: 0.01 + 0.015*49/50 = 0.0247
	end.itl = []float64{150, 200, 200}
	// E2E increases 1:0, 5:0, +Inf:10: every quantile is in +Inf, so the
	// highest finite bound, 5.
	end.e2e = []float64{0, 0, 20}
	// TPOT increases 0.025:3, 0.05:8, +Inf:10.
	end.tpot = []float64{4, 10, 12}
	// Running 4, 4, 7 at the three points: mean 5; 200 tokens/s / 5 = 40.
	end.running = 7

	h := newHistorySLO([]time.Duration{time.Minute}, time.Second, SLOTargets{
		TTFT: []time.Duration{500 * time.Millisecond, 250 * time.Millisecond, 2 * time.Second},
		TPOT: []time.Duration{50 * time.Millisecond, 10 * time.Millisecond},
		E2E:  []time.Duration{time.Second, 7 * time.Second},
	})
	h.Observe(at(0), parsePage(t, start.text()))
	h.Observe(at(10), parsePage(t, start.text()))
	h.Observe(at(20), parsePage(t, end.text()))
	fams := h.Derive(at(20), byModelEngine)

	l := []string{"engine", "0", "model_name", "m", "window", "1m"}
	wantValue(t, fams, 0.1, DerivedPreemptionsPerSecond, l...)
	wantValue(t, fams, 0.6, DerivedPrefixCacheHitRatio, l...)
	wantValue(t, fams, 0.25, DerivedExternalPrefixCacheHitRatio, l...)
	wantValue(t, fams, 100, DerivedPromptTokensPerSecond, l...)
	wantValue(t, fams, 200, DerivedGenerationTokensPerSecond, l...)
	wantValue(t, fams, 0.5, DerivedRequestsPerSecond, append(l, "finished_reason", "stop")...)
	wantValue(t, fams, 0.2, DerivedRequestsPerSecond, append(l, "finished_reason", "length")...)
	wantValue(t, fams, 0, DerivedRequestsPerSecond, append(l, "finished_reason", "abort")...)
	// Of the 14 finished: 10 stop, 4 length, none abort.
	wantValue(t, fams, 10.0/14, DerivedFinishedRatio, append(l, "finished_reason", "stop")...)
	wantValue(t, fams, 4.0/14, DerivedFinishedRatio, append(l, "finished_reason", "length")...)
	wantValue(t, fams, 0, DerivedFinishedRatio, append(l, "finished_reason", "abort")...)
	// No split by source: the fallback, prompt tokens less the local and
	// external hits, 100 - 60/20 - 5/20 = 96.75/s.
	wantValue(t, fams, 96.75, DerivedPrefillTokensPerSecond, l...)
	wantValue(t, fams, 1.5, DerivedQueueTimeMeanSeconds, l...)
	wantValue(t, fams, 0.5, DerivedPrefillTimeMeanSeconds, l...)
	wantValue(t, fams, 3, DerivedDecodeTimeMeanSeconds, l...)
	wantValue(t, fams, 0.75, DerivedTTFTQueueRatio, l...)
	wantValue(t, fams, 200, DerivedPromptTokensMean, l...)
	wantValue(t, fams, 250, DerivedGenerationTokensMean, l...)
	wantValue(t, fams, 0.4, DerivedTTFTSeconds, append(l, "q", "0.5")...)
	wantValue(t, fams, 0.875, DerivedTTFTSeconds, append(l, "q", "0.9")...)
	wantValue(t, fams, 0.9875, DerivedTTFTSeconds, append(l, "q", "0.99")...)
	wantValue(t, fams, 0.01, DerivedInterTokenLatencySeconds, append(l, "q", "0.5")...)
	wantValue(t, fams, 0.022, DerivedInterTokenLatencySeconds, append(l, "q", "0.9")...)
	wantValue(t, fams, 0.0247, DerivedInterTokenLatencySeconds, append(l, "q", "0.99")...)
	for _, q := range []string{"0.5", "0.9", "0.99"} {
		wantValue(t, fams, 5, DerivedE2ELatencySeconds, append(l, "q", q)...)
	}
	wantValue(t, fams, 40, DerivedGenerationTokensPerSecondPerRequest, l...)
	// SLO attainment from the same increases. TTFT at most 0.5 s: a bound,
	// 6/10; at most 0.25 s: inside (0.1, 0.5], 2 + 4*0.15/0.4 = 3.5 -> 0.35;
	// at most 2 s: above the highest finite bound (1) with nothing in +Inf
	// beyond it, 1. le is printed as Prometheus prints bucket bounds.
	wantValue(t, fams, 0.6, DerivedSLOAttainmentRatio, append(l, "slo", "ttft", "target", "0.5")...)
	wantValue(t, fams, 0.35, DerivedSLOAttainmentRatio, append(l, "slo", "ttft", "target", "0.25")...)
	wantValue(t, fams, 1, DerivedSLOAttainmentRatio, append(l, "slo", "ttft", "target", "2.0")...)
	// TPOT at most 50 ms: 8/10; at most 10 ms: 3*0.01/0.025 = 1.2 -> 0.12.
	wantValue(t, fams, 0.8, DerivedSLOAttainmentRatio, append(l, "slo", "tpot", "target", "0.05")...)
	wantValue(t, fams, 0.12, DerivedSLOAttainmentRatio, append(l, "slo", "tpot", "target", "0.01")...)
	// E2E at most 1 s: 0/10; at most 7 s: all 10 lie beyond the highest
	// finite bound (5), where nothing says how many are <= 7: absent.
	wantValue(t, fams, 0, DerivedSLOAttainmentRatio, append(l, "slo", "e2e", "target", "1.0")...)
	wantAbsent(t, fams, DerivedSLOAttainmentRatio, append(l, "slo", "e2e", "target", "7.0")...)
	if n := seriesCount(fams, DerivedSLOAttainmentRatio); n != 6 {
		t.Errorf("%d attainment series, want 6", n)
	}

	// Every family is there once, sorted, typed gauge, with a HELP text.
	var names []string
	for _, f := range fams {
		names = append(names, f.Name)
		if f.Type != model.MetricTypeGauge {
			t.Errorf("%s: type %q, want gauge", f.Name, f.Type)
		}
		checkHelp(t, testRoles(), f)
	}
	if want := windowedFamilies() + 1; !slices.IsSorted(names) || len(names) != want {
		t.Errorf("families %v: want all %d windowed ones and the prefill rate's fallback, sorted", names, want)
	}
}

// A counter that goes down mid-window (vLLM restarted) counts from zero:
// the increase is neither negative nor inflated.
func TestDeriveCounterReset(t *testing.T) {
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	obs := func(sec, preempt, hits, queries float64) {
		h.Observe(at(sec), parsePage(t, page{
			lbls: `model_name="m",engine="0"`, preempt: preempt, pcHits: hits, pcQueries: queries,
		}.text()))
	}
	// Preemptions 100, 110, restart, 5, 15: increases 10, 5 (from zero), 10
	// = 25 over 30 s = 0.8333/s. (last-first would be -85; counting the
	// drop as a full reset of 100 would inflate it.)
	// Hits 50, 60, 2, 12 -> 10+2+10 = 22; queries 100, 120, 4, 24 ->
	// 20+4+20 = 44: ratio 0.5.
	obs(0, 100, 50, 100)
	obs(10, 110, 60, 120)
	obs(20, 5, 2, 4)
	obs(30, 15, 12, 24)
	fams := h.Derive(at(30), byModelEngine)
	l := []string{"engine", "0", "model_name", "m", "window", "1m"}
	wantValue(t, fams, 25.0/30, DerivedPreemptionsPerSecond, l...)
	wantValue(t, fams, 0.5, DerivedPrefixCacheHitRatio, l...)

	// A restart to exactly zero, observed at the window's last point:
	// 15 -> 0 adds nothing. Window (1,61]: points 10, 20, 30, 61 with
	// values 110, 5, 15, 0 -> 5+10+0 = 15 over 51 s.
	obs(61, 0, 0, 0)
	fams = h.Derive(at(61), byModelEngine)
	wantValue(t, fams, 15.0/51, DerivedPreemptionsPerSecond, l...)
}

// One point is not a rate; neither is one point per series in a window that
// has more points.
func TestDeriveMissingHistory(t *testing.T) {
	h := NewHistory([]time.Duration{15 * time.Second, time.Minute}, time.Second)
	if fams := h.Derive(at(0), byModel); len(fams) != 0 {
		t.Fatalf("empty history derived %s", dump(fams))
	}
	p := page{lbls: `model_name="m",engine="0"`, preempt: 1}
	h.Observe(at(0), parsePage(t, p.text()))
	if fams := h.Derive(at(0), byModel); len(fams) != 0 {
		t.Fatalf("one point derived %s", dump(fams))
	}
	// Engine 1 appears at the second scrape: it has one point only.
	p.preempt = 4
	two := p.text() + page{lbls: `model_name="m",engine="1"`, preempt: 7}.text()
	h.Observe(at(20), parsePage(t, two))
	fams := h.Derive(at(20), byModelEngine)
	// 1m window: engine 0 has points 0 and 20: 3/20 = 0.15/s.
	wantValue(t, fams, 0.15, DerivedPreemptionsPerSecond, "engine", "0", "model_name", "m", "window", "1m")
	wantAbsent(t, fams, DerivedPreemptionsPerSecond, "engine", "1", "model_name", "m", "window", "1m")
	// 15s window (5,20]: only the point at 20: nothing.
	wantAbsent(t, fams, DerivedPreemptionsPerSecond, "engine", "0", "model_name", "m", "window", "15s")
	if n := seriesCount(fams, DerivedPreemptionsPerSecond); n != 1 {
		t.Errorf("%d preemption series, want 1:\n%s", n, dump(fams))
	}
}

// Zero denominators give no series; a zero rate is a value.
func TestDeriveZeroDenominators(t *testing.T) {
	p := page{
		lbls:    `model_name="m",engine="0"`,
		preempt: 3, pcHits: 0, pcQueries: 50, extHits: 0, extQueries: 0,
		queueSum: 1, queueCount: 2, prefillSum: 1, prefillCount: 2,
		ttftLE: []string{"0.5", "+Inf"}, ttft: []float64{2, 2},
	}
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	h.Observe(at(0), parsePage(t, p.text()))
	h.Observe(at(5), parsePage(t, p.text())) // nothing moved
	fams := h.Derive(at(5), byModelEngine)
	l := []string{"engine", "0", "model_name", "m", "window", "1m"}
	// Preemptions +0 over 5 s: a rate of 0 is a fact.
	wantValue(t, fams, 0, DerivedPreemptionsPerSecond, l...)
	for _, name := range []string{
		DerivedPrefixCacheHitRatio, DerivedExternalPrefixCacheHitRatio,
		DerivedQueueTimeMeanSeconds, DerivedPrefillTimeMeanSeconds, DerivedTTFTQueueRatio,
		DerivedDecodeTimeMeanSeconds, DerivedPromptTokensMean, DerivedGenerationTokensMean,
	} {
		wantAbsent(t, fams, name, l...)
	}
	// No observation in the window: no quantile.
	if n := seriesCount(fams, DerivedTTFTSeconds); n != 0 {
		t.Errorf("quantiles without observations:\n%s", dump(fams))
	}

	// Queue and prefill means both 0 (requests that took no time): the
	// means are 0 and the ratio 0/(0+0) is absent.
	p2 := p
	p2.queueCount, p2.prefillCount = 4, 4 // +2 requests, +0 s each
	h.Observe(at(10), parsePage(t, p2.text()))
	fams = h.Derive(at(10), byModelEngine)
	wantValue(t, fams, 0, DerivedQueueTimeMeanSeconds, l...)
	wantValue(t, fams, 0, DerivedPrefillTimeMeanSeconds, l...)
	wantAbsent(t, fams, DerivedTTFTQueueRatio, l...)
}

// Two data-parallel engines: one series each under model_name+engine, and a
// ratio of sums (not a mean of ratios) under model_name.
func TestDeriveDataParallelEngines(t *testing.T) {
	e0 := page{lbls: `model_name="m",engine="0"`,
		preempt: 0, pcHits: 0, pcQueries: 0, queueSum: 0, queueCount: 0, prefillSum: 0, prefillCount: 0,
		ttftLE: []string{"1", "2", "+Inf"}, ttft: []float64{0, 0, 0}}
	// Engine 1 prints other bucket bounds ("1.0" is the same bound as "1").
	e1 := page{lbls: `model_name="m",engine="1"`,
		ttftLE: []string{"1.0", "4", "+Inf"}, ttft: []float64{0, 0, 0}}
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	h.Observe(at(0), parsePage(t, e0.text()+e1.text()))
	e0.preempt, e1.preempt = 6, 3         // 0.2/s and 0.1/s over 30 s; model: 0.3/s
	e0.pcHits, e0.pcQueries = 10, 20      // 0.5
	e1.pcHits, e1.pcQueries = 10, 180     // 0.0556; model: 20/200 = 0.1 (mean of ratios would be 0.278)
	e0.queueSum, e0.queueCount = 3, 1     // 3 s
	e1.queueSum, e1.queueCount = 1, 3     // 0.333 s; model: 4/4 = 1 s
	e0.prefillSum, e0.prefillCount = 1, 1 // 1 s;  ratio 3/(3+1) = 0.75
	e1.prefillSum, e1.prefillCount = 1, 3 // 0.333 s; ratio 0.5; model prefill 2/4 = 0.5, ratio 1/(1+0.5) = 0.6667
	e0.ttft = []float64{2, 6, 8}          // engine 0: 1:2, 2:6, +Inf:8
	e1.ttft = []float64{4, 10, 10}        // engine 1: 1:4, 4:10, +Inf:10
	h.Observe(at(30), parsePage(t, e0.text()+e1.text()))

	fams := h.Derive(at(30), byModelEngine)
	l0 := []string{"engine", "0", "model_name", "m", "window", "1m"}
	l1 := []string{"engine", "1", "model_name", "m", "window", "1m"}
	wantValue(t, fams, 0.2, DerivedPreemptionsPerSecond, l0...)
	wantValue(t, fams, 0.1, DerivedPreemptionsPerSecond, l1...)
	wantValue(t, fams, 0.5, DerivedPrefixCacheHitRatio, l0...)
	wantValue(t, fams, 10.0/180, DerivedPrefixCacheHitRatio, l1...)
	wantValue(t, fams, 3, DerivedQueueTimeMeanSeconds, l0...)
	wantValue(t, fams, 1.0/3, DerivedQueueTimeMeanSeconds, l1...)
	wantValue(t, fams, 0.75, DerivedTTFTQueueRatio, l0...)
	wantValue(t, fams, 0.5, DerivedTTFTQueueRatio, l1...)
	// Engine 0 TTFT: q.5 rank 4 in (1,2]: 1 + (4-2)/4 = 1.5; q.9 rank 7.2
	// in +Inf: 2. Engine 1: q.5 rank 5 in (1,4]: 1 + 3*(5-4)/6 = 1.5;
	// q.9 rank 9: 1 + 3*5/6 = 3.5; q.99 rank 9.9: 1 + 3*5.9/6 = 3.95.
	wantValue(t, fams, 1.5, DerivedTTFTSeconds, append(l0, "q", "0.5")...)
	wantValue(t, fams, 2, DerivedTTFTSeconds, append(l0, "q", "0.9")...)
	wantValue(t, fams, 1.5, DerivedTTFTSeconds, append(l1, "q", "0.5")...)
	wantValue(t, fams, 3.5, DerivedTTFTSeconds, append(l1, "q", "0.9")...)
	wantValue(t, fams, 3.95, DerivedTTFTSeconds, append(l1, "q", "0.99")...)

	fams = h.Derive(at(30), byModel)
	lm := []string{"model_name", "m", "window", "1m"}
	wantValue(t, fams, 0.3, DerivedPreemptionsPerSecond, lm...)
	wantValue(t, fams, 0.1, DerivedPrefixCacheHitRatio, lm...)
	wantValue(t, fams, 1, DerivedQueueTimeMeanSeconds, lm...)
	wantValue(t, fams, 0.5, DerivedPrefillTimeMeanSeconds, lm...)
	wantValue(t, fams, 1/1.5, DerivedTTFTQueueRatio, lm...)
	// Summed by le: 1 ("1" and "1.0"): 2+4 = 6, 2: 6 (engine 0 only),
	// 4: 10 (engine 1 only), +Inf: 18.
	//   q.5: rank 9 in (2,4]: 2 + 2*(9-6)/(10-6) = 3.5
	//   q.9: rank 16.2 in +Inf: 4
	wantValue(t, fams, 3.5, DerivedTTFTSeconds, append(lm, "q", "0.5")...)
	wantValue(t, fams, 4, DerivedTTFTSeconds, append(lm, "q", "0.9")...)
	for _, f := range fams {
		for _, s := range f.Samples {
			if s.Labels.Has("engine") {
				t.Fatalf("engine label under model_name grouping: %s", s.Labels)
			}
		}
	}
}

// Several API-server processes (pid) are summed away before dividing.
func TestDerivePidSummedAway(t *testing.T) {
	p1 := page{lbls: `model_name="m",engine="0",pid="101"`}
	p2 := page{lbls: `model_name="m",engine="0",pid="202"`}
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	h.Observe(at(0), parsePage(t, p1.text()+p2.text()))
	p1.queueSum, p1.queueCount = 3, 1 // 3 s
	p2.queueSum, p2.queueCount = 1, 3 // 0.333 s
	// Sum then divide: 4/4 = 1 s (a mean of the two means would be 1.667).
	p1.promptTok, p2.promptTok = 100, 300 // (100+300)/10 s = 40/s
	p1.stop, p2.stop = 5, 5               // 10/10 s = 1/s
	h.Observe(at(10), parsePage(t, p1.text()+p2.text()))
	fams := h.Derive(at(10), byModelEngine)
	l := []string{"engine", "0", "model_name", "m", "window", "1m"}
	wantValue(t, fams, 1, DerivedQueueTimeMeanSeconds, l...)
	wantValue(t, fams, 40, DerivedPromptTokensPerSecond, l...)
	wantValue(t, fams, 1, DerivedRequestsPerSecond, append(l, "finished_reason", "stop")...)
	for _, f := range fams {
		if len(f.Samples) > 3 { // requests_per_second: one per reason
			t.Errorf("%s has %d series, pid not summed away:\n%s", f.Name, len(f.Samples), dump(fams))
		}
		for _, s := range f.Samples {
			if s.Labels.Has("pid") {
				t.Fatalf("pid kept: %s", s.Labels)
			}
		}
	}
}

// V0 prints no engine label: the derived series have none either. Its
// gpu_prefix_cache_hit_rate gauge stands in for missing prefix counters.
func TestDeriveV0(t *testing.T) {
	v0 := func(rate, preempt float64) string {
		return page{lbls: `model_name="m"`, preempt: preempt, noPrefixCounters: true,
			skipFamilies: []string{"vllm:external_prefix_cache_queries_total", "vllm:external_prefix_cache_hits_total"},
			extraLine:    fmt.Sprintf("# TYPE vllm:gpu_prefix_cache_hit_rate gauge\nvllm:gpu_prefix_cache_hit_rate{model_name=\"m\"} %v\n", rate),
		}.text()
	}
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	// Hit rate 0.5, -1 (no data: ignored), 0.3: mean (0.5+0.3)/2 = 0.4.
	h.Observe(at(0), parsePage(t, v0(0.5, 0)))
	h.Observe(at(10), parsePage(t, v0(-1, 1)))
	h.Observe(at(20), parsePage(t, v0(0.3, 4))) // preemptions +4/20 s = 0.2/s
	fams := h.Derive(at(20), byModelEngine)
	wantValue(t, fams, 0.4, DerivedPrefixCacheHitRatio, "model_name", "m", "window", "1m")
	wantValue(t, fams, 0.2, DerivedPreemptionsPerSecond, "model_name", "m", "window", "1m")

	// Only "no data" in the window: absent.
	h2 := NewHistory([]time.Duration{time.Minute}, time.Second)
	h2.Observe(at(0), parsePage(t, v0(-1, 0)))
	h2.Observe(at(10), parsePage(t, v0(-1, 0)))
	wantAbsent(t, h2.Derive(at(10), byModel), DerivedPrefixCacheHitRatio, "model_name", "m", "window", "1m")

	// Where the counter pair exists it wins over the gauge: hits +1 of
	// queries +4 = 0.25, not the gauge's 0.9.
	both := func(hits, queries float64) string {
		return page{lbls: `model_name="m"`, pcHits: hits, pcQueries: queries,
			extraLine: "# TYPE vllm:gpu_prefix_cache_hit_rate gauge\nvllm:gpu_prefix_cache_hit_rate{model_name=\"m\"} 0.9\n",
		}.text()
	}
	h3 := NewHistory([]time.Duration{time.Minute}, time.Second)
	h3.Observe(at(0), parsePage(t, both(0, 0)))
	h3.Observe(at(10), parsePage(t, both(1, 4)))
	wantValue(t, h3.Derive(at(10), byModel), 0.25, DerivedPrefixCacheHitRatio, "model_name", "m", "window", "1m")
}

// Windows: each gets its own series, counted over its own points.
func TestDeriveSeveralWindows(t *testing.T) {
	h := NewHistory([]time.Duration{5 * time.Minute, 30 * time.Second}, time.Second)
	if got := h.Windows(); !slices.Equal(got, []time.Duration{30 * time.Second, 5 * time.Minute}) {
		t.Fatalf("Windows() = %v", got)
	}
	// Preemptions +1 every 10 s for 300 s (values 0..30), then
	// 60 s quiet.
	for s := 0; s <= 300; s += 10 {
		h.Observe(at(float64(s)), parsePage(t, page{lbls: `model_name="m",engine="0"`, preempt: float64(s / 10)}.text()))
	}
	fams := h.Derive(at(300), byModel)
	// 30s window (270,300]: points 280, 290, 300: +2 over 20 s = 0.1.
	wantValue(t, fams, 0.1, DerivedPreemptionsPerSecond, "model_name", "m", "window", "30s")
	// 5m window (0,300]: points 10..300: +29 over 290 s = 0.1.
	wantValue(t, fams, 0.1, DerivedPreemptionsPerSecond, "model_name", "m", "window", "5m")

	for s := 310; s <= 360; s += 10 {
		h.Observe(at(float64(s)), parsePage(t, page{lbls: `model_name="m",engine="0"`, preempt: 30}.text()))
	}
	fams = h.Derive(at(360), byModel)
	// 30s: (330,360]: flat, 0. 5m: (60,360]: points 70..360, values 7..30:
	// +23 over 290 s.
	wantValue(t, fams, 0, DerivedPreemptionsPerSecond, "model_name", "m", "window", "30s")
	wantValue(t, fams, 23.0/290, DerivedPreemptionsPerSecond, "model_name", "m", "window", "5m")
}

// An upstream outage (no Observe calls) keeps the history; a restart during
// the outage is a reset.
func TestDeriveOutage(t *testing.T) {
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	obs := func(sec, v float64) {
		h.Observe(at(sec), parsePage(t, page{lbls: `model_name="m",engine="0"`, promptTok: v}.text()))
	}
	obs(0, 100)
	obs(1, 110)
	obs(2, 120)
	// Outage from 2 s to 40 s; vLLM came back restarted, at 30.
	obs(40, 30)
	obs(41, 50)
	// +10, +10, +30 (reset: from zero), +20 = 70 over 41 s.
	wantValue(t, h.Derive(at(41), byModel), 70.0/41, DerivedPromptTokensPerSecond, "model_name", "m", "window", "1m")
}

// A series that disappears upstream still counts while it has 2 points in
// the window, and is forgotten once its last point has left the longest
// window.
func TestHistoryForgetsVanishedSeries(t *testing.T) {
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	both := page{lbls: `model_name="a",engine="0"`, preempt: 0, skipFamilies: allButPreemptions}.text() +
		page{lbls: `model_name="b",engine="0"`, preempt: 0, skipFamilies: allButPreemptions}.text()
	h.Observe(at(0), parsePage(t, both))
	both = page{lbls: `model_name="a",engine="0"`, preempt: 5, skipFamilies: allButPreemptions}.text() +
		page{lbls: `model_name="b",engine="0"`, preempt: 0, skipFamilies: allButPreemptions}.text()
	h.Observe(at(10), parsePage(t, both))
	if n := h.storedSeries(); n != 2 {
		t.Fatalf("%d series stored, want 2 (one preemption counter per model)", n)
	}
	onlyB := page{lbls: `model_name="b",engine="0"`, preempt: 0, skipFamilies: allButPreemptions}.text()
	for s := 20; s <= 69; s++ {
		h.Observe(at(float64(s)), parsePage(t, onlyB))
	}
	// At 69 the 1m window is (9,69]: a's points at 10 only: absent. The
	// 0..10 increase of a is not in the window any more.
	fams := h.Derive(at(69), byModel)
	wantAbsent(t, fams, DerivedPreemptionsPerSecond, "model_name", "a", "window", "1m")
	wantValue(t, fams, 0, DerivedPreemptionsPerSecond, "model_name", "b", "window", "1m")
	// Still stored: its point at 10 is inside the window.
	if n := h.storedSeries(); n != 2 {
		t.Fatalf("at 69: %d series stored, want 2", n)
	}
	// At 70 the point at 10 is at the window's open start: dropped, and a
	// with it.
	h.Observe(at(70), parsePage(t, onlyB))
	if n := h.storedSeries(); n != 1 {
		t.Fatalf("at 70: %d series stored, want 1", n)
	}

	// Before that, with a window that still holds a's two points, a counts.
	h2 := NewHistory([]time.Duration{time.Minute}, time.Second)
	h2.Observe(at(0), parsePage(t, page{lbls: `model_name="a",engine="0"`, preempt: 0, skipFamilies: allButPreemptions}.text()))
	h2.Observe(at(10), parsePage(t, page{lbls: `model_name="a",engine="0"`, preempt: 5, skipFamilies: allButPreemptions}.text()))
	h2.Observe(at(20), parsePage(t, onlyB))
	// a: +5 over 10 s (its own points) = 0.5/s.
	wantValue(t, h2.Derive(at(20), byModel), 0.5, DerivedPreemptionsPerSecond, "model_name", "a", "window", "1m")
}

var allButPreemptions = []string{
	"vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
	"vllm:external_prefix_cache_queries_total", "vllm:external_prefix_cache_hits_total",
	"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total",
	"vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
	"vllm:request_prompt_tokens", "vllm:request_generation_tokens",
}

// Only the series derivations read are stored.
func TestHistoryStoresOnlyNeededSeries(t *testing.T) {
	raw := `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m",engine="0"} 3
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{model_name="m",engine="0"} 3
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{model_name="m",engine="0"} 1.7e9
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{model_name="m",engine="0",le="1"} 1
vllm:request_queue_time_seconds_bucket{model_name="m",engine="0",le="+Inf"} 1
vllm:request_queue_time_seconds_sum{model_name="m",engine="0"} 0.5
vllm:request_queue_time_seconds_count{model_name="m",engine="0"} 1
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{model_name="m",engine="0",le="1"} 1
vllm:time_to_first_token_seconds_bucket{model_name="m",engine="0",le="+Inf"} 1
vllm:time_to_first_token_seconds_sum{model_name="m",engine="0"} 0.5
vllm:time_to_first_token_seconds_count{model_name="m",engine="0"} 1
`
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	h.Observe(at(0), parsePage(t, raw))
	// preemptions; queue _sum and _count (no buckets); TTFT's 2 buckets
	// and _count (the requests started, for the refused share), no _sum;
	// running.
	if n := h.storedSeries(); n != 7 {
		t.Fatalf("%d series stored, want 7", n)
	}
}

// Memory: at most one point per resolution slot, the newest observation
// always kept, nothing older than the longest window.
func TestHistoryMemoryBound(t *testing.T) {
	h := NewHistory([]time.Duration{time.Minute, 5 * time.Minute}, time.Second)
	fams := parsePage(t, page{lbls: `model_name="m",engine="0"`}.text())
	preempt := findSample(t, fams, "vllm:num_preemptions_total")
	maxPoints := 0
	// 10,000 scrapes 100 ms apart (1000 s), the counter +1 per scrape.
	for i := range 10_000 {
		preempt.Value = float64(i)
		h.Observe(at(float64(i)/10), fams)
		n := h.storedPoints()
		maxPoints = max(maxPoints, n)
		// 5m / 1s = 300 slots, plus the slot the window's start falls in.
		if n > 301 {
			t.Fatalf("after %d scrapes %d points stored, want <= 301", i+1, n)
		}
	}
	if maxPoints < 300 {
		t.Errorf("only %d points kept: the 5m window is not covered", maxPoints)
	}
	if c := h.Capacity(); c > 301 {
		t.Errorf("ring capacity %d, want <= 301", c)
	}
	// The newest observation (999.9 s, value 9999) is kept: over the 1m
	// window the rate is exactly 10/s (+1 per 100 ms, read at whatever
	// points were kept).
	fams2 := h.Derive(at(999.9), byModel)
	wantValue(t, fams2, 10, DerivedPreemptionsPerSecond, "model_name", "m", "window", "1m")
	wantValue(t, fams2, 10, DerivedPreemptionsPerSecond, "model_name", "m", "window", "5m")
}

// Observations inside one resolution slot replace the slot's point, but
// resets seen in between still count.
func TestHistoryResolutionKeepsResets(t *testing.T) {
	h := NewHistory([]time.Duration{time.Minute}, 10*time.Second)
	obs := func(sec, v float64) {
		h.Observe(at(sec), parsePage(t, page{lbls: `model_name="m",engine="0"`, genTok: v}.text()))
	}
	obs(0, 100)
	obs(10, 200) // slot 1
	obs(12, 20)  // slot 1 again, a restart: +20
	obs(15, 50)  // slot 1: +30; replaces the point at 12
	if n := h.storedPoints(); n != 2 {
		t.Fatalf("%d points, want 2 (0 s and 15 s)", n)
	}
	// Points 0 and 15: +100 +20 +30 = 150 over 15 s = 10/s.
	wantValue(t, h.Derive(at(15), byModel), 10, DerivedGenerationTokensPerSecond, "model_name", "m", "window", "1m")
}

// Clock going backwards: the observation is ignored.
func TestHistoryIgnoresOlderObservation(t *testing.T) {
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	p := func(v float64) []exposition.Family {
		return parsePage(t, page{lbls: `model_name="m",engine="0"`, preempt: v}.text())
	}
	h.Observe(at(10), p(0))
	h.Observe(at(5), p(100))
	h.Observe(at(20), p(10))
	wantValue(t, h.Derive(at(20), byModel), 1, DerivedPreemptionsPerSecond, "model_name", "m", "window", "1m")
}

// A bucket whose le is not a number is left out; a histogram without +Inf
// gives no quantile.
func TestDeriveBadBuckets(t *testing.T) {
	mk := func(c float64) string {
		return fmt.Sprintf(`# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{model_name="m",le="x"} %[1]v
vllm:time_to_first_token_seconds_bucket{model_name="m",le="1"} %[1]v
vllm:time_to_first_token_seconds_bucket{model_name="m",le="+Inf"} %[1]v
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{model_name="m",le="1"} %[1]v
vllm:e2e_request_latency_seconds_bucket{model_name="m",le="2"} %[1]v
`, c)
	}
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	h.Observe(at(0), parsePage(t, mk(0)))
	h.Observe(at(1), parsePage(t, mk(4)))
	fams := h.Derive(at(1), byModel)
	// TTFT 1:4, +Inf:4: rank 2 in (0,1]: 0.5.
	wantValue(t, fams, 0.5, DerivedTTFTSeconds, "model_name", "m", "q", "0.5", "window", "1m")
	if n := seriesCount(fams, DerivedE2ELatencySeconds); n != 0 {
		t.Errorf("e2e quantiles without +Inf bucket:\n%s", dump(fams))
	}
}

func TestFormatWindow(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Second:  "5s",
		time.Minute:      "1m",
		90 * time.Second: "1m30s",
		90 * time.Minute: "1h30m",
		time.Hour:        "1h",
	} {
		if got := window.Format(d); got != want {
			t.Errorf("window.Format(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestHistoryConcurrent: Observe and Derive run concurrently (run with
// -race). The prompt-token counter grows by exactly 3 per 100 ms step;
// every Derive, at any point of the observations, reads a rate of exactly
// 30/s or none yet, and the last one reads 30/s.
func TestHistoryConcurrent(t *testing.T) {
	h := NewHistory([]time.Duration{time.Minute}, 100*time.Millisecond)
	pages := make([][]exposition.Family, 200)
	for i := range pages {
		pages[i] = parsePage(t, page{lbls: `model_name="m",engine="0"`, promptTok: 3 * float64(i)}.text())
	}
	var (
		wg     sync.WaitGroup
		done   = make(chan struct{})
		bad    []float64
		rates  int
		readMu sync.Mutex
	)
	// Whole nanoseconds: at(i/10) rounds some steps a nanosecond short,
	// which moves the rate by up to 1e-8 (failed in CI).
	step := func(i int) time.Time { return t0.Add(time.Duration(i) * 100 * time.Millisecond) }
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range pages {
			h.Observe(step(i), pages[i])
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			got, ok := promptRate(t, h, 20, "1m", "0")
			readMu.Lock()
			if ok {
				rates++
				if math.Abs(got-30) > 1e-9 {
					bad = append(bad, got)
				}
			}
			readMu.Unlock()
		}
	}()
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("%d of %d concurrent reads gave another rate than 30/s: %v", len(bad), rates, bad[:min(5, len(bad))])
	}
	if got, ok := promptRate(t, h, 19.9, "1m", "0"); !ok || math.Abs(got-30) > 1e-9 {
		t.Errorf("after the observations: rate %v (present %v), want 30/s", got, ok)
	}
}

func findSample(tb testing.TB, fams []exposition.Family, name string) *exposition.Sample {
	for fi := range fams {
		for si := range fams[fi].Samples {
			if fams[fi].Samples[si].Name() == name {
				return &fams[fi].Samples[si]
			}
		}
	}
	tb.Fatalf("no sample %s", name)
	return nil
}
