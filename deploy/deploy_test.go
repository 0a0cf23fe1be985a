package deploy

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	yaml "go.yaml.in/yaml/v2"

	"github.com/fos-study/vllm-normalizer/derive"
	"github.com/fos-study/vllm-normalizer/internal/testbin"
	"github.com/fos-study/vllm-normalizer/mapping"
)

var update = flag.Bool("update", false, "regenerate kubernetes/prometheusrule.yaml from prometheus/*.yml and the Helm chart's copies in helm/vllm-normalizer/files")

var ruleFiles = []string{"prometheus/alerts.yml", "prometheus/recording.yml", "prometheus/admission.yml"}

const prometheusRuleFile = "kubernetes/prometheusrule.yaml"

// ---- helpers -----------------------------------------------------------------

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readRules(t *testing.T, path string) ruleFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(data, &rf); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rf
}

// rawGroups returns the groups of all rule files, in order, as generic YAML.
func rawGroups(t *testing.T) []any {
	t.Helper()
	var all []any
	for _, p := range ruleFiles {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Groups []yaml.MapSlice `yaml:"groups"`
		}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, g := range doc.Groups {
			all = append(all, g)
		}
	}
	return all
}

// normalize turns MapSlices into maps so DeepEqual ignores key order.
func normalize(v any) any {
	switch x := v.(type) {
	case yaml.MapSlice:
		m := map[string]any{}
		for _, it := range x {
			m[fmt.Sprint(it.Key)] = normalize(it.Value)
		}
		return m
	case map[string]any:
		m := map[string]any{}
		for k, val := range x {
			m[k] = normalize(val)
		}
		return m
	case map[any]any:
		m := map[string]any{}
		for k, val := range x {
			m[fmt.Sprint(k)] = normalize(val)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = normalize(x[i])
		}
		return out
	default:
		return v
	}
}

func renderPrometheusRule(groups []any) ([]byte, error) {
	doc := yaml.MapSlice{
		{Key: "apiVersion", Value: "monitoring.coreos.com/v1"},
		{Key: "kind", Value: "PrometheusRule"},
		{Key: "metadata", Value: yaml.MapSlice{
			{Key: "name", Value: "vllm-normalizer"},
			{Key: "labels", Value: yaml.MapSlice{{Key: "app.kubernetes.io/name", Value: "vllm-normalizer"}}},
		}},
		{Key: "spec", Value: yaml.MapSlice{{Key: "groups", Value: groups}}},
	}
	body, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	header := "# GENERATED from deploy/prometheus/alerts.yml, recording.yml and admission.yml; do not edit.\n" +
		"# Regenerate: go test ./deploy -run TestPrometheusRuleMatchesFiles -update\n"
	return append([]byte(header), body...), nil
}

// ---- PrometheusRule is the same content as the rule files -------------------

