package main

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/fos-study/vllm-normalizer/collector"
	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/genai"
	"github.com/fos-study/vllm-normalizer/internal/setting"
	"github.com/fos-study/vllm-normalizer/otlp"
)

// check rejects flag values that would fail later or silently do something
// else than asked. Every error names the flag, the bad value, the rule and
// the fix: cmd's own rules through badFlag, the libraries' through
// setting.Error (flagged) or, for a library that words its error itself,
// prefixed with the flag.
func (f *flags) check() error {
	for _, p := range []struct{ flag, path string }{{"--web.telemetry-path", f.telemetryPath}, {"--web.routing-path", f.routingPath}} {
		if !strings.HasPrefix(p.path, "/") || strings.ContainsAny(p.path, " {}") {
			return badFlag(p.flag, strconv.Quote(p.path), "must be a plain URL path starting with /, without spaces or braces", "give one like /metrics")
		}
		if f.reserved(p.path) != "" {
			return badFlag(p.flag, p.path, "is taken by one of the sidecar's own endpoints", "choose another path")
		}
	}
	if f.telemetryPath == f.routingPath {
		return badFlag("--web.telemetry-path and --web.routing-path", "", "are both "+f.routingPath, "the full page and the routing view need different paths")
	}
	if err := f.checkScrape(); err != nil {
		return err
	}
	if f.maxProcs < 0 {
		return badFlag("--runtime.gomaxprocs", f.maxProcs, "must be 0 (Go's own choice) or positive", "give e.g. 1")
	}
	if !(f.memLimitRatio > 0 && f.memLimitRatio <= 1) {
		return badFlag("--auto-gomemlimit.ratio", f.memLimitRatio, "must be in (0, 1]", "give e.g. 0.6")
	}
	if f.writeTimeout <= 0 {
		return badFlag("--web.write-timeout", f.writeTimeout, "must be positive: without it a reader that stops reading holds its connection and page for ever", "give e.g. 10s")
	}
	if f.maxConns < 1 {
		return badFlag("--web.max-connections", f.maxConns, "must be at least 1", "give 1 or more")
	}
	if f.demoEngines < 1 {
		return badFlag("--demo.engines", f.demoEngines, "must be at least 1: the demo simulates one engine or more", "give 1 or more")
	}
	if err := demo.CheckScenario(f.demoScenario); err != nil {
		return fmt.Errorf("--demo.scenario: %w", err)
	}
	if f.demoShiftAfter <= 0 {
		return badFlag("--demo.shift-after", f.demoShiftAfter, "must be positive: the scenario runs steady for that long, then shifts", "give e.g. "+model.Duration(demo.DefaultShiftAfter).String())
	}
	if err := f.checkDemo(); err != nil {
		return err
	}
	if err := f.checkDiagnosis(); err != nil {
		return err
	}
	if err := f.checkGenAI(); err != nil {
		return err
	}
	if f.otlpInterval <= 0 {
		return badFlag("--otlp.interval", f.otlpInterval, "must be positive", "give e.g. "+model.Duration(otlp.DefaultInterval).String())
	}
	if f.otlpInterval < otlp.MinInterval {
		return badFlag("--otlp.interval", f.otlpInterval, "is below the floor of "+model.Duration(otlp.MinInterval).String()+": each export goes over the network to a collector and must end within 90% of the interval",
			"give "+model.Duration(otlp.MinInterval).String()+" or more (15s by default)")
	}
	return f.checkListeners()
}

