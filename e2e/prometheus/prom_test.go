package prometheus_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// repoRoot is the module's root directory (tests run in their package
// directory, e2e/prometheus).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// needPrometheus returns the path of the Prometheus 3.x server
// (testbin.PrometheusTool): under -short (the fast lane) the test skips;
// without the binary it skips, except under CI=true, where it fails.
func needPrometheus(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): runs a real Prometheus beside the sidecar")
	}
	return testbin.PrometheusTool(t, "prometheus")
}

// lockedBuffer collects a process's output safely.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// promServer is a Prometheus server started by a test, with its own
// temporary storage, listening on a free loopback port.
type promServer struct {
	URL  string
	logs *lockedBuffer
}

// scrapeJob is one scrape_configs entry with a single static target.
type scrapeJob struct {
	Name        string
	Target      string // host:port
	MetricsPath string // "" = /metrics
	Labels      map[string]string
	Extra       []string // more lines of the job's configuration, e.g. "scrape_protocols: [PrometheusText0.0.4]"
}

// startPrometheus writes a configuration scraping jobs every second and
// evaluating ruleFiles every second, starts Prometheus and waits until it is
// ready. It is stopped when the test ends; its log is printed if the test
// failed.
func startPrometheus(t *testing.T, bin string, jobs []scrapeJob, ruleFiles []string) *promServer {
	t.Helper()
	return startPrometheusWith(t, bin, jobs, ruleFiles, "")
}

// startPrometheusWith is startPrometheus with more top-level configuration
// (an otlp: block, say) and more command-line flags.
func startPrometheusWith(t *testing.T, bin string, jobs []scrapeJob, ruleFiles []string, config string, flags ...string) *promServer {
	t.Helper()
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n")
	cfg.WriteString(config)
	if len(ruleFiles) > 0 {
		cfg.WriteString("rule_files:\n")
		for _, f := range ruleFiles {
			fmt.Fprintf(&cfg, "  - %q\n", f)
		}
	}
	cfg.WriteString("scrape_configs:\n")
	for _, j := range jobs {
		fmt.Fprintf(&cfg, "  - job_name: %q\n", j.Name)
		if j.MetricsPath != "" {
			fmt.Fprintf(&cfg, "    metrics_path: %q\n", j.MetricsPath)
		}
		for _, line := range j.Extra {
			fmt.Fprintf(&cfg, "    %s\n", line)
		}
		fmt.Fprintf(&cfg, "    static_configs:\n      - targets: [%q]\n", j.Target)
		if len(j.Labels) > 0 {
			cfg.WriteString("        labels:\n")
			for k, v := range j.Labels {
				fmt.Fprintf(&cfg, "          %s: %q\n", k, v)
			}
		}
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testbin.FreeAddr(t)
	logs := &lockedBuffer{}
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--storage.tsdb.retention.time=1h",
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Args = append(cmd.Args, flags...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p := &promServer{URL: "http://" + addr, logs: logs}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			t.Fatalf("prometheus exited at start:\n%s\nconfiguration:\n%s", logs, cfg.String())
		default:
		}
		if resp, err := http.Get(p.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Logf("%s is ready at %s", promVersion(bin), p.URL)
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("prometheus did not become ready:\n%s", logs)
	return nil
}

// promVersion is the first line of `prometheus --version`.
func promVersion(bin string) string {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return "prometheus (version unknown)"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return line
}

// apiResponse is the envelope of every Prometheus HTTP API answer.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
}

// apiGet calls a Prometheus API path with query parameters and returns its
// data, or an error carrying Prometheus's own error message.
func (p *promServer) apiGet(path string, params url.Values) (json.RawMessage, error) {
	resp, err := http.Get(p.URL + path + "?" + params.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d, undecodable answer: %v", path, resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	return r.Data, nil
}

// promSample is one element of an instant vector (or a scalar, with no
// labels).
type promSample struct {
	Metric map[string]string
	Value  float64
}

func (s promSample) String() string {
	return fmt.Sprintf("%v => %g", s.Metric, s.Value)
}

// query evaluates expr at time at (the zero time: Prometheus's now) and
// returns the resulting vector; a scalar becomes one sample without labels,
// a string or matrix is an error.
func (p *promServer) query(expr string, at time.Time) ([]promSample, error) {
	params := url.Values{"query": {expr}}
	if !at.IsZero() {
		params.Set("time", strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 3, 64))
	}
	data, err := p.apiGet("/api/v1/query", params)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", expr, err)
	}
	var res struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("query %q: %w", expr, err)
	}
	switch res.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(res.Result, &vec); err != nil {
			return nil, fmt.Errorf("query %q: %w", expr, err)
		}
		out := make([]promSample, 0, len(vec))
		for _, v := range vec {
			f, err := sampleValue(v.Value)
			if err != nil {
				return nil, fmt.Errorf("query %q: %w", expr, err)
			}
			out = append(out, promSample{Metric: v.Metric, Value: f})
		}
		return out, nil
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(res.Result, &v); err != nil {
			return nil, fmt.Errorf("query %q: %w", expr, err)
		}
		f, err := sampleValue(v)
		if err != nil {
			return nil, fmt.Errorf("query %q: %w", expr, err)
		}
		return []promSample{{Metric: map[string]string{}, Value: f}}, nil
	default:
		return nil, fmt.Errorf("query %q: result type %q, want vector or scalar", expr, res.ResultType)
	}
}

// sampleValue decodes the [timestamp, "value"] pair of the API.
func sampleValue(v [2]any) (float64, error) {
	s, ok := v[1].(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", v[1])
	}
	return strconv.ParseFloat(s, 64)
}

// mustQuery is query that fails the test on error.
func (p *promServer) mustQuery(t *testing.T, expr string, at time.Time) []promSample {
	t.Helper()
	res, err := p.query(expr, at)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// one is mustQuery of an expression that must give exactly one value.
func (p *promServer) one(t *testing.T, expr string, at time.Time) float64 {
	t.Helper()
	res := p.mustQuery(t, expr, at)
	if len(res) != 1 {
		t.Fatalf("%s: %v, want one series", expr, res)
	}
	return res[0].Value
}

// waitFor polls query(expr) until it returns at least one sample or the
// deadline passes.
func (p *promServer) waitFor(t *testing.T, expr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		res, err := p.query(expr, time.Time{})
		if err == nil && len(res) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %q still returns nothing (err %v)", timeout, expr, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// promRule is one rule as /api/v1/rules reports it.
type promRule struct {
	Name      string `json:"name"`
	Query     string `json:"query"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	Type      string `json:"type"`
	State     string `json:"state"` // alerting rules: inactive, pending, firing
}

// rules returns every loaded rule with its group name.
func (p *promServer) rules(t *testing.T) map[string][]promRule {
	t.Helper()
	data, err := p.apiGet("/api/v1/rules", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Groups []struct {
			Name  string     `json:"name"`
			File  string     `json:"file"`
			Rules []promRule `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	out := map[string][]promRule{}
	for _, g := range res.Groups {
		out[filepath.Base(g.File)+"/"+g.Name] = append(out[filepath.Base(g.File)+"/"+g.Name], g.Rules...)
	}
	return out
}

// raw returns the API's data for expr at time at as text, for failure
// messages (range vectors included).
func (p *promServer) raw(expr string, at time.Time) string {
	params := url.Values{"query": {expr}}
	if !at.IsZero() {
		params.Set("time", strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 3, 64))
	}
	data, err := p.apiGet("/api/v1/query", params)
	if err != nil {
		return err.Error()
	}
	return string(data)
}