// TestPrometheusRuleMatchesFiles fails when kubernetes/prometheusrule.yaml
// does not carry exactly the groups of prometheus/*.yml.
func TestPrometheusRuleMatchesFiles(t *testing.T) {
	groups := rawGroups(t)
	if *update {
		out, err := renderPrometheusRule(groups)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(prometheusRuleFile, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(prometheusRuleFile)
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Spec       struct {
			Groups []yaml.MapSlice `yaml:"groups"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("%s: got %s %s, want monitoring.coreos.com/v1 PrometheusRule", prometheusRuleFile, pr.APIVersion, pr.Kind)
	}
	var got []any
	for _, g := range pr.Spec.Groups {
		got = append(got, g)
	}
	if !reflect.DeepEqual(normalize(got), normalize(groups)) {
		t.Errorf("%s differs from %v: regenerate with go test ./deploy -run TestPrometheusRuleMatchesFiles -update", prometheusRuleFile, ruleFiles)
	}
}

// ---- rules: PromQL, contract, tests ------------------------------------------

// derivedGauges are derive's gauges, by the name their rules carry
// (vllm:derived_<gauge>:...): windowed ones, those of the current scrape
// (one rule each, without window), and which have quantiles or SLO targets.
func derivedGauges(t *testing.T) (windowed, now []string, quantiles, slos map[string]bool) {
	t.Helper()
	cat, err := mapping.LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	quantiles, slos = map[string]bool{}, map[string]bool{}
	for _, s := range derive.Specs(cat.Roles()) {
		g := strings.TrimPrefix(s.Name, "vllm_derived_")
		if s.Now {
			now = append(now, g)
			continue
		}
		windowed = append(windowed, g)
		quantiles[g] = slices.Contains(s.Labels, derive.QuantileLabel)
		slos[g] = slices.Contains(s.Labels, derive.SLOLabel)
	}
	return windowed, now, quantiles, slos
}

// fleetSignalNames are the signal label values of the fleet comparison
// (docs/diagnosis.md#compare-instances).
var fleetSignalNames = []string{"ttft_p90", "itl_p90", "preemptions_per_second", "ttft_queue_ratio", "kv_cache_usage"}

// sloRules are the slo/le pairs the attainment rules are recorded for, in
// each window: the targets the autoscaling overlays set.
var sloRules = map[string]string{"ttft": "0.5", "tpot": "0.05", "e2e": "10.0"}

// TestRulesParse parses every rule expression with the Prometheus parser and
// checks names, labels and the coverage of the derived gauges.
func TestRulesParse(t *testing.T) {
	windowed, nowGauges, quantileGauges, sloGauges := derivedGauges(t)
	p := parser.NewParser(parser.Options{})
	recorded := map[string][]map[string]string{}
	fleetRe := regexp.MustCompile(`^vllm:fleet_(value|pods|median|ratio|outlier|refusing):(pod|model)5m$`)
	signalSel := regexp.MustCompile(`signal="([a-z0-9_]+)"`)
	fleetSignals := map[string]map[string]bool{} // record -> signals with a rule of their own
	alerts := 0
	for _, path := range ruleFiles {
		rf := readRules(t, path)
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				name := r.Alert + r.Record
				if (r.Alert == "") == (r.Record == "") {
					t.Errorf("%s: rule %q must have exactly one of alert and record", path, name)
				}
				if _, err := p.ParseExpr(r.Expr); err != nil {
					t.Errorf("%s: %s: %v", path, name, err)
				}
				if strings.Contains(r.Expr, "job=") {
					t.Errorf("%s: %s: hard-coded job matcher", path, name)
				}
				if r.Alert != "" {
					alerts++
					if r.Labels["severity"] == "" {
						t.Errorf("%s: alert %s has no severity label", path, name)
					}
				}
				if r.Record != "" {
					recorded[r.Record] = append(recorded[r.Record], r.Labels)
				}
				if fleetRe.MatchString(r.Record) {
					// A value rule names its signal as a label; an
					// outlier rule selects one signal throughout.
					sig := r.Labels["signal"]
					if r.Labels["signal"] == "" {
						sigs := map[string]bool{}
						for _, m := range signalSel.FindAllStringSubmatch(r.Expr, -1) {
							sigs[m[1]] = true
						}
						if len(sigs) == 1 {
							for k := range sigs {
								sig = k
							}
						} else if len(sigs) > 1 {
							t.Errorf("%s: rule %s mixes signals %v", path, r.Record, sigs)
						}
					}
					if fleetSignals[r.Record] == nil {
						fleetSignals[r.Record] = map[string]bool{}
					}
					fleetSignals[r.Record][sig] = true
				}
			}
		}
	}
	if alerts < 5 {
		t.Errorf("only %d alerts", alerts)
	}
	recRe := regexp.MustCompile(`^vllm:derived_([a-z0-9_]+):[a-z_]+([0-9]+[smhd])$`)
	nowRe := regexp.MustCompile(`^vllm:derived_([a-z0-9_]+):[a-z_]+$`)
	nowFound := map[string]int{}
	diagRe := regexp.MustCompile(`^vllm:diagnosis_([a-z0-9_]+):(recent1m|baseline30m)$`)
	diag := map[string]int{}
	for name, ls := range recorded {
		if m := nowRe.FindStringSubmatch(name); m != nil && slices.Contains(nowGauges, m[1]) {
			nowFound[m[1]] += len(ls)
			for _, l := range ls {
				if l["window"] != "" {
					t.Errorf("recording rule %s of a gauge of the current scrape has window %q", name, l["window"])
				}
			}
			continue
		}
		if m := diagRe.FindStringSubmatch(name); m != nil {
			diag[m[1]]++
			continue
		}
		if fleetRe.MatchString(name) {
			continue
		}
		if !recRe.MatchString(name) {
			t.Errorf("recording rule %s does not follow vllm:derived_<gauge>:<op><window>, vllm:diagnosis_<signal>:recent1m|baseline30m or vllm:fleet_<what>:pod5m|model5m", name)
		}
	}
	// Every signal of the fleet comparison has its value and its outlier
	// rule; the median, count and ratio are one rule over all signals.
	for _, rec := range []string{"vllm:fleet_value:pod5m", "vllm:fleet_outlier:pod5m"} {
		for _, sig := range fleetSignalNames {
			if !fleetSignals[rec][sig] {
				t.Errorf("fleet signal %s has no %s rule", sig, rec)
			}
		}
		if len(fleetSignals[rec]) != len(fleetSignalNames) {
			t.Errorf("%s has rules for signals %v, want %v", rec, fleetSignals[rec], fleetSignalNames)
		}
	}
	for _, rec := range []string{"vllm:fleet_pods:model5m", "vllm:fleet_median:model5m", "vllm:fleet_ratio:pod5m"} {
		if len(recorded[rec]) != 1 {
			t.Errorf("%s: %d rules, want one over all signals", rec, len(recorded[rec]))
		}
	}
	// Every signal of the diagnosis, and its request count, in both windows.
	for _, sig := range []string{"ttft_p90", "itl_p90", "ttft_mean", "itl_mean", "generation_tokens_per_second", "waiting", "running", "kv_cache_usage",
		"preemptions_per_second", "prompt_tokens_mean", "generation_tokens_mean", "prefix_cache_hit_ratio", "requests"} {
		if diag[sig] != 2 {
			t.Errorf("diagnosis signal %s: %d recording rules, want recent1m and baseline30m", sig, diag[sig])
		}
	}
	for _, g := range nowGauges {
		if nowFound[g] != 1 {
			t.Errorf("derived gauge %s: %d recording rules vllm:derived_%s:<op>, want 1", g, nowFound[g], g)
		}
	}
	for _, g := range windowed {
		for _, d := range derive.DefaultWindows() {
			w := model.Duration(d).String()
			var found []map[string]string
			for name, ls := range recorded {
				m := recRe.FindStringSubmatch(name)
				if m != nil && m[1] == g && m[2] == w {
					found = append(found, ls...)
				}
			}
			want := 1
			if quantileGauges[g] {
				want = 3
			}
			if sloGauges[g] {
				want = len(sloRules)
				for _, ls := range found {
					if sloRules[ls["slo"]] != ls["target"] {
						t.Errorf("attainment rule for window %s has slo=%q target=%q, want one of %v", w, ls["slo"], ls["target"], sloRules)
					}
				}
			}
			if len(found) != want {
				t.Errorf("derived gauge %s, window %s: %d recording rules, want %d", g, w, len(found), want)
			}
			qs := map[string]bool{}
			for _, ls := range found {
				if ls["window"] != w {
					t.Errorf("derived gauge %s: rule for window %s has window label %q", g, w, ls["window"])
				}
				qs[ls["q"]] = true
			}
			if quantileGauges[g] && !(qs["0.5"] && qs["0.9"] && qs["0.99"]) {
				t.Errorf("derived gauge %s window %s: quantiles %v, want 0.5, 0.9, 0.99", g, w, qs)
			}
		}
	}
}

// TestEveryAlertHasFiringAndQuietTests reads the promtool unit tests and
// requires, for each alert, one case that expects it and one that does not.
func TestEveryAlertHasFiringAndQuietTests(t *testing.T) {
	files, _ := filepath.Glob("prometheus/tests/*.yml")
	if len(files) == 0 {
		t.Fatal("no promtool unit tests in prometheus/tests")
	}
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `yaml:"alertname"`
					ExpAlerts []any  `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
			} `yaml:"tests"`
		}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range doc.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					firing[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
	}
	var alerts []string
	for _, path := range ruleFiles {
		for _, g := range readRules(t, path).Groups {
			for _, r := range g.Rules {
				if r.Alert != "" {
					alerts = append(alerts, r.Alert)
				}
			}
		}
	}
	for _, alert := range alerts {
		if !firing[alert] {
			t.Errorf("alert %s has no promtool test where it fires", alert)
		}
		if !quiet[alert] {
			t.Errorf("alert %s has no promtool test where it stays quiet", alert)
		}
	}
	for _, want := range []string{"VLLMUpstreamDown", "VLLMNormalizerScrapesFailing", "VLLMLegacyMetricNamesInUse", "VLLMSustainedPreemptions", "VLLMInstanceQueueingAbovePeers", "VLLMInstanceOutlierInFleet", "VLLMAdmissionRefusing"} {
		if !firing[want] {
			t.Errorf("required alert %s is missing or untested", want)
		}
	}
}

// TestAlertMetricsInSidecarContract checks the metric names the alerts read
// against the sidecar's real output, once the core golden file exists.
func TestAlertMetricsInSidecarContract(t *testing.T) {
	const golden = "../testdata/golden/sidecar-demo.metrics"
	data, err := os.ReadFile(golden)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s does not exist yet (written by the sidecar's golden test); alert metric names are not checked", golden)
	}
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	// labels are the label names each served family carries, so that a rule
	// selecting by a label the sidecar renamed fails here, not in a dashboard.
	labels := map[string]map[string]bool{}
	labelName := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	for line := range strings.SplitSeq(string(data), "\n") {
		fs := strings.Fields(line)
		switch {
		case len(fs) >= 4 && fs[0] == "#" && fs[1] == "TYPE":
			known[fs[2]] = true
			if fs[3] == "counter" {
				known[strings.TrimSuffix(fs[2], "_total")+"_total"] = true
			}
		case len(fs) >= 1 && !strings.HasPrefix(fs[0], "#"):
			name, rest, _ := strings.Cut(fs[0], "{")
			known[name] = true
			if labels[name] == nil {
				labels[name] = map[string]bool{}
			}
			for _, m := range labelName.FindAllStringSubmatch(rest, -1) {
				labels[name][m[1]] = true
			}
		}
	}
	// Labels Prometheus adds to every scraped series, and the cluster label
	// of Thanos and Mimir.
	targetLabels := map[string]bool{"namespace": true, "pod": true, "job": true, "instance": true, "cluster": true}
	// The fleet rules read the sidecar's output only (Prometheus adds the
	// pod labels); an alert may read what they record.
	p := parser.NewParser(parser.Options{})
	var checked []string
	check := func(what, expr string) {
		ast, err := p.ParseExpr(expr)
		if err != nil {
			return // reported by TestRulesParse
		}
		for _, vs := range parser.ExtractSelectors(ast) {
			name := ""
			for _, m := range vs {
				if m.Name == "__name__" {
					name = m.Value
					if !known[m.Value] {
						t.Errorf("%s reads %s, which the sidecar does not serve (%s)", what, m.Value, golden)
					}
				}
			}
			served, ok := labels[name]
			if !ok {
				continue // a recorded series, or reported above
			}
			for _, m := range vs {
				if m.Name != "__name__" && !targetLabels[m.Name] && !served[m.Name] {
					t.Errorf("%s selects %s by %s, a label the sidecar does not put on it (%s)", what, name, m.Name, golden)
				}
			}
		}
		checked = append(checked, what)
	}
	for _, g := range readRules(t, "prometheus/recording.yml").Groups {
		if g.Name != "vllm-fleet" {
			continue
		}
		for _, r := range g.Rules {
			check("fleet rule "+r.Record, r.Expr)
			known[r.Record] = true // the rules of a group run in order
		}
	}
	if len(checked) == 0 {
		t.Error("no vllm-fleet recording rules found in prometheus/recording.yml")
	}
	rf := readRules(t, "prometheus/alerts.yml")
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			check("alert "+r.Alert, r.Expr)
		}
	}
}

