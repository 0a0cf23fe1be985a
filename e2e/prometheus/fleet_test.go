package prometheus_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v2"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// fleetModel is the model the four pods of TestFleetOutlier serve.
const fleetModel = "fleet-model"

// fleetPod is what one pod's vLLM prints: every counter and bucket grows at
// a fixed rate from the upstream's start, so every window's quantile and
// rate is known.
type fleetPod struct {
	start   time.Time
	ttftCum []float64 // observations/s <= fleetTTFTLes[i]
	itlCum  []float64 // tokens/s <= fleetITLLes[i]
	preempt float64   // preemptions/s
	kv      float64   // KV-cache usage
}

var (
	fleetTTFTLes = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, inf}
	fleetITLLes  = []float64{0.01, 0.025, 0.05, 0.1, inf}
	// 2 requests/s: p90 at the 0.5 s bound (1.8 of 2 at or below it).
	fleetTTFTNormal = []float64{0.2, 1.0, 1.8, 2, 2, 2, 2}
	// The shifted pod: p90 at the 2.5 s bound, five times the others.
	fleetTTFTShifted = []float64{0, 0, 0.2, 0.6, 1.8, 2, 2}
)

func (p *fleetPod) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	el := time.Since(p.start).Seconds()
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	lbl := fmt.Sprintf(`engine="0",model_name=%q`, fleetModel)
	var b strings.Builder
	gauge := func(name string, v float64) {
		fmt.Fprintf(&b, "# HELP %s Fleet test gauge.\n# TYPE %s gauge\n%s{%s} %s\n", name, name, name, lbl, f(v))
	}
	counter := func(name, extra string, rate float64) {
		fmt.Fprintf(&b, "# HELP %s Fleet test counter.\n# TYPE %s counter\n%s_total{%s%s} %s\n", name, name, name, lbl, extra, f(rate*el))
	}
	hist := func(name string, les, cum []float64, sum float64) {
		fmt.Fprintf(&b, "# HELP %s Fleet test histogram.\n# TYPE %s histogram\n", name, name)
		for i, le := range les {
			s := "+Inf"
			if le != inf {
				s = f(le)
			}
			fmt.Fprintf(&b, "%s_bucket{%s,le=%q} %s\n", name, lbl, s, f(cum[i]*el))
		}
		fmt.Fprintf(&b, "%s_sum{%s} %s\n%s_count{%s} %s\n", name, lbl, f(sum*el), name, lbl, f(cum[len(cum)-1]*el))
	}
	gauge("vllm:num_requests_running", 4)
	gauge("vllm:num_requests_waiting", 0)
	gauge("vllm:kv_cache_usage_perc", p.kv)
	counter("vllm:num_preemptions", "", p.preempt)
	counter("vllm:request_success", `,finished_reason="stop"`, 2)
	counter("vllm:prompt_tokens", "", 400)
	counter("vllm:generation_tokens", "", 100)
	hist("vllm:time_to_first_token_seconds", fleetTTFTLes, p.ttftCum, 0.8)
	hist("vllm:inter_token_latency_seconds", fleetITLLes, p.itlCum, 4)
	// Queue 0.05 s and prefill 0.2 s on every pod: queue share 0.2.
	hist("vllm:request_queue_time_seconds", []float64{0.05, 0.1, inf}, []float64{2, 2, 2}, 0.1)
	hist("vllm:request_prefill_time_seconds", []float64{0.1, 0.25, inf}, []float64{0, 2, 2}, 0.4)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// fleetRules writes a test copy of the shipped fleet rules: the vllm-fleet
