package derive

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/internal/mappingtest"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// Two data-parallel engines, engine 1 restarting between the first and the
// second point; points at 0, 10 and 20 s in a 1m window.
//
//	engine 0: generation tokens 0, 1000, 2000: 100/s; running 2, 2, 2:
//	          mean 2; 100/2 = 50 per request.
//	engine 1: 5000, then 300 (restart: 300 since it), then 900: increase
//	          300 + 600 = 900 in 20 s = 45/s; running 1, 2, 6: mean 3;
//	          45/3 = 15 per request.
//	model:    (100 + 45) / (2 + 3) = 29, not the mean of 50 and 15.
//
// TTFT buckets le 0.5, 1, +Inf:
//
//	engine 0: 0,0,0 -> 2,4,4 -> 4,8,10: increases 4, 8, 10.
//	          at most 0.5 s (a bound): 4/10 = 0.4;
//	          at most 0.75 s (inside (0.5, 1]): 4 + 4*0.5 = 6 -> 0.6.
//	engine 1: 50,60,60 -> 1,1,1 (restart) -> 3,6,6: increases 1+2, 1+5,
//	          1+5 = 3, 6, 6. 0.5 s: 3/6 = 0.5; 0.75 s: 3 + 3*0.5 = 4.5 -> 0.75.
//	model:    summed increases 7, 14, 16. 0.5 s: 7/16 = 0.4375;
//	          0.75 s: 7 + 7*0.5 = 10.5 -> 0.65625.
func TestDeriveAutoscalingDataParallel(t *testing.T) {
	type state struct {
		gen, running float64
		ttft         []float64
	}
	states := [3][2]state{
		{{0, 2, []float64{0, 0, 0}}, {5000, 1, []float64{50, 60, 60}}},
		{{1000, 2, []float64{2, 4, 4}}, {300, 2, []float64{1, 1, 1}}},
		{{2000, 2, []float64{4, 8, 10}}, {900, 6, []float64{3, 6, 6}}},
	}
	h := newHistorySLO([]time.Duration{time.Minute}, time.Second, SLOTargets{TTFT: []time.Duration{750 * time.Millisecond, 500 * time.Millisecond}})
	for i, st := range states {
		var b strings.Builder
		for e, s := range st {
			b.WriteString(page{
				lbls:   fmt.Sprintf(`model_name="m",engine="%d"`, e),
				genTok: s.gen, hasRunning: true, running: s.running,
				ttftLE: []string{"0.5", "1.0", "+Inf"}, ttft: s.ttft,
			}.text())
		}
		h.Observe(at(float64(10*i)), parsePage(t, mergeFamilies(b.String())))
	}
	both := h.Groupings(at(20), byModelEngine, byModel)
	perEngine, perModel := both[0], both[1]
	e0 := []string{"engine", "0", "model_name", "m", "window", "1m"}
	e1 := []string{"engine", "1", "model_name", "m", "window", "1m"}
	m := []string{"model_name", "m", "window", "1m"}
	wantValue(t, perEngine, 50, DerivedGenerationTokensPerSecondPerRequest, e0...)
	wantValue(t, perEngine, 15, DerivedGenerationTokensPerSecondPerRequest, e1...)
	wantValue(t, perModel, 29, DerivedGenerationTokensPerSecondPerRequest, m...)
	for _, c := range []struct {
		lbls []string
		fams []exposition.Family
		le   string
		want float64
	}{
		{e0, perEngine, "0.5", 0.4}, {e0, perEngine, "0.75", 0.6},
		{e1, perEngine, "0.5", 0.5}, {e1, perEngine, "0.75", 0.75},
		{m, perModel, "0.5", 0.4375}, {m, perModel, "0.75", 0.65625},
	} {
		wantValue(t, c.fams, c.want, DerivedSLOAttainmentRatio, append(c.lbls, "slo", "ttft", "target", c.le)...)
	}
	// No TPOT or e2e targets, no TPOT or e2e series.
	if n := seriesCount(perEngine, DerivedSLOAttainmentRatio); n != 4 {
		t.Errorf("%d attainment series per engine, want 4", n)
	}
}

