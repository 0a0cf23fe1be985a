package prometheus_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// Kube-like target labels, as the PodMonitor would attach them, so that the
// dashboards' namespace and pod variables match.
const (
	demoNamespace = "demo"
	demoPod       = "vllm-0"
)

// grafanaBuiltins replaces Grafana's built-in interval variables. With a 1 s
// scrape interval, 1m is what $__rate_interval gives for a 15 s scrape
// interval in production and leaves ~60 samples per range.
var grafanaBuiltins = map[string]string{
	"__rate_interval": "1m",
	"__interval":      "15s",
	"__range":         "1m",
	"__range_s":       "60",
	"__interval_ms":   "15000",
}

// emptyAllowed lists the panel queries that legitimately return nothing on a
// healthy demo, keyed by dashboard file and panel title, with the reason.
// Only the fleet row needs one: the demo is one pod, a fleet median needs
// three (TestFleetOutlier checks those queries on four). Even the
// scrape-failure and config-reload panels get vectors of zeros, because the
// sidecar initialises those counters for every reason and outcome. An entry
// that is no longer needed fails the test.
var emptyAllowed = map[string]string{
	"vllm-routing.json/Pods ranked against their fleet median":                  fleetOfOne,
	"vllm-routing.json/TTFT p90 per pod against the fleet median":               fleetOfOne,
	"vllm-routing.json/ITL p90 per pod against the fleet median":                fleetOfOne,
	"vllm-routing.json/Preemptions per second per pod against the fleet median": fleetOfOne,
	"vllm-routing.json/TTFT queue share per pod against the fleet median":       fleetOfOne,
	"vllm-routing.json/KV-cache usage per pod against the fleet median":         fleetOfOne,
}

const fleetOfOne = "the fleet median, its ratio and outliers need 3 pods or more; the demo is one"

// rulesEmptyAllowed lists the recording rules that legitimately have no
// series on the one-pod demo, with the reason; TestFleetOutlier checks them
// on four pods. An entry that is no longer needed fails the test.
var rulesEmptyAllowed = map[string]string{
	"vllm:fleet_median:model5m": "a fleet median needs 3 pods or more; the demo is one",
	"vllm:fleet_ratio:pod5m":    "a ratio to the fleet median needs the median",
	"vllm:fleet_outlier:pod5m":  "an outlier needs the median, and the demo has no odd pod",
	// The demo's vLLM prints fixture 13's families: no KV offloading
	// connector, and no waiting by reason (it predates it).
	"vllm:derived_kv_offload_load_bytes_per_second:rate1m":  "no KV offloading connector on the demo",
	"vllm:derived_kv_offload_load_bytes_per_second:rate5m":  "no KV offloading connector on the demo",
	"vllm:derived_kv_offload_store_bytes_per_second:rate1m": "no KV offloading connector on the demo",
	"vllm:derived_kv_offload_store_bytes_per_second:rate5m": "no KV offloading connector on the demo",
	"vllm:derived_requests_waiting_deferred_ratio:ratio":    "no num_requests_waiting_by_reason on the demo (fixture 13 predates it)",
	// The steady demo runs no admission cap: no vllm:admission_rejections_total
	// (vLLM 0.29 on; fixture 13 predates it) and no --upstream.max-num-queued-reqs.
	"vllm:derived_admission_rejections_per_second:rate1m": "no admission counter on the steady demo",
	"vllm:derived_admission_rejections_per_second:rate5m": "no admission counter on the steady demo",
	"vllm:derived_admission_rejected_ratio:ratio1m":       "no admission counter on the steady demo",
	"vllm:derived_admission_rejected_ratio:ratio5m":       "no admission counter on the steady demo",
	"vllm:derived_admission_at_cap:max1m":                 "no admission counter and no cap on the steady demo",
	"vllm:derived_admission_at_cap:max5m":                 "no admission counter and no cap on the steady demo",
}