// group of recording.yml and the VLLMInstanceOutlierInFleet alert, with the
// 5m window replaced by the sidecars' 10s one and `for` by 2s. Every
// replacement must happen, so a renamed window cannot leave the copy
// reading nothing.
func fleetRules(t *testing.T, root string) (path string, alertExpr string) {
	t.Helper()
	type rule map[string]any
	type file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	read := func(name string) file {
		raw, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", name))
		if err != nil {
			t.Fatal(err)
		}
		var f file
		if err := yaml.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return f
	}
	var rules []rule
	for _, g := range read("recording.yml").Groups {
		if g.Name == "vllm-fleet" {
			rules = g.Rules
		}
	}
	if len(rules) == 0 {
		t.Fatal("recording.yml has no vllm-fleet group")
	}
	windowed := 0
	for _, r := range rules {
		e := r["expr"].(string)
		n := strings.Count(e, `window="5m"`) + strings.Count(e, "[5m]")
		e = strings.ReplaceAll(strings.ReplaceAll(e, `window="5m"`, `window="10s"`), "[5m]", "[10s]")
		if n > 0 {
			windowed++
		}
		r["expr"] = e
	}
	if windowed != 5 {
		t.Fatalf("%d fleet rules read the 5m window, want the 5 value rules", windowed)
	}
	var alert rule
	for _, g := range read("alerts.yml").Groups {
		for _, r := range g.Rules {
			if r["alert"] == "VLLMInstanceOutlierInFleet" {
				alert = r
			}
		}
	}
	if alert == nil || alert["for"] != "10m" {
		t.Fatalf("alerts.yml has no VLLMInstanceOutlierInFleet with for: 10m (%v)", alert)
	}
	alert["for"] = "2s"
	out, err := yaml.Marshal(map[string]any{"groups": []any{
		map[string]any{"name": "vllm-fleet", "rules": rules},
		map[string]any{"name": "vllm-fleet-alerts", "rules": []rule{alert}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "fleet.yml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, alert["expr"].(string)
}

// fleetSidecars starts a sidecar (1 s scrapes, a 10 s window) in front of
// each upstream, and returns their scrape jobs as pods vllm-<i> of
// namespace fleet.
func fleetSidecars(t *testing.T, upstreams []http.Handler) []scrapeJob {
	t.Helper()
	var jobs []scrapeJob
	for i, h := range upstreams {
		up := httptest.NewServer(h)
		t.Cleanup(up.Close)
		side := testbin.Start(t, "--vllm.scrape-uri="+up.URL+"/metrics", "--vllm.scrape-interval=1s", "--derive.window=10s")
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("sidecar %d log:\n%s", i, side.Logs())
			}
		})
		jobs = append(jobs, scrapeJob{
			Name: fmt.Sprintf("vllm-%d", i), Target: side.Addr,
			Labels: map[string]string{"namespace": "fleet", "pod": fmt.Sprintf("vllm-%d", i)},
		})
	}
	return jobs
}

// TestFleetOutlier: four sidecars, each in front of a vLLM page of the same
// model; pod vllm-3's TTFT p90 is five times the others', pod vllm-1 has
// a slightly slower ITL and a background preemption rate of 0.01/s. The
// shipped fleet rules, loaded into Prometheus, name vllm-3 on ttft_p90 and
// nothing else, and the alert fires for vllm-3 only.
func TestFleetOutlier(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	root := repoRoot(t)
	start := time.Now()
	itlNormal := []float64{10, 60, 95, 100, 100}
	pods := []*fleetPod{
		{start, fleetTTFTNormal, itlNormal, 0, 0.3},
		{start, fleetTTFTNormal, []float64{5, 50, 92, 100, 100}, 0.01, 0.35},
		{start, fleetTTFTNormal, itlNormal, 0, 0.4},
		{start, fleetTTFTShifted, itlNormal, 0, 0.3},
	}
	handlers := make([]http.Handler, len(pods))
	for i, p := range pods {
		handlers[i] = p
	}
	jobs := fleetSidecars(t, handlers)
	rules, alertExpr := fleetRules(t, root)
	prom := startPrometheus(t, promBin, jobs, []string{rules})

	// Every pod in the fleet on every signal, then the median.
	waitCount := func(expr string, want int) {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for {
			res, err := prom.query(expr, time.Time{})
			if err == nil && len(res) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s, %q returns %v (err %v), want %d series", time.Since(start).Round(time.Second), expr, res, err, want)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	waitCount(`vllm:fleet_pods:model5m{namespace="fleet"} == 4`, 5)
	// A full 10s window behind every sidecar value the rules read.
	time.Sleep(12 * time.Second)

	at := time.Now().Add(-time.Second)
	median := byKey(t, "fleet median", prom.mustQuery(t, `vllm:fleet_median:model5m{namespace="fleet"}`, at), "signal")
	value := byKey(t, "vllm-3", prom.mustQuery(t, `vllm:fleet_value:pod5m{namespace="fleet",pod="vllm-3"}`, at), "signal")
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"median TTFT p90", median["ttft_p90"], 0.5},
		{"vllm-3 TTFT p90", value["ttft_p90"], 2.5},
		{"median KV usage", median["kv_cache_usage"], 0.325},
		{"median queue share", median["ttft_queue_ratio"], 0.2},
		{"median preemptions/s", median["preemptions_per_second"], 0},
	} {
		if math.Abs(c.got-c.want) > 0.05*math.Max(c.want, 0.01) {
			t.Errorf("%s = %g, want %g (5%%)", c.what, c.got, c.want)
		}
	}

	// The alert's expression over several evaluations: vllm-3 on ttft_p90,
	// nothing else (not vllm-1's ITL or its 0.01 preemptions/s).
	for i := range 5 {
		res := prom.mustQuery(t, alertExpr, time.Time{})
		var got []string
		for _, s := range res {
			got = append(got, s.Metric["pod"]+" "+s.Metric["signal"])
		}
		sort.Strings(got)
		if strings.Join(got, ",") != "vllm-3 ttft_p90" {
			t.Fatalf("evaluation %d: the outlier expression names %v, want [vllm-3 ttft_p90]:\n%s", i, got, prom.raw(`vllm:fleet_value:pod5m`, time.Time{}))
		}
		time.Sleep(time.Second)
	}
	// With `for` shortened to 2s the alert fires, for vllm-3 only.
	waitCount(`ALERTS{alertname="VLLMInstanceOutlierInFleet",alertstate="firing"}`, 1)
	firing := prom.mustQuery(t, `ALERTS{alertname="VLLMInstanceOutlierInFleet"}`, time.Time{})
	if len(firing) != 1 || firing[0].Metric["pod"] != "vllm-3" || firing[0].Metric["signal"] != "ttft_p90" ||
		firing[0].Metric["model_name"] != fleetModel || firing[0].Metric["alertstate"] != "firing" {
		t.Errorf("alerts %v, want one firing for vllm-3 on ttft_p90", firing)
	}
	checkFleetRow(t, prom, root)
	t.Logf("fleet medians %v; vllm-3 %v; alert firing after %s", median, value, time.Since(start).Round(time.Second))
}

// checkFleetRow runs the routing dashboard's fleet row on the four pods
// (the one-pod demo of TestDashboardsAndRulesReturnData cannot fill it):
// every query returns data, and the ranking's largest ratio is vllm-3's
// TTFT p90, five times the median.
func checkFleetRow(t *testing.T, prom *promServer, root string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "dashboards", "vllm-routing.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	vals := map[string][]string{"namespace": {"fleet"}, "model_name": {fleetModel}, "pod": {".*"}, "window": {"10s"}}
	inRow, queried := false, 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			inRow = strings.HasPrefix(p.Title, "Fleet:")
			continue
		}
		if !inRow {
			continue
		}
		for _, tg := range p.Targets {
			expr, err := substitute(tg.Expr, vals)
			if err != nil {
				t.Fatalf("panel %q: %v", p.Title, err)
			}
			res := prom.mustQuery(t, expr, time.Time{})
			queried++
			if len(res) == 0 {
				t.Errorf("panel %q target %s returns no data on four pods:\n  %s", p.Title, tg.RefID, expr)
				continue
			}
			if p.Title == "Pods ranked against their fleet median" && tg.RefID == "A" {
				top := res[0]
				for _, s := range res {
					if s.Value > top.Value {
						top = s
					}
				}
				if top.Metric["pod"] != "vllm-3" || top.Metric["signal"] != "ttft_p90" || math.Abs(top.Value-5) > 0.25 {
					t.Errorf("the ranking's top is %v, want vllm-3 ttft_p90 at 5", top)
				}
			}
			if p.Title == "Fleet outliers now" && res[0].Value != 1 {
				t.Errorf("Fleet outliers now = %g, want 1", res[0].Value)
			}
		}
	}
	if queried < 10 {
		t.Errorf("only %d queries in the routing dashboard's fleet row", queried)
	}
}
