package routing

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/derive"
	"github.com/fos-study/vllm-normalizer/exposition"
)

// consumerPage is a V1 port with two data-parallel engines: the histograms
// and counters that routers read besides the gauges.
const consumerPage = `# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.6
# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="1",le="0.01",model_name="m"} 5
vllm:inter_token_latency_seconds_bucket{engine="1",le="0.1",model_name="m"} 7
vllm:inter_token_latency_seconds_bucket{engine="1",le="+Inf",model_name="m"} 8
vllm:inter_token_latency_seconds_sum{engine="1",model_name="m"} 1.5
vllm:inter_token_latency_seconds_count{engine="1",model_name="m"} 8
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="m"} 1
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.1",model_name="m"} 2
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 2.25
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 4
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 30
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 12
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 100
vllm:prefix_cache_queries_total{engine="1",model_name="m"} 50
`

func derivedRatio(pairs ...any) []exposition.Family {
	f := exposition.Family{Name: derive.DerivedPrefixCacheHitRatio, Type: model.MetricTypeGauge, Help: "h"}
	for i := 0; i < len(pairs); i += 2 {
		f.Samples = append(f.Samples, exposition.Sample{
			Labels: labels.FromStrings(model.MetricNameLabel, derive.DerivedPrefixCacheHitRatio, "model_name", "m", "window", pairs[i].(string)),
			Value:  pairs[i+1].(float64),
		})
	}
	return []exposition.Family{f}
}

// TestRoutingViewConsumerFamilies checks the legacy names and the summed
// histograms and counters against sums done by hand.
func TestRoutingViewConsumerFamilies(t *testing.T) {
	id := func(s string) string { return s }
	// The 5m window is listed first: the shortest window must be chosen.
	derived := derivedRatio("5m", 0.25, "1m", 0.4)
	got := routingSamples(t, View(parsePage(t, consumerPage), derived, testRoles, "v1", id))
	want := map[string]float64{
		`{__name__="vllm:kv_cache_usage_perc", model_name="m"}`:                         0.4, // (0.2+0.6)/2
		`{__name__="vllm:gpu_cache_usage_perc", model_name="m"}`:                        0.4,
		`{__name__="vllm:cpu_cache_usage_perc", model_name="m"}`:                        0,
		`{__name__="vllm:gpu_prefix_cache_hit_rate", model_name="m"}`:                   0.4,
		`{__name__="vllm:prefix_cache_hits_total", model_name="m"}`:                     42,
		`{__name__="vllm:prefix_cache_queries_total", model_name="m"}`:                  150,
		`{__name__="vllm:gpu_prefix_cache_hits_total", model_name="m"}`:                 42,
		`{__name__="vllm:gpu_prefix_cache_queries_total", model_name="m"}`:              150,
		`{__name__="vllm_derived_prefix_cache_hit_ratio", model_name="m", window="5m"}`: 0.25,
		`{__name__="vllm_derived_prefix_cache_hit_ratio", model_name="m", window="1m"}`: 0.4,
	}
	for _, name := range []string{"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"} {
		want[`{__name__="`+name+`_bucket", le="0.01", model_name="m"}`] = 6
		want[`{__name__="`+name+`_bucket", le="0.1", model_name="m"}`] = 9
		want[`{__name__="`+name+`_bucket", le="+Inf", model_name="m"}`] = 12
		want[`{__name__="`+name+`_sum", model_name="m"}`] = 3.75
		want[`{__name__="`+name+`_count", model_name="m"}`] = 12
	}
	checkSamples(t, got, want)

	// The histogram types survive (a router reads buckets only from a
	// histogram family), and each family is served once.
	text := string(exposition.AppendText(nil, View(parsePage(t, consumerPage), derived, testRoles, "v1", id)))
	for _, line := range []string{
		"# TYPE vllm:time_per_output_token_seconds histogram",
		"# TYPE vllm:inter_token_latency_seconds histogram",
		"# TYPE vllm:gpu_prefix_cache_hits_total counter",
	} {
		if strings.Count(text, line+"\n") != 1 {
			t.Errorf("want %q once in:\n%s", line, text)
		}
	}
}

