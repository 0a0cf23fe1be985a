package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/promslog"

	"github.com/fos-study/vllm-normalizer/collector"
	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/internal/mappingtest"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// readmeFlags returns docs/flags.md's flag tables: flag name -> the default
// cell's values (backticked tokens; "off" is false, "none" is empty), and
// for a cell saying "derived:" (no fixed default) the flag -> its tokens.
func readmeFlags(t *testing.T) (defaults, derived map[string][]string) {
	t.Helper()
	b, err := os.ReadFile("../../docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	table := string(b)
	tick := regexp.MustCompile("`([^`]*)`")
	out, derived := map[string][]string{}, map[string][]string{}
	for line := range strings.SplitSeq(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`--") {
			continue
		}
		var names, defaults []string
		for _, m := range tick.FindAllStringSubmatch(cells[1], -1) {
			names = append(names, strings.TrimPrefix(m[1], "--"))
		}
		for _, m := range tick.FindAllStringSubmatch(cells[2], -1) {
			defaults = append(defaults, m[1])
		}
		switch cell := strings.TrimSpace(cells[2]); {
		case cell == "off":
			defaults = []string{"false"}
		case cell == "none":
			defaults = []string{""}
		case strings.Contains(cell, "derived:"):
			for _, n := range names {
				derived[n] = defaults
			}
			defaults = []string{""}
		}
		if len(names) > 1 && len(names) == len(defaults) {
			// "`--log.level`, `--log.format` | `info`, `logfmt`"
			for i, n := range names {
				out[n] = defaults[i : i+1]
			}
			continue
		}
		for _, n := range names {
			out[n] = defaults
		}
	}
	if len(out) < 10 {
		t.Fatalf("read only %d flags from docs/flags.md's tables", len(out))
	}
	return out, derived
}

// TestFlagTable: every flag of docs/flags.md exists with the
// default it states, and every visible flag is in the table.
func TestFlagTable(t *testing.T) {
	doc, derived := readmeFlags(t)
	app := newApp(&flags{log: &promslog.Config{}}, io.Discard, io.Discard)
	have := map[string][]string{}
	for _, fl := range app.Model().Flags {
		if fl.Hidden || fl.Name == "help" {
			continue
		}
		have[fl.Name] = fl.Default
		if fl.IsBoolFlag() && len(fl.Default) == 0 {
			have[fl.Name] = []string{"false"}
		}
		if _, ok := doc[fl.Name]; !ok {
			t.Errorf("--%s is not in docs/flags.md", fl.Name)
		}
	}
	for name, want := range doc {
		got, ok := have[name]
		if !ok {
			t.Errorf("docs/flags.md lists --%s, which does not exist", name)
			continue
		}
		if name == "version" {
			continue // no default
		}
		if len(got) == 0 {
			got = []string{""}
		}
		if !slices.Equal(got, want) {
			t.Errorf("--%s: docs/flags.md says default %q, the flag has %q", name, want, got)
		}
	}
	// A default derived from other flags is stated by --help, with the
	// same values as docs/flags.md.
	for name, tokens := range derived {
		fl := app.GetFlag(name)
		if fl == nil {
			continue // reported above
		}
		help := fl.Model().Help
		if !strings.Contains(help, "default: ") {
			t.Errorf("--%s: docs/flags.md says its default is derived, --help %q does not say from what", name, help)
		}
		for _, tok := range tokens {
			if !strings.Contains(help, tok) {
				t.Errorf("--%s: docs/flags.md's derived default names %q, --help %q does not", name, tok, help)
			}
		}
	}
}

// TestHelpModelRoom: --help states the room a model takes in
// --history.max-series as the collector counts it (it said 16 after it became 9).
func TestHelpModelRoom(t *testing.T) {
	app := newApp(&flags{log: &promslog.Config{}}, io.Discard, io.Discard)
	want := fmt.Sprintf("the room of %d more", collector.ModelSeries)
	if help := app.GetFlag("history.max-series").Model().Help; !strings.Contains(help, want) {
		t.Errorf("--history.max-series help %q does not say %q", help, want)
	}
}

func TestFlagChecks(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--web.routing-path=metrics/routing"}, "--web.routing-path=\"metrics/routing\" must be a plain URL path starting with /"},
		{[]string{"--web.telemetry-path=GET /metrics"}, "--web.telemetry-path=\"GET /metrics\" must be a plain URL path"},
		{[]string{"--web.routing-path=/metrics"}, "--web.telemetry-path and --web.routing-path are both /metrics"},
		{[]string{"--web.routing-path=/-/healthy"}, "--web.routing-path=/-/healthy is taken"},
		{[]string{"--demo.engines=0"}, "--demo.engines=0"},
		// The demo's flags without --demo shape nothing; --demo ignores the scrape URI.
		{[]string{"--demo.scenario=queueing"}, "--demo.scenario=queueing is given without --demo"},
		{[]string{"--demo.engines=4"}, "--demo.engines=4 is given without --demo: it shapes the demo's simulated vLLM only, and without --demo the sidecar scrapes --vllm.scrape-uri; add --demo, or drop --demo.engines"},
		{[]string{"--demo.shift-after=2m"}, "--demo.shift-after=2m is given without --demo"},
		{[]string{"--demo", "--vllm.scrape-uri=http://u:pw-secret@vllm:8000/metrics"}, "--vllm.scrape-uri=http://u:xxxxx@vllm:8000/metrics is given with --demo, which scrapes its own simulated vLLM instead; drop --demo to scrape that server, or drop --vllm.scrape-uri"},
		{[]string{"--slo.ttft=500ms", "--slo.ttft=0s"}, "--slo.ttft=0s is not positive: a latency target must be a positive duration"},
		{[]string{"--slo.tpot=-50ms"}, "--slo.tpot=-50ms is not positive"},
		{[]string{"--slo.e2e=-1s"}, "--slo.e2e=-1s"},
		{[]string{"--slo.e2e=fast"}, `--slo.e2e=fast cannot be read (time: invalid duration "fast"); give a duration such as 500ms, 30s or 3h`},
		{[]string{"--diagnosis.max-incident=long"}, `--diagnosis.max-incident=long cannot be read (time: invalid duration "long"); give a duration such as 500ms, 30s or 3h`},
		{[]string{"--history.max-models=many"}, `--history.max-models=many cannot be read (strconv.ParseFloat: parsing "many": invalid syntax); give a whole number such as 1000`},
		{[]string{"--history.max-series=1.5"}, `--history.max-series=1.5 is not a whole number; give a whole number such as 1000`},
		// A value the flag's type cannot read names the flag, the value and an example.
		{[]string{"--vllm.max-body-bytes=abc"}, "--vllm.max-body-bytes=abc cannot be read (units: invalid abc); give a value such as 4MiB"},
		{[]string{"--vllm.scrape-interval", "fast"}, `--vllm.scrape-interval=fast cannot be read (time: invalid duration "fast"); give a value such as 1s`},
		{[]string{"--history.max-series=lots"}, "--history.max-series=lots cannot be read"},
		// kingpin reads an int flag as a float and truncates: 0.5 would be 0, "no limit".
		{[]string{"--vllm.sample-limit=0.5"}, "--vllm.sample-limit=0.5 is not a whole number; give a value such as 50000"},
		{[]string{"--history.max-series", "100.9"}, "--history.max-series=100.9 is not a whole number"},
		{[]string{"--web.max-connections=1e30"}, "--web.max-connections=1e30 is not a whole number"},
		{[]string{"--output.name-style=dots"}, "--output.name-style=dots cannot be read (enum value must be one of colon,underscore, got 'dots'); give a value such as colon"},
		{[]string{"--runtime.gomaxprocs=-1"}, "--runtime.gomaxprocs=-1 must be 0 (Go's own choice) or positive"},
		{[]string{"--auto-gomemlimit.ratio=0"}, "--auto-gomemlimit.ratio=0 must be in (0, 1]"},
		{[]string{"--auto-gomemlimit.ratio=1.5"}, "--auto-gomemlimit.ratio=1.5 must be in (0, 1]"},
		{[]string{"--web.write-timeout=0s"}, "--web.write-timeout=0s must be positive"},
		{[]string{"--web.max-connections=0"}, "--web.max-connections=0 must be at least 1"},
		{[]string{"--history.max-series=-1"}, "--history.max-series=-1 is negative; give 0 (no limit) or a positive number"},
		// A bound a model's own state does not fit in would leave every model without its gauges.
		{[]string{"--history.max-series=10"}, "--history.max-series=10 admits no model: each model kept takes 10 series for its own state beside its page's; give 0 (no limit)"},
		{[]string{"--upstream.max-num-queued-reqs=-1"}, "--upstream.max-num-queued-reqs=-1 is negative; give the server's --max-num-queued-reqs, or 0"},
		{[]string{"--vllm.label-limit=-1"}, "--vllm.label-limit=-1 is negative; give 0 (no limit)"},
		{[]string{"--vllm.label-value-length-limit=-5"}, "--vllm.label-value-length-limit=-5 is negative"},
		{[]string{"--demo.scenario=slow"}, `--demo.scenario: unknown demo scenario "slow"; valid: steady, queueing, long_prompts, prefix_cache_misses, batch_growth, preemptions, long_outputs`},
		{[]string{"--demo.shift-after=0s"}, "--demo.shift-after=0s must be positive"},
		{[]string{"--otlp.interval=0s"}, "--otlp.interval=0s must be positive"},
		// Each export must reach a collector over the network within 90 % of the interval.
		{[]string{"--otlp.interval=1ms"}, "--otlp.interval=1ms is below the floor of 1s"},
		{[]string{"--otlp.view=compat"}, "must be one of full,routing,genai, got 'compat'"},
		{[]string{"--diagnosis.window=1s"}, "--diagnosis.window=1s is shorter than two scrape intervals (2s)"},
		{[]string{"--vllm.scrape-interval=1m", "--derive.window=5m", "--diagnosis.window=5m", "--diagnosis.baseline=90s"}, "--diagnosis.baseline=1m30s is shorter than two scrape intervals (2m0s)"},
		{[]string{"--derive.window=1s"}, "--derive.window=1s is shorter than two scrape intervals (2s)"},
		{[]string{"--vllm.scrape-uri=ftp://10.0.0.5/metrics"}, "--vllm.scrape-uri=ftp://10.0.0.5/metrics is not http(s)"},
		{[]string{"--vllm.scrape-uri=http://user:s3cret@host:port/metrics"}, "--vllm.scrape-uri is not a URL"},
		{[]string{"--vllm.timeout=2s"}, "--vllm.timeout=2s is longer than the scrape interval (1s)"},
		// Below the floor every scrape costs vLLM's event loop a page render (3.6 ms and more of CPU) faster than any reader polls.
		{[]string{"--vllm.scrape-interval=1ms", "--derive.window=1s", "--diagnosis.window=1s", "--diagnosis.baseline=2s"}, "--vllm.scrape-interval=1ms is below the floor of 50ms"},
		{[]string{"--vllm.scrape-interval=49ms", "--derive.window=1s", "--diagnosis.window=1s", "--diagnosis.baseline=2s"}, "give 50ms or more (100ms for an EPP"},
		{[]string{"--vllm.timeout=1ms"}, "--vllm.timeout=1ms is below the floor of 10ms"},
		{[]string{"--diagnosis.min-change=1.5"}, "--diagnosis.min-change=1.5 is not above 0 and below 1"},
		{[]string{"--diagnosis.min-change=0"}, "--diagnosis.min-change=0 is not above 0"},
		{[]string{"--diagnosis.baseline-lookback=20m"}, "--diagnosis.baseline-lookback=20m is shorter than the baseline (30m)"},
		{[]string{"--web.routing-path=/diagnosis"}, "--web.routing-path=/diagnosis is taken"},
		// A flag's 0 is a value the library checks as given, not its "left unset".
		{[]string{"--diagnosis.significance=0"}, "--diagnosis.significance=0 is not above 0 and below 0.5"},
		{[]string{"--diagnosis.max-incident=0s"}, "--diagnosis.max-incident=0s is not longer than the recent window plus the baseline (31m)"},
		{[]string{"--diagnosis.baseline-lookback=0s"}, "--diagnosis.baseline-lookback=0s is shorter than the baseline (30m)"},
	} {
		_, err := parseFlags(tc.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
	t.Setenv("GOMAXPROCS", "two")
	if _, err := parseFlags(nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), `GOMAXPROCS (the environment variable of --runtime.gomaxprocs)=two cannot be read`) {
		t.Errorf("GOMAXPROCS=two: error %v, want it to name the variable and its flag", err)
	}
	os.Unsetenv("GOMAXPROCS")
	if f, err := parseFlags([]string{"--vllm.sample-limit=1e3"}, io.Discard, io.Discard); err != nil || f.sampleLimit != 1000 {
		t.Errorf("--vllm.sample-limit=1e3: %v, limit %v; want 1000", err, f)
	}
	// The EPP deployments' interval (docs/routing.md, scripts/sidebyside.sh) and the floor itself are accepted.
	for _, iv := range []string{"100ms", "50ms"} {
		if _, err := parseFlags([]string{"--vllm.scrape-interval=" + iv, "--derive.window=1m", "--diagnosis.window=1m", "--diagnosis.baseline=5m"}, io.Discard, io.Discard); err != nil {
			t.Errorf("--vllm.scrape-interval=%s rejected: %v", iv, err)
		}
	}
	if _, err := parseFlags([]string{"--web.telemetry-path=/", "--web.routing-path=/route"}, io.Discard, io.Discard); err != nil {
		t.Errorf("distinct valid paths rejected: %v", err)
	}
	f, err := parseFlags([]string{"--slo.ttft=500ms", "--slo.ttft=1s", "--slo.e2e=10s"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatalf("valid SLO targets rejected: %v", err)
	}
	if !slices.Equal(f.slos.TTFT, []time.Duration{500 * time.Millisecond, time.Second}) || len(f.slos.TPOT) != 0 || !slices.Equal(f.slos.E2E, []time.Duration{10 * time.Second}) {
		t.Errorf("SLO targets parsed as %+v", f.slos)
	}
}

const smallPage = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3
vllm:num_requests_running{engine="1",model_name="m"} 4
`

// TestPathFlags: the pages are served at --web.telemetry-path and
// --web.routing-path, not at the defaults, and the landing page links them.
func TestPathFlags(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, smallPage) }))
	defer up.Close()
	f, err := parseFlags([]string{"--web.telemetry-path=/full", "--web.routing-path=/route"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := testMapper(t)
	diag, err := diagnosis.New(f.diagnosisOptions())
	if err != nil {
		t.Fatal(err)
	}
	coll, err := collector.New(collector.Config{ScrapeURI: up.URL, Interval: f.scrapeInterval, MaxBodyBytes: int64(f.maxBody),
		Windows: uniqueWindows(f.windows), Mapper: m, Registry: prometheus.NewRegistry(), Diagnosis: diag})
	if err != nil {
		t.Fatal(err)
	}
	coll.ScrapeOnce(context.Background())
	mux, err := newMux(f, coll, diag, func() error { return nil }, "")
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/full"); code != 200 || !strings.Contains(body, "\nvllm_up 1\n") || !strings.Contains(body, `vllm:num_requests_running{engine="1",model_name="m"} 4`) {
		t.Errorf("/full answered %d without the full page:\n%s", code, body)
	}
	if code, body := get("/route"); code != 200 || !strings.Contains(body, `vllm:num_requests_running{model_name="m",role="both"} 7`) {
		t.Errorf("/route answered %d without the routing view:\n%s", code, body)
	}
	for _, p := range []string{"/metrics", "/metrics/routing"} {
		if _, body := get(p); strings.Contains(body, "vllm_up") {
			t.Errorf("%s still serves a page after the paths were moved", p)
		}
	}
	if code, body := get("/"); code != 200 || !strings.Contains(body, `href="/full"`) || !strings.Contains(body, `href="/route"`) ||
		!strings.Contains(body, `href="/diagnosis"`) || !strings.Contains(body, `href="/api/v1/diagnosis"`) {
		t.Errorf("landing page (%d) does not link the moved paths and the diagnosis:\n%s", code, body)
	}
	if code, body := get("/api/v1/diagnosis"); code != 200 || !strings.Contains(body, `"status": "ok"`) || !strings.Contains(body, `"model_name": "m"`) {
		t.Errorf("/api/v1/diagnosis answered %d:\n%s", code, body)
	}
	if code, body := get("/diagnosis"); code != 200 || !strings.Contains(body, `data-model="m"`) {
		t.Errorf("/diagnosis answered %d:\n%s", code, body)
	}
}

