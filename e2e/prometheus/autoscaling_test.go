package prometheus_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v2"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// The autoscaling overlays select the example base's served model name;
// the demo serves another, which the test substitutes.
const (
	overlayModel = `model_name="my-model"`
	demoModel    = `model_name="TinyLlama"`
)

// overlaySLOFlags returns the sidecar flags the autoscaling overlays add
// (deploy/autoscaling/slo), so the demo sidecar computes what they query.
func overlaySLOFlags(t *testing.T, root string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "autoscaling", "slo", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var comp struct {
		Patches []struct {
			Patch string `yaml:"patch"`
		} `yaml:"patches"`
	}
	if err := yaml.Unmarshal(raw, &comp); err != nil {
		t.Fatal(err)
	}
	var flags []string
	for _, p := range comp.Patches {
		var ops []struct {
			Value string `yaml:"value"`
		}
		if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			if strings.HasPrefix(op.Value, "--slo.") {
				flags = append(flags, op.Value)
			}
		}
	}
	if len(flags) == 0 {
		t.Fatal("the slo component adds no --slo flag")
	}
	return flags
}

// forDemo rewrites an overlay query for the demo, which must be needed.
func forDemo(t *testing.T, what, q string) string {
	t.Helper()
	if !strings.Contains(q, overlayModel) {
		t.Fatalf("%s: %q does not select %s", what, q, overlayModel)
	}
	return strings.ReplaceAll(q, overlayModel, demoModel)
}

