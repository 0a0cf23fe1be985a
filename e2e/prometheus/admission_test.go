package prometheus_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v2"
)

// refusingPod is a vLLM 0.29+ page of fleetModel with admission control:
// refused requests a second (0: the cap never bites) beside 2 that start.
type refusingPod struct {
	start   time.Time
	refused float64
}

func (p *refusingPod) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	el := time.Since(p.start).Seconds()
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	lbl := fmt.Sprintf(`engine="0",model_name=%q`, fleetModel)
	var b strings.Builder
	fmt.Fprintf(&b, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{%s} 12\n", lbl)
	fmt.Fprintf(&b, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{%s} 0\n", lbl)
	fmt.Fprintf(&b, "# TYPE vllm:request_success_total counter\nvllm:request_success_total{%s,finished_reason=\"stop\"} %s\n", lbl, f(2*el))
	fmt.Fprintf(&b, "# TYPE vllm:time_to_first_token_seconds histogram\n")
	fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{%s,le=\"0.5\"} %s\n", lbl, f(2*el))
	fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{%s,le=\"+Inf\"} %s\n", lbl, f(2*el))
	fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_sum{%s} %s\nvllm:time_to_first_token_seconds_count{%s} %s\n", lbl, f(0.4*el), lbl, f(2*el))
	fmt.Fprintf(&b, "# HELP vllm:admission_rejections_total Number of admission attempts rejected.\n# TYPE vllm:admission_rejections_total counter\n")
	fmt.Fprintf(&b, "vllm:admission_rejections_total{model_name=%q,reason=\"max_num_queued_reqs\"} %s\n", fleetModel, f(p.refused*el))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// admissionRules writes a test copy of deploy/prometheus/admission.yml with
// the 5m window replaced by the sidecars' 10s one and `for` by 2s; every
// replacement must happen.
func admissionRules(t *testing.T, root string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "admission.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string           `yaml:"name"`
			Rules []map[string]any `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	windowed, alerts := 0, 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			e := r["expr"].(string)
			if strings.Contains(e, `window="5m"`) {
				windowed++
			}
			r["expr"] = strings.ReplaceAll(e, `window="5m"`, `window="10s"`)
			if r["alert"] != nil {
				if r["for"] != "10m" {
					t.Fatalf("alert %v: for %v, want 10m", r["alert"], r["for"])
				}
				r["for"] = "2s"
				alerts++
			}
		}
	}
	if windowed != 2 || alerts != 1 {
		t.Fatalf("admission.yml: %d rules read the 5m window and %d alerts, want 2 and 1", windowed, alerts)
	}
	out, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "admission.yml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFleetRefusing: three sidecars in front of pods of one model, vllm-2
// refusing 5 requests a second at admission while the others refuse
// none. The shipped vllm-admission rule, loaded into Prometheus, names
// vllm-2 alone, and VLLMAdmissionRefusing (window and `for` shortened)
// fires for vllm-2 only.
func TestFleetRefusing(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	root := repoRoot(t)
	start := time.Now()
	jobs := fleetSidecars(t, []http.Handler{&refusingPod{start, 0}, &refusingPod{start, 0}, &refusingPod{start, 5}})
	prom := startPrometheus(t, promBin, jobs, []string{admissionRules(t, root)})

	pods := func(expr string) []string {
		res, err := prom.query(expr, time.Time{})
		if err != nil {
			return []string{err.Error()}
		}
		var out []string
		for _, s := range res {
			out = append(out, s.Metric["pod"])
		}
		sort.Strings(out)
		return out
	}
	waitPods := func(expr string, want ...string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			got := pods(expr)
			if strings.Join(got, ",") == strings.Join(want, ",") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s, %q names %v, want %v:\n%s", time.Since(start).Round(time.Second), expr, got, want,
					prom.raw(`vllm_derived_admission_at_cap{window="10s"}`, time.Time{}))
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	// Every pod says whether it is at its cap; vllm-2 alone is.
	waitPods(`vllm_derived_admission_at_cap{namespace="fleet",window="10s"}`, "vllm-0", "vllm-1", "vllm-2")
	waitPods(`vllm:fleet_refusing:pod5m{namespace="fleet",model_name="`+fleetModel+`"} == 1`, "vllm-2")
	waitPods(`ALERTS{alertname="VLLMAdmissionRefusing",alertstate="firing"}`, "vllm-2")
	// And keeps naming it alone.
	for i := range 3 {
		if got := pods(`vllm:fleet_refusing:pod5m{namespace="fleet"}`); strings.Join(got, ",") != "vllm-2" {
			t.Fatalf("evaluation %d: the fleet rule names %v, want [vllm-2]", i, got)
		}
		time.Sleep(time.Second)
	}
	t.Logf("vllm-2 named and its alert firing after %s", time.Since(start).Round(time.Second))
}
