package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/fos-study/vllm-normalizer/collector"
	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/otlp"
)

func main() {
	stampVersion(debug.ReadBuildInfo())
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr *os.File) int {
	f, err := parseFlags(args, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vllm-normalizer: %v; see --help\n", err)
		return 2
	}
	f.log.Writer = stderr
	logger := promslog.New(f.log)
	if !f.enablePprof {
		// Heap profiles only for /debug/pprof: the sampling keeps a record
		// per allocation site, 0.4-0.7 MiB of steady RSS on one engine that
		// no one reads (docs/performance.md#memory).
		runtime.MemProfileRate = 0
	}
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
	if err == nil {
		err = checkWebConfig(*f.web.WebConfigFile)
	}
	if err == nil && f.configCheck {
		_, err = upstreamClient(f.httpConfigFile, f.scrapeURI)
	}
	if f.configCheck {
		if err != nil {
			fmt.Fprintf(stderr, "vllm-normalizer: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s is valid\n", loader.describe()+prefixed(" and the upstream client of ", f.httpConfigFile)+prefixed(" and the web configuration ", *f.web.WebConfigFile))
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
	if f.otlpEndpoint != "" {
		view := collector.View(f.otlpView)
		push, err := otlp.New(ctx, otlp.Options{
			Endpoint: f.otlpEndpoint, Interval: f.otlpInterval, Version: version.Version,
			Source: func() (otlp.Page, bool) {
				pub, ok := coll.Families(view)
				return otlp.Page{Families: pub.Families, At: pub.At, RestartedAt: pub.RestartedAt}, ok
			},
			Logger: logger, Registerer: reg,
		})
		if err != nil {
			logger.Error("invalid settings", "err", err)
			return 2
		}
		logger.Info("pushing over OTLP", "view", f.otlpView, "interval", f.otlpInterval)
		go push.Run(ctx)
	}

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
	srv.serveWeb("--web.listen-address", "main", mux, f.web)
	if f.routingListen != "" {
		rmux, err := newRoutingMux(coll)
		if err != nil {
			logger.Error("cannot build the routing listener's landing page", "err", err)
			return 1
		}
		// Its own copy of the web flags: same TLS and auth file, its own
		// address, never the systemd socket (that is the main listener's).
		noSystemd := false
		srv.serveWeb("--web.routing-listen-address", "routing", rmux, &web.FlagConfig{
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
	// Started: the pages of code and tables only the start touched (every
	// package's init, the flags, the first scrapes' setup) go back to the
	// page cache; steady RSS keeps the ones the loop uses.
	release := time.AfterFunc(max(startupRelease, 2*f.scrapeInterval), func() {
		n, err := releaseStartupPages()
		logger.Debug("released the executable's pages touched while starting", "bytes", n, "err", err)
	})
	defer release.Stop()
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

// startupRelease is the earliest the start's pages are released: by then
// the servers listen and the first scrapes are over.
const startupRelease = 10 * time.Second

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

// checkWebConfig reads --web.config.file as the listeners will, so that a bad
// file fails the start and --config.check naming the flag, not "main: ...".
func checkWebConfig(path string) error {
	if err := web.Validate(path); err != nil {
		return fmt.Errorf("--web.config.file %s: %w; fix the file: it is exporter-toolkit's web configuration (tls_server_config with cert_file and key_file, basic_auth_users with bcrypt hashes such as htpasswd -nBC 10 \"\" USER prints)", path, err)
	}
	return nil
}