// TestAutoscalingQueriesReturnData: the PromQL of the KEDA ScaledObject and
// of the prometheus-adapter rules behind the HPA (deploy/autoscaling)
// returns data from a real Prometheus scraping the demo sidecar (two
// engines) with the overlays' SLO flags, and the values are the ones the raw
// series give. So do the recording rules of the autoscaling gauges that
// aggregate the sidecar's gauges across pods.
func TestAutoscalingQueriesReturnData(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	root := repoRoot(t)

	side := testbin.Start(t, append([]string{"--demo", "--demo.engines=2"}, overlaySLOFlags(t, root)...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar log:\n%s", side.Logs())
		}
	})
	prom := startPrometheus(t, promBin, []scrapeJob{{
		Name:   "vllm-normalizer",
		Target: side.Addr,
		Labels: map[string]string{"namespace": demoNamespace, "pod": demoPod},
	}}, []string{filepath.Join(root, "deploy", "prometheus", "recording.yml")})
	// The 1m window needs two scrapes, and the demo some requests in it.
	prom.waitFor(t, `vllm_derived_slo_attainment_ratio{slo="ttft",target="0.5",window="1m"}`, 30*time.Second)
	prom.waitFor(t, `vllm:derived_idle_seconds:min`, 10*time.Second)
	time.Sleep(2 * time.Second)
	at := time.Now().Add(-time.Second).Truncate(time.Second)

	one := func(what, q string) promSample {
		t.Helper()
		res := prom.mustQuery(t, q, at)
		if len(res) != 1 {
			t.Fatalf("%s: %q returned %d series, want 1: %v", what, q, len(res), res)
		}
		return res[0]
	}
	// The raw truth at the same instant: in flight over the pod's engines,
	// and the worst engine's TTFT attainment from the sidecar's own gauge.
	inFlight := one("running + waiting", `sum(vllm:num_requests_running{namespace="demo"}) + sum(vllm:num_requests_waiting{namespace="demo"})`).Value
	worst := one("worst attainment", `min(vllm_derived_slo_attainment_ratio{namespace="demo",`+demoModel+`,slo="ttft",target="0.5",window="1m"})`).Value
	if worst < 0 || worst > 1 {
		t.Fatalf("TTFT attainment %g is not a share", worst)
	}

	// KEDA.
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "autoscaling", "keda", "scaledobject.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var so struct {
		Spec struct {
			Triggers []struct {
				Name     string            `yaml:"name"`
				Metadata map[string]string `yaml:"metadata"`
			} `yaml:"triggers"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(raw, &so); err != nil {
		t.Fatal(err)
	}
	if len(so.Spec.Triggers) != 2 {
		t.Fatalf("ScaledObject has %d triggers, want the in-flight and the SLO one", len(so.Spec.Triggers))
	}
	for _, tr := range so.Spec.Triggers {
		q := forDemo(t, "trigger "+tr.Name, tr.Metadata["query"])
		got := one("trigger "+tr.Name, q).Value
		var want float64
		switch {
		case strings.Contains(q, "vllm_derived_requests_in_flight"):
			want = inFlight
		case strings.Contains(q, "vllm_derived_slo_attainment_ratio"):
			want = 1 - worst
		default:
			t.Fatalf("trigger %s reads neither gauge: %q", tr.Name, q)
		}
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("KEDA trigger %s: %q = %g, the raw series give %g", tr.Name, q, got, want)
		}
		t.Logf("KEDA trigger %s = %g (threshold %s)", tr.Name, got, tr.Metadata["threshold"])
	}

	// prometheus-adapter, as it expands its templates for the HPA's
	// metrics: the Pods metric for pod vllm-0, the External metric with the
	// HPA's selector.
	raw, err = os.ReadFile(filepath.Join(root, "deploy", "autoscaling", "hpa", "prometheus-adapter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type rule struct {
		SeriesQuery string `yaml:"seriesQuery"`
		Name        struct {
			Matches string `yaml:"matches"`
			As      string `yaml:"as"`
		} `yaml:"name"`
		MetricsQuery string `yaml:"metricsQuery"`
	}
	var adapter struct {
		Rules         []rule `yaml:"rules"`
		ExternalRules []rule `yaml:"externalRules"`
	}
	if err := yaml.Unmarshal(raw, &adapter); err != nil {
		t.Fatal(err)
	}
	if len(adapter.Rules) != 1 || len(adapter.ExternalRules) != 1 {
		t.Fatalf("adapter rules: %d custom, %d external; want one each", len(adapter.Rules), len(adapter.ExternalRules))
	}
	expand := func(r rule, matchers, groupBy string) string {
		series := strings.Trim(r.Name.Matches, "^$")
		return strings.NewReplacer("<<.Series>>", series, "<<.LabelMatchers>>", matchers, "<<.GroupBy>>", groupBy).Replace(r.MetricsQuery)
	}
	for _, r := range append(adapter.Rules, adapter.ExternalRules...) {
		if res := prom.mustQuery(t, r.SeriesQuery, at); len(res) == 0 {
			t.Errorf("adapter seriesQuery %q finds no series", r.SeriesQuery)
		}
	}
	pods := expand(adapter.Rules[0], fmt.Sprintf(`namespace=%q,pod=~%q`, demoNamespace, demoPod), "pod")
	p := one("adapter "+adapter.Rules[0].Name.As, pods)
	if p.Metric["pod"] != demoPod || math.Abs(p.Value-inFlight) > 1e-9 {
		t.Errorf("adapter %s: %q = %v, want pod %s with %g", adapter.Rules[0].Name.As, pods, p, demoPod, inFlight)
	}
	ext := expand(adapter.ExternalRules[0], fmt.Sprintf(`namespace=%q,%s,slo="ttft",target="0.5",window="1m"`, demoNamespace, demoModel), "namespace")
	e := one("adapter "+adapter.ExternalRules[0].Name.As, ext)
	if math.Abs(e.Value-(1-worst)) > 1e-9 {
		t.Errorf("adapter %s: %q = %g, want %g", adapter.ExternalRules[0].Name.As, ext, e.Value, 1-worst)
	}

	// Recording rules that aggregate the sidecar's gauges across pods (one
	// pod here): the model's free KV tokens and idle time.
	for _, c := range []struct{ rule, agg, series string }{
		{"vllm:derived_kv_cache_free_tokens:sum", "sum", `vllm_derived_kv_cache_free_tokens{namespace="demo",` + demoModel + `}`},
		{"vllm:derived_idle_seconds:min", "min", `vllm_derived_idle_seconds{namespace="demo",` + demoModel + `}`},
	} {
		sel := c.rule + `{namespace="demo",` + demoModel + `}`
		of := c.agg + "(" + c.series + ")"
		// Compared at the rule's own evaluation time, on the same samples:
		// those of that time, or, when a scrape stamped before it was
		// still being ingested as the rule ran, the scrape before.
		ts := one("timestamp of "+c.rule, "timestamp("+sel+")").Value
		evalAt := time.Unix(0, int64(ts*1e9))
		got := prom.mustQuery(t, sel, evalAt)
		want := prom.mustQuery(t, of, evalAt)
		if len(got) != 1 || len(want) != 1 {
			t.Fatalf("%s = %v, the sidecar's gauges give %v (%s)", c.rule, got, want, of)
		}
		if math.Abs(got[0].Value-want[0].Value) > 1e-9 {
			last := prom.mustQuery(t, "max(timestamp("+c.series+"))", evalAt)
			var before []promSample
			if len(last) == 1 {
				before = prom.mustQuery(t, of, time.Unix(0, int64(last[0].Value*1e9)-int64(time.Millisecond)))
			}
			if len(before) != 1 || math.Abs(got[0].Value-before[0].Value) > 1e-9 {
				t.Errorf("%s = %v, the sidecar's gauges give %v (%s), and %v at the scrape before", c.rule, got, want, of, before)
			}
		}
	}
	if free := one("free KV tokens", `vllm:derived_kv_cache_free_tokens:sum{namespace="demo",`+demoModel+`}`).Value; free <= 0 {
		t.Errorf("vllm:derived_kv_cache_free_tokens:sum = %g, want the demo's free tokens", free)
	}
}