// TestDemoEngines: --demo.engines sets how many data-parallel engines the
// demo upstream prints.
func TestDemoEngines(t *testing.T) {
	addr, shutdown, err := startDemo(demo.Options{Engines: 3, Scenario: demo.ScenarioSteady}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, e := range []string{`engine="0"`, `engine="1"`, `engine="2"`} {
		if !strings.Contains(string(b), e) {
			t.Errorf("demo with 3 engines prints no %s series", e)
		}
	}
	if strings.Contains(string(b), `engine="3"`) {
		t.Error("demo with 3 engines prints a fourth")
	}
}

// TestSetMemoryLimit: in a container limited to 128 MiB the runtime's soft
// limit becomes 60 % of it (the default ratio); an explicit GOMEMLIMIT wins.
func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	container := func() (uint64, error) { return 128 << 20, nil }
	logger := slog.New(slog.DiscardHandler)
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		defer os.Setenv("GOMEMLIMIT", v)
		os.Unsetenv("GOMEMLIMIT")
	}
	f, err := parseFlags(nil, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(float64(128<<20) * f.memLimitRatio) // the default, 0.6
	if got := setMemoryLimit(f.memLimitRatio, container, logger); got != want || debug.SetMemoryLimit(-1) != want {
		t.Errorf("soft limit %d (runtime %d), want %d", got, debug.SetMemoryLimit(-1), want)
	}
	t.Setenv("GOMEMLIMIT", "50MiB")
	debug.SetMemoryLimit(50 << 20)
	if got := setMemoryLimit(f.memLimitRatio, container, logger); got != 50<<20 {
		t.Errorf("with GOMEMLIMIT=50MiB the soft limit is %d", got)
	}
}

