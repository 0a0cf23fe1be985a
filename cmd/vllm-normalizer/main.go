// Command vllm-normalizer runs next to a vLLM server, scrapes its /metrics
// and re-exposes one stable, router-ready page. See the README for flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/fos-study/vllm-normalizer/collector"
	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/derive"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/window"
)

const defaultListen = ":9400"

// Paths of the diagnosis, on the main mux (same TLS and auth as the pages).
const (
	diagnosisPagePath = "/diagnosis"
	diagnosisAPIPath  = "/api/v1/diagnosis"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// flags are the parsed command line.
type flags struct {
	scrapeURI      string
	scrapeInterval time.Duration
	timeout        time.Duration
	maxBody        units.Base2Bytes
	askGzip        bool
	sampleLimit    int
	labelLimits    exposition.LabelLimits
	maxSeries      int
	windows        []time.Duration
	slos           derive.SLOTargets
	legacyAliases  bool
	nameStyle      string
	configFile     string
	configCheck    bool
	telemetryPath  string
	routingPath    string
	disableExpMet  bool
	enableLife     bool
	enablePprof    bool
	demo           bool
	demoEngines    int
	routingListen  string
	proxyListen    string
	proxyUpstream  string
	writeTimeout   time.Duration
	autoMemLimit   bool
	memLimitRatio  float64
	maxProcs       int
	maxConns       int
	demoScenario   string
	demoShiftAfter time.Duration
	diagWindow     time.Duration
	diagBaseline   time.Duration
	diagMinChange  float64
	web            *web.FlagConfig
	log            *promslog.Config
}

func parseFlags(args []string, stdout, stderr io.Writer) (*flags, error) {
	f := &flags{log: &promslog.Config{}}
	app := newApp(f, stdout, stderr)
	if _, err := app.Parse(args); err != nil {
		return nil, err
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	return f, nil
}

// check rejects flag values that would fail later or silently do something
// else than asked.
func (f *flags) check() error {
	for _, p := range []struct{ flag, path string }{{"--web.telemetry-path", f.telemetryPath}, {"--web.routing-path", f.routingPath}} {
		if !strings.HasPrefix(p.path, "/") || strings.ContainsAny(p.path, " {}") {
			return fmt.Errorf("%s=%q must be a plain URL path starting with /, e.g. /metrics", p.flag, p.path)
		}
		if p.path == "/-/healthy" || p.path == "/-/ready" || p.path == "/-/reload" || p.path == diagnosisPagePath || p.path == diagnosisAPIPath || strings.HasPrefix(p.path, "/debug/pprof/") {
			return fmt.Errorf("%s=%s is taken by one of the sidecar's own endpoints; choose another path", p.flag, p.path)
		}
	}
	if f.telemetryPath == f.routingPath {
		return fmt.Errorf("--web.telemetry-path and --web.routing-path are both %s; the full page and the routing view need different paths", f.routingPath)
	}
	if err := f.checkScrape(); err != nil {
		return err
	}
	if f.maxSeries < 0 {
		return fmt.Errorf("--history.max-series must be 0 (no limit) or positive, got %d", f.maxSeries)
	}
	if f.maxProcs < 0 {
		return fmt.Errorf("--runtime.gomaxprocs=%d must be 0 (Go's own choice) or positive, e.g. 1", f.maxProcs)
	}
	if !(f.memLimitRatio > 0 && f.memLimitRatio <= 1) {
		return fmt.Errorf("--auto-gomemlimit.ratio=%v must be in (0, 1], e.g. 0.6", f.memLimitRatio)
	}
	if f.writeTimeout <= 0 {
		return fmt.Errorf("--web.write-timeout=%s must be positive: without it a reader that stops reading holds its connection and page for ever", f.writeTimeout)
	}
	if f.maxConns < 1 {
		return fmt.Errorf("--web.max-connections=%d must be at least 1", f.maxConns)
	}
	if f.demoEngines < 1 {
		return fmt.Errorf("--demo.engines=%d: the demo simulates at least one engine; give 1 or more", f.demoEngines)
	}
	if err := demo.CheckScenario(f.demoScenario); err != nil {
		return fmt.Errorf("--demo.scenario: %w", err)
	}
	if f.demoShiftAfter <= 0 {
		return fmt.Errorf("--demo.shift-after=%s must be positive: the scenario runs steady for that long, then shifts", f.demoShiftAfter)
	}
	if err := f.checkDiagnosis(); err != nil {
		return err
	}
	return f.checkListeners()
}

// checkDiagnosis rejects diagnosis settings the diagnosis would refuse,
// naming the flags.
func (f *flags) checkDiagnosis() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--diagnosis.window", f.diagWindow}, {"--diagnosis.baseline", f.diagBaseline}} {
		if d.v < 2*f.scrapeInterval {
			return fmt.Errorf("%s=%s is shorter than two scrape intervals (%s): a change needs two scrapes inside each window; lengthen it or shorten --vllm.scrape-interval", d.flag, window.Format(d.v), 2*f.scrapeInterval)
		}
	}
	if !(f.diagMinChange > 0 && f.diagMinChange < 1) {
		return fmt.Errorf("--diagnosis.min-change=%v must be above 0 and below 1 (0.25 means a change of 25 %%)", f.diagMinChange)
	}
	return nil
}

