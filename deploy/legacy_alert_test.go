package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// TestLegacyAlertOnFullStatusPages runs VLLMLegacyMetricNamesInUse through
// promtool on the FULL vllm_normalizer_metric_status output the sidecar
// prints for real pages (its golden outputs: the demo and fixture 13, two
// current V1 pages; fixture 12, a V0 page; fixture 04, SGLang), every
// series of each, not a chosen few. The V1 and SGLang pods must stay quiet,
// the V0 pod must warn for each name it prints under a legacy name with a
// replacement, and for nothing else.
func TestLegacyAlertOnFullStatusPages(t *testing.T) {
	pt := promtool(t)
	pages := []struct{ pod, golden string }{
		{"demo", "sidecar-demo.metrics"},
		{"v1-13", "13-*.metrics"},
		{"v0-12", "12-*.metrics"},
		{"sglang-04", "04-*.metrics"},
	}
	p := parser.NewParser(parser.Options{})
	var series, alerts strings.Builder
	quiet, total := 0, 0
	for _, pg := range pages {
		paths, _ := filepath.Glob(filepath.Join("..", "testdata", "golden", pg.golden))
		if len(paths) != 1 {
			t.Fatalf("golden %s: %v", pg.golden, paths)
		}
		body, err := os.ReadFile(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for line := range strings.SplitSeq(string(body), "\n") {
			if !strings.HasPrefix(line, "vllm_normalizer_metric_status{") {
				continue
			}
			l, err := p.ParseMetric(line[:strings.LastIndex(line, " ")])
			if err != nil {
				t.Fatalf("%s: %v", paths[0], err)
			}
			n++
			fmt.Fprintf(&series, "      - series: 'vllm_normalizer_metric_status{namespace=\"llm\", pod=%q, metric=%q, status=%q, replacement=%q, source=%q}'\n        values: '1x12'\n",
				pg.pod, l.Get("metric"), l.Get("status"), l.Get("replacement"), l.Get("source"))
			// Expected by hand: a V0 page's renamed names, nothing on V1 or SGLang.
			if pg.pod == "v0-12" && l.Get("status") == "renamed" {
				fmt.Fprintf(&alerts, "          - exp_labels: {severity: warning, namespace: llm, pod: %s, metric: %q, status: renamed, replacement: %q}\n            exp_annotations:\n              summary: %q\n              description: %q\n",
					pg.pod, l.Get("metric"), l.Get("replacement"),
					"vLLM on llm/"+pg.pod+" still exposes "+l.Get("metric")+" under a legacy name.",
					l.Get("metric")+" is renamed: the next vLLM upgrade removes it. Move dashboards, alerts and routers to "+l.Get("replacement")+" before upgrading.")
				total++
			}
			if pg.pod != "v0-12" && l.Get("status") == "legacy" {
				quiet++ // a name removed without successor, still printed by a current page
			}
		}
		if least := map[bool]int{true: 5, false: 50}[strings.HasPrefix(pg.pod, "sglang")]; n < least {
			t.Fatalf("%s: only %d status series, want at least %d (the whole catalogue on vLLM; mapped names and the foreign summary on SGLang)", paths[0], n, least)
		}
	}
	if total == 0 || quiet == 0 {
		t.Fatalf("%d expected alerts on the V0 page, %d legacy statuses on current pages: the pages no longer test both cases", total, quiet)
	}
	doc := "rule_files:\n  - " + filepath.Join(mustAbs(t, "prometheus"), "alerts.yml") + "\nevaluation_interval: 1m\ntests:\n  - interval: 5m\n    input_series:\n" +
		series.String() + "    alert_rule_test:\n      - eval_time: 55m\n        alertname: VLLMLegacyMetricNamesInUse\n        exp_alerts:\n" + alerts.String()
	file := filepath.Join(t.TempDir(), "legacy_full_test.yml")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(t, pt, "test", "rules", file); !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