// ---- promtool ----------------------------------------------------------------

// promtool is promtool 3.x (testbin.PrometheusTool): the rule tests hold the
// rules to the Prometheus users run; under CI=true its absence fails.
func promtool(t *testing.T) string {
	t.Helper()
	return testbin.PrometheusTool(t, "promtool")
}

// missingTool skips a test whose tool is missing, but fails it under
// CI=true, where deploy/ci-deps.sh installs every tool: CI never passes
// without running them.
func missingTool(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why + " (and CI=true: the test must run in CI)")
	}
	t.Skip(why)
}

// TestPromtoolRequiredUnderCI: without promtool the rule tests are skipped
// on a laptop but fail under CI=true, as the other packages' promtool tests
// do, so that CI never passes without running them. It runs promtool's
// lookup in a child with an empty PATH and GOPATH (testbin.PrometheusTool
// looks in GOPATH/bin first).
func TestPromtoolRequiredUnderCI(t *testing.T) {
	if os.Getenv("DEPLOY_PROMTOOL_CHILD") == "1" {
		promtool(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPromtoolRequiredUnderCI$", "-test.v")
	cmd.Env = append(os.Environ(), "CI=true", "PATH="+t.TempDir(), "GOPATH="+t.TempDir(), "DEPLOY_PROMTOOL_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "CI=true") {
		t.Errorf("under CI=true without promtool the test must fail naming CI=true; it exited %v:\n%s", err, out)
	}
}

// shippedMemory is the sidecar's memory limit in both manifests: three
// quarters of it covers the peak RSS that e2e's TestDefaultsFitTheContainer
// measures under the worst the default flags admit (docs/operating.md).
const shippedMemory = "448Mi"

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func TestPromtoolCheckRules(t *testing.T) {
	pt := promtool(t)
	run(t, pt, append([]string{"check", "rules"}, ruleFiles...)...)
	// The rules inside the PrometheusRule are checked too.
	data, err := os.ReadFile(prometheusRuleFile)
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Spec yaml.MapSlice `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatal(err)
	}
	spec, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "prometheusrule-spec.yml")
	if err := os.WriteFile(tmp, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, pt, "check", "rules", tmp)
}

func TestPromtoolTestRules(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): evaluates every rule test in Prometheus's engine (20 s on a loaded machine)")
	}
	pt := promtool(t)
	files, _ := filepath.Glob("prometheus/tests/*.yml")
	out := run(t, pt, append([]string{"test", "rules"}, files...)...)
	if strings.Count(out, "SUCCESS") != len(files) {
		t.Fatalf("promtool test rules did not succeed for every file:\n%s", out)
	}
}

// ---- Kubernetes ----------------------------------------------------------------

// kustomize builds a kustomization with kubectl's embedded kustomize.
func kustomize(t *testing.T, dir string) []map[string]any {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		missingTool(t, "kubectl not found: the Kubernetes manifests are not built (install kubectl >= 1.27, which embeds kustomize v5, with deploy/ci-deps.sh)")
	}
	ver, _ := exec.Command(kubectl, "version", "--client").CombinedOutput()
	if !regexp.MustCompile(`Kustomize Version: v[45]`).Match(ver) {
		missingTool(t, fmt.Sprintf("kubectl's embedded kustomize is too old or unknown (%q): need v4 or v5", strings.TrimSpace(string(ver))))
	}
	out := run(t, kubectl, "kustomize", dir)
	dec := yaml.NewDecoder(strings.NewReader(out))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("kustomize output: %v", err)
		}
		if d != nil {
			docs = append(docs, normalize(d).(map[string]any))
		}
	}
	return docs
}

// overlayDir returns a new directory for an overlay and the path of target
// (relative to this package) from it: kustomize refuses absolute paths.
func overlayDir(t *testing.T, target string) (dir, rel string) {
	t.Helper()
	abs, err := filepath.Abs(target)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	rel, err = filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	return dir, rel
}

// get walks a path of map keys and list indexes through generic YAML.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func byKind(docs []map[string]any) map[string][]map[string]any {
	m := map[string][]map[string]any{}
	for _, d := range docs {
		k := fmt.Sprint(d["kind"])
		m[k] = append(m[k], d)
	}
	return m
}

func findContainer(t *testing.T, podSpec any, name string) map[string]any {
	t.Helper()
	cs, _ := get(podSpec, "containers").([]any)
	for _, c := range cs {
		if get(c, "name") == name {
			return c.(map[string]any)
		}
	}
	t.Fatalf("no container %q in the pod spec", name)
	return nil
}

// portNumber resolves a probe or monitor port (name or number) in a container.
func portNumber(c map[string]any, port any) int {
	if n, ok := port.(int); ok {
		return n
	}
	ps, _ := c["ports"].([]any)
	for _, p := range ps {
		if get(p, "name") == port {
			n, _ := get(p, "containerPort").(int)
			return n
		}
	}
	return 0
}

func TestKustomizeBuild(t *testing.T) {
	docs := kustomize(t, "kubernetes")
	kinds := byKind(docs)
	for _, k := range []string{"Deployment", "Service", "PodMonitor", "PrometheusRule", "ConfigMap"} {
		if len(kinds[k]) != 1 {
			t.Fatalf("want one %s, got %d", k, len(kinds[k]))
		}
	}

	dep := kinds["Deployment"][0]
	pod := get(dep, "spec", "template", "spec")
	podLabels, _ := get(dep, "spec", "template", "metadata", "labels").(map[string]any)

	t.Run("vllm container", func(t *testing.T) {
		c := findContainer(t, pod, "vllm")
		if img := fmt.Sprint(c["image"]); !strings.HasPrefix(img, "vllm/vllm-openai:") {
			t.Errorf("vllm image = %s", img)
		}
		if portNumber(c, "http") != 8000 {
			t.Errorf("vllm must listen on 8000, the port the sidecar scrapes")
		}
	})

	t.Run("sidecar container", func(t *testing.T) {
		c := findContainer(t, pod, "vllm-normalizer")
		if img := fmt.Sprint(c["image"]); !strings.HasPrefix(img, "ghcr.io/fos-study/vllm-normalizer:") {
			t.Errorf("sidecar image = %s", img)
		}
		args := fmt.Sprint(c["args"])
		for _, a := range []string{"--web.listen-address=:9400", "--vllm.scrape-uri=http://127.0.0.1:8000/metrics", "--auto-gomemlimit"} {
			if !strings.Contains(args, a) {
				t.Errorf("sidecar args %s lack %s", args, a)
			}
		}
		if portNumber(c, "normalizer") != 9400 {
			t.Errorf("sidecar port normalizer must be 9400")
		}
		for probe, path := range map[string]string{"livenessProbe": "/-/healthy", "readinessProbe": "/-/ready"} {
			if got := get(c, probe, "httpGet", "path"); got != path {
				t.Errorf("%s path = %v, want %s", probe, got, path)
			}
			if n := portNumber(c, get(c, probe, "httpGet", "port")); n != 9400 {
				t.Errorf("%s port resolves to %d, want 9400", probe, n)
			}
		}
		sc := get(c, "securityContext")
		want := map[string]any{"readOnlyRootFilesystem": true, "runAsNonRoot": true, "runAsUser": 65532, "allowPrivilegeEscalation": false}
		for k, v := range want {
			if got := get(sc, k); got != v {
				t.Errorf("securityContext.%s = %v, want %v", k, got, v)
			}
		}
		res := map[string]string{
			"requests.cpu": "10m", "requests.memory": "32Mi",
			"limits.cpu": "200m", "limits.memory": shippedMemory,
		}
		for k, v := range res {
			parts := strings.Split(k, ".")
			if got := fmt.Sprint(get(c, "resources", parts[0], parts[1])); got != v {
				t.Errorf("resources.%s = %s, want %s", k, got, v)
			}
		}
	})

	t.Run("routers and monitors point at the sidecar", func(t *testing.T) {
		// AIBrix reads /metrics on the labelled port: it must be the
		// routing listener, which serves the routing view there.
		side := findContainer(t, pod, "vllm-normalizer")
		routing := listenPort(t, side, "--web.routing-listen-address")
		if podLabels["model.aibrix.ai/metric-port"] != fmt.Sprint(routing) || portNumber(side, "nz-routing") != routing {
			t.Errorf("pod label model.aibrix.ai/metric-port = %v, want the routing listener's port %d, declared as nz-routing", podLabels["model.aibrix.ai/metric-port"], routing)
		}
		pm := kinds["PodMonitor"][0]
		if get(pm, "apiVersion") != "monitoring.coreos.com/v1" {
			t.Errorf("PodMonitor apiVersion = %v", get(pm, "apiVersion"))
		}
		sel, _ := get(pm, "spec", "selector", "matchLabels").(map[string]any)
		if len(sel) == 0 {
			t.Fatal("PodMonitor has no matchLabels")
		}
		for k, v := range sel {
			if podLabels[k] != v {
				t.Errorf("PodMonitor selects %s=%v, which the vLLM pods do not carry", k, v)
			}
		}
		ep := get(pm, "spec", "podMetricsEndpoints", 0)
		if portNumber(side, get(ep, "port")) != 9400 {
			t.Errorf("PodMonitor port %v does not resolve to the sidecar's 9400", get(ep, "port"))
		}
		if get(ep, "path") != "/metrics" {
			t.Errorf("PodMonitor path = %v", get(ep, "path"))
		}
		svcPorts, _ := get(kinds["Service"][0], "spec", "ports").([]any)
		found := false
		for _, p := range svcPorts {
			if get(p, "port") == 9400 {
				found = true
			}
		}
		if !found {
			t.Error("Service does not expose 9400")
		}
	})

	t.Run("PrometheusRule carries the rule files", func(t *testing.T) {
		got := get(kinds["PrometheusRule"][0], "spec", "groups")
		if !reflect.DeepEqual(got, normalize(rawGroups(t))) {
			t.Error("built PrometheusRule groups differ from prometheus/*.yml")
		}
	})

	t.Run("dashboards ConfigMap", func(t *testing.T) {
		cm := kinds["ConfigMap"][0]
		if get(cm, "metadata", "labels", "grafana_dashboard") != "1" {
			t.Errorf("ConfigMap labels = %v, want grafana_dashboard: \"1\"", get(cm, "metadata", "labels"))
		}
		data, _ := get(cm, "data").(map[string]any)
		files, _ := filepath.Glob("../dashboards/*.json")
		if len(files) == 0 || len(data) != len(files) {
			t.Fatalf("ConfigMap has %d dashboards, dashboards/ has %d", len(data), len(files))
		}
		var keys []string
		for _, f := range files {
			want, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			k := filepath.Base(f)
			keys = append(keys, k)
			if data[k] != string(want) {
				t.Errorf("ConfigMap key %s differs from %s", k, f)
			}
		}
		sort.Strings(keys)
	})
}

// TestKustomizeImageOverride proves the sidecar image can be pinned with a
// kustomize images: entry in an overlay.
func TestKustomizeImageOverride(t *testing.T) {
	dir, rel := overlayDir(t, "kubernetes")
	overlay := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: ghcr.io/fos-study/vllm-normalizer
    newName: registry.example/vllm-normalizer
    newTag: v9.9.9
`, rel)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	docs := kustomize(t, dir)
	for _, d := range docs {
		if d["kind"] != "Deployment" {
			continue
		}
		c := findContainer(t, get(d, "spec", "template", "spec"), "vllm-normalizer")
		if c["image"] != "registry.example/vllm-normalizer:v9.9.9" {
			t.Errorf("sidecar image = %v after override", c["image"])
		}
		return
	}
	t.Fatal("no Deployment in the overlay output")
}

// TestAutoscalingRulesHavePromtoolTests requires a promtool test case that
// evaluates each recording rule of the autoscaling gauges.
func TestAutoscalingRulesHavePromtoolTests(t *testing.T) {
	files, _ := filepath.Glob("prometheus/tests/*.yml")
	var exprs []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Tests []struct {
				PromQLExprTest []struct {
					Expr string `yaml:"expr"`
				} `yaml:"promql_expr_test"`
			} `yaml:"tests"`
		}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range doc.Tests {
			for _, e := range tc.PromQLExprTest {
				exprs = append(exprs, e.Expr)
			}
		}
	}
	_, nowGauges, _, _ := derivedGauges(t)
	autoscaling := append([]string{"slo_attainment_ratio", "generation_tokens_per_second_per_request"}, nowGauges...)
	rf := readRules(t, "prometheus/recording.yml")
	n := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			m := regexp.MustCompile(`^vllm:derived_([a-z0-9_]+):`).FindStringSubmatch(r.Record)
			if m == nil || !slices.Contains(autoscaling, m[1]) {
				continue
			}
			n++
			tested := slices.ContainsFunc(exprs, func(e string) bool {
				return regexp.MustCompile(regexp.QuoteMeta(r.Record) + `\b`).MatchString(e)
			})
			if !tested {
				t.Errorf("recording rule %s has no promtool test case in prometheus/tests", r.Record)
			}
		}
	}
	if n == 0 {
		t.Error("no autoscaling recording rules found")
	}
}