// TestReservedPaths: every fixed path of the route table, and any path
// under one that holds a subtree, is refused to the path flags, and the
// mux serves each route the table lists.
func TestReservedPaths(t *testing.T) {
	f, err := parseFlags([]string{"--web.enable-pprof"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	fixed := 0
	for _, r := range f.routes() {
		if r.flag != "" {
			continue
		}
		fixed++
		paths := []string{r.pattern}
		if strings.HasSuffix(r.pattern, "/") {
			paths = append(paths, r.pattern+"heap")
		}
		for _, p := range paths {
			for _, flag := range []string{"--web.telemetry-path", "--web.routing-path"} {
				_, err := parseFlags([]string{flag + "=" + p}, io.Discard, io.Discard)
				if want := flag + "=" + p + " is taken"; err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s=%s: error %v, want %q", flag, p, err, want)
				}
			}
		}
	}
	if fixed < 7 {
		t.Errorf("only %d fixed routes in the table", fixed)
	}
	mux := landingMux(t, "--web.enable-pprof")
	for _, p := range []string{"/-/healthy", "/-/ready", "/metrics/genai", "/diagnosis", "/api/v1/diagnosis", "/debug/pprof/", "/metrics/routing/engines/0"} {
		if code, _ := serveGet(mux, p); code == http.StatusNotFound {
			t.Errorf("%s is not served", p)
		}
	}
}

// testMapper is the built-in catalogue's mapper with the default options,
// as the command builds it without --mapping.config.
func testMapper(t *testing.T) *mapping.Mapper { return mappingtest.Mapper(t, mapping.Options{}) }
