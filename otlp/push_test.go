package otlp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/internal/fixtures"
)

// receiver is an OTLP/HTTP receiver that keeps what it is sent.
type receiver struct {
	mu   sync.Mutex
	reqs []*colmetricpb.ExportMetricsServiceRequest
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var m colmetricpb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, &m)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
	_, _ = w.Write(out)
}

// page is a Source of fixture 13 published at at.
type page struct {
	mu   sync.Mutex
	fams []exposition.Family
	at   time.Time
}

func (p *page) source() (Page, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Page{Families: p.fams, At: p.at}, true
}

func (p *page) publish(at time.Time) {
	p.mu.Lock()
	p.at = at
	p.mu.Unlock()
}

// waitIdle waits for the export in flight, failing after a minute.
func waitIdle(t *testing.T, p *Pusher) {
	t.Helper()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the export did not end within a minute")
	}
}

func TestPushSendsThePageWithItsResource(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	env := map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test,service.name=from-attributes", "K8S_POD_NAME": "vllm-0", "K8S_NAMESPACE_NAME": "llm", "K8S_NODE_NAME": "gpu-3", "K8S_CONTAINER_NAME": "vllm-normalizer"}
	pg := &page{fams: fixtures.Families(t, "13-"), at: time.Now()}
	reg := prometheus.NewRegistry()
	p, err := New(context.Background(), Options{
		Endpoint: srv.URL + "/v1/metrics", Interval: 10 * time.Second, Source: pg.source,
		Version: "1.2.3", Registerer: reg, Getenv: func(k string) string { return env[k] },
	})
	if err != nil {
		t.Fatal(err)
	}
	p.tick(context.Background())
	waitIdle(t, p)
	// The same page again is not sent again.
	p.tick(context.Background())
	waitIdle(t, p)
	if got := testutil.ToFloat64(p.exports.WithLabelValues(ResultSuccess)); got != 1 {
		t.Fatalf("%v successful exports, want 1 (errors %v, timeouts %v)", got, testutil.ToFloat64(p.exports.WithLabelValues(ResultError)), testutil.ToFloat64(p.exports.WithLabelValues(ResultTimeout)))
	}
	if got := testutil.ToFloat64(p.exports.WithLabelValues(ResultSkippedUnchanged)); got != 1 {
		t.Errorf("%v pushes skipped as unchanged, want 1", got)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.reqs) != 1 || len(rcv.reqs[0].ResourceMetrics) != 1 {
		t.Fatalf("the receiver got %d requests, want 1 of one resource", len(rcv.reqs))
	}
	rm := rcv.reqs[0].ResourceMetrics[0]
	attrs := map[string]string{}
	for _, kv := range rm.Resource.Attributes {
		attrs[kv.Key] = kv.Value.GetStringValue()
	}
	for k, want := range map[string]string{
		"service.name":                "from-attributes", // OTEL_RESOURCE_ATTRIBUTES wins
		"service.version":             "1.2.3",
		"service.instance.id":         "llm.vllm-0.vllm-normalizer",
		"k8s.pod.name":                "vllm-0",
		"k8s.namespace.name":          "llm",
		"k8s.node.name":               "gpu-3",
		"deployment.environment.name": "test",
	} {
		if attrs[k] != want {
			t.Errorf("resource %s=%q, want %q (all: %v)", k, attrs[k], want, attrs)
		}
	}
	n := 0
	for _, sm := range rm.ScopeMetrics {
		n += len(sm.Metrics)
	}
	if n < 20 {
		t.Errorf("%d metrics sent, want every family of fixture 13", n)
	}
}