// ---- autoscaling overlays ----------------------------------------------------

// adapterQuery expands a prometheus-adapter metricsQuery template the way
// the adapter does for one query: <<.Series>> the series name,
// <<.LabelMatchers>> the matchers, <<.GroupBy>> the grouping labels.
func adapterQuery(tmpl, series, matchers, groupBy string) string {
	r := strings.NewReplacer("<<.Series>>", series, "<<.LabelMatchers>>", matchers, "<<.GroupBy>>", groupBy)
	return r.Replace(tmpl)
}

// sidecarSLOArgs returns the --slo.* flags of the rendered sidecar.
func sidecarSLOArgs(t *testing.T, kinds map[string][]map[string]any) map[string]string {
	t.Helper()
	if len(kinds["Deployment"]) != 1 {
		t.Fatalf("want one Deployment, got %d", len(kinds["Deployment"]))
	}
	c := findContainer(t, get(kinds["Deployment"][0], "spec", "template", "spec"), "vllm-normalizer")
	args, _ := c["args"].([]any)
	out := map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(fmt.Sprint(a), "=")
		if ok && strings.HasPrefix(k, "--slo.") {
			out[strings.TrimPrefix(k, "--slo.")] = v
		}
	}
	return out
}

// checkSLOArgs: the overlays' sidecar computes attainment for exactly the
// targets the recording rules and the triggers use (le as the sidecar
// prints it: 500ms -> "0.5").
func checkSLOArgs(t *testing.T, kinds map[string][]map[string]any) {
	t.Helper()
	got := sidecarSLOArgs(t, kinds)
	want := map[string]string{"ttft": "500ms", "tpot": "50ms", "e2e": "10s"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sidecar --slo flags %v, want %v", got, want)
	}
	leOf := map[string]string{"500ms": "0.5", "50ms": "0.05", "10s": "10.0"}
	for slo, d := range got {
		if sloRules[slo] != leOf[d] {
			t.Errorf("--slo.%s=%s is le %q, but the recording rules record le %q", slo, d, leOf[d], sloRules[slo])
		}
	}
}