// dashVar is one templating variable of a dashboard.
type dashVar struct {
	Name    string          `json:"name"`
	Type    string          `json:"type"`
	Multi   bool            `json:"multi"`
	All     bool            `json:"includeAll"`
	Query   json.RawMessage `json:"query"`
	Options []struct {
		Value string `json:"value"`
	} `json:"options"`
	Current struct {
		Value any `json:"value"`
	} `json:"current"`
}

// dashPanel is a panel, possibly a row holding others.
type dashPanel struct {
	Title   string      `json:"title"`
	Type    string      `json:"type"`
	Panels  []dashPanel `json:"panels"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

type dashboard struct {
	Title      string      `json:"title"`
	Panels     []dashPanel `json:"panels"`
	Templating struct {
		List []dashVar `json:"list"`
	} `json:"templating"`
}

// varRef matches $var, ${var}, ${var:format} and [[var]].
var varRef = regexp.MustCompile(`\$\{(\w+)(?::(\w+))?\}|\$(\w+)|\[\[(\w+)\]\]`)

// substitute replaces Grafana variable references in expr with vals (a
// variable with several values becomes a regex alternation, as Grafana
// formats multi-value variables for Prometheus); unknown variables are an
// error.
func substitute(expr string, vals map[string][]string) (string, error) {
	var unknown []string
	out := varRef.ReplaceAllStringFunc(expr, func(m string) string {
		sm := varRef.FindStringSubmatch(m)
		name := sm[1] + sm[3] + sm[4]
		if v, ok := grafanaBuiltins[name]; ok {
			return v
		}
		vs, ok := vals[name]
		if !ok {
			unknown = append(unknown, m)
			return m
		}
		if len(vs) == 1 {
			return regexp.QuoteMeta(vs[0])
		}
		q := make([]string, len(vs))
		for i, v := range vs {
			q[i] = regexp.QuoteMeta(v)
		}
		return "(" + strings.Join(q, "|") + ")"
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown variables %v in %q", unknown, expr)
	}
	return out, nil
}

// labelValuesRe parses Grafana's label_values(selector, label) and
// label_values(label).
var labelValuesRe = regexp.MustCompile(`^\s*label_values\(\s*(?:(.+?)\s*,\s*)?(\w+)\s*\)\s*$`)

// resolveVars gives every variable its values: query variables by running
// their label_values() against Prometheus (in order, so later ones see the
// earlier ones' values), custom variables with each option in turn (the
// caller iterates over customs), datasource variables a placeholder.
func resolveVars(t *testing.T, prom *promServer, d dashboard, file string) (map[string][]string, map[string][]string) {
	t.Helper()
	vals := map[string][]string{}
	customs := map[string][]string{}
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			vals[v.Name] = []string{"prometheus"}
		case "custom":
			var opts []string
			for _, o := range v.Options {
				opts = append(opts, o.Value)
			}
			if len(opts) == 0 {
				var q string
				if err := json.Unmarshal(v.Query, &q); err == nil {
					for o := range strings.SplitSeq(q, ",") {
						opts = append(opts, strings.TrimSpace(o))
					}
				}
			}
			if len(opts) == 0 {
				t.Errorf("%s: custom variable %s has no options", file, v.Name)
			}
			customs[v.Name] = opts
			vals[v.Name] = opts[:1]
		case "query":
			var q string
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				if err := json.Unmarshal(v.Query, &obj); err != nil {
					t.Errorf("%s: variable %s: unreadable query %s", file, v.Name, v.Query)
					continue
				}
				q = obj.Query
			}
			m := labelValuesRe.FindStringSubmatch(q)
			if m == nil {
				t.Errorf("%s: variable %s: query %q is not label_values(...)", file, v.Name, q)
				continue
			}
			params := url.Values{
				"start": {fmt.Sprint(time.Now().Add(-10 * time.Minute).Unix())},
				"end":   {fmt.Sprint(time.Now().Unix())},
			}
			if m[1] != "" {
				sel, err := substitute(m[1], vals)
				if err != nil {
					t.Errorf("%s: variable %s: %v", file, v.Name, err)
					continue
				}
				params.Set("match[]", sel)
			}
			data, err := prom.apiGet("/api/v1/label/"+m[2]+"/values", params)
			if err != nil {
				t.Errorf("%s: variable %s (%s): %v", file, v.Name, q, err)
				continue
			}
			var got []string
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				t.Errorf("%s: variable %s: %s finds no value", file, v.Name, q)
				continue
			}
			sort.Strings(got)
			vals[v.Name] = got
		default:
			t.Errorf("%s: variable %s has type %q, which this test does not know how to fill", file, v.Name, v.Type)
		}
	}
	return vals, customs
}

// combos returns every assignment of the custom variables' options.
func combos(customs map[string][]string) []map[string]string {
	out := []map[string]string{{}}
	names := make([]string, 0, len(customs))
	for n := range customs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var next []map[string]string
		for _, c := range out {
			for _, o := range customs[n] {
				m := map[string]string{n: o}
				maps.Copy(m, c)
				next = append(next, m)
			}
		}
		out = next
	}
	return out
}

// readDashboard reads a dashboard file; file is its base name.
func readDashboard(t *testing.T, path string) (file string, d dashboard) {
	t.Helper()
	file = filepath.Base(path)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return file, d
}

func walkPanels(ps []dashPanel, f func(dashPanel)) {
	for _, p := range ps {
		f(p)
		walkPanels(p.Panels, f)
	}
}

// TestDashboardsAndRulesReturnData is issue 5: on a healthy demo scraped by
// a real Prometheus, every panel query of dashboards/*.json returns data
// (for every value of the custom variables), every dashboard variable finds
// values, and every recording and alerting rule evaluates without error.
func TestDashboardsAndRulesReturnData(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	root := repoRoot(t)

	// Short diagnosis windows, so that the verdict row has data within the
	// wait below: a recent window plus a baseline of five of them (90 s),
	// each window holding the 20 finished requests a verdict needs (the
	// steady demo finishes about two a second).
	side := testbin.Start(t, "--demo", "--demo.engines=2", "--diagnosis.window=15s", "--diagnosis.baseline=75s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar log:\n%s", side.Logs())
		}
	})
	ruleFiles := []string{
		filepath.Join(root, "deploy", "prometheus", "recording.yml"),
		filepath.Join(root, "deploy", "prometheus", "alerts.yml"),
	}
	prom := startPrometheus(t, promBin, []scrapeJob{{
		Name:   "vllm-normalizer",
		Target: side.Addr,
		Labels: map[string]string{"namespace": demoNamespace, "pod": demoPod},
	}}, ruleFiles)
	start := time.Now()
	prom.waitFor(t, `vllm_up{namespace="demo",pod="vllm-0"} == 1`, 20*time.Second)
	// Long enough for $__rate_interval (1m) ranges to hold a minute of
	// samples, for the 1m derived windows to fill and for the diagnosis to
	// have its recent window and baseline.
	if d := time.Until(start.Add(100 * time.Second)); d > 0 {
		t.Logf("letting Prometheus scrape the demo for %s", d.Round(time.Second))
		time.Sleep(d)
	}

	files, err := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards found (%v)", err)
	}
	at := time.Now()
	queried, allowedEmpty := 0, 0
	usedExceptions := map[string]bool{}
	for _, path := range files {
		file, d := readDashboard(t, path)
		vals, customs := resolveVars(t, prom, d, file)
		if got := vals["namespace"]; got != nil && strings.Join(got, ",") != demoNamespace {
			t.Errorf("%s: variable namespace = %v, want [%s]", file, got, demoNamespace)
		}
		if got := vals["pod"]; got != nil && strings.Join(got, ",") != demoPod {
			t.Errorf("%s: variable pod = %v, want [%s]", file, got, demoPod)
		}
		targets := 0
		walkPanels(d.Panels, func(p dashPanel) {
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					continue
				}
				targets++
				key := file + "/" + p.Title
				for _, c := range combos(customs) {
					vs := map[string][]string{}
					maps.Copy(vs, vals)
					for k, v := range c {
						vs[k] = []string{v}
					}
					expr, err := substitute(tg.Expr, vs)
					if err != nil {
						t.Errorf("%s panel %q: %v", file, p.Title, err)
						continue
					}
					queried++
					res, err := prom.query(expr, at)
					if err != nil {
						t.Errorf("%s panel %q target %s: %v", file, p.Title, tg.RefID, err)
						continue
					}
					if len(res) > 0 {
						continue
					}
					if reason, ok := emptyAllowed[key]; ok {
						usedExceptions[key] = true
						allowedEmpty++
						t.Logf("%s panel %q target %s (%v): empty, allowed: %s", file, p.Title, tg.RefID, c, reason)
						continue
					}
					t.Errorf("%s panel %q target %s (%v) returns no data:\n  %s", file, p.Title, tg.RefID, c, expr)
				}
			}
		})
		if targets == 0 {
			t.Errorf("%s: no panel query found", file)
		}
		t.Logf("%s: %d panel queries, variables %v, custom %v", file, targets, vals, customs)
	}
	for key := range emptyAllowed {
		if !usedExceptions[key] {
			t.Errorf("exception %q is no longer needed (the panel returns data, or is gone): remove it", key)
		}
	}
	t.Logf("ran %d dashboard queries, %d empty by an explicit exception", queried, allowedEmpty)

	// Rules: Prometheus has evaluated each one every second for a minute;
	// none may report an error, and each query also runs through the query
	// API.
	groups := prom.rules(t)
	for _, f := range ruleFiles {
		found := false
		for g := range groups {
			if strings.HasPrefix(g, filepath.Base(f)+"/") {
				found = true
			}
		}
		if !found {
			t.Errorf("no rule group loaded from %s", f)
		}
	}
	nrules := 0
	for g, rules := range groups {
		for _, r := range rules {
			nrules++
			if r.Health != "ok" || r.LastError != "" {
				t.Errorf("%s rule %s: health %q, last error %q", g, r.Name, r.Health, r.LastError)
			}
			if _, err := prom.query(r.Query, at); err != nil {
				t.Errorf("%s rule %s: %v", g, r.Name, err)
			}
			if r.Type == "alerting" && r.State == "firing" {
				t.Logf("%s alert %s fires on the demo", g, r.Name)
			}
		}
	}
	if nrules == 0 {
		t.Error("no rules loaded")
	}
	// The recording rules produce series on the demo's data.
	usedRuleExceptions := map[string]bool{}
	for g, rules := range groups {
		if !strings.HasPrefix(g, "recording.yml/") {
			continue
		}
		for _, r := range rules {
			res, err := prom.query(r.Name, at)
			switch {
			case err != nil:
				t.Errorf("%s: %v", r.Name, err)
			case len(res) == 0 && rulesEmptyAllowed[r.Name] != "":
				usedRuleExceptions[r.Name] = true
			case len(res) == 0:
				t.Errorf("recording rule %s has no series on the demo", r.Name)
			case rulesEmptyAllowed[r.Name] != "":
				t.Errorf("recording rule %s has series on the demo, but is listed as empty (%s): remove it from rulesEmptyAllowed", r.Name, rulesEmptyAllowed[r.Name])
			}
		}
	}
	for name, reason := range rulesEmptyAllowed {
		if !usedRuleExceptions[name] {
			t.Errorf("recording rule %s is listed as empty on the demo (%s) but is not loaded or not empty: remove it", name, reason)
		} else {
			t.Logf("recording rule %s: no series on the demo, allowed: %s", name, reason)
		}
	}
	t.Logf("%d rules loaded and evaluated without error", nrules)
}
