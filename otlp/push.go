package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
)

// DefaultInterval is the default time between pushes (--otlp.interval):
// the OpenTelemetry Collector's and Prometheus's usual 15 s.
const DefaultInterval = 15 * time.Second

// MinInterval is the shortest interval accepted: each export goes over the
// network to a collector and must end within 90 % of it.
const MinInterval = time.Second

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES name one.
const DefaultServiceName = "vllm-normalizer"

// Source returns the page to push (a new At is a new page), and whether
// there is one to push at all.
type Source func() (Page, bool)

// Options configure a Pusher.
type Options struct {
	// Endpoint is the receiver's full URL, path included (as
	// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT): http://collector:4318/v1/metrics,
	// http://prometheus:9090/api/v1/otlp/v1/metrics.
	Endpoint string
	Interval time.Duration
	Source   Source
	// Version is service.version.
	Version    string
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Getenv reads the environment (nil: os.Getenv); tests set it.
	Getenv func(string) string
	// ReadFile reads the files the OTEL_* variables name (nil: os.ReadFile).
	ReadFile func(string) ([]byte, error)
}

// Results of one tick (vllm_normalizer_otlp_exports_total's result label).
const (
	ResultSuccess = "success"
	ResultError   = "error"
	ResultTimeout = "timeout"
	// ResultSkippedBusy: the previous export was still running.
	ResultSkippedBusy = "skipped_busy"
	// ResultSkippedUnchanged: no page was published since the last push
	// (the scrape loop is slower than the push), or there is none to push.
	ResultSkippedUnchanged = "skipped_unchanged"
)

// Pusher pushes a page at every interval.
type Pusher struct {
	opts     Options
	endpoint string // opts.Endpoint without a password, for logs
	timeout  time.Duration
	exporter *exporter
	res      []*commonpb.KeyValue
	scope    *commonpb.InstrumentationScope
	conv     *Converter // used by the running export only

	busy    atomic.Bool
	lastAt  time.Time // the page last handed to an export; the ticker's own
	wg      sync.WaitGroup
	logMu   sync.Mutex
	lastLog string // the result last logged, to log changes only

	exports  *prometheus.CounterVec
	dropped  *prometheus.CounterVec
	duration prometheus.Gauge
	success  prometheus.Gauge
}

// Protocol is the only OTLP protocol the pusher speaks.
const Protocol = "http/protobuf"

// New checks the endpoint and the OTEL_* environment and builds a Pusher;
// Run starts it.
func New(ctx context.Context, opts Options) (*Pusher, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.ReadFile == nil {
		opts.ReadFile = os.ReadFile
	}
	u, err := url.Parse(opts.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--otlp.endpoint=%q is not an http or https URL with a host; give the receiver's full URL, such as http://otel-collector:4318/v1/metrics", opts.Endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		base := strings.TrimSuffix(u.Redacted(), "/")
		return nil, fmt.Errorf("--otlp.endpoint=%q has no path; give the full URL of the receiver's metrics endpoint, such as %s/v1/metrics (a Collector) or %s/api/v1/otlp/v1/metrics (Prometheus)", u.Redacted(), base, base)
	}
	for _, env := range []string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := opts.Getenv(env); p != "" {
			if p != Protocol {
				return nil, fmt.Errorf("%s=%q: the OTLP push speaks only %s; unset it or set it to %s", env, p, Protocol, Protocol)
			}
			break
		}
	}
	if opts.Interval <= 0 {
		return nil, fmt.Errorf("--otlp.interval=%s must be positive", opts.Interval)
	}
	if opts.Interval < MinInterval {
		return nil, fmt.Errorf("--otlp.interval=%s is below the floor of %s: each export goes over the network to a collector and must end within 90%% of the interval; give %s or more", opts.Interval, MinInterval, MinInterval)
	}
	res, err := newResource(opts.Version, opts.Getenv)
	if err != nil {
		return nil, err
	}
	// 90 % of the interval, as a scrape's timeout: an export that hangs
	// ends before the next tick.
	timeout := opts.Interval * 9 / 10
	exp, err := newExporter(opts.Endpoint, opts.Version, timeout, opts.Getenv, opts.ReadFile)
	if err != nil {
		return nil, err
	}
	p := &Pusher{
		opts: opts, endpoint: u.Redacted(), timeout: timeout, exporter: exp, res: res, conv: NewConverter(),
		scope: &commonpb.InstrumentationScope{Name: "github.com/fos-study/vllm-normalizer", Version: opts.Version},
		exports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm_normalizer_otlp_exports_total",
			Help: "OTLP push ticks by result: success, error, timeout (the export ran out of its time), skipped_busy (the previous export still ran), skipped_unchanged (no new page since the last push).",
		}, []string{"result"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm_normalizer_otlp_dropped_series_total",
			Help: "Series of the pushed page left out of an OTLP export because OTLP cannot carry them, by reason (invalid_histogram).",
		}, []string{"reason"}),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_normalizer_otlp_export_duration_seconds",
			Help: "Duration of the last OTLP export, successful or not.",
		}),
		success: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_normalizer_otlp_last_success_timestamp_seconds",
			Help: "Unix time of the last successful OTLP export; 0 before the first.",
		}),
	}
	for _, r := range []string{ResultSuccess, ResultError, ResultTimeout, ResultSkippedBusy, ResultSkippedUnchanged} {
		p.exports.WithLabelValues(r)
	}
	p.dropped.WithLabelValues(DropInvalidHistogram)
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{p.exports, p.dropped, p.duration, p.success} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// newResource is the resource of every export: service.name, the pod's
// attributes from the downward API's variables (PodEnv), then
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, which win, read as the
// SDK's resource.WithFromEnv reads them (push_test.go checks it against
// it); sorted by key, as the SDK sends them.
func newResource(version string, getenv func(string) string) ([]*commonpb.KeyValue, error) {
	attrs := map[string]string{"service.name": DefaultServiceName}
	if version != "" {
		attrs["service.version"] = version
	}
	for _, a := range PodEnv {
		if v := getenv(a.Env); v != "" {
			attrs[a.Attribute] = v
		}
	}
	// service.instance.id tells pushers of one service.name apart (it is
	// Prometheus's instance label): the pod and container, as the
	// semantic conventions advise for Kubernetes, else the host.
	instance := attrs["k8s.pod.name"]
	if ns := attrs["k8s.namespace.name"]; instance != "" && ns != "" {
		instance = ns + "." + instance
	}
	if c := attrs["k8s.container.name"]; instance != "" && c != "" {
		instance += "." + c
	}
	if instance == "" {
		instance, _ = os.Hostname()
	}
	if instance != "" {
		attrs["service.instance.id"] = instance
	}
	if env := strings.TrimSpace(getenv("OTEL_RESOURCE_ATTRIBUTES")); env != "" {
		for pair := range strings.SplitSeq(env, ",") {
			k, v, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES=%q: %q is not key=value; write it as key1=value1,key2=value2 with values percent-encoded", env, pair)
			}
			dec, err := url.PathUnescape(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES=%q: %q: %w; percent-encode the value (a comma as %%2C)", env, pair, err)
			}
			attrs[k] = dec
		}
	}
	if name := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); name != "" {
		attrs["service.name"] = name
	}
	out := make([]*commonpb.KeyValue, 0, len(attrs))
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		out = append(out, stringKV(k, attrs[k]))
	}
	return out, nil
}