// A window without a finished request has no attainment and no
// per-request speed (nothing ran): absent, never 0 or 1.
func TestDeriveAutoscalingEmptyWindow(t *testing.T) {
	p := page{lbls: `model_name="m",engine="0"`, genTok: 10, hasRunning: true, running: 0,
		ttftLE: []string{"0.5", "+Inf"}, ttft: []float64{3, 4}}
	h := newHistorySLO([]time.Duration{time.Minute}, time.Second, SLOTargets{TTFT: []time.Duration{500 * time.Millisecond}})
	h.Observe(at(0), parsePage(t, p.text()))
	h.Observe(at(10), parsePage(t, p.text()))
	fams := h.Derive(at(10), byModelEngine)
	l := []string{"engine", "0", "model_name", "m", "window", "1m"}
	wantAbsent(t, fams, DerivedSLOAttainmentRatio, append(l, "slo", "ttft", "target", "0.5")...)
	wantAbsent(t, fams, DerivedGenerationTokensPerSecondPerRequest, l...)
	wantValue(t, fams, 0, DerivedGenerationTokensPerSecond, l...)
}

// Without TPOT targets the TPOT histogram is not even stored.
func TestHistoryStoresTPOTOnlyForTargets(t *testing.T) {
	p := page{lbls: `model_name="m",engine="0"`, tpotLE: []string{"0.05", "+Inf"}, tpot: []float64{1, 2},
		skipFamilies: allFamilies}
	for _, c := range []struct {
		slos SLOTargets
		want int
	}{{SLOTargets{}, 0}, {SLOTargets{TTFT: []time.Duration{time.Second}}, 0}, {SLOTargets{TPOT: []time.Duration{time.Second}}, 2}} {
		h := newHistorySLO([]time.Duration{time.Minute}, time.Second, c.slos)
		h.Observe(at(0), parsePage(t, p.text()))
		if n := h.storedSeries(); n != c.want {
			t.Errorf("targets %+v: %d series stored, want %d", c.slos, n, c.want)
		}
	}
}

var allFamilies = []string{
	"vllm:num_preemptions_total", "vllm:external_prefix_cache_queries_total", "vllm:external_prefix_cache_hits_total",
	"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total",
	"vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
	"vllm:request_prompt_tokens", "vllm:request_generation_tokens",
	"vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
}