// badFlag is cmd's one error shape, the libraries' setting.Error: flag and
// bad value (left out when ""), the rule broken, the fix.
// checkDemo refuses the demo's flags without --demo (the sidecar would
// scrape --vllm.scrape-uri and shape nothing), and --vllm.scrape-uri with
// it (the demo's server is scraped instead).
func (f *flags) checkDemo() error {
	if f.demo {
		if f.scrapeURISet {
			shown := "(not a URL)" // url.Parse's error would quote a password
			if u, err := url.Parse(f.scrapeURI); err == nil {
				shown = u.Redacted()
			}
			return badFlag("--vllm.scrape-uri", shown, "is given with --demo, which scrapes its own simulated vLLM instead", "drop --demo to scrape that server, or drop --vllm.scrape-uri")
		}
		return nil
	}
	for _, d := range []struct {
		flag  string
		set   bool
		value any
	}{
		{"--demo.engines", f.demoEnginesSet, f.demoEngines},
		{"--demo.scenario", f.demoScenarioSet, f.demoScenario},
		{"--demo.shift-after", f.demoShiftSet, model.Duration(f.demoShiftAfter)},
	} {
		if d.set {
			return badFlag(d.flag, d.value, "is given without --demo: it shapes the demo's simulated vLLM only, and without --demo the sidecar scrapes --vllm.scrape-uri", "add --demo, or drop "+d.flag)
		}
	}
	return nil
}

func badFlag(flag string, value any, rule, fix string) error {
	return &setting.Error{Name: flag, Value: fmt.Sprint(value), Rule: rule, Fix: fix}
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
	"collector.Config.MaxModels":               "--history.max-models",
	"collector.Config.Windows":                 "--derive.window",
	"collector.Config.QueuedReqsCap":           "--upstream.max-num-queued-reqs",
	"derive.SLOTargets.TTFT":                   "--slo.ttft",
	"derive.SLOTargets.TPOT":                   "--slo.tpot",
	"derive.SLOTargets.E2E":                    "--slo.e2e",
	"diagnosis.Options.Window":                 "--diagnosis.window",
	"diagnosis.Options.Baseline":               "--diagnosis.baseline",
	"diagnosis.Options.MinChange":              "--diagnosis.min-change",
	"diagnosis.Options.Significance":           "--diagnosis.significance",
	"diagnosis.Options.MaxIncident":            "--diagnosis.max-incident",
	"diagnosis.Options.BaselineLookback":       "--diagnosis.baseline-lookback",
}

// flagged names a library's rejected setting by its flag.
func flagged(err error) error {
	return setting.For(err, func(s string) string { return settingFlags[s] })
}

// checkDiagnosis rejects diagnosis settings the diagnosis would refuse,
// naming the flags; the library checks every value as given, 0 included.
func (f *flags) checkDiagnosis() error {
	return flagged(f.diagnosisOptions().Check())
}

// diagnosisOptions are the diagnosis' options from the flags, each one
// given, 0 included, for Check to judge: the flags' defaults are the
// library's, those that follow the windows filled by deriveUnset.
func (f *flags) diagnosisOptions() diagnosis.Options {
	return diagnosis.Options{Window: f.diagWindow, Baseline: f.diagBaseline, MinChange: f.diagMinChange, Interval: f.scrapeInterval,
		MinRequests: diagnosis.DefaultMinRequests, Significance: f.diagSignificance, MaxIncident: f.diagMaxIncident, BaselineLookback: f.diagLookback,
		SLO: diagnosis.SLO{TTFT: tightest(f.slos.TTFT), TPOT: tightest(f.slos.TPOT)}}
}

// checkGenAI rejects GenAI view settings the view would refuse, naming the
// flags.
func (f *flags) checkGenAI() error {
	if f.genai.Operation == "" {
		return badFlag("--genai.operation-name", "", "is empty: gen_ai.operation.name is a required attribute", "give one such as chat or text_completion")
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
		ScrapeURI:     f.scrapeURI,
		Interval:      f.scrapeInterval,
		Timeout:       f.timeout,
		MaxBodyBytes:  int64(f.maxBody),
		AskGzip:       f.askGzip,
		SampleLimit:   f.sampleLimit,
		LabelLimits:   f.labelLimits,
		MaxSeries:     f.maxSeries,
		MaxModels:     f.maxModels,
		Windows:       uniqueWindows(f.windows),
		SLOs:          f.slos,
		LegacyLabels:  f.legacyLabels,
		Role:          f.upstreamRole,
		QueuedReqsCap: f.queuedReqsCap,
		ModelName:     f.upstreamModel,

		CreatedTimestamps: f.createdTimes,
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

func uniqueWindows(ws []time.Duration) []time.Duration {
	out := slices.Clone(ws)
	slices.Sort(out)
	return slices.Compact(out)
}
