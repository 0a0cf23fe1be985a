package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/fos-study/vllm-normalizer/collector"
	"github.com/fos-study/vllm-normalizer/proxy"
)

// shutdownGrace is how long SIGTERM waits for responses in flight on the
// sidecar's own listeners (the main one and the routing listener).
const shutdownGrace = 5 * time.Second

// headerTimeout closes a connection to the sidecar's own listeners (the
// main one and the routing listener, both read by routers) that has not
// sent its request header this long after connecting: silent connections
// would otherwise hold --web.max-connections' slots and keep a router's
// request waiting. The proxy's bound, for the same reason.
const headerTimeout = proxy.ReadHeaderTimeout

// listenExample is each listener flag's example address, for its errors.
var listenExample = map[string]string{"--web.listen-address": ":9400", "--web.routing-listen-address": ":9401", "--proxy.listen-address": ":8001"}

// checkListenAddress rejects a tcp address flag gives that no listener can
// take: not host:port, or a port outside 0 to 65535.
func checkListenAddress(flag, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return fmt.Errorf("%s=%q is not host:port (%v); give e.g. %s", flag, addr, err, listenExample[flag])
	}
	return nil
}

// listenFailed is the error of flag's listener that could not listen on
// addr (its port taken, most often).
func listenFailed(flag, addr string, err error) error {
	return fmt.Errorf("%s=%s: %w; give an address no other process listens on, e.g. %s", flag, addr, err, listenExample[flag])
}

// checkListeners rejects router-facing listener flags that cannot work.
func (f *flags) checkListeners() error {
	named := []struct{ flag, addr string }{
		{"--web.routing-listen-address", f.routingListen},
		{"--proxy.listen-address", f.proxyListen},
	}
	for _, a := range *f.web.WebListenAddresses {
		if strings.HasPrefix(a, "vsock://") {
			if _, err := vsockPort(a); err != nil {
				return fmt.Errorf("--web.listen-address=%q is not vsock://[CID]:PORT (%v); give e.g. vsock://:9400", a, err)
			}
		} else if err := checkListenAddress("--web.listen-address", a); err != nil {
			return err
		}
	}
	for _, n := range named {
		if n.addr == "" {
			continue
		}
		if err := checkListenAddress(n.flag, n.addr); err != nil {
			return err
		}
		if slices.Contains(*f.web.WebListenAddresses, n.addr) {
			return fmt.Errorf("%s=%s is also a --web.listen-address; each listener needs an address of its own", n.flag, n.addr)
		}
	}
	if f.routingListen != "" && f.routingListen == f.proxyListen {
		return fmt.Errorf("--web.routing-listen-address and --proxy.listen-address are both %s; each listener needs an address of its own", f.proxyListen)
	}
	if f.proxyUpstream != "" {
		if f.proxyListen == "" {
			return errors.New("--proxy.upstream is set but --proxy.listen-address is not; set both to run the proxy, or drop --proxy.upstream")
		}
		if _, err := proxy.ParseUpstream(f.proxyUpstream); err != nil {
			return fmt.Errorf("--proxy.upstream: %w", err)
		}
	}
	return nil
}

// proxyUpstreamURL is --proxy.upstream, or scheme, host and port of the
// scrape URI (after --demo replaced it).
func (f *flags) proxyUpstreamURL() (string, error) {
	if f.proxyUpstream != "" {
		return f.proxyUpstream, nil
	}
	u, err := proxy.UpstreamOf(f.scrapeURI)
	if err != nil {
		return "", fmt.Errorf("--proxy.upstream defaults to scheme, host and port of --vllm.scrape-uri, which is %w; set --proxy.upstream", err)
	}
	if _, err := proxy.ParseUpstream(u); err != nil {
		return "", fmt.Errorf("--proxy.upstream defaults to scheme, host and port of --vllm.scrape-uri, which gives %w; set --proxy.upstream", err)
	}
	return u, nil
}

// newRoutingMux serves the routing listener: the routing view at /metrics,
// where AIBrix (which hard-codes the path) and older EPPs read, its own
// health endpoint, and a landing page.
func newRoutingMux(coll *collector.Collector) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", coll.CompatHandler())
	for _, path := range coll.RouterPaths() {
		mux.Handle(path, coll.CompatHandler()) // a router's own path for its engine (AIBrix trtllm)
	}
	mux.HandleFunc("/-/healthy", okHandler)
	landing, err := web.NewLandingPage(web.LandingConfig{
		Name:        "vllm-normalizer routing listener",
		Description: "The routing view of vllm-normalizer, at /metrics for routers that cannot change the path",
		Version:     versionText(),
		Profiling:   "false",
		Links: []web.LandingLinks{
			{Address: "/metrics", Text: "Routing view", Description: "the compatibility page: one series per model of what routers read; 503 from the first failed scrape"},
			{Address: "/-/healthy", Text: "Health"},
		},
	})
	if err != nil {
		return nil, err
	}
	mux.Handle("/", landing)
	return mux, nil
}

