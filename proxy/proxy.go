package proxy

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricsPath is the path a GET or HEAD of which is answered by
// Config.Metrics instead of vLLM: the path production-stack and kthena
// append to the inference URL.
const MetricsPath = "/metrics"

// Bounds on the way to the upstream. None of them applies once vLLM has
// accepted a request, so none can cut a long generation.
const (
	DialTimeout         = 5 * time.Second
	TLSHandshakeTimeout = 10 * time.Second
	// IdleConnTimeout closes pooled connections nobody uses.
	IdleConnTimeout = 90 * time.Second
	// MaxIdleConnsPerHost is large because there is one host: with
	// net/http's default of 2, a router sending many concurrent requests
	// would open and close a connection for most of them.
	MaxIdleConnsPerHost = 128
	// ReadHeaderTimeout bounds how long a client may take to send its
	// request header after connecting (slowloris, or a connection that
	// sends nothing); it never applies to a body or a response. Short: a
	// router or Prometheus sends its header at once, and connections that
	// send none must not hold the sidecar's connection slots for long.
	ReadHeaderTimeout = 2 * time.Second
	// ServerIdleTimeout closes client keep-alive connections left idle.
	ServerIdleTimeout = 2 * time.Minute
)

// Reasons a request could not be forwarded, the values of the reason label
// of vllm_normalizer_proxy_upstream_errors_total.
const (
	ReasonRefused = "refused" // nothing listens at the upstream address
	ReasonTimeout = "timeout" // connecting or the TLS handshake took too long
	ReasonNetwork = "network" // any other failure before vLLM's response header
)

// Config is what New needs.
type Config struct {
	// Upstream is vLLM's base URL: scheme, host and port only (see
	// ParseUpstream).
	Upstream *url.URL
	// Metrics answers GET and HEAD MetricsPath.
	Metrics http.Handler
	// Logger receives failed forwards at debug level; nil discards them.
	Logger *slog.Logger
	// Registerer, when set, gets vllm_normalizer_proxy_upstream_errors_total.
	Registerer prometheus.Registerer
	// Transport replaces the default transport to the upstream; for tests.
	Transport http.RoundTripper
}

// Proxy is the http.Handler of the proxy listener.
type Proxy struct {
	metrics  http.Handler
	rp       *httputil.ReverseProxy
	upstream string
	logger   *slog.Logger
	errors   *prometheus.CounterVec
}

// New checks cfg and builds the proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Metrics == nil {
		return nil, errors.New("proxy: no handler for " + MetricsPath + " given")
	}
	if cfg.Upstream == nil {
		return nil, errors.New("proxy: no upstream given")
	}
	if err := checkUpstream(cfg.Upstream); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{
		metrics:  cfg.Metrics,
		upstream: cfg.Upstream.String(),
		logger:   logger,
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm_normalizer_proxy_upstream_errors_total",
			Help: "Requests the inference-port proxy could not forward to vLLM (answered 502), by reason: refused, timeout, network.",
		}, []string{"reason"}),
	}
	for _, r := range []string{ReasonRefused, ReasonTimeout, ReasonNetwork} {
		p.errors.WithLabelValues(r)
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(p.errors); err != nil {
			return nil, fmt.Errorf("proxy: registering its metrics: %w", err)
		}
	}
	transport := cfg.Transport
	if transport == nil {
		transport = NewTransport()
	}
	target := *cfg.Upstream
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&target)
			// vLLM sees the Host the client asked for, as without the proxy.
			pr.Out.Host = pr.In.Host
			// Keep the chain of earlier proxies; SetXForwarded appends the
			// client's address to it.
			pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
			pr.SetXForwarded()
		},
		Transport:     transport,
		FlushInterval: -1,
		BufferPool:    copyBuffers{},
		ErrorLog:      log.New(slogWriter{logger}, "", 0),
		ErrorHandler:  p.fail,
	}
	return p, nil
}

// NewTransport is the transport to the upstream: bounded connection set-up,
// no bound once a request is sent, no proxy from the environment, no
// transparent gzip (the client's Accept-Encoding decides, as without the
// proxy). vLLM's server speaks HTTP/1.1.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   TLSHandshakeTimeout,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:   MaxIdleConnsPerHost,
		IdleConnTimeout:       IdleConnTimeout,
		DisableCompression:    true,
	}
}