// PodEnv are the environment variables read as resource attributes, all
// optional. The kustomize Component (deploy/components/sidecar) sets each
// from the downward API's FieldPath, or to Value where the downward API has
// no field; deploy's tests check that it does.
var PodEnv = []struct{ Env, Attribute, FieldPath, Value string }{
	{Env: "K8S_POD_NAME", Attribute: "k8s.pod.name", FieldPath: "metadata.name"},
	{Env: "K8S_POD_UID", Attribute: "k8s.pod.uid", FieldPath: "metadata.uid"},
	{Env: "K8S_NAMESPACE_NAME", Attribute: "k8s.namespace.name", FieldPath: "metadata.namespace"},
	{Env: "K8S_NODE_NAME", Attribute: "k8s.node.name", FieldPath: "spec.nodeName"},
	{Env: "K8S_CONTAINER_NAME", Attribute: "k8s.container.name", Value: "vllm-normalizer"},
}

// Run pushes at every interval until ctx ends, then waits for the export
// in flight (which ctx cancels) and shuts the exporter down.
func (p *Pusher) Run(ctx context.Context) {
	t := time.NewTicker(p.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.wg.Wait()
			p.exporter.close()
			return
		case <-t.C:
			p.tick(ctx)
		}
	}
}

// tick starts one export unless the previous one still runs or no new
// page was published. It never waits for an export.
func (p *Pusher) tick(ctx context.Context) {
	if !p.busy.CompareAndSwap(false, true) {
		p.exports.WithLabelValues(ResultSkippedBusy).Inc()
		p.logChange(ResultSkippedBusy, nil)
		return
	}
	page, ok := p.opts.Source()
	if !ok || !page.At.After(p.lastAt) {
		// The same page again would repeat its samples' timestamps,
		// which receivers refuse or drop.
		p.busy.Store(false)
		p.exports.WithLabelValues(ResultSkippedUnchanged).Inc()
		return
	}
	p.lastAt = page.At
	p.wg.Go(func() {
		defer p.busy.Store(false)
		p.export(ctx, page)
	})
}

// export converts and sends one page within the timeout.
func (p *Pusher) export(ctx context.Context, page Page) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	before := p.conv.Dropped[DropInvalidHistogram]
	ms := p.conv.Convert(page)
	if n := p.conv.Dropped[DropInvalidHistogram] - before; n > 0 {
		p.dropped.WithLabelValues(DropInvalidHistogram).Add(float64(n))
	}
	err := p.exporter.Export(ctx, &metricpb.ResourceMetrics{
		Resource:     &resourcepb.Resource{Attributes: p.res},
		ScopeMetrics: []*metricpb.ScopeMetrics{{Scope: p.scope, Metrics: ms}},
	})
	p.duration.Set(time.Since(start).Seconds())
	result := ResultSuccess
	switch {
	case err == nil:
		p.success.Set(float64(time.Now().UnixNano()) / 1e9)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		result = ResultTimeout
	default:
		result = ResultError
	}
	p.exports.WithLabelValues(result).Inc()
	p.logChange(result, err)
}

// logChange logs a result when it differs from the last one logged, so
// that an endpoint down for hours logs once, and once again when it is
// back.
func (p *Pusher) logChange(result string, err error) {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	if result == p.lastLog || p.opts.Logger == nil {
		return
	}
	first := p.lastLog == ""
	p.lastLog = result
	switch {
	case result == ResultSuccess && !first:
		p.opts.Logger.Info("OTLP push succeeds again", "endpoint", p.endpoint)
	case result == ResultSuccess:
		p.opts.Logger.Info("OTLP push started", "endpoint", p.endpoint)
	case result == ResultSkippedBusy:
		p.opts.Logger.Warn("OTLP push skipped: the previous export still runs; see vllm_normalizer_otlp_exports_total", "endpoint", p.endpoint, "timeout", p.timeout)
	default:
		p.opts.Logger.Error("OTLP push failed; later failures of the same kind are only counted in vllm_normalizer_otlp_exports_total", "endpoint", p.endpoint, "result", result, "err", err)
	}
}