func parseQuery(t *testing.T, what, q string) {
	t.Helper()
	if _, err := parser.NewParser(parser.Options{}).ParseExpr(q); err != nil {
		t.Errorf("%s: %q does not parse: %v", what, q, err)
	}
}

func TestKustomizeKEDA(t *testing.T) {
	docs := kustomize(t, "autoscaling/keda")
	kinds := byKind(docs)
	for _, k := range []string{"Deployment", "Service", "PodMonitor", "PrometheusRule", "ScaledObject"} {
		if len(kinds[k]) != 1 {
			t.Fatalf("want one %s, got %d", k, len(kinds[k]))
		}
	}
	checkSLOArgs(t, kinds)
	so := kinds["ScaledObject"][0]
	if get(so, "apiVersion") != "keda.sh/v1alpha1" {
		t.Errorf("ScaledObject apiVersion = %v", get(so, "apiVersion"))
	}
	if got, want := get(so, "spec", "scaleTargetRef", "name"), get(kinds["Deployment"][0], "metadata", "name"); got != want {
		t.Errorf("ScaledObject scales %v, the Deployment is %v", got, want)
	}
	triggers, _ := get(so, "spec", "triggers").([]any)
	reads := map[string]bool{}
	for i, tr := range triggers {
		if get(tr, "type") != "prometheus" {
			t.Errorf("trigger %d is %v, want prometheus", i, get(tr, "type"))
		}
		q := fmt.Sprint(get(tr, "metadata", "query"))
		parseQuery(t, fmt.Sprintf("trigger %d", i), q)
		if get(tr, "metadata", "serverAddress") == nil || get(tr, "metadata", "threshold") == nil {
			t.Errorf("trigger %d lacks serverAddress or threshold", i)
		}
		for _, g := range []string{"vllm_derived_requests_in_flight", "vllm_derived_slo_attainment_ratio"} {
			if strings.Contains(q, g) {
				reads[g] = true
			}
		}
		if strings.Contains(q, "vllm_derived_slo_attainment_ratio") && !strings.Contains(q, `slo="ttft",target="0.5"`) {
			t.Errorf("SLO trigger %q does not select the target the sidecar computes (slo=\"ttft\",target=\"0.5\")", q)
		}
	}
	if !reads["vllm_derived_requests_in_flight"] || !reads["vllm_derived_slo_attainment_ratio"] {
		t.Errorf("triggers read %v, want the in-flight gauge and SLO attainment", reads)
	}
}