// checkScrape rejects scrape settings the collector would refuse, naming
// the flags (library packages speak of settings, not of flags).
func (f *flags) checkScrape() error {
	if f.scrapeInterval <= 0 {
		return fmt.Errorf("--vllm.scrape-interval must be positive, got %s", f.scrapeInterval)
	}
	if f.timeout < 0 {
		return fmt.Errorf("--vllm.timeout must be 0 (90%% of the interval) or positive, got %s", f.timeout)
	}
	if f.timeout > f.scrapeInterval {
		return fmt.Errorf("--vllm.timeout=%s is longer than --vllm.scrape-interval=%s: scrapes never overlap, so a slow upstream would delay every later scrape; set --vllm.timeout to at most the interval (0 means 90%% of it) or lengthen the interval", f.timeout, f.scrapeInterval)
	}
	if f.maxBody <= 0 {
		return fmt.Errorf("--vllm.max-body-bytes must be positive, got %d", f.maxBody)
	}
	if f.sampleLimit < 0 {
		return fmt.Errorf("--vllm.sample-limit must be 0 (no limit) or positive, got %d", f.sampleLimit)
	}
	for _, l := range []struct {
		flag string
		v    int
	}{{"--vllm.label-limit", f.labelLimits.Labels}, {"--vllm.label-name-length-limit", f.labelLimits.NameLength}, {"--vllm.label-value-length-limit", f.labelLimits.ValueLength}} {
		if l.v < 0 {
			return fmt.Errorf("%s must be 0 (no limit) or positive, got %d", l.flag, l.v)
		}
	}
	for _, w := range f.windows {
		if w < 2*f.scrapeInterval {
			return fmt.Errorf("--derive.window=%s is shorter than two scrape intervals (%s): a rate needs two scrapes inside the window; lengthen the window or shorten --vllm.scrape-interval", window.Format(w), 2*f.scrapeInterval)
		}
	}
	for _, s := range []struct {
		flag string
		ds   []time.Duration
	}{{"--slo.ttft", f.slos.TTFT}, {"--slo.tpot", f.slos.TPOT}, {"--slo.e2e", f.slos.E2E}} {
		for _, d := range s.ds {
			if d <= 0 {
				return fmt.Errorf("%s=%s: a latency target must be a positive duration, such as --slo.ttft=500ms or --slo.e2e=10s", s.flag, d)
			}
		}
	}
	if !f.demo {
		if _, err := url.Parse(f.scrapeURI); err != nil {
			// url.Parse's error quotes the whole URL, password included.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return fmt.Errorf("--vllm.scrape-uri is not a URL (%v); give one like http://127.0.0.1:8000/metrics", err)
		}
	}
	return nil
}