// NewServer is an http.Server fit for the proxy listener: a bound on reading
// request headers and on idle keep-alive connections, and no ReadTimeout or
// WriteTimeout, either of which would cut a long generation.
func NewServer(h http.Handler, logger *slog.Logger) *http.Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       ServerIdleTimeout,
		ErrorLog:          log.New(slogWriter{logger}, "", 0),
	}
}

// ServeHTTP answers GET and HEAD MetricsPath itself and forwards the rest.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == MetricsPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		p.metrics.ServeHTTP(w, r)
		return
	}
	// Full duplex: once the response header goes out, net/http would
	// otherwise drain and close the request body itself, racing the
	// transport that is still reading it to the end for vLLM. The loser
	// of that race cuts the upstream connection and with it the
	// generation just begun; and a body still being sent would be lost.
	_ = http.NewResponseController(w).EnableFullDuplex()
	p.rp.ServeHTTP(w, r)
}

// fail answers a request ReverseProxy could not forward (no response header
// from vLLM). A failure after the header has been sent never comes here:
// ReverseProxy then aborts the connection, so the client sees a cut stream,
// never a clean end.
func (p *Proxy) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		// The client went away first; its cancellation is what stopped
		// the upstream request. Nobody reads this answer.
		p.logger.Debug("proxied request ended early: the client went away", "method", r.Method, "path", r.URL.Path)
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	reason := classify(err)
	p.errors.WithLabelValues(reason).Inc()
	p.logger.Debug("cannot forward a request to vLLM", "method", r.Method, "path", r.URL.Path, "reason", reason, "err", err)
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusBadGateway)
	_, _ = fmt.Fprintf(w, "vllm-normalizer proxy: vLLM at %s did not answer (%s): %v\n", p.upstream, reason, err)
}

func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonRefused
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	}
	return ReasonNetwork
}

// ParseUpstream parses vLLM's base URL: http or https, a host (and port),
// nothing else. A path, query or user info is an error rather than dropped,
// since the proxy would otherwise send requests somewhere else than asked.
func ParseUpstream(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the input, which may hold a password.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("upstream is not a URL: %v; give scheme, host and port, e.g. http://127.0.0.1:8000", err)
	}
	if err := checkUpstream(u); err != nil {
		return nil, err
	}
	return u, nil
}

func checkUpstream(u *url.URL) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("upstream %q: the scheme must be http or https, e.g. http://127.0.0.1:8000", u.Redacted())
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("upstream %q has no host; give scheme, host and port, e.g. http://127.0.0.1:8000", u.Redacted())
	case u.User != nil:
		return fmt.Errorf("upstream %q carries user info; the proxy passes each client's own credentials through, so give scheme, host and port only", u.Redacted())
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "", u.Opaque != "":
		return fmt.Errorf("upstream %q has a path, query or fragment; requests keep their own path, so give scheme, host and port only, e.g. %s://%s", u.Redacted(), u.Scheme, u.Host)
	}
	return nil
}

// UpstreamOf returns scheme, host and port of a URL (user info, path and
// query dropped): the default upstream derived from vLLM's metrics URL.
func UpstreamOf(metricsURL string) (string, error) {
	u, err := url.Parse(metricsURL)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return "", fmt.Errorf("not a URL: %v", err)
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host}).String(), nil
}

// copyBuffers reuses the buffers ReverseProxy copies bodies through, which
// it would otherwise allocate (32 KiB) for every request.
type copyBuffers struct{}

var copyBufferPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (copyBuffers) Get() []byte  { return *copyBufferPool.Get().(*[]byte) }
func (copyBuffers) Put(b []byte) { copyBufferPool.Put(&b) }

// slogWriter turns the log.Logger lines of net/http and ReverseProxy (a
// client hanging up mid-stream, a body copy that failed) into debug
// records: they describe single requests, not the sidecar's health.
type slogWriter struct{ l *slog.Logger }

func (s slogWriter) Write(p []byte) (int, error) {
	msg := string(p)
	if n := len(msg); n > 0 && msg[n-1] == '\n' {
		msg = msg[:n-1]
	}
	s.l.Debug(msg)
	return len(p), nil
}
