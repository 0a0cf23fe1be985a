package collector

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fos-study/vllm-normalizer/otlp"
	"github.com/fos-study/vllm-normalizer/proxy"
	"github.com/fos-study/vllm-normalizer/scrape"
)

// docRow is a row of docs/metrics.md's table of the sidecar's own metrics.
type docRow struct {
	line   int
	labels []string
	values []string // top-level backticked label values of the meaning cell
}

// documentedSelfMetrics reads docs/metrics.md's "The sidecar's own metrics"
// table: family -> row. Rows of wildcards (go_*) are left out.
func documentedSelfMetrics(t *testing.T) map[string]docRow {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	start := slices.Index(lines, "## The sidecar's own metrics")
	if start < 0 {
		t.Fatal(`docs/metrics.md has no "## The sidecar's own metrics" section`)
	}
	name := regexp.MustCompile("^`([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\\{([a-z_,]+)\\})?`$")
	value := regexp.MustCompile("^[a-z_][a-z0-9_]*$")
	rows := map[string]docRow{}
	for i := start + 1; i < len(lines) && !strings.HasPrefix(lines[i], "#"); i++ {
		cells := strings.Split(strings.Trim(lines[i], "|"), "|")
		if !strings.HasPrefix(lines[i], "| `") || len(cells) != 3 {
			continue
		}
		m := name.FindStringSubmatch(strings.TrimSpace(cells[0]))
		if m == nil {
			continue // go_*, vllm_normalizer_process_*: the runtime's collectors
		}
		r := docRow{line: i + 1}
		if m[2] != "" {
			r.labels = strings.Split(m[2], ",")
		}
		// Backticked words outside parentheses: the values, as
		// "`refused`, `timeout` (why), `network`".
		depth := 0
		for j, part := range strings.Split(cells[2], "`") {
			if j%2 == 0 {
				depth += strings.Count(part, "(") - strings.Count(part, ")")
				continue
			}
			if depth == 0 && value.MatchString(part) && !slices.Contains(r.labels, part) {
				r.values = append(r.values, part)
			}
		}
		rows[m[1]] = r
	}
	if len(rows) < 20 {
		t.Fatalf("read %d rows of docs/metrics.md's own-metrics table; has its layout changed?", len(rows))
	}
	return rows
}

// codeFamily is a family of the sidecar's own as the code makes it: its
// label and every value the label takes, where the code lists them.
type codeFamily struct {
	label  string
	values []string
}

// servedSelfMetrics are the sidecar's own families: those of every scrape
// (newSelfMetrics), those registered on the runtime registry (version, the
// proxy's), and those the goldens of every fixture's page hold (the
// upstream's info, statuses, age and sleep, which publish and mapping make).
func servedSelfMetrics(t *testing.T) map[string]codeFamily {
	t.Helper()
	fams := map[string]codeFamily{}
	for _, f := range newSelfMetrics(nil).fams {
		cf := codeFamily{label: f.label}
		for _, s := range f.series {
			if f.label != "" {
				cf.values = append(cf.values, s.value)
			}
		}
		fams[f.name] = cf
	}
	reg := prometheus.NewRegistry()
	if err := registerVersion(reg); err != nil {
		t.Fatal(err)
	}
	up, _ := url.Parse("http://127.0.0.1:8000")
	if _, err := proxy.New(proxy.Config{Upstream: up, Metrics: http.NotFoundHandler(), Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := otlp.New(context.Background(), otlp.Options{Endpoint: "http://127.0.0.1:4318/v1/metrics", Interval: time.Second, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	gathered, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range gathered {
		var cf codeFamily
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" || l.GetName() == "result" {
					cf.label = l.GetName()
					cf.values = append(cf.values, l.GetValue())
				}
			}
		}
		fams[mf.GetName()] = cf
	}
	goldens, _ := filepath.Glob(filepath.Join("..", "testdata", "golden", "*.metrics"))
	if len(goldens) == 0 {
		t.Fatal("no goldens in testdata/golden")
	}
	typeLine := regexp.MustCompile(`(?m)^# TYPE ((?:vllm_normalizer_|vllm_up)[a-z_]*) `)
	for _, g := range goldens {
		raw, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range typeLine.FindAllStringSubmatch(string(raw), -1) {
			if _, ok := fams[m[1]]; !ok && !strings.HasPrefix(m[1], "vllm_normalizer_process_") {
				fams[m[1]] = codeFamily{}
			}
		}
	}
	return fams
}

// docs/metrics.md's table of the sidecar's own metrics is the code's: each
// family the sidecar serves of its own has a row and each row is such a
// family; where the code lists a label's values (the reasons of failed
// scrapes, dropped series and failed forwards, reload outcomes, metadata),
// the row names exactly those.
func TestSelfMetricsDocumented(t *testing.T) {
	docs, code := documentedSelfMetrics(t), servedSelfMetrics(t)
	for name, cf := range code {
		row, ok := docs[name]
		if !ok {
			t.Errorf("%s is served but has no row in docs/metrics.md's table of the sidecar's own metrics: add one", name)
			continue
		}
		if cf.label == "" || len(cf.values) == 0 {
			continue
		}
		if !slices.Contains(row.labels, cf.label) {
			t.Errorf("docs/metrics.md:%d: %s has label %s, the row names %v", row.line, name, cf.label, row.labels)
		}
		for _, v := range cf.values {
			if !slices.Contains(row.values, v) {
				t.Errorf("docs/metrics.md:%d: %s{%s=%q} can be served but the row does not name %q", row.line, name, cf.label, v, v)
			}
		}
		for _, v := range row.values {
			if !slices.Contains(cf.values, v) {
				t.Errorf("docs/metrics.md:%d: the row names %s=%q of %s, which the code never serves", row.line, cf.label, v, name)
			}
		}
	}
	for name, row := range docs {
		if _, ok := code[name]; !ok {
			t.Errorf("docs/metrics.md:%d documents %s, which the sidecar does not serve", row.line, name)
		}
	}
}

// docs/operating.md's table of failed scrapes explains each reason the
// scrape counts, and no other.
func TestScrapeFailureReasonsExplained(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	start := slices.Index(lines, "| reason | what happened | what to do |")
	if start < 0 {
		t.Fatal("docs/operating.md has no table of failed scrapes (| reason | what happened | what to do |)")
	}
	var documented []string
	for i := start + 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		first, _, _ := strings.Cut(strings.Trim(lines[i], "|"), "|")
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(first, -1) {
			documented = append(documented, m[1])
		}
	}
	for _, r := range scrape.FailureReasons {
		if !slices.Contains(documented, r) {
			t.Errorf("docs/operating.md's table of failed scrapes has no row for reason %q: add one saying what happened and what to do", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(scrape.FailureReasons, r) {
			t.Errorf("docs/operating.md's table of failed scrapes explains reason %q, which the scrape never counts", r)
		}
	}
}
