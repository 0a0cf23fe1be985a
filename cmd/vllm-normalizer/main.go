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
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
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
	"github.com/fos-study/vllm-normalizer/genai"
	"github.com/fos-study/vllm-normalizer/internal/setting"
	"github.com/fos-study/vllm-normalizer/mapping"
)

const defaultListen = ":9400"

// Paths of the diagnosis, on the main mux (same TLS and auth as the pages).
const (
	diagnosisPagePath = "/diagnosis"
	diagnosisAPIPath  = "/api/v1/diagnosis"
)

// genaiPath is the OpenTelemetry GenAI view's path, on the main mux.
const genaiPath = "/metrics/genai"

func main() {
	stampVersion(debug.ReadBuildInfo())
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// flags are the parsed command line.
type flags struct {
	scrapeURI        string
	upstreamRole     string
	upstreamModel    string
	scrapeInterval   time.Duration
	timeout          time.Duration
	maxBody          units.Base2Bytes
	askGzip          bool
	sampleLimit      int
	labelLimits      exposition.LabelLimits
	maxSeries        int
	windows          []time.Duration
	slos             derive.SLOTargets
	legacyAliases    bool
	legacyLabels     bool
	nameStyle        string
	configFile       string
	profileFiles     []string
	httpConfigFile   string
	configCheck      bool
	telemetryPath    string
	routingPath      string
	disableExpMet    bool
	enableLife       bool
	enablePprof      bool
	demo             bool
	demoEngines      int
	routingListen    string
	proxyListen      string
	proxyUpstream    string
	writeTimeout     time.Duration
	autoMemLimit     bool
	memLimitRatio    float64
	maxProcs         int
	maxProcsSet      bool // given on the command line
	maxConns         int
	demoScenario     string
	demoShiftAfter   time.Duration
	diagWindow       time.Duration
	diagBaseline     time.Duration
	diagMinChange    float64
	diagSignificance float64
	diagMaxIncident  time.Duration
	genai            genai.Options
	web              *web.FlagConfig
	log              *promslog.Config
}

func parseFlags(args []string, stdout, stderr io.Writer) (*flags, error) {
	f := &flags{log: &promslog.Config{}}
	app := newApp(f, stdout, stderr)
	if _, err := app.Parse(args); err != nil {
		return nil, err
	}
	if _, env := os.LookupEnv("GOMAXPROCS"); f.proxyListen != "" && !f.maxProcsSet && !env {
		// The proxy's streams need more than one CPU (200 streams: 5x
		// slower first byte on one); the default of one is for the scrape loop.
		f.maxProcs = 0
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
		if p.path == "/-/healthy" || p.path == "/-/ready" || p.path == "/-/reload" || p.path == diagnosisPagePath || p.path == diagnosisAPIPath || p.path == genaiPath || strings.HasPrefix(p.path, "/debug/pprof/") {
			return fmt.Errorf("%s=%s is taken by one of the sidecar's own endpoints; choose another path", p.flag, p.path)
		}
	}
	if _, err := mapping.ParsePodRole(f.upstreamRole); err != nil {
		return fmt.Errorf("--upstream.role: %w", err)
	}
	if f.telemetryPath == f.routingPath {
		return fmt.Errorf("--web.telemetry-path and --web.routing-path are both %s; the full page and the routing view need different paths", f.routingPath)
	}
	if err := f.checkScrape(); err != nil {
		return err
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
	if err := f.checkGenAI(); err != nil {
		return err
	}
	return f.checkListeners()
}

// tightest is the smallest of the targets, 0 without: the diagnosis page
// says whether the strictest one holds.
func tightest(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Min(ds)
}

// settingFlags maps the libraries' setting names (setting.Error) to the
// flags that give them: the rules and their texts live in the libraries.
var settingFlags = map[string]string{
	"collector.Config.ScrapeURI":               "--vllm.scrape-uri",
	"collector.Config.Interval":                "--vllm.scrape-interval",
	"collector.Config.Timeout":                 "--vllm.timeout",
	"collector.Config.MaxBodyBytes":            "--vllm.max-body-bytes",
	"collector.Config.SampleLimit":             "--vllm.sample-limit",
	"collector.Config.LabelLimits.Labels":      "--vllm.label-limit",
	"collector.Config.LabelLimits.NameLength":  "--vllm.label-name-length-limit",
	"collector.Config.LabelLimits.ValueLength": "--vllm.label-value-length-limit",
	"collector.Config.MaxSeries":               "--history.max-series",
	"collector.Config.Windows":                 "--derive.window",
	"derive.SLOTargets.TTFT":                   "--slo.ttft",
	"derive.SLOTargets.TPOT":                   "--slo.tpot",
	"derive.SLOTargets.E2E":                    "--slo.e2e",
	"diagnosis.Options.Window":                 "--diagnosis.window",
	"diagnosis.Options.Baseline":               "--diagnosis.baseline",
	"diagnosis.Options.MinChange":              "--diagnosis.min-change",
	"diagnosis.Options.Significance":           "--diagnosis.significance",
	"diagnosis.Options.MaxIncident":            "--diagnosis.max-incident",
}

// flagged names a library's rejected setting by its flag.
func flagged(err error) error {
	return setting.For(err, func(s string) string { return settingFlags[s] })
}

// checkDiagnosis rejects diagnosis settings the diagnosis would refuse,
// naming the flags.
func (f *flags) checkDiagnosis() error {
	return flagged(f.diagnosisOptions().Check())
}

// diagnosisOptions are the diagnosis' options from the flags.
func (f *flags) diagnosisOptions() diagnosis.Options {
	return diagnosis.Options{Window: f.diagWindow, Baseline: f.diagBaseline, MinChange: f.diagMinChange, Interval: f.scrapeInterval,
		Significance: f.diagSignificance, MaxIncident: f.diagMaxIncident,
		SLO: diagnosis.SLO{TTFT: tightest(f.slos.TTFT), TPOT: tightest(f.slos.TPOT)}}
}

// checkGenAI rejects GenAI view settings the view would refuse, naming the
// flags.
func (f *flags) checkGenAI() error {
	if f.genai.Operation == "" {
		return errors.New("--genai.operation-name is empty: gen_ai.operation.name is a required attribute; give one such as chat or text_completion")
	}
	if err := (genai.Options{ServerAddress: f.genai.ServerAddress}).Check(); err != nil {
		return fmt.Errorf("--genai.server-address: %w", err)
	}
	return nil
}

// collectorConfig is the collector's configuration the flags give, without
// what run wires in (mapper, registries, diagnosis, logger).
func (f *flags) collectorConfig() collector.Config {
	return collector.Config{
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
		LegacyLabels: f.legacyLabels,
		Role:         f.upstreamRole,
		ModelName:    f.upstreamModel,
	}
}

// checkScrape rejects scrape settings the collector would refuse, naming
// the flags.
func (f *flags) checkScrape() error {
	cfg := f.collectorConfig()
	if f.demo {
		cfg.ScrapeURI = "http://127.0.0.1/metrics" // the demo's, known only once it listens
	}
	return flagged(cfg.Validate())
}

// newApp declares every flag, filling f when the application parses.
func newApp(f *flags, stdout, stderr io.Writer) *kingpin.Application {
	app := kingpin.New("vllm-normalizer", "Scrapes an LLM inference server's /metrics (vLLM, SGLang, TensorRT-LLM, llama.cpp) and serves stable, router-ready pages.")
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)
	app.HelpFlag.Short('h')
	app.Version(version.Print("vllm-normalizer"))
	// Upstream.
	app.Flag("vllm.scrape-uri", "URL of the server's metrics page; fixed by flag, never taken from a request.").
		Default("http://127.0.0.1:8000/metrics").StringVar(&f.scrapeURI)
	app.Flag("vllm.scrape-interval", "Time between scrapes; derived gauges update at this pace.").
		Default("1s").DurationVar(&f.scrapeInterval)
	app.Flag("vllm.timeout", "Limit for one scrape, at most the interval; 0 means 90% of the interval.").
		Default("0s").DurationVar(&f.timeout)
	app.Flag("vllm.max-body-bytes", "Largest page accepted, after decompression (KiB, MiB, GiB).").
		Default("4MiB").BytesVar(&f.maxBody)
	app.Flag("vllm.http-config.file", "Prometheus http_config YAML for the upstream client: TLS, CA, client certificate, bearer token, basic auth, proxy.").
		Default("").StringVar(&f.httpConfigFile)
	app.Flag("vllm.enable-compression", "Ask the server for gzip. Off: on loopback gzip only costs CPU.").
		Default("false").BoolVar(&f.askGzip)
	app.Flag("vllm.sample-limit", "Most samples on one page, as Prometheus's sample_limit; 0 means none.").
		Default("50000").IntVar(&f.sampleLimit)
	app.Flag("vllm.label-limit", "Most labels on one sample, as Prometheus's label_limit; 0 means none.").
		Default("64").IntVar(&f.labelLimits.Labels)
	app.Flag("vllm.label-name-length-limit", "Longest label name in bytes; 0 means none.").
		Default("128").IntVar(&f.labelLimits.NameLength)
	app.Flag("vllm.label-value-length-limit", "Longest label value in bytes; 0 means none.").
		Default("4096").IntVar(&f.labelLimits.ValueLength)
	app.Flag("upstream.role", "What the pod serves: prefill, decode or both (empty means both); labels derived and routing series.").
		Default("both").StringVar(&f.upstreamRole)
	app.Flag("upstream.model-name", "The model of a server whose page names none (llama.cpp); empty asks the server's /v1/models.").
		StringVar(&f.upstreamModel)

	// History and derived gauges.
	app.Flag("history.max-series", "Most upstream series kept for the derived gauges; the default admits every page --vllm.max-body-bytes admits. 0 means no limit.").
		Default(strconv.Itoa(collector.DefaultMaxSeries)).IntVar(&f.maxSeries)
	app.Flag("derive.window", "Window of the derived gauges, repeatable; each gives a window label.").
		Default("1m", "5m").DurationListVar(&f.windows)
	app.Flag("derive.legacy-labels", "Label latency quantiles quantile and SLO targets le, the names before q and target. Deprecated.").
		Default("false").BoolVar(&f.legacyLabels)
	for _, slo := range []struct {
		name, what string
		ds         *[]time.Duration
	}{
		{"slo.ttft", "time to first token", &f.slos.TTFT},
		{"slo.tpot", "time per output token", &f.slos.TPOT},
		{"slo.e2e", "end-to-end latency", &f.slos.E2E},
	} {
		app.Flag(slo.name, "Target "+slo.what+" of vllm_derived_slo_attainment_ratio, repeatable.").
			DurationListVar(slo.ds)
	}

	// Names and mapping.
	app.Flag("mapping.legacy-aliases", "Also emit legacy alias names the server does not print.").
		Default("false").BoolVar(&f.legacyAliases)
	app.Flag("output.name-style", "colon keeps names as printed; underscore writes colons as _.").
		Default("colon").EnumVar(&f.nameStyle, "colon", "underscore")
	app.Flag("config.file", "YAML with metric_relabel_configs; reloaded on SIGHUP and POST /-/reload.").
		Default("").StringVar(&f.configFile)
	app.Flag("engine.profile-file", "Engine profile (YAML) adding or replacing a server's; repeatable, reloaded with --config.file.").
		StringsVar(&f.profileFiles)
	app.Flag("config.check", "Check the configuration files and exit: 0 if valid, else 1.").
		Default("false").BoolVar(&f.configCheck)

	// Web.
	app.Flag("web.telemetry-path", "Path of the full page.").Default("/metrics").StringVar(&f.telemetryPath)
	app.Flag("web.routing-path", "Path of the routing view.").
		Default("/metrics/routing").StringVar(&f.routingPath)
	app.Flag("web.routing-listen-address", "Second listener serving the routing view at /metrics; off when empty.").
		Default("").StringVar(&f.routingListen)
	app.Flag("web.disable-exporter-metrics", "Leave out the go_* and vllm_normalizer_process_* metrics.").
		Default("false").BoolVar(&f.disableExpMet)
	app.Flag("web.enable-lifecycle", "Enable POST /-/reload.").Default("false").BoolVar(&f.enableLife)
	app.Flag("web.enable-pprof", "Serve Go profiling under /debug/pprof/; timed profiles shorter than --web.write-timeout, one at a time.").Default("false").BoolVar(&f.enablePprof)
	app.Flag("web.write-timeout", "Longest time one response may take to write; also the longest a keep-alive connection stays idle.").
		Default("10s").DurationVar(&f.writeTimeout)
	app.Flag("web.max-connections", "Most simultaneous connections per listen address; at the cap the longest-idle one is closed.").
		Default("512").IntVar(&f.maxConns)

	// Inference-port proxy.
	app.Flag("proxy.listen-address", "Inference-port proxy: GET /metrics is the routing view; off when empty.").
		Default("").StringVar(&f.proxyListen)
	app.Flag("proxy.upstream", "Base URL the proxy forwards to; empty means that of --vllm.scrape-uri.").
		Default("").StringVar(&f.proxyUpstream)

	// Diagnosis.
	app.Flag("diagnosis.window", "Recent window of the diagnosis.").
		Default("1m").DurationVar(&f.diagWindow)
	app.Flag("diagnosis.baseline", "Baseline window of the diagnosis, just before the recent one.").
		Default("30m").DurationVar(&f.diagBaseline)
	app.Flag("diagnosis.min-change", "Smallest relative change the diagnosis counts (0.25 = 25 %).").
		Default("0.25").Float64Var(&f.diagMinChange)
	app.Flag("diagnosis.significance", "Level at which a change must also be significant for the data each window holds (0.01 = 1 %).").
		Default("0.01").Float64Var(&f.diagSignificance)
	app.Flag("diagnosis.max-incident", "Longest an incident stays open against its frozen baseline; then the new level becomes the baseline.").
		Default(model.Duration(diagnosis.DefaultMaxIncident).String()).DurationVar(&f.diagMaxIncident)

	// Demo.
	app.Flag("demo", "Scrape a simulated vLLM started in-process, for trying without a GPU.").
		Default("false").BoolVar(&f.demo)
	app.Flag("demo.engines", "Data-parallel engines the demo simulates.").Default("1").IntVar(&f.demoEngines)
	app.Flag("demo.scenario", "Demo load: steady, or a shift the diagnosis should name: "+strings.Join(demo.Scenarios[1:], ", ")+".").
		Default(demo.ScenarioSteady).StringVar(&f.demoScenario)
	app.Flag("demo.shift-after", "How long a demo scenario runs steady before its shift.").
		Default(model.Duration(demo.DefaultShiftAfter).String()).DurationVar(&f.demoShiftAfter)

	// Runtime.
	app.Flag("auto-gomemlimit", "Set GOMEMLIMIT from the container's memory limit.").
		Default("true").BoolVar(&f.autoMemLimit)
	app.Flag("auto-gomemlimit.ratio", "Share of the container's memory limit given to GOMEMLIMIT.").
		Default("0.6").Float64Var(&f.memLimitRatio)
	app.Flag("runtime.gomaxprocs", "CPUs the Go runtime uses (GOMAXPROCS); 0 keeps Go's own choice, the default with --proxy.listen-address.").
		Envar("GOMAXPROCS").Default("1").IsSetByUser(&f.maxProcsSet).IntVar(&f.maxProcs)

	// OpenTelemetry GenAI view.
	app.Flag("genai.provider-name", "gen_ai_provider_name on "+genaiPath+"; empty means the server kind (vllm, sglang, trtllm).").
		Default("").StringVar(&f.genai.Provider)
	app.Flag("genai.operation-name", "gen_ai_operation_name on "+genaiPath+", such as chat or text_completion.").
		Default(genai.DefaultOperation).StringVar(&f.genai.Operation)
	app.Flag("genai.server-address", "host:port clients address the server at: server_address and server_port on "+genaiPath+"; none when empty.").
		Default("").StringVar(&f.genai.ServerAddress)
	app.Flag("genai.name-style", "Names on "+genaiPath+": suffixed with the unit (the OpenTelemetry Prometheus exporter's), or unsuffixed (Envoy AI Gateway's).").
		Default(string(genai.Suffixed)).EnumVar((*string)(&f.genai.NameStyle), string(genai.Suffixed), string(genai.Unsuffixed))
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
	loader := &mapperLoader{path: f.configFile, profileFiles: f.profileFiles, catalogue: cat, opts: mapping.Options{
		LegacyAliases: f.legacyAliases,
		NameStyle:     mapping.NameStyle(f.nameStyle),
	}}
	mapper, err := loader.load()
	if err == nil && f.configCheck {
		_, err = upstreamClient(f.httpConfigFile, f.scrapeURI)
	}
	if f.configCheck {
		if err != nil {
			fmt.Fprintf(stderr, "vllm-normalizer: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s is valid\n", loader.describe()+prefixed(" and the upstream client of ", f.httpConfigFile))
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

	client, err := upstreamClient(f.httpConfigFile, f.scrapeURI)
	if err != nil {
		logger.Error("cannot build the upstream HTTP client", "err", err)
		return 1
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
	diag, err := diagnosis.New(f.diagnosisOptions())
	if err != nil {
		logger.Error("invalid settings", "err", flagged(err))
		return 2
	}
	cfg := f.collectorConfig()
	cfg.Diagnosis, cfg.GenAI, cfg.Mapper, cfg.Client, cfg.Registry, cfg.Gatherer, cfg.Logger = diag, f.genai, mapper, client, reg, gatherers, logger
	coll, err := collector.New(cfg)
	if err != nil {
		logger.Error("invalid settings", "err", flagged(err))
		return 2
	}

	reload := func() error {
		if err := coll.Reload(loader.load); err != nil {
			logger.Error("configuration reload failed; keeping the previous configuration", "err", err)
			return err
		}
		logger.Info("configuration reloaded", "file", orDefault(f.configFile, "none (flags only)"), "profile_files", f.profileFiles)
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
		if err := srv.serveProxy(f.proxyListen, upstream, coll.CompatHandler(), reg); err != nil {
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
	mux.Handle(genaiPath, coll.GenAIHandler())
	// One data-parallel engine's routing view, for routers that address
	// ranks as endpoints.
	mux.Handle(strings.TrimSuffix(f.routingPath, "/")+"/engines/{engine}", coll.EngineRoutingHandler())
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
		(&pprofGuard{bound: f.writeTimeout}).register(mux)
	}
	if f.telemetryPath != "/" && f.routingPath != "/" {
		links := []web.LandingLinks{
			{Address: f.telemetryPath, Text: "Metrics", Description: "the server's metrics under current names, derived gauges, statuses, sidecar health"},
			{Address: f.routingPath, Text: "Routing view", Description: "one series per model for routers"},
			{Address: genaiPath, Text: "GenAI view", Description: "OpenTelemetry gen_ai.server.* histograms per model, for panels beside a gateway's"},
			{Address: diagnosisPagePath, Text: "Diagnosis", Description: "the five-step triage against the pod's own past, with charts"},
			{Address: diagnosisAPIPath, Text: "Diagnosis API", Description: "the same as JSON"},
		}
		if f.enablePprof {
			links = append(links, pprofLinks(f.writeTimeout)...)
		}
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "vllm-normalizer",
			Description: "Stable, router-ready metrics for vLLM, SGLang, TensorRT-LLM, llama.cpp and Dynamo",
			Version:     versionText(),
			Links:       links,
			// The toolkit's own profiling box links to an external upload
			// site and to a 60 s profile; pprofLinks replaces it.
			Profiling: "false",
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

// prefixed is p+s, or "" when s is.
func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
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
