package prometheus_test

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// TestScrapeProtocols: Prometheus 3 stores the same series from the sidecar
// whichever way it scrapes: with its default protocols (OpenMetrics first),
// with the classic text format only, and asking for escaped names
// (escaping=underscores in Accept, legacy name validation). Every series of
// one job is in the others, with the same labels.
func TestScrapeProtocols(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	side := testbin.Start(t, "--demo", "--demo.engines=2")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar log:\n%s", side.Logs())
		}
	})
	jobs := []scrapeJob{
		{Name: "defaults", Target: side.Addr},
		{Name: "text", Target: side.Addr, Extra: []string{"scrape_protocols: [PrometheusText0.0.4]"}},
		{Name: "underscores", Target: side.Addr, Extra: []string{
			"metric_name_validation_scheme: legacy",
			"metric_name_escaping_scheme: underscores",
		}},
	}
	prom := startPrometheus(t, promBin, jobs, nil)
	prom.waitFor(t, `count(vllm_up == 1) == 3`, time.Minute)
	// A few scrapes of each job, so every family the demo prints is in.
	time.Sleep(5 * time.Second)

	seriesOf := func(job string) map[string]bool {
		t.Helper()
		res, err := prom.query(fmt.Sprintf(`{job=%q}`, job), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, s := range res {
			out[seriesKey(s.Metric)] = true
		}
		return out
	}
	namesOf := func(job string) map[string]int {
		t.Helper()
		res, err := prom.query(fmt.Sprintf(`count by (__name__) ({job=%q})`, job), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, s := range res {
			out[s.Metric["__name__"]] = int(s.Value)
		}
		return out
	}
	want, wantNames := seriesOf("defaults"), namesOf("defaults")
	if len(wantNames) < 50 {
		t.Fatalf("the default scrape stored %d families, want the demo's whole page", len(wantNames))
	}
	for _, job := range []string{"text", "underscores"} {
		got, gotNames := seriesOf(job), namesOf(job)
		for _, n := range slices.Sorted(maps.Keys(wantNames)) {
			if gotNames[n] != wantNames[n] {
				t.Errorf("%s: %d series of %s, the default protocols stored %d", job, gotNames[n], n, wantNames[n])
			}
		}
		for _, n := range slices.Sorted(maps.Keys(gotNames)) {
			if _, ok := wantNames[n]; !ok {
				t.Errorf("%s: stored %s, which the default protocols did not", job, n)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d label sets, the default protocols stored %d", job, len(got), len(want))
		}
	}
	t.Logf("%d families, %d label sets, the same in all three jobs", len(wantNames), len(want))
}

// seriesKey is a label set (with __name__) without job and instance, as
// one string.
func seriesKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "job" && k != "instance" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q,", k, m[k])
	}
	return b.String()
}
