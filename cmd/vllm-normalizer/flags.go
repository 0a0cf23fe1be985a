package main

import (
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"
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
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/otlp"
)

const defaultListen = ":9400"

// flags are the parsed command line.
type flags struct {
	scrapeURI        string
	upstreamRole     string
	upstreamModel    string
	queuedReqsCap    int
	scrapeInterval   time.Duration
	timeout          time.Duration
	maxBody          units.Base2Bytes
	askGzip          bool
	sampleLimit      int
	labelLimits      exposition.LabelLimits
	maxSeries        int
	maxModels        int
	maxSeriesSet     bool // given on the command line, else derived from the body limit
	maxModelsSet     bool // given on the command line, else derived from the series bound
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
	demoEnginesSet   bool // given on the command line: the demo's flags shape nothing without --demo
	demoScenarioSet  bool // given on the command line
	demoShiftSet     bool // given on the command line
	scrapeURISet     bool // given on the command line: --demo scrapes its own server instead
	diagWindow       time.Duration
	diagBaseline     time.Duration
	diagMinChange    float64
	diagSignificance float64
	diagMaxIncident  time.Duration
	diagLookback     time.Duration
	diagMaxIncSet    bool // given on the command line, else derived from the windows
	diagLookbackSet  bool // given on the command line, else derived from the baseline
	genai            genai.Options
	otlpEndpoint     string
	otlpView         string
	otlpInterval     time.Duration
	createdTimes     bool
	web              *web.FlagConfig
	log              *promslog.Config
}