// newApp declares every flag, filling f when the application parses.
func newApp(f *flags, stdout, stderr io.Writer) *kingpin.Application {
	app := kingpin.New("vllm-normalizer", "Scrapes one vLLM server's /metrics and re-exposes a stable, router-ready page: legacy names mapped to current ones, absences flagged, windowed rates and quantiles as gauges.")
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)
	app.HelpFlag.Short('h')
	app.Version(version.Print("vllm-normalizer"))
	app.Flag("vllm.scrape-uri", "URL of vLLM's metrics page. Fixed here on purpose: the sidecar never takes a target from a request.").
		Default("http://127.0.0.1:8000/metrics").StringVar(&f.scrapeURI)
	app.Flag("vllm.scrape-interval", "Time between scrapes of vLLM; derived gauges are computed at this pace.").
		Default("1s").DurationVar(&f.scrapeInterval)
	app.Flag("vllm.timeout", "Time limit for one scrape, connect to last byte; at most --vllm.scrape-interval. 0 means 90% of --vllm.scrape-interval.").
		Default("0s").DurationVar(&f.timeout)
	app.Flag("vllm.max-body-bytes", "Largest page accepted from vLLM, after decompression (units: KiB, MiB, GiB). A larger page fails the scrape with reason body_too_large.").
		Default("4MiB").BytesVar(&f.maxBody)
	app.Flag("vllm.enable-compression", "Ask vLLM for a gzip-compressed page, as Prometheus does. Off by default: beside vLLM, on loopback, compression saves no time and costs CPU on both sides (vLLM compresses every page at gzip's highest level). Turn it on when the upstream is across a slow network. A gzip page is read either way.").
		Default("false").BoolVar(&f.askGzip)
	app.Flag("vllm.sample-limit", "Most samples accepted on one page, like Prometheus's sample_limit; more fails the scrape with reason sample_limit. 0 means no limit.").
		Default("50000").IntVar(&f.sampleLimit)
	app.Flag("vllm.label-limit", "Most labels on one sample, __name__ included, like Prometheus's label_limit; more fails the scrape with reason label_limit. 0 means no limit.").
		Default("64").IntVar(&f.labelLimits.Labels)
	app.Flag("vllm.label-name-length-limit", "Longest label name in bytes, like Prometheus's label_name_length_limit; longer fails the scrape with reason label_name_length_limit. 0 means no limit.").
		Default("128").IntVar(&f.labelLimits.NameLength)
	app.Flag("vllm.label-value-length-limit", "Longest label value in bytes (metric names included), like Prometheus's label_value_length_limit; longer fails the scrape with reason label_value_length_limit. 0 means no limit.").
		Default("4096").IntVar(&f.labelLimits.ValueLength)
	app.Flag("history.max-series", "Most upstream series kept in the derived gauges' history; samples beyond are not windowed, are counted in vllm_normalizer_history_unwindowed_samples_total, and the derived gauges of their model_name and engine are left out. 0 means no limit.").
		Default("5000").IntVar(&f.maxSeries)
	app.Flag("derive.window", "Window of the derived gauges (rates, ratios, means, quantiles), repeatable; each value becomes a window=\"...\" label.").
		Default("1m", "5m").DurationListVar(&f.windows)
	for _, slo := range []struct {
		name, what, example string
		ds                  *[]time.Duration
	}{
		{"slo.ttft", "time to first token", "500ms", &f.slos.TTFT},
		{"slo.tpot", "mean time per output token of a request", "50ms", &f.slos.TPOT},
		{"slo.e2e", "end-to-end request latency", "10s", &f.slos.E2E},
	} {
		app.Flag(slo.name, "Target for the "+slo.what+", repeatable (e.g. "+slo.example+"): vllm_derived_slo_attainment_ratio{slo=\""+strings.TrimPrefix(slo.name, "slo.")+"\"} gives the share of requests at most this slow, per window. None by default.").
			DurationListVar(slo.ds)
	}
	app.Flag("mapping.legacy-aliases", "Also emit the legacy vLLM names the catalogue marks as aliases (the old KV-usage, time-per-output-token and GPU prefix-cache names; see docs/mapping.md) from their current families when the upstream does not print them (legacy names it prints are always kept), for consumers that still ask for them. Off by default: aliases double-count sums over every vLLM name.").
		Default("false").BoolVar(&f.legacyAliases)
	app.Flag("output.name-style", "colon keeps vLLM's names as printed, colons included; underscore writes every colon of a metric name as _ for consumers that reject colons.").
		Default("colon").EnumVar(&f.nameStyle, "colon", "underscore")
	app.Flag("config.file", "Optional YAML file with metric_relabel_configs (Prometheus syntax) applied after the built-in mapping. Reloaded on SIGHUP and POST /-/reload.").
		Default("").StringVar(&f.configFile)
	app.Flag("config.check", "Validate --config.file and exit: 0 if valid, 1 with the offending rule if not.").
		Default("false").BoolVar(&f.configCheck)
	app.Flag("web.telemetry-path", "Path of the full page.").Default("/metrics").StringVar(&f.telemetryPath)
	app.Flag("web.routing-path", "Path of the routing view: one series per model_name of running, waiting, KV usage, cache and LoRA info, and the derived gauges; 503 when vLLM data is older than three scrape intervals.").
		Default("/metrics/routing").StringVar(&f.routingPath)
	app.Flag("web.disable-exporter-metrics", "Leave out the sidecar's own go_* and vllm_normalizer_process_* metrics.").
		Default("false").BoolVar(&f.disableExpMet)
	app.Flag("web.enable-lifecycle", "Enable POST /-/reload.").Default("false").BoolVar(&f.enableLife)
	app.Flag("web.enable-pprof", "Serve Go profiling under /debug/pprof/ (same listener, same TLS and auth).").Default("false").BoolVar(&f.enablePprof)
	app.Flag("web.write-timeout", "Longest time one response may take to write; a reader slower than that is cut off, so it cannot hold a connection and an old page for ever. Profiles under /debug/pprof/ must be shorter.").
		Default("10s").DurationVar(&f.writeTimeout)
	app.Flag("web.max-connections", "Most simultaneous HTTP connections per listen address of the sidecar's own listeners (not the inference proxy); further ones wait in the kernel's accept queue.").
		Default("512").IntVar(&f.maxConns)
	app.Flag("auto-gomemlimit", "Set the Go runtime's soft memory limit (GOMEMLIMIT) to --auto-gomemlimit.ratio of the container's (cgroup's) memory limit, as Prometheus does; an explicit GOMEMLIMIT wins.").
		Default("true").BoolVar(&f.autoMemLimit)
	app.Flag("auto-gomemlimit.ratio", "Share of the container's memory limit given to the Go runtime as its soft limit. Below Prometheus's 0.9: a page's garbage comes all at once every scrape.").
		Default("0.6").Float64Var(&f.memLimitRatio)
	app.Flag("runtime.gomaxprocs", "CPUs the Go runtime runs the sidecar on at once (GOMAXPROCS); 0 keeps Go's own choice (the machine's or the container's CPUs, at least 2). One by default, as node_exporter: the work is one scrape loop, and a second CPU cost a quarter more CPU per scrape in cross-CPU wake-ups and garbage-collector workers. Raise it when the pages are of tens of engines, where a router's read may otherwise wait up to ~20 ms behind a scrape, or when the inference proxy carries heavy traffic.").
		Envar("GOMAXPROCS").Default("1").IntVar(&f.maxProcs)
	app.Flag("demo", "Start a simulated vLLM upstream in-process (a real V1 page replayed with advancing counters) and scrape it instead of --vllm.scrape-uri. For trying the sidecar without a GPU.").
		Default("false").BoolVar(&f.demo)
	app.Flag("demo.engines", "Data-parallel engines the --demo upstream simulates.").Default("1").IntVar(&f.demoEngines)
	app.Flag("web.routing-listen-address", "Address of a second listener serving the routing view at /metrics (and /-/healthy), for routers that cannot change the path (AIBrix's model.aibrix.ai/metric-port, --model-server-metrics-port of older EPPs). Same TLS and auth as --web.config.file. Off when empty.").
		Default("").StringVar(&f.routingListen)
	app.Flag("proxy.listen-address", "Address of the inference-port proxy, for routers that read /metrics on the port they send inference to (production-stack, kthena): GET /metrics is the routing view, every other request goes to --proxy.upstream unchanged. Plain HTTP without --web.config.file, like vLLM's own port. Off when empty.").
		Default("").StringVar(&f.proxyListen)
	app.Flag("proxy.upstream", "vLLM's base URL (scheme, host and port) the proxy forwards to. Empty means scheme, host and port of --vllm.scrape-uri.").
		Default("").StringVar(&f.proxyUpstream)
	app.Flag("demo.scenario", "Load the --demo upstream simulates: steady, or steady then one shift that the diagnosis should name: "+strings.Join(demo.Scenarios[1:], ", ")+".").
		Default(demo.ScenarioSteady).StringVar(&f.demoScenario)
	app.Flag("demo.shift-after", "How long a --demo.scenario runs steady before its shift.").
		Default(model.Duration(demo.DefaultShiftAfter).String()).DurationVar(&f.demoShiftAfter)
	app.Flag("diagnosis.window", "Recent window of the diagnosis: each signal over it is compared with the baseline window just before it.").
		Default("1m").DurationVar(&f.diagWindow)
	app.Flag("diagnosis.baseline", "Baseline window of the diagnosis, ending where the recent window starts.").
		Default("30m").DurationVar(&f.diagBaseline)
	app.Flag("diagnosis.min-change", "Smallest relative change of a signal, recent against baseline, that the diagnosis counts (0.25 = 25 %).").
		Default("0.25").Float64Var(&f.diagMinChange)
	f.web = kingpinflag.AddFlags(app, defaultListen)
	promslogflag.AddFlags(app, f.log)
	return app
}