// TestRoutingViewConsumerFamiliesV0: a V0 server's own CPU cache gauge and
// hit-rate gauge are served as it prints them (-1 included), never a
// computed replacement.
func TestRoutingViewConsumerFamiliesV0(t *testing.T) {
	page := `# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.3
# TYPE vllm:cpu_cache_usage_perc gauge
vllm:cpu_cache_usage_perc{model_name="m"} 0.05
# TYPE vllm:gpu_prefix_cache_hit_rate gauge
vllm:gpu_prefix_cache_hit_rate{model_name="m"} -1
`
	got := routingSamples(t, View(parsePage(t, page), derivedRatio("1m", 0.9), testRoles, "v0", func(s string) string { return s }))
	for k, w := range map[string]float64{
		`{__name__="vllm:gpu_cache_usage_perc", model_name="m"}`:      0.3,
		`{__name__="vllm:cpu_cache_usage_perc", model_name="m"}`:      0.05,
		`{__name__="vllm:gpu_prefix_cache_hit_rate", model_name="m"}`: -1,
	} {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, w)
		}
	}
}

// TestRoutingViewConsumerFamiliesAbsent: nothing is invented. No CPU cache
// zero unless the page is V1; no histogram sum over engines with different
// bucket bounds. Without a ratio in the window the hit rate is -1, V0's
// "no data", not absent; without query counters it is absent.
func TestRoutingViewConsumerFamiliesAbsent(t *testing.T) {
	page := strings.Replace(consumerPage, `engine="0",le="0.1"`, `engine="0",le="0.2"`, 1)
	got := routingSamples(t, View(parsePage(t, page), nil, testRoles, "unknown", func(s string) string { return s }))
	if v, ok := got[`{__name__="vllm:gpu_prefix_cache_hit_rate", model_name="m"}`]; !ok || v != -1 {
		t.Errorf("hit rate with queries counted but no ratio in the window: %v (present %v), want -1", v, ok)
	}
	noQueries := regexp.MustCompile(`(?m)^vllm:prefix_cache_queries.*\n`).ReplaceAllString(page, "")
	if strings.Contains(noQueries, "vllm:prefix_cache_queries_total{") {
		t.Fatal("the page still has prefix-cache queries")
	}
	for k := range routingSamples(t, View(parsePage(t, noQueries), nil, testRoles, "unknown", func(s string) string { return s })) {
		if strings.Contains(k, "gpu_prefix_cache_hit_rate") {
			t.Errorf("%s served on a page without prefix-cache queries; want it absent", k)
		}
	}
	for k := range got {
		for _, absent := range []string{"cpu_cache_usage_perc", "inter_token_latency_seconds", "time_per_output_token_seconds"} {
			if strings.Contains(k, absent) {
				t.Errorf("%s served; want it absent", k)
			}
		}
	}
	if _, ok := got[`{__name__="vllm:gpu_cache_usage_perc", model_name="m"}`]; !ok {
		t.Error("vllm:gpu_cache_usage_perc missing although KV usage is known")
	}
}

// TestViewerRemembersLayouts checks that a Viewer kept across views, as
// the scrape loop keeps one, prints exactly what a fresh View prints
// while nothing restarts and no series leaves: with the last view's label
// sets and new values, after an engine changes its bucket bounds (no sum)
// and back, and after a series appears.
func TestViewerRemembersLayouts(t *testing.T) {
	id := func(s string) string { return s }
	derived := derivedRatio("1m", 0.4)
	bump := func(text string, by float64) []exposition.Family {
		fams := parsePage(t, text)
		for i := range fams {
			for j := range fams[i].Samples {
				fams[i].Samples[j].Value += by * float64(j+1)
			}
		}
		return fams
	}
	extraEngine := consumerPage + `vllm:prefix_cache_hits_total{engine="2",model_name="m"} 7
`
	otherBounds := strings.Replace(consumerPage, `engine="0",le="0.1"`, `engine="0",le="0.2"`, 1)
	pages := []string{consumerPage, consumerPage, consumerPage, otherBounds, otherBounds, consumerPage, extraEngine, extraEngine}
	var v Viewer
	for i, text := range pages {
		want := exposition.AppendText(nil, View(bump(text, float64(i)), derived, testRoles, "v1", id))
		got := exposition.AppendText(nil, v.View(bump(text, float64(i)), derived, testRoles, "v1", id))
		if string(got) != string(want) {
			t.Fatalf("view %d: a kept Viewer printed\n%s\nwant (a fresh View)\n%s", i, got, want)
		}
	}
	// The page's label sets changed in the middle (extraEngine), so the
	// layouts were rebuilt and are those of the last page.
	if l := v.sums.layouts["vllm:inter_token_latency_seconds"]; l == nil || len(l.out) == 0 {
		t.Fatalf("no layout kept for the summed histogram: %v", v.sums)
	}
}