func parseFlags(args []string, stdout, stderr io.Writer) (*flags, error) {
	f := &flags{log: &promslog.Config{}}
	app := newApp(f, stdout, stderr)
	if _, err := app.Parse(args); err != nil {
		return nil, unreadable(app, args, err)
	}
	if err := wholeNumbers(app, args); err != nil {
		return nil, err
	}
	f.deriveUnset()
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

// deriveUnset fills the flags left unset whose defaults follow other flags,
// with what the libraries derive from the flags given, so that a default
// never contradicts a flag given (a page the body limit admits is kept
// whole; a longer baseline alone starts).
func (f *flags) deriveUnset() {
	if !f.maxSeriesSet {
		f.maxSeries = collector.MaxSeriesFor(int64(f.maxBody))
	}
	if !f.maxModelsSet {
		f.maxModels = collector.MaxModelsFor(f.maxSeries)
	}
	derived := f.diagnosisOptions().WithDefaults() // the unset are still 0
	if !f.diagMaxIncSet {
		f.diagMaxIncident = derived.MaxIncident
	}
	if !f.diagLookbackSet {
		f.diagLookback = derived.BaselineLookback
	}
}

// newApp declares every flag, filling f when the application parses.
func newApp(f *flags, stdout, stderr io.Writer) *kingpin.Application {
	app := kingpin.New("vllm-normalizer", "Scrapes an LLM inference server's /metrics ("+mapping.ServerList()+") and serves stable, router-ready pages. Every flag, its default and its rules: docs/flags.md.")
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)
	app.HelpFlag.Short('h')
	app.Version(version.Print("vllm-normalizer"))
	// Upstream.
	app.Flag("vllm.scrape-uri", "URL of the server's metrics page; fixed by flag, never taken from a request.").
		Default("http://127.0.0.1:8000/metrics").IsSetByUser(&f.scrapeURISet).StringVar(&f.scrapeURI)
	app.Flag("vllm.scrape-interval", "Time between scrapes, at least 50ms; derived gauges update at this pace.").
		Default("1s").DurationVar(&f.scrapeInterval)
	app.Flag("vllm.timeout", "Limit for one scrape, at least 10ms and at most the interval; 0 means 90% of the interval.").
		Default("0s").DurationVar(&f.timeout)
	app.Flag("vllm.max-body-bytes", "Largest page accepted, after decompression (KiB, MiB, GiB).").
		Default(units.Base2Bytes(collector.DefaultMaxBodyBytes).String()).BytesVar(&f.maxBody)
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
	app.Flag("upstream.role", "What the pod serves: a value of llm-d's llm-d.ai/role (decode, prefill, encode, prefill-decode, encode-prefill, encode-prefill-decode, both; empty means both); labels derived and routing series. Any other value is served with a warning, never refused.").
		Default("both").StringVar(&f.upstreamRole)
	app.Flag("upstream.model-name", "The model of a server whose page names none (llama.cpp); empty asks the server's /v1/models.").
		StringVar(&f.upstreamModel)
	app.Flag("upstream.max-num-queued-reqs", "The server's --max-num-queued-reqs (vLLM 0.29 on), so that vllm_derived_admission_at_cap says when waiting + running reach it; 0 means not known.").
		Default("0").IntVar(&f.queuedReqsCap)

	// History and derived gauges.
	// No fixed defaults: left unset, each follows the limit before it.
	app.Flag("history.max-series", "Most upstream series kept for the derived gauges, each model kept taking the room of "+strconv.Itoa(collector.ModelSeries)+" more for its own state (its diagnosis); default: one per "+strconv.Itoa(collector.PageBytesPerSeries)+" bytes of --vllm.max-body-bytes ("+strconv.Itoa(collector.DefaultMaxSeries)+" at its default), so that every page of a few models it admits is kept whole. 0 means no limit.").
		PlaceHolder("SERIES").IsSetByUser(&f.maxSeriesSet).IntVar(&f.maxSeries)
	app.Flag("history.max-models", "Most model_name values whose state (windows, idle times, the diagnosis) is kept; models beyond have no derived gauges and no diagnosis; default: the most --history.max-series admits, one per "+strconv.Itoa(collector.ModelSeries)+" series ("+strconv.Itoa(collector.DefaultMaxModels)+" at its default, no limit when it is 0). 0 means no limit.").
		PlaceHolder("MODELS").IsSetByUser(&f.maxModelsSet).IntVar(&f.maxModels)
	app.Flag("derive.window", "Window of the derived gauges, repeatable; each gives a window label.").
		Default(durationStrings(derive.DefaultWindows())...).DurationListVar(&f.windows)
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
	app.Flag("output.created-timestamps", "Serve the start times of counters and histograms (the sums of the compatibility page and "+genaiPath+", the server's series it printed _created for, the sidecar's own) as OpenMetrics _created lines; the OTLP push starts those series at the same times.").
		Default("false").BoolVar(&f.createdTimes)
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
		Default(model.Duration(diagnosis.DefaultWindow).String()).DurationVar(&f.diagWindow)
	app.Flag("diagnosis.baseline", "Baseline window of the diagnosis, just before the recent one.").
		Default(model.Duration(diagnosis.DefaultBaseline).String()).DurationVar(&f.diagBaseline)
	app.Flag("diagnosis.min-change", "Smallest relative change the diagnosis counts (0.25 = 25 %).").
		Default(strconv.FormatFloat(diagnosis.DefaultMinChange, 'g', -1, 64)).Float64Var(&f.diagMinChange)
	app.Flag("diagnosis.significance", "Level at which a change must also be significant for the data each window holds (0.01 = 1 %).").
		Default(strconv.FormatFloat(diagnosis.DefaultSignificance, 'g', -1, 64)).Float64Var(&f.diagSignificance)
	// No fixed default: left unset, the diagnosis derives them from the windows given.
	app.Flag("diagnosis.max-incident", "Longest an incident stays open against its frozen baseline; then the new level becomes the baseline. Longer than --diagnosis.window plus --diagnosis.baseline; default: the longer of "+model.Duration(diagnosis.DefaultMaxIncident).String()+" and twice that.").
		PlaceHolder("DURATION").IsSetByUser(&f.diagMaxIncSet).DurationVar(&f.diagMaxIncident)
	app.Flag("diagnosis.baseline-lookback", "How far back the baseline may reach for time that was not in an incident; at least --diagnosis.baseline; default: the longer of "+model.Duration(diagnosis.DefaultBaselineLookback).String()+" and --diagnosis.baseline.").
		PlaceHolder("DURATION").IsSetByUser(&f.diagLookbackSet).DurationVar(&f.diagLookback)

	// Demo.
	app.Flag("demo", "Scrape a simulated vLLM started in-process, for trying without a GPU.").
		Default("false").BoolVar(&f.demo)
	app.Flag("demo.engines", "Data-parallel engines the demo simulates.").Default("1").IsSetByUser(&f.demoEnginesSet).IntVar(&f.demoEngines)
	app.Flag("demo.scenario", "Demo load: steady, or a shift the diagnosis should name: "+strings.Join(demo.Scenarios[1:], ", ")+".").
		Default(demo.ScenarioSteady).IsSetByUser(&f.demoScenarioSet).StringVar(&f.demoScenario)
	app.Flag("demo.shift-after", "How long a demo scenario runs steady before its shift.").
		Default(model.Duration(demo.DefaultShiftAfter).String()).IsSetByUser(&f.demoShiftSet).DurationVar(&f.demoShiftAfter)

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
	// OTLP push.
	app.Flag("otlp.endpoint", "Push a page over OTLP/HTTP to this URL, path included (http://otel-collector:4318/v1/metrics); off when empty. OTEL_EXPORTER_OTLP_* set headers, TLS and compression, OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME the resource.").
		Default("").StringVar(&f.otlpEndpoint)
	app.Flag("otlp.view", "Page pushed over OTLP: full (/metrics), routing (/metrics/routing) or genai (/metrics/genai).").
		Default(string(collector.ViewFull)).EnumVar(&f.otlpView, string(collector.ViewFull), string(collector.ViewRouting), string(collector.ViewGenAI))
	app.Flag("otlp.interval", "Time between OTLP pushes, at least 1s; each export times out at 90% of it.").
		Default(model.Duration(otlp.DefaultInterval).String()).DurationVar(&f.otlpInterval)
	f.web = kingpinflag.AddFlags(app, defaultListen)
	promslogflag.AddFlags(app, f.log)
	return app
}