func run(args []string, stdout, stderr *os.File) int {
	f, err := parseFlags(args, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vllm-normalizer: %v; see --help\n", err)
		return 2
	}
	f.log.Writer = stderr
	logger := promslog.New(f.log)
	if f.maxProcs > 0 {
		runtime.GOMAXPROCS(f.maxProcs)
	}
	if f.autoMemLimit {
		setMemoryLimit(f.memLimitRatio, memlimit.FromCgroup, logger)
	}

	cat, err := mapping.LoadCatalogue()
	if err != nil {
		logger.Error("the built-in metric catalogue is invalid", "err", err)
		return 1
	}
	loader := &mapperLoader{path: f.configFile, catalogue: cat, opts: mapping.Options{
		LegacyAliases: f.legacyAliases,
		NameStyle:     mapping.NameStyle(f.nameStyle),
	}}
	mapper, err := loader.load()
	if f.configCheck {
		if err != nil {
			fmt.Fprintf(stderr, "vllm-normalizer: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s is valid\n", orDefault(f.configFile, "the built-in mapping"))
		return 0
	}
	if err != nil {
		logger.Error("cannot load the configuration", "err", err)
		return 1
	}
	logger.Info("starting vllm-normalizer", "version", version.Info(), "build_context", version.BuildContext())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if f.demo {
		addr, shutdown, err := startDemo(demo.Options{Engines: f.demoEngines, Scenario: f.demoScenario, ShiftAfter: f.demoShiftAfter}, logger)
		if err != nil {
			logger.Error("cannot start the demo upstream", "err", err)
			return 1
		}
		defer shutdown()
		f.scrapeURI = "http://" + addr + "/metrics"
		logger.Info("demo mode: scraping the built-in simulated vLLM", "uri", f.scrapeURI, "scenario", f.demoScenario, "shift_after", f.demoShiftAfter)
	}

	reg := prometheus.NewRegistry()
	gatherers := prometheus.Gatherers{reg}
	if !f.disableExpMet {
		exp := prometheus.NewRegistry()
		exp.MustRegister(collectors.NewGoCollector())
		// Namespaced: vLLM's own process_* series pass through unchanged.
		exp.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "vllm_normalizer"}))
		gatherers = append(gatherers, exp)
	}
	diag, err := diagnosis.New(diagnosis.Options{Window: f.diagWindow, Baseline: f.diagBaseline, MinChange: f.diagMinChange, Interval: f.scrapeInterval})
	if err != nil {
		logger.Error("invalid settings", "err", err)
		return 2
	}
	coll, err := collector.New(collector.Config{
		Diagnosis:    diag,
		ScrapeURI:    f.scrapeURI,
		Interval:     f.scrapeInterval,
		Timeout:      f.timeout,
		MaxBodyBytes: int64(f.maxBody),
		AskGzip:      f.askGzip,
		SampleLimit:  f.sampleLimit,
		LabelLimits:  f.labelLimits,
		MaxSeries:    f.maxSeries,
		Windows:      uniqueWindows(f.windows),
		SLOs:         f.slos,
		Mapper:       mapper,
		Registry:     reg,
		Gatherer:     gatherers,
		Logger:       logger,
	})
	if err != nil {
		logger.Error("invalid settings", "err", err)
		return 2
	}

	reload := func() error {
		if err := coll.Reload(loader.load); err != nil {
			logger.Error("configuration reload failed; keeping the previous configuration", "err", err)
			return err
		}
		logger.Info("configuration reloaded", "file", orDefault(f.configFile, "none (flags only)"))
		return nil
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = reload()
			}
		}
	}()

	go coll.Run(ctx)

	upstream := ""
	if f.proxyListen != "" {
		if upstream, err = f.proxyUpstreamURL(); err != nil {
			logger.Error("invalid settings", "err", err)
			return 2
		}
	}
	mux, err := newMux(f, coll, diag, reload, upstream)
	if err != nil {
		logger.Error("cannot build the landing page", "err", err)
		return 1
	}

	srv := newServers(logger)
	srv.writeTimeout, srv.maxConns = f.writeTimeout, f.maxConns
	srv.serveWeb("main", mux, f.web)
	if f.routingListen != "" {
		rmux, err := newRoutingMux(coll)
		if err != nil {
			logger.Error("cannot build the routing listener's landing page", "err", err)
			return 1
		}
		// Its own copy of the web flags: same TLS and auth file, its own
		// address, never the systemd socket (that is the main listener's).
		noSystemd := false
		srv.serveWeb("routing", rmux, &web.FlagConfig{
			WebListenAddresses: &[]string{f.routingListen},
			WebSystemdSocket:   &noSystemd,
			WebConfigFile:      f.web.WebConfigFile,
		})
	}
	if f.proxyListen != "" {
		if err := srv.serveProxy(f.proxyListen, upstream, coll.RoutingHandler(), reg); err != nil {
			logger.Error("cannot start the inference-port proxy", "err", err)
			srv.shutdown()
			return 1
		}
	}
	select {
	case err := <-srv.errs:
		logger.Error("cannot serve", "err", err)
		srv.shutdown()
		return 1
	case <-ctx.Done():
	}
	// A second SIGTERM or interrupt now ends the process at once.
	stop()
	logger.Info("shutting down: finishing requests in flight")
	if !srv.shutdown() {
		return 1
	}
	return 0
}