// The prefill/decode example scales two pools apart, each on its own
// role's gauge: prefill on seconds of queued prefill, decode on requests in
// flight.
func TestKustomizeKEDAPrefillDecode(t *testing.T) {
	docs := kustomize(t, "autoscaling/keda-pd")
	sos := byKind(docs)["ScaledObject"]
	if len(sos) != 2 || len(docs) != 2 {
		t.Fatalf("want two ScaledObjects and nothing else, got %d documents", len(docs))
	}
	want := map[string]struct{ role, gauge string }{
		"vllm-prefill": {"prefill", "vllm_derived_prefill_backlog_seconds"},
		"vllm-decode":  {"decode", "vllm_derived_requests_in_flight"},
	}
	for _, so := range sos {
		target := fmt.Sprint(get(so, "spec", "scaleTargetRef", "name"))
		w, ok := want[target]
		if !ok {
			t.Errorf("a ScaledObject scales %s, want vllm-prefill or vllm-decode", target)
			continue
		}
		delete(want, target)
		triggers, _ := get(so, "spec", "triggers").([]any)
		if len(triggers) == 0 {
			t.Errorf("%s has no trigger", target)
		}
		for i, tr := range triggers {
			q := fmt.Sprint(get(tr, "metadata", "query"))
			parseQuery(t, fmt.Sprintf("%s trigger %d", target, i), q)
			if get(tr, "type") != "prometheus" || get(tr, "metadata", "serverAddress") == nil || get(tr, "metadata", "threshold") == nil {
				t.Errorf("%s trigger %d: want a prometheus trigger with serverAddress and threshold: %v", target, i, tr)
			}
			if !strings.Contains(q, w.gauge) || !strings.Contains(q, `role="`+w.role+`"`) {
				t.Errorf("%s trigger %d: %q must read %s of role=%q only", target, i, q, w.gauge, w.role)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("no ScaledObject for %v", want)
	}
}

func TestKustomizeHPA(t *testing.T) {
	docs := kustomize(t, "autoscaling/hpa")
	kinds := byKind(docs)
	for _, k := range []string{"Deployment", "HorizontalPodAutoscaler"} {
		if len(kinds[k]) != 1 {
			t.Fatalf("want one %s, got %d", k, len(kinds[k]))
		}
	}
	checkSLOArgs(t, kinds)
	hpa := kinds["HorizontalPodAutoscaler"][0]
	if get(hpa, "apiVersion") != "autoscaling/v2" {
		t.Errorf("HPA apiVersion = %v", get(hpa, "apiVersion"))
	}
	if got, want := get(hpa, "spec", "scaleTargetRef", "name"), get(kinds["Deployment"][0], "metadata", "name"); got != want {
		t.Errorf("HPA scales %v, the Deployment is %v", got, want)
	}
	// The adapter's rules ship as a ConfigMap holding the file verbatim.
	file, err := os.ReadFile("autoscaling/hpa/prometheus-adapter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm map[string]any
	for _, d := range kinds["ConfigMap"] {
		if get(d, "metadata", "name") == "prometheus-adapter-vllm" {
			cm = d
		}
	}
	if cm == nil || get(cm, "data", "config.yaml") != string(file) {
		t.Fatal("no ConfigMap prometheus-adapter-vllm with config.yaml = autoscaling/hpa/prometheus-adapter.yaml")
	}
	var adapter struct {
		Rules         []adapterRule `yaml:"rules"`
		ExternalRules []adapterRule `yaml:"externalRules"`
	}
	if err := yaml.UnmarshalStrict(file, &adapter); err != nil {
		t.Fatal(err)
	}
	custom, external := map[string]adapterRule{}, map[string]adapterRule{}
	for _, r := range adapter.Rules {
		custom[r.Name.As] = r
	}
	for _, r := range adapter.ExternalRules {
		external[r.Name.As] = r
	}
	for _, set := range []map[string]adapterRule{custom, external} {
		for as, r := range set {
			parseQuery(t, "adapter seriesQuery "+as, r.SeriesQuery)
			q := adapterQuery(r.MetricsQuery, regexp.MustCompile(`^\^?([a-z_:]+)\$?$`).ReplaceAllString(r.Name.Matches, "$1"), `namespace="llm"`, "namespace")
			parseQuery(t, "adapter metricsQuery "+as, q)
		}
	}
	// Every HPA metric is one the adapter serves, of the right kind.
	metrics, _ := get(hpa, "spec", "metrics").([]any)
	kindsSeen := map[string]bool{}
	for _, m := range metrics {
		switch typ := fmt.Sprint(get(m, "type")); typ {
		case "Pods":
			name := fmt.Sprint(get(m, "pods", "metric", "name"))
			if _, ok := custom[name]; !ok {
				t.Errorf("HPA Pods metric %s is not a custom metric of the adapter rules", name)
			}
			kindsSeen[typ] = true
		case "External":
			name := fmt.Sprint(get(m, "external", "metric", "name"))
			if _, ok := external[name]; !ok {
				t.Errorf("HPA External metric %s is not an external metric of the adapter rules", name)
			}
			sel, _ := get(m, "external", "metric", "selector", "matchLabels").(map[string]any)
			if sel["slo"] != "ttft" || sel["target"] != "0.5" || sel["window"] == nil {
				t.Errorf("HPA SLO metric selects %v, want slo=ttft, target=0.5 and a window", sel)
			}
			kindsSeen[typ] = true
		default:
			t.Errorf("unexpected HPA metric type %s", typ)
		}
	}
	if !kindsSeen["Pods"] || !kindsSeen["External"] {
		t.Errorf("HPA metrics %v: want the in-flight Pods metric and the SLO External metric", kindsSeen)
	}
}

// adapterRule is one prometheus-adapter discovery rule.
type adapterRule struct {
	SeriesQuery string `yaml:"seriesQuery"`
	Resources   struct {
		Overrides map[string]struct {
			Resource string `yaml:"resource"`
		} `yaml:"overrides"`
	} `yaml:"resources"`
	Name struct {
		Matches string `yaml:"matches"`
		As      string `yaml:"as"`
	} `yaml:"name"`
	MetricsQuery string `yaml:"metricsQuery"`
}

// listenPort returns the port of a container's --flag=host:port argument.
func listenPort(t *testing.T, c map[string]any, flag string) int {
	t.Helper()
	args, _ := c["args"].([]any)
	for _, a := range args {
		v, ok := strings.CutPrefix(fmt.Sprint(a), flag+"=")
		if !ok {
			continue
		}
		i := strings.LastIndex(v, ":")
		n, err := strconv.Atoi(v[i+1:])
		if i < 0 || err != nil {
			t.Fatalf("%s=%s is not host:port", flag, v)
		}
		return n
	}
	t.Fatalf("the container has no %s argument: %v", flag, args)
	return 0
}

// TestKustomizeSidecarComponent renders the example overlay that adds the
// sidecar to a plain vLLM Deployment through deploy/components/sidecar, and
// checks the resulting pod: vLLM's container untouched and still first,
// the sidecar appended with the overlay's image, every listener's port
// declared, probes and security settings as in the base.
func TestKustomizeSidecarComponent(t *testing.T) {
	docs := kustomize(t, "examples/sidecar-component")
	kinds := byKind(docs)
	if len(docs) != 1 || len(kinds["Deployment"]) != 1 {
		t.Fatalf("want exactly the one Deployment, got %d documents", len(docs))
	}
	pod := get(kinds["Deployment"][0], "spec", "template", "spec")
	cs, _ := get(pod, "containers").([]any)
	if len(cs) != 2 || get(cs[0], "name") != "vllm" || get(cs[1], "name") != "vllm-normalizer" {
		t.Fatalf("containers %v: want vllm first, then vllm-normalizer", cs)
	}
	vllm := findContainer(t, pod, "vllm")
	if vllm["image"] != "vllm/vllm-openai:v0.11.0" || fmt.Sprint(vllm["args"]) != "[--model=Qwen/Qwen2.5-7B-Instruct --port=8000]" {
		t.Errorf("the vLLM container changed: %v", vllm)
	}
	c := findContainer(t, pod, "vllm-normalizer")
	if c["image"] != "registry.example.com/vllm-normalizer:v0.1.0" {
		t.Errorf("sidecar image = %v, want the overlay's images: entry", c["image"])
	}
	args := fmt.Sprint(c["args"])
	if !strings.Contains(args, "--vllm.scrape-uri=http://127.0.0.1:8000/metrics") || portNumber(vllm, "http") != 8000 {
		t.Errorf("the sidecar must scrape vLLM's port 8000 on loopback: args %s, vLLM port %d", args, portNumber(vllm, "http"))
	}
	for _, l := range []struct {
		flag, portName string
		want           int
	}{
		{"--web.listen-address", "normalizer", 9400},
		{"--web.routing-listen-address", "nz-routing", 9401},
		{"--proxy.listen-address", "nz-proxy", 8001},
	} {
		if got := listenPort(t, c, l.flag); got != l.want || portNumber(c, l.portName) != l.want {
			t.Errorf("%s listens on %d and port %s is %d; want both %d", l.flag, got, l.portName, portNumber(c, l.portName), l.want)
		}
	}
	for probe, path := range map[string]string{"livenessProbe": "/-/healthy", "readinessProbe": "/-/ready"} {
		if get(c, probe, "httpGet", "path") != path || portNumber(c, get(c, probe, "httpGet", "port")) != 9400 {
			t.Errorf("%s = %v, want %s on 9400", probe, get(c, probe), path)
		}
	}
	want := map[string]any{"readOnlyRootFilesystem": true, "runAsNonRoot": true, "runAsUser": 65532, "allowPrivilegeEscalation": false}
	for k, v := range want {
		if got := get(c, "securityContext", k); got != v {
			t.Errorf("securityContext.%s = %v, want %v", k, got, v)
		}
	}
	if fmt.Sprint(get(c, "resources", "limits", "memory")) != shippedMemory || fmt.Sprint(get(c, "resources", "requests", "cpu")) != "10m" {
		t.Errorf("resources = %v, want the memory limit %s", get(c, "resources"), shippedMemory)
	}
	if args := fmt.Sprint(c["args"]); !strings.Contains(args, "--auto-gomemlimit") {
		t.Errorf("the component's sidecar args %s lack --auto-gomemlimit", args)
	}
	// The pod role comes from the pod label llm-d.ai/role through the
	// downward API: an env var the role flag expands.
	roleVar := ""
	envs, _ := c["env"].([]any)
	for _, e := range envs {
		if get(e, "valueFrom", "fieldRef", "fieldPath") == "metadata.labels['llm-d.ai/role']" {
			roleVar, _ = get(e, "name").(string)
		}
	}
	if roleVar == "" || !strings.Contains(args, "--upstream.role=$("+roleVar+")") {
		t.Errorf("the sidecar must take --upstream.role from the pod label llm-d.ai/role (downward API env var): env %v, args %s", envs, args)
	}
}

// TestSidecarComponentSelectsByLabel: only Deployments labelled
// vllm-normalizer/sidecar=true get the sidecar.
func TestSidecarComponentSelectsByLabel(t *testing.T) {
	dir, rel := overlayDir(t, "components/sidecar")
	deployment := func(name, label string) string {
		return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels: {app: %[1]s%[2]s}
spec:
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
        - {name: vllm, image: vllm/vllm-openai:v0.11.0}
`, name, label)
	}
	files := map[string]string{
		"selected.yaml":   deployment("selected", `, vllm-normalizer/sidecar: "true"`),
		"unlabelled.yaml": deployment("unlabelled", ""),
		"off.yaml":        deployment("off", `, vllm-normalizer/sidecar: "false"`),
		"kustomization.yaml": fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [selected.yaml, unlabelled.yaml, off.yaml]
components: [%s]
`, rel),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range kustomize(t, dir) {
		name := get(d, "metadata", "name")
		var names []string
		cs, _ := get(d, "spec", "template", "spec", "containers").([]any)
		for _, c := range cs {
			names = append(names, fmt.Sprint(get(c, "name")))
		}
		want := "[vllm]"
		if name == "selected" {
			want = "[vllm vllm-normalizer]"
		}
		if fmt.Sprint(names) != want {
			t.Errorf("Deployment %v has containers %v, want %s", name, names, want)
		}
	}
}

// TestAlertTestStatusesAreReal ties the metric-status series of the
// promtool tests to what the sidecar really prints: a series on a pod named
// <engine>-<NN> must be, metric for metric, the status and replacement that
// the sidecar's golden output for testdata/fixtures/<NN>-*.prom holds.
func TestAlertTestStatusesAreReal(t *testing.T) {
	data, err := os.ReadFile("prometheus/tests/alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests []struct {
			InputSeries []struct {
				Series string `yaml:"series"`
			} `yaml:"input_series"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	podRe := regexp.MustCompile(`^(v0|v1|sglang)-(\d\d)$`)
	p := parser.NewParser(parser.Options{})
	// "metric status replacement" lines of the golden output, per fixture.
	golden := map[string]map[string]bool{}
	statusOf := func(nn string) map[string]bool {
		if g, ok := golden[nn]; ok {
			return g
		}
		paths, _ := filepath.Glob(filepath.Join("..", "testdata", "golden", nn+"-*.metrics"))
		if len(paths) != 1 {
			t.Fatalf("no single golden output for fixture %s: %v", nn, paths)
		}
		body, err := os.ReadFile(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		g := map[string]bool{}
		for line := range strings.SplitSeq(string(body), "\n") {
			if !strings.HasPrefix(line, "vllm_normalizer_metric_status{") {
				continue
			}
			l, err := p.ParseMetric(line[:strings.LastIndex(line, " ")])
			if err != nil {
				t.Fatalf("%s: %v", paths[0], err)
			}
			g[l.Get("metric")+" "+l.Get("status")+" "+l.Get("replacement")] = true
		}
		golden[nn] = g
		return g
	}
	checked := 0
	for _, tc := range doc.Tests {
		for _, in := range tc.InputSeries {
			l, err := p.ParseMetric(in.Series)
			if err != nil || l.Get("__name__") != "vllm_normalizer_metric_status" {
				continue
			}
			m := podRe.FindStringSubmatch(l.Get("pod"))
			if m == nil {
				continue
			}
			key := l.Get("metric") + " " + l.Get("status") + " " + l.Get("replacement")
			if !statusOf(m[2])[key] {
				t.Errorf("%s: the sidecar does not print %q for fixture %s", in.Series, key, m[2])
			}
			checked++
		}
	}
	if checked < 10 {
		t.Errorf("only %d status series checked; the V0, V1 and SGLang cases must name their pods <engine>-<NN>", checked)
	}
}