// durationStrings spells durations as flag defaults, as Prometheus does (1m, 5m).
func durationStrings(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = model.Duration(d).String()
	}
	return out
}

// givenFlag is a flag on the command line with the text given for it.
type givenFlag struct {
	model *kingpin.FlagModel
	value string
}

// givenFlags are the flags args sets, in order; none when they do not parse.
func givenFlags(app *kingpin.Application, args []string) []givenFlag {
	ctx, err := app.ParseContext(args)
	if err != nil || ctx == nil {
		return nil
	}
	var out []givenFlag
	for _, el := range ctx.Elements {
		if fc, ok := el.Clause.(*kingpin.FlagClause); ok && el.Value != nil {
			out = append(out, givenFlag{fc.Model(), *el.Value})
		}
	}
	return out
}

// example is the fix an error about flag m offers: its default, if it has one.
func example(m *kingpin.FlagModel) string {
	if len(m.Default) > 0 && m.Default[0] != "" {
		return "give a value such as " + m.Default[0]
	}
	// Without a default, the kind its value reads: --help shows only a
	// placeholder (SLO.TTFT, SERIES).
	if g, ok := m.Value.(kingpin.Getter); ok {
		switch g.Get().(type) {
		case time.Duration, *[]time.Duration:
			return "give a duration such as 500ms, 30s or 3h"
		case int, int64, uint, uint64:
			return "give a whole number such as 1000"
		}
	}
	return "give a value of the type --help shows for it"
}

// unreadable names the flag whose value kingpin could not read (its error
// quotes only the type's parser), with the value and an example: err when
// no flag's value gives that error.
func unreadable(app *kingpin.Application, args []string, err error) error {
	for _, g := range givenFlags(app, args) {
		// Setting again only repeats what failed: the process exits on this error.
		if serr := g.model.Value.Set(g.value); serr == nil || serr.Error() != err.Error() {
			continue
		}
		return badFlag("--"+g.model.Name, g.value, "cannot be read ("+err.Error()+")", example(g.model))
	}
	for _, m := range app.Model().Flags {
		v, ok := os.LookupEnv(m.Envar)
		if m.Envar == "" || !ok {
			continue
		}
		if serr := m.Value.Set(v); serr == nil || serr.Error() != err.Error() {
			continue
		}
		return badFlag(m.Envar+" (the environment variable of --"+m.Name+")", v, "cannot be read ("+err.Error()+")", "unset it or "+example(m))
	}
	return err
}

// wholeNumbers refuses a fraction given to an int flag: kingpin reads ints as
// floats and truncates, so --vllm.sample-limit=0.5 would be 0, "no limit".
func wholeNumbers(app *kingpin.Application, args []string) error {
	for _, g := range givenFlags(app, args) {
		getter, ok := g.model.Value.(kingpin.Getter)
		if !ok {
			continue
		}
		if _, isInt := getter.Get().(int); !isInt {
			continue
		}
		v, err := strconv.ParseFloat(g.value, 64)
		if err == nil && v == math.Trunc(v) && math.Abs(v) <= 1<<53 {
			continue
		}
		return badFlag("--"+g.model.Name, g.value, "is not a whole number", example(g.model))
	}
	return nil
}