// newMux routes every endpoint: the two pages at their flag-given paths,
// health, reload, pprof when enabled, and the landing page at "/" unless a
// page is served there.
func newMux(f *flags, coll *collector.Collector, diag *diagnosis.Diagnoser, reload func() error, upstream string) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	mux.Handle(f.telemetryPath, coll.MetricsHandler())
	mux.Handle(f.routingPath, coll.RoutingHandler())
	mux.Handle(diagnosisAPIPath, diag.APIHandler())
	mux.Handle(diagnosisPagePath, diag.PageHandler())
	mux.HandleFunc("/-/healthy", okHandler)
	mux.HandleFunc("/-/ready", okHandler)
	mux.HandleFunc("/-/reload", func(w http.ResponseWriter, r *http.Request) {
		if !f.enableLife {
			http.Error(w, "Lifecycle API is not enabled; start with --web.enable-lifecycle.", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			w.Header().Set("Allow", "POST, PUT")
			http.Error(w, "use POST to reload the configuration", http.StatusMethodNotAllowed)
			return
		}
		if err := reload(); err != nil {
			http.Error(w, "reload failed, previous configuration kept: "+err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("configuration reloaded\n"))
	})
	if f.enablePprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		// No /debug/pprof/cmdline: the command line may hold the
		// password of --vllm.scrape-uri.
		mux.HandleFunc("/debug/pprof/cmdline", http.NotFound)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	if f.telemetryPath != "/" && f.routingPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "vllm-normalizer",
			Description: "Stable, router-ready metrics for vLLM",
			Version:     version.Info(),
			Links: []web.LandingLinks{
				{Address: f.telemetryPath, Text: "Metrics", Description: "vLLM's metrics under current names, derived gauges, statuses, sidecar health"},
				{Address: f.routingPath, Text: "Routing view", Description: "one series per model for routers"},
				{Address: diagnosisPagePath, Text: "Diagnosis", Description: "the five-step triage against the pod's own past, with charts"},
				{Address: diagnosisAPIPath, Text: "Diagnosis API", Description: "the same as JSON"},
			},
			ExtraHTML: f.listenersText(upstream),
		})
		if err != nil {
			return nil, err
		}
		mux.Handle("/", landing)
	}

	return mux, nil
}

func okHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("OK\n"))
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func uniqueWindows(ws []time.Duration) []time.Duration {
	out := slices.Clone(ws)
	slices.Sort(out)
	return slices.Compact(out)
}

// startDemo serves the simulated upstream on a loopback port of its own.
func startDemo(opts demo.Options, logger *slog.Logger) (string, func(), error) {
	opts.Seed = time.Now().UnixNano()
	up, err := demo.New(opts)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: up, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("demo upstream stopped", "err", err)
		}
	}()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// setMemoryLimit sets the Go runtime's soft memory limit to ratio of what
// provider reports (the cgroup's limit), unless GOMEMLIMIT is set: the
// collector's garbage comes a page at a time, and without a limit the heap
// may grow to twice what is live before the collector runs.
func setMemoryLimit(ratio float64, provider memlimit.Provider, logger *slog.Logger) int64 {
	limit, err := memlimit.Set(memlimit.WithRatio(ratio), memlimit.WithProvider(provider), memlimit.WithLogger(logger))
	if err != nil {
		logger.Warn("cannot set the Go memory limit from the container's; running without one", "err", err)
	}
	return limit
}