// TestResourceMatchesSDK pins OTEL_RESOURCE_ATTRIBUTES and
// OTEL_SERVICE_NAME against the SDK's own reading of them
// (resource.WithFromEnv) merged over the sidecar's attributes, as the
// pusher did with the SDK.
func TestResourceMatchesSDK(t *testing.T) {
	k8s := map[string]string{"K8S_POD_NAME": "vllm-0", "K8S_NAMESPACE_NAME": "llm", "K8S_CONTAINER_NAME": "vllm-normalizer"}
	for _, env := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "my-vllm"},
		{"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test,service.name=from-attributes"},
		{"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes", "OTEL_SERVICE_NAME": " my-vllm "},
		{"OTEL_RESOURCE_ATTRIBUTES": " team = ml%20infra%2Cgpu , k8s.pod.name=other,a=1,a=2,empty="},
	} {
		for _, k := range []string{"OTEL_RESOURCE_ATTRIBUTES", "OTEL_SERVICE_NAME"} {
			t.Setenv(k, env[k])
		}
		getenv := func(k string) string {
			if v, ok := k8s[k]; ok {
				return v
			}
			return os.Getenv(k)
		}
		got, err := newResource("1.2.3", getenv)
		if err != nil {
			t.Fatalf("%v: %v", env, err)
		}
		base, err := newResource("1.2.3", func(k string) string { return k8s[k] })
		if err != nil {
			t.Fatal(err)
		}
		var kvs []attribute.KeyValue
		for _, kv := range base {
			kvs = append(kvs, attribute.String(kv.Key, kv.Value.GetStringValue()))
		}
		fromEnv, err := resource.New(context.Background(), resource.WithFromEnv())
		if err != nil {
			t.Fatalf("%v: the SDK: %v", env, err)
		}
		want, err := resource.Merge(resource.NewSchemaless(kvs...), fromEnv)
		if err != nil {
			t.Fatal(err)
		}
		var gotS, wantS []string
		for _, kv := range got {
			gotS = append(gotS, kv.Key+"="+kv.Value.GetStringValue())
		}
		for _, kv := range want.Attributes() {
			wantS = append(wantS, string(kv.Key)+"="+kv.Value.AsString())
		}
		if !slices.Equal(gotS, wantS) {
			t.Errorf("%v:\n got %q\nwant %q (the SDK's)", env, gotS, wantS)
		}
	}
}

// TestResourceRefusesBadAttributes: what the SDK refuses stops the
// sidecar at start, and so does what it would drop or keep undecoded.
func TestResourceRefusesBadAttributes(t *testing.T) {
	for _, tc := range []struct{ attrs, want string }{
		{"a=b,c", `"c" is not key=value`},
		{"a=b,", `"" is not key=value`},
		{"=x", `"=x" is not key=value`},
		{"a=%zz", `"a=%zz": invalid URL escape`},
	} {
		_, err := newResource("", func(k string) string { return map[string]string{"OTEL_RESOURCE_ATTRIBUTES": tc.attrs}[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "OTEL_RESOURCE_ATTRIBUTES=") {
			t.Errorf("%q: error %v, want it to name the variable and contain %q", tc.attrs, err, tc.want)
		}
	}
}

// TestHungEndpointSkipsAndTimesOut: an endpoint that accepts and never
// answers holds one export until its timeout; a push due meanwhile is
// skipped and counted, never queued, and tick never waits.
func TestHungEndpointSkipsAndTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	pg := &page{fams: fixtures.Families(t, "13-"), at: time.Now()}
	p, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1/metrics", Interval: 2 * time.Second, Source: pg.source})
	if err != nil {
		t.Fatal(err)
	}
	p.tick(context.Background())
	pg.publish(time.Now().Add(time.Second))
	for range 5 {
		p.tick(context.Background()) // returns at once: the export runs on
	}
	if got := testutil.ToFloat64(p.exports.WithLabelValues(ResultSkippedBusy)); got != 5 {
		t.Errorf("%v pushes skipped while the export hung, want 5", got)
	}
	waitIdle(t, p)
	if got := testutil.ToFloat64(p.exports.WithLabelValues(ResultTimeout)); got != 1 {
		t.Errorf("%v exports timed out, want 1 (errors: %v)", got, testutil.ToFloat64(p.exports.WithLabelValues(ResultError)))
	}
	// The next page goes out once the endpoint is free again.
	if p.busy.Load() {
		t.Error("still busy after the export ended")
	}
}

func TestNewRefusesBadSettings(t *testing.T) {
	src := func() (Page, bool) { return Page{}, false }
	for _, tc := range []struct {
		endpoint string
		env      map[string]string
		want     string
	}{
		{"otel-collector:4318", nil, `--otlp.endpoint="otel-collector:4318" is not an http or https URL with a host`},
		{"http://otel-collector:4318", nil, "has no path; give the full URL of the receiver's metrics endpoint, such as http://otel-collector:4318/v1/metrics"},
		{"http://otel-collector:4317/v1/metrics", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, `OTEL_EXPORTER_OTLP_PROTOCOL="grpc": the OTLP push speaks only http/protobuf`},
		{"http://c:4318/v1/metrics", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf"}, ""},
	} {
		_, err := New(context.Background(), Options{Endpoint: tc.endpoint, Interval: time.Second, Source: src, Getenv: func(k string) string { return tc.env[k] }})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %v: %v", tc.endpoint, tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %v: error %v, want it to contain %q", tc.endpoint, tc.env, err, tc.want)
		}
	}
	// An export must reach the collector within 90 % of the interval.
	_, err := New(context.Background(), Options{Endpoint: "http://c:4318/v1/metrics", Interval: time.Millisecond, Source: src, Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "--otlp.interval=1ms is below the floor of 1s") || !strings.Contains(err.Error(), "give 1s or more") {
		t.Errorf("a 1ms interval: error %v, want the floor and the fix named", err)
	}
}