// TestSummedCountersNeverGoDown: a sum over engines kept by the Viewer
// does not go down when one engine restarts (its count so far still
// counts) or drops off the page (its last total still counts, and it goes
// on from there when it is back); it is the plain sum until then.
func TestSummedCountersNeverGoDown(t *testing.T) {
	id := func(s string) string { return s }
	page := func(e0 float64, e1 string) []exposition.Family {
		text := fmt.Sprintf("# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total{engine=\"0\",model_name=\"m\"} %v\n", e0)
		if e1 != "" {
			text += `vllm:prefix_cache_hits_total{engine="1",model_name="m"} ` + e1 + "\n"
		}
		return parsePage(t, text)
	}
	const sum = `{__name__="vllm:prefix_cache_hits_total", model_name="m"}`
	var v Viewer
	for i, c := range []struct {
		e0   float64
		e1   string // "" absent
		want float64
	}{
		{10, "20", 30},
		{15, "25", 40},
		{14, "26", 15 + 26},    // engine 0 dips for one scrape: held
		{15, "27", 15 + 27},    // and is back: never counted twice
		{2, "30", 15 + 30},     // engine 0 lower again: held
		{5, "", 15 + 5 + 30},   // still lower: it restarted; engine 1 missed a scrape
		{6, "31", 15 + 6 + 31}, // and is back, going on
		{7, "1", 15 + 7 + 31},  // engine 1 lower: held
		// Gone while held: what it counted before stays (a restart no
		// later scrape confirms adds nothing of its own).
		{8, "", 15 + 8 + 31},
	} {
		got := routingSamples(t, v.View(page(c.e0, c.e1), nil, testRoles, "v1", id))
		if got[sum] != c.want {
			t.Fatalf("view %d (engine 0 at %v, engine 1 at %q): sum %v, want %v", i, c.e0, c.e1, got[sum], c.want)
		}
	}
	// Gone for long: its total stays, and the sum goes on with engine 0.
	for i := range 2*maxGone + 3 {
		got := routingSamples(t, v.View(page(float64(9+i), ""), nil, testRoles, "v1", id))
		if want := 15 + float64(9+i) + 31; got[sum] != want {
			t.Fatalf("%d views after engine 1 went: sum %v, want %v", i+1, got[sum], want)
		}
	}
	// A new engine after that: the page's label sets change, engine 1's
	// total is kept, and the new engine adds its count.
	e2 := parsePage(t, "# TYPE vllm:prefix_cache_hits_total counter\n"+
		`vllm:prefix_cache_hits_total{engine="0",model_name="m"} 1000`+"\n"+
		`vllm:prefix_cache_hits_total{engine="2",model_name="m"} 5`+"\n")
	for i := range 2 {
		if got := routingSamples(t, v.View(e2, nil, testRoles, "v1", id)); got[sum] != 15+1000+31+5 {
			t.Fatalf("view %d with engine 2: sum %v, want %v", i, got[sum], 15+1000+31+5)
		}
	}
	// A fresh View, which keeps nothing, prints the plain sum.
	if got := routingSamples(t, View(page(3, "4"), nil, testRoles, "v1", id)); got[sum] != 7 {
		t.Fatalf("a fresh View printed %v, want the plain sum 7", got[sum])
	}
}