// listenersText describes the router-facing listeners for the main landing
// page (plain text: the landing page escapes it).
func (f *flags) listenersText(upstream string) string {
	var parts []string
	if f.routingListen != "" {
		parts = append(parts, "Routing listener on "+f.routingListen+": the routing view at /metrics.")
	}
	if f.proxyListen != "" {
		parts = append(parts, "Inference-port proxy on "+f.proxyListen+": GET /metrics is the routing view, every other request goes to vLLM at "+upstream+".")
	}
	return strings.Join(parts, " ")
}

// servers are the running listeners and how each stops.
type servers struct {
	logger *slog.Logger
	errs   chan error // the first error of any listener ends run
	own    []*http.Server
	proxy  *http.Server
	// writeTimeout and maxConns bound the sidecar's own listeners against
	// slow readers (--web.write-timeout, --web.max-connections); 0 means
	// none.
	writeTimeout time.Duration
	maxConns     int
}

func newServers(logger *slog.Logger) *servers {
	return &servers{logger: logger, errs: make(chan error, 4)}
}

// serveWeb serves h through exporter-toolkit on flags' addresses, given by
// flag, with TLS and basic auth from flags' web config file.
func (s *servers) serveWeb(flag, name string, h http.Handler, flags *web.FlagConfig) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: headerTimeout, WriteTimeout: s.writeTimeout, IdleTimeout: idleTimeout(s.writeTimeout), ConnState: trackIdle}
	s.own = append(s.own, srv)
	go func() {
		logger := s.logger.With("listener", name)
		ls, err := listeners(flag, flags, s.maxConns, logger)
		if err == nil {
			err = serve(ls, srv, flags, logger)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errs <- fmt.Errorf("%s: %w", name, err)
		}
	}()
}

// serveProxy starts the proxy listener. It listens before returning so that
// a taken port fails the start with the flag's name.
func (s *servers) serveProxy(addr, upstream string, metrics http.Handler, reg prometheus.Registerer) error {
	u, err := proxy.ParseUpstream(upstream)
	if err != nil {
		return fmt.Errorf("--proxy.upstream: %w", err)
	}
	p, err := proxy.New(proxy.Config{Upstream: u, Metrics: metrics, Logger: s.logger.With("listener", "proxy"), Registerer: reg})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return listenFailed("--proxy.listen-address", addr, err)
	}
	s.proxy = proxy.NewServer(p, s.logger.With("listener", "proxy"))
	s.logger.Info("inference-port proxy listening", "address", ln.Addr().String(), "upstream", upstream)
	go func() {
		if err := s.proxy.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errs <- fmt.Errorf("proxy: %w", err)
		}
	}()
	return nil
}

// shutdown stops every listener at once. The sidecar's own listeners get
// shutdownGrace to finish their responses. The proxy gets no deadline of
// its own: a generation in flight is never cut by the sidecar (vLLM, told
// to stop at the same moment, ends its streams itself, and the pod's
// termination grace period bounds the wait); a second SIGTERM ends the
// process at once. It reports whether the own listeners finished in time.
func (s *servers) shutdown() bool {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	var wg sync.WaitGroup
	proxyDone := make(chan struct{})
	if s.proxy != nil {
		go func() {
			_ = s.proxy.Shutdown(context.Background())
			close(proxyDone)
		}()
	} else {
		close(proxyDone)
	}
	ok := true
	var mu sync.Mutex
	for _, srv := range s.own {
		wg.Go(func() {
			if err := srv.Shutdown(ctx); err != nil {
				mu.Lock()
				ok = false
				mu.Unlock()
				s.logger.Error("shutdown did not finish in time", "err", err)
			}
		})
	}
	wg.Wait()
	select {
	case <-proxyDone:
	case <-time.After(time.Until(deadlineOf(ctx))):
		s.logger.Info("proxied requests still in flight: waiting for them to finish (a second SIGTERM exits at once)")
		<-proxyDone
	}
	return ok
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