// mergeFamilies joins pages of several engines so that each family's
// samples stand together under one TYPE line, as the format requires.
func mergeFamilies(text string) string {
	var order []string
	lines := map[string][]string{}
	typ := map[string]string{}
	fam := ""
	for l := range strings.SplitSeq(text, "\n") {
		if l == "" {
			continue
		}
		if strings.HasPrefix(l, "# TYPE ") {
			fam = strings.Fields(l)[2]
			if _, ok := typ[fam]; !ok {
				typ[fam] = l
				order = append(order, fam)
			}
			continue
		}
		lines[fam] = append(lines[fam], l)
	}
	var b strings.Builder
	for _, f := range order {
		b.WriteString(typ[f] + "\n")
		for _, l := range lines[f] {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// ---- now gauges: in flight, free KV tokens ----------------------------------

func testMapper(t testing.TB) *mapping.Mapper { return mappingtest.Mapper(t, mapping.Options{}) }

// normalizedPage is the page as the collector hands it to derive: vLLM's
// normalised page made canonical by its profile.
func normalizedPage(t *testing.T, text string) []exposition.Family {
	t.Helper()
	norm, _ := testMapper(t).Normalize(exposition.DropCreated(parsePage(t, text)))
	return canonicalOf(t, norm)
}

// canonicalOf is the canonical page of a normalised one, by the profile
// its server's families match.
func canonicalOf(t *testing.T, norm []exposition.Family) []exposition.Family {
	t.Helper()
	cat, err := mapping.LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := mapping.LoadProfiles(cat.Roles())
	if err != nil {
		t.Fatal(err)
	}
	p := ps.Detect(norm)
	if p == nil {
		t.Fatal("no profile matches the page")
	}
	return p.Canonical(norm, cat.Roles())
}

// Two engines, the first printed by two API-server processes (pid).
const capacityPage = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m",pid="1"} 3
vllm:num_requests_running{engine="0",model_name="m",pid="2"} 1
vllm:num_requests_running{engine="1",model_name="m"} 5
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m",pid="1"} 2
vllm:num_requests_waiting{engine="0",model_name="m",pid="2"} 0
vllm:num_requests_waiting{engine="1",model_name="m"} 0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="1"} 0.25
vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="2"} 0
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000",pid="1"} 1
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000",pid="2"} 1
vllm:cache_config_info{block_size="32",engine="1",num_gpu_blocks="1000"} 1
`

// In flight: engine 0: 3 + 1 + 2 + 0 = 6; engine 1: 5; model 11.
// Free KV: engine 0 uses 0.25 (the busy process; the idle one says 0):
// 0.75 * 1000 * 16 = 12000; engine 1: 0.5 * 1000 * 32 = 16000; model 28000
// (cache_config_info of engine 0 counted once, not per process).
func TestCapacityGauges(t *testing.T) {
	norm := normalizedPage(t, capacityPage)
	idle := testDeriver.NewIdleTracker(at(0))
	idle.Observe(at(1), norm)
	perEngine := testDeriver.Capacity(norm, idle, at(1), true)
	perModel := testDeriver.Capacity(norm, idle, at(1), false)
	e0 := []string{"engine", "0", "model_name", "m"}
	e1 := []string{"engine", "1", "model_name", "m"}
	m := []string{"model_name", "m"}
	wantValue(t, perEngine, 6, DerivedRequestsInFlight, e0...)
	wantValue(t, perEngine, 5, DerivedRequestsInFlight, e1...)
	wantValue(t, perModel, 11, DerivedRequestsInFlight, m...)
	wantValue(t, perEngine, 12000, DerivedKVCacheFreeTokens, e0...)
	wantValue(t, perEngine, 16000, DerivedKVCacheFreeTokens, e1...)
	wantValue(t, perModel, 28000, DerivedKVCacheFreeTokens, m...)
	// Requests are running: busy now.
	wantValue(t, perEngine, 0, DerivedIdleSeconds, e0...)
	wantValue(t, perModel, 0, DerivedIdleSeconds, m...)
	for _, f := range append(perEngine, perModel...) {
		if f.Help != testDeriver.help[f.Name] || f.Help == "" {
			t.Errorf("%s: HELP %q", f.Name, f.Help)
		}
	}
	// Capacities gives both groupings at once, the same families.
	bothEngine, bothModel := testDeriver.Capacities(norm, idle, at(1))
	if !reflect.DeepEqual(bothEngine, perEngine) || !reflect.DeepEqual(bothModel, perModel) {
		t.Errorf("Capacities = %v, %v; Capacity gives %v, %v", bothEngine, bothModel, perEngine, perModel)
	}
}

// Where an engine's block data is missing (num_gpu_blocks "None" before
// the engine is up) its free tokens are absent, and so is the model's sum:
// a sum without it would read as less capacity than there is. Likewise an
// engine without a waiting gauge has no in-flight count.
func TestCapacityGaugesMissingData(t *testing.T) {
	text := strings.Replace(capacityPage, `block_size="32",engine="1",num_gpu_blocks="1000"`, `block_size="32",engine="1",num_gpu_blocks="None"`, 1)
	text = strings.Replace(text, "vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 0\n", "", 1)
	norm := normalizedPage(t, text)
	idle := testDeriver.NewIdleTracker(at(0))
	perEngine := testDeriver.Capacity(norm, idle, at(1), true)
	perModel := testDeriver.Capacity(norm, idle, at(1), false)
	e0 := []string{"engine", "0", "model_name", "m"}
	e1 := []string{"engine", "1", "model_name", "m"}
	m := []string{"model_name", "m"}
	wantValue(t, perEngine, 12000, DerivedKVCacheFreeTokens, e0...)
	wantAbsent(t, perEngine, DerivedKVCacheFreeTokens, e1...)
	wantAbsent(t, perModel, DerivedKVCacheFreeTokens, m...)
	wantValue(t, perEngine, 6, DerivedRequestsInFlight, e0...)
	wantAbsent(t, perEngine, DerivedRequestsInFlight, e1...)
	wantAbsent(t, perModel, DerivedRequestsInFlight, m...)

	// No cache_config_info at all, or a usage above 1: absent.
	text = strings.Replace(capacityPage, `engine="1",model_name="m"} 0.5`, `engine="1",model_name="m"} 1.5`, 1)
	perEngine = testDeriver.Capacity(normalizedPage(t, text), idle, at(1), true)
	wantValue(t, perEngine, 12000, DerivedKVCacheFreeTokens, e0...)
	wantAbsent(t, perEngine, DerivedKVCacheFreeTokens, e1...)
	text = capacityPage[:strings.Index(capacityPage, "# TYPE vllm:cache_config_info")]
	if n := seriesCount(testDeriver.Capacity(normalizedPage(t, text), idle, at(1), true), DerivedKVCacheFreeTokens); n != 0 {
		t.Errorf("%d free-token series without cache_config_info, want 0", n)
	}
}

// Real pages. V1 (fixture 13, copied to two engines): usage 0,
// num_gpu_blocks 112009, block_size 16: 1792144 free tokens per engine,
// 3584288 for the model; nothing running or waiting: 0 in flight. V0
// (fixture 01, no engine label, vllm:gpu_cache_usage_perc 0 served as
// vllm:kv_cache_usage_perc): 81767 blocks * 16 = 1308272.
func TestCapacityGaugesRealPages(t *testing.T) {
	idle := testDeriver.NewIdleTracker(at(0))
	norm, _ := testMapper(t).Normalize(exposition.DropCreated(fixturePage(t, 2)))
	norm = canonicalOf(t, norm)
	perEngine := testDeriver.Capacity(norm, idle, at(1), true)
	perModel := testDeriver.Capacity(norm, idle, at(1), false)
	for _, e := range []string{"0", "1"} {
		wantValue(t, perEngine, 1792144, DerivedKVCacheFreeTokens, "engine", e, "model_name", "TinyLlama")
		wantValue(t, perEngine, 0, DerivedRequestsInFlight, "engine", e, "model_name", "TinyLlama")
	}
	wantValue(t, perModel, 3584288, DerivedKVCacheFreeTokens, "model_name", "TinyLlama")

	raw, err := os.ReadFile("../testdata/fixtures/01-vllm-0.7.x-aibrix-runtime-docs.prom")
	if err != nil {
		t.Fatal(err)
	}
	norm = normalizedPage(t, string(raw))
	perEngine = testDeriver.Capacity(norm, idle, at(1), true)
	wantValue(t, perEngine, 1308272, DerivedKVCacheFreeTokens, "model_name", "Qwen/Qwen2.5-Coder-1.5B-Instruct")
	wantValue(t, perEngine, 0, DerivedRequestsInFlight, "model_name", "Qwen/Qwen2.5-Coder-1.5B-Instruct")
}

// ---- idle seconds -----------------------------------------------------------

// idlePage prints one model's request counters and in-flight gauges per
// engine: success, generation tokens, running.
func idlePage(engines ...[3]float64) string {
	var b strings.Builder
	b.WriteString("# TYPE vllm:request_success_total counter\n")
	for e, v := range engines {
		fmt.Fprintf(&b, "vllm:request_success_total{engine=\"%d\",finished_reason=\"stop\",model_name=\"m\"} %v\n", e, v[0])
	}
	b.WriteString("# TYPE vllm:generation_tokens_total counter\n")
	for e, v := range engines {
		fmt.Fprintf(&b, "vllm:generation_tokens_total{engine=\"%d\",model_name=\"m\"} %v\n", e, v[1])
	}
	b.WriteString("# TYPE vllm:num_requests_running gauge\n")
	for e, v := range engines {
		fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"%d\",model_name=\"m\"} %v\n", e, v[2])
	}
	b.WriteString("# TYPE vllm:num_requests_waiting gauge\n")
	for e := range engines {
		fmt.Fprintf(&b, "vllm:num_requests_waiting{engine=\"%d\",model_name=\"m\"} 0\n", e)
	}
	return b.String()
}

// The sidecar starts at 0. Each step: the page at that time and the idle
// seconds expected for engine 0, engine 1 and the model (the most recently
// busy engine), worked out by hand.
func TestIdleSeconds(t *testing.T) {
	steps := []struct {
		at      float64
		e0, e1  [3]float64 // success, generation tokens, running
		want    [3]float64
		comment string
	}{
		{1, [3]float64{5, 100, 0}, [3]float64{5, 100, 0}, [3]float64{1, 1, 1}, "first scrape: the past is unknown, nothing moved: idle since start"},
		{2, [3]float64{5, 100, 0}, [3]float64{5, 150, 0}, [3]float64{2, 0, 0}, "engine 1 generated tokens"},
		{5, [3]float64{5, 100, 0}, [3]float64{5, 150, 0}, [3]float64{5, 3, 3}, "nothing moved"},
		{6, [3]float64{0, 0, 0}, [3]float64{5, 150, 0}, [3]float64{6, 4, 4}, "engine 0 restarted to zero: no work"},
		{7, [3]float64{0, 0, 1}, [3]float64{5, 150, 0}, [3]float64{0, 5, 0}, "engine 0 runs a request, counters unchanged"},
		{9, [3]float64{0, 0, 0}, [3]float64{5, 150, 0}, [3]float64{2, 7, 2}, "it is gone"},
		{10, [3]float64{0, 0, 0}, [3]float64{1, 3, 0}, [3]float64{3, 0, 0}, "engine 1 restarted and already served 1 request: work"},
		{12, [3]float64{0, 0, 0}, [3]float64{1, 3, 0}, [3]float64{5, 2, 2}, "nothing moved"},
	}
	idle := testDeriver.NewIdleTracker(at(0))
	for _, s := range steps {
		norm := normalizedPage(t, idlePage(s.e0, s.e1))
		idle.Observe(at(s.at), norm)
		perEngine := testDeriver.Capacity(norm, idle, at(s.at), true)
		perModel := testDeriver.Capacity(norm, idle, at(s.at), false)
		t.Run(fmt.Sprintf("t=%v %s", s.at, s.comment), func(t *testing.T) {
			wantValue(t, perEngine, s.want[0], DerivedIdleSeconds, "engine", "0", "model_name", "m")
			wantValue(t, perEngine, s.want[1], DerivedIdleSeconds, "engine", "1", "model_name", "m")
			wantValue(t, perModel, s.want[2], DerivedIdleSeconds, "model_name", "m")
		})
	}
}

// A pod that never served a request: idle since the sidecar started, and
// a series printed for the first time later (a new finished_reason) counts
// as work; a group no longer printed has no idle series.
func TestIdleSecondsNeverBusyAndNewSeries(t *testing.T) {
	idle := testDeriver.NewIdleTracker(at(0))
	quiet := idlePage([3]float64{0, 0, 0})
	for _, sec := range []float64{3, 30, 90} {
		norm := normalizedPage(t, quiet)
		idle.Observe(at(sec), norm)
		wantValue(t, testDeriver.Capacity(norm, idle, at(sec), true), sec, DerivedIdleSeconds, "engine", "0", "model_name", "m")
	}
	abort := strings.Replace(quiet, "# TYPE vllm:generation_tokens_total", "vllm:request_success_total{engine=\"0\",finished_reason=\"abort\",model_name=\"m\"} 1\n# TYPE vllm:generation_tokens_total", 1)
	norm := normalizedPage(t, abort)
	idle.Observe(at(95), norm)
	wantValue(t, testDeriver.Capacity(norm, idle, at(100), true), 5, DerivedIdleSeconds, "engine", "0", "model_name", "m")

	norm = normalizedPage(t, strings.ReplaceAll(quiet, `engine="0"`, `engine="1"`))
	idle.Observe(at(101), norm)
	fams := testDeriver.Capacity(norm, idle, at(101), true)
	wantAbsent(t, fams, DerivedIdleSeconds, "engine", "0", "model_name", "m")
	wantValue(t, fams, 101, DerivedIdleSeconds, "engine", "1", "model_name", "m")
}

// A request counter missing from one page (a cut body, a glitch) and back
// unchanged did no work: the pod stays idle since the start.
func TestIdleSecondsCounterMissingOnce(t *testing.T) {
	idle := testDeriver.NewIdleTracker(at(0))
	page := idlePage([3]float64{5, 100, 0})
	_, withoutSuccess, _ := strings.Cut(page, "# TYPE vllm:generation_tokens_total")
	for sec, p := range []string{page, page, "# TYPE vllm:generation_tokens_total" + withoutSuccess, page} {
		norm := normalizedPage(t, p)
		idle.Observe(at(float64(sec+1)), norm)
		wantValue(t, testDeriver.Capacity(norm, idle, at(float64(sec+1)), true), float64(sec+1), DerivedIdleSeconds, "engine", "0", "model_name", "m")
	}
}

func TestSLOTargetsValidate(t *testing.T) {
	if _, err := testDeriver.WithSLOs(SLOTargets{TTFT: []time.Duration{time.Second}, E2E: []time.Duration{time.Millisecond}}); err != nil {
		t.Errorf("valid targets rejected: %v", err)
	}
	for _, c := range []struct {
		slos SLOTargets
		want string
	}{
		{SLOTargets{TTFT: []time.Duration{0}}, "derive.SLOTargets.TTFT=0s is not positive: a latency target must be a positive duration"},
		{SLOTargets{TPOT: []time.Duration{time.Second, -time.Millisecond}}, "derive.SLOTargets.TPOT=-1ms"},
		{SLOTargets{E2E: []time.Duration{-time.Minute}}, "derive.SLOTargets.E2E=-1m0s"},
	} {
		_, err := testDeriver.WithSLOs(c.slos)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.slos, err, c.want)
		}
	}
}

// le is written as Prometheus writes bucket bounds: always with a decimal
// point or an exponent, shortest form otherwise.
func TestFormatSLOTarget(t *testing.T) {
	for d, want := range map[time.Duration]string{
		500 * time.Millisecond:  "0.5",
		time.Second:             "1.0",
		2500 * time.Millisecond: "2.5",
		10 * time.Second:        "10.0",
		25 * time.Millisecond:   "0.025",
		time.Millisecond:        "0.001",
		90 * time.Second:        "90.0",
	} {
		if got := FormatSLOTarget(d); got != want {
			t.Errorf("FormatSLOTarget(%s) = %q, want %q", d, got, want)
		}
	}
}

// Free KV tokens with known truth on real pages of every server that says
// its KV size. Fixture 20 (vLLM, hybrid KV, idle): kv_cache_size_tokens
// 1,428,520 where num_gpu_blocks × block_size = 15,998 × 4 = 63,992 (what the
// formula read before). Fixture 26 (SGLang, idle): max_total_num_tokens
// 92,962. Fixture 31 (TensorRT-LLM): 3,584 free blocks × 32 tokens =
// 114,688, as (1 − 0.125) × 4,096 × 32 also gives.
func TestKVFreeTokensRealPages(t *testing.T) {
	idle := testDeriver.NewIdleTracker(at(0))
	for _, tc := range []struct {
		fixture string
		want    float64
		labels  []string
	}{
		{"20-", 1428520, []string{"engine", "0", "model_name", "deepseek-v4-flash-vision-exp-ablit-dual"}},
		{"26-", 92962, []string{"model_name", "Qwen/Qwen3-0.6B"}},
		{"31-", 114688, []string{"model_name", "Qwen/Qwen3-0.6B"}},
	} {
		norm, _ := testMapper(t).Normalize(readFixture(t, tc.fixture))
		canon := canonicalOf(t, norm)
		wantValue(t, testDeriver.Capacity(canon, idle, at(1), true), tc.want, DerivedKVCacheFreeTokens, tc.labels...)
	}
}

// SGLang's token_usage is the highest of its pools on a hybrid model; where
// full_token_usage is printed it is the KV figure (fixture 26 with a
// mamba-heavy token_usage of 0.9 and full_token_usage 0.25 added:
// 0.75 × 92,962 = 69,721.5, whole tokens 69,721). Fractions of a token
// round down; a product a hair below a whole number does not.
func TestKVFreeTokensKVOnlyUsageAndWholeTokens(t *testing.T) {
	idle := testDeriver.NewIdleTracker(at(0))
	raw, err := os.ReadFile("../testdata/fixtures/26-dynamo-worker+sglang-2026-01-complete-dynamo-docs-metrics-examples-sglang.prom")
	if err != nil {
		t.Fatal(err)
	}
	const ranks = `engine_type="unified",model_name="Qwen/Qwen3-0.6B",moe_ep_rank="0",pp_rank="0",tp_rank="0"`
	text := strings.Replace(string(raw), "sglang:token_usage{"+ranks+"} 0.0", "sglang:token_usage{"+ranks+"} 0.9", 1)
	text += "# TYPE sglang:full_token_usage gauge\nsglang:full_token_usage{" + ranks + "} 0.25\n"
	norm := normalizedPage(t, text)
	wantValue(t, testDeriver.Capacity(norm, idle, at(1), true), 69721, DerivedKVCacheFreeTokens, "model_name", "Qwen/Qwen3-0.6B")

	// (1 − 0.8) × 16,000 is 3,199.999999999999 in floats: 3,200, not less;
	// (1 − 0.123456) × 32,000 is 28,049.408: 28,049.
	text = strings.Replace(capacityPage, `vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5`, `vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.123456`, 1)
	text = strings.Replace(text, `vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="1"} 0.25`, `vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="1"} 0.8`, 1)
	per := testDeriver.Capacity(normalizedPage(t, text), idle, at(1), true)
	wantValue(t, per, 3200, DerivedKVCacheFreeTokens, "engine", "0", "model_name", "m")
	wantValue(t, per, 28049, DerivedKVCacheFreeTokens, "engine", "1", "model_name", "m")
	for _, f := range per {
		for _, s := range f.Samples {
			if f.Name == DerivedKVCacheFreeTokens && s.Value != math.Trunc(s.Value) {
				t.Errorf("%s %v: not whole tokens", s.Labels, s.Value)
			}
		}
	}
}

// NaN usage on one API-server process is left out, as PromQL's max leaves
// it out: engine 0 keeps the other process's 0.25 (12,000 free); NaN on
// every process leaves no value.
func TestKVFreeTokensNaNProcess(t *testing.T) {
	idle := testDeriver.NewIdleTracker(at(0))
	text := strings.Replace(capacityPage, `vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="2"} 0`+"\n", `vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="2"} NaN`+"\n", 1)
	per := testDeriver.Capacity(normalizedPage(t, text), idle, at(1), true)
	wantValue(t, per, 12000, DerivedKVCacheFreeTokens, "engine", "0", "model_name", "m")
	text = strings.Replace(text, `vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="1"} 0.25`, `vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="1"} NaN`, 1)
	per = testDeriver.Capacity(normalizedPage(t, text), idle, at(1), true)
	wantAbsent(t, per, DerivedKVCacheFreeTokens, "engine", "0", "model_name", "m")
	wantValue(t, per, 16000, DerivedKVCacheFreeTokens, "engine", "1", "model_name", "m")
}