// TestSummedCounterBackAfterLongAbsence: an engine off the page for many
// scrapes that comes back goes on from its last value, as Prometheus
// reads a returning series (higher: counted on; lower: restarted), and
// never adds its old total a second time. Gone engines remembered by
// their labels stay bounded when labels churn.
func TestSummedCounterBackAfterLongAbsence(t *testing.T) {
	id := func(s string) string { return s }
	const sum = `{__name__="vllm:prefix_cache_hits_total", model_name="m"}`
	page := func(engines map[string]float64) []exposition.Family {
		text := "# TYPE vllm:prefix_cache_hits_total counter\n"
		for _, e := range slices.Sorted(maps.Keys(engines)) {
			text += fmt.Sprintf("vllm:prefix_cache_hits_total{engine=%q,model_name=\"m\"} %v\n", e, engines[e])
		}
		return parsePage(t, text)
	}
	check := func(v *Viewer, engines map[string]float64, want float64, what string) {
		t.Helper()
		if got := routingSamples(t, v.View(page(engines), nil, testRoles, "v1", id))[sum]; got != want {
			t.Fatalf("%s: sum %v, want %v", what, got, want)
		}
	}
	for _, c := range []struct {
		back, want, next, nextWant float64
		what                       string
	}{
		{520, 10 + 520, 521, 10 + 521, "counted on from 500 to 520"},
		{3, 10 + 500, 4, 10 + 500 + 4, "lower: held, then restarted, counted 4"},
	} {
		var v Viewer
		check(&v, map[string]float64{"0": 10, "1": 500}, 510, "both engines")
		for i := range 3 * maxGone {
			check(&v, map[string]float64{"0": 10}, 510, fmt.Sprintf("%d views without engine 1", i+1))
		}
		check(&v, map[string]float64{"0": 10, "1": c.back}, c.want, "engine 1 back: "+c.what)
		check(&v, map[string]float64{"0": 10, "1": c.next}, c.nextWant, "engine 1 back, a scrape on: "+c.what)
	}

	// A new pid label for every restart, 5 times maxGone of them: the
	// sum stays monotonic and what is remembered by labels stays bounded.
	var v Viewer
	total := 0.0
	for i := range 5 * maxGone {
		total += 7
		check(&v, map[string]float64{fmt.Sprintf("p%d", i): 7}, total, fmt.Sprintf("process %d", i))
	}
	for name, l := range v.sums.layouts {
		if len(l.gone) > maxGone+len(l.out) {
			t.Errorf("%s remembers %d gone inputs, want at most %d", name, len(l.gone), maxGone+len(l.out))
		}
	}
}

// One engine printing +Inf or NaN for a scrape makes that scrape's sum
// what a plain sum is (+Inf; NaN, which a router is never served: no
// series), and no more: the sum goes on from the finite values, and a
// restart after such a scrape is still a restart.
func TestSummedCounterNonFiniteInput(t *testing.T) {
	id := func(s string) string { return s }
	const sum = `{__name__="vllm:prefix_cache_hits_total", model_name="m"}`
	var v Viewer
	for i, c := range []struct {
		engine1 string
		want    float64
	}{
		{"100", 150},
		{"+Inf", math.Inf(1)},
		{"110", 160},
		{"NaN", math.NaN()},
		{"5", 50 + 110},     // lower than the last finite value: held
		{"7", 50 + 110 + 7}, // still lower: restarted
	} {
		text := "# TYPE vllm:prefix_cache_hits_total counter\n" +
			`vllm:prefix_cache_hits_total{engine="0",model_name="m"} 50` + "\n" +
			`vllm:prefix_cache_hits_total{engine="1",model_name="m"} ` + c.engine1 + "\n"
		got, ok := routingSamples(t, v.View(parsePage(t, text), nil, testRoles, "v1", id))[sum]
		if math.IsNaN(c.want) {
			if ok {
				t.Fatalf("scrape %d (engine 1 at %s): sum %v served, want no series", i, c.engine1, got)
			}
			continue
		}
		if got != c.want {
			t.Fatalf("scrape %d (engine 1 at %s): sum %v, want %v", i, c.engine1, got, c.want)
		}
	}
}

// TestRoutingViewCPUCacheOnOffloadingV1: on a V1 server with KV offloading
// the CPU KV-cache usage is the offload tier's, highest over engines; with
// offload traffic but no usage gauge nothing is served (0 would be wrong);
// without offloading it is 0.
func TestRoutingViewCPUCacheOnOffloadingV1(t *testing.T) {
	const base = `# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.3
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5
`
	const usage = `# TYPE vllm:kv_offload_cpu_cache_usage_perc gauge
vllm:kv_offload_cpu_cache_usage_perc{engine="0",model_name="m"} 0.2
vllm:kv_offload_cpu_cache_usage_perc{engine="1",model_name="m"} 0.6
`
	const traffic = `# TYPE vllm:kv_offload_store_bytes_total counter
vllm:kv_offload_store_bytes_total{engine="0",model_name="m"} 4096
`
	const cpu = `{__name__="vllm:cpu_cache_usage_perc", model_name="m"}`
	for _, tc := range []struct {
		name, page string
		want       float64
		present    bool
	}{
		{"offload usage printed", base + usage + traffic, 0.6, true},
		{"offload traffic, no usage gauge", base + traffic, 0, false},
		{"no offloading", base, 0, true},
	} {
		got := routingSamples(t, View(parsePage(t, tc.page), nil, testRoles, "v1", func(s string) string { return s }))
		if v, ok := got[cpu]; ok != tc.present || v != tc.want {
			t.Errorf("%s: cpu_cache_usage_perc %v (present %v), want %v (present %v)", tc.name, v, ok, tc.want, tc.present)
		}
	}
}
