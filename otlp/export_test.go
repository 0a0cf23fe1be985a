package otlp

import (
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	// The SDK's exporter is the oracle: what the sidecar sent before it
	// sent the request itself. A test import does not link into the binary
	// (TestBinaryLinksNoGRPC).
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/fos-study/vllm-normalizer/internal/fixtures"
)

// captured is one request as a receiver sees it.
type captured struct {
	path    string
	header  http.Header
	request *colmetricpb.ExportMetricsServiceRequest
}

// capture is a receiver that keeps every request and answers answer(n)
// to the n-th (from 0); nil answers 200 with an empty response.
type capture struct {
	mu     sync.Mutex
	got    []captured
	at     []time.Time
	answer func(n int, w http.ResponseWriter)
}

func (c *capture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var m colmetricpb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(b, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	n := len(c.got)
	c.got = append(c.got, captured{path: r.URL.Path, header: r.Header.Clone(), request: &m})
	c.at = append(c.at, time.Now())
	c.mu.Unlock()
	if c.answer != nil {
		c.answer(n, w)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
	_, _ = w.Write(out)
}

func (c *capture) take() []captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.got
	c.got, c.at = nil, nil
	return got
}

// sample is fixture 13 converted, with a resource from the environment
// (gauges, sums, histograms and summaries), and the same as the SDK's
// data, to hand the SDK's exporter.
func sample(t *testing.T) (*metricpb.ResourceMetrics, *metricdata.ResourceMetrics) {
	t.Helper()
	res, err := newResource("1.2.3", func(k string) string {
		return map[string]string{"K8S_POD_NAME": "vllm-0", "K8S_NAMESPACE_NAME": "llm"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	ms := NewConverter().Convert(Page{Families: fixtures.Families(t, "13-"), At: time.Unix(1_790_000_000, 123_000_000)})
	rm := &metricpb.ResourceMetrics{Resource: &resourcepb.Resource{Attributes: res}, ScopeMetrics: []*metricpb.ScopeMetrics{{
		Scope: &commonpb.InstrumentationScope{Name: "github.com/fos-study/vllm-normalizer", Version: "1.2.3"}, Metrics: ms,
	}}}
	md := asMetricdata(t, rm)
	kinds := map[string]bool{}
	for _, m := range md.ScopeMetrics[0].Metrics {
		kinds[fmt.Sprintf("%T", m.Data)] = true
	}
	if len(kinds) != 4 {
		t.Fatalf("fixture 13 converts to %v, want every kind", kinds)
	}
	return rm, md
}

// asMetricdata is rm as the SDK's data: what the SDK's exporter, given
// it, sends is what the sidecar's own export must send.
func asMetricdata(t *testing.T, rm *metricpb.ResourceMetrics) *metricdata.ResourceMetrics {
	t.Helper()
	set := func(kvs []*commonpb.KeyValue) attribute.Set {
		out := make([]attribute.KeyValue, 0, len(kvs))
		for _, kv := range kvs {
			out = append(out, attribute.String(kv.Key, kv.Value.GetStringValue()))
		}
		return attribute.NewSet(out...)
	}
	at := func(ns uint64) time.Time {
		if ns == 0 {
			return time.Time{}
		}
		return time.Unix(0, int64(ns))
	}
	numbers := func(ps []*metricpb.NumberDataPoint) []metricdata.DataPoint[float64] {
		var out []metricdata.DataPoint[float64]
		for _, p := range ps {
			out = append(out, metricdata.DataPoint[float64]{Attributes: set(p.Attributes), StartTime: at(p.StartTimeUnixNano), Time: at(p.TimeUnixNano), Value: p.GetAsDouble()})
		}
		return out
	}
	attrs := set(rm.Resource.Attributes)
	out := &metricdata.ResourceMetrics{Resource: resource.NewSchemaless(attrs.ToSlice()...)}
	for _, sm := range rm.ScopeMetrics {
		smd := metricdata.ScopeMetrics{Scope: instrumentation.Scope{Name: sm.Scope.Name, Version: sm.Scope.Version}}
		for _, m := range sm.Metrics {
			mm := metricdata.Metrics{Name: m.Name, Description: m.Description, Unit: m.Unit}
			switch d := m.Data.(type) {
			case *metricpb.Metric_Gauge:
				mm.Data = metricdata.Gauge[float64]{DataPoints: numbers(d.Gauge.DataPoints)}
			case *metricpb.Metric_Sum:
				mm.Data = metricdata.Sum[float64]{DataPoints: numbers(d.Sum.DataPoints), Temporality: metricdata.CumulativeTemporality, IsMonotonic: d.Sum.IsMonotonic}
			case *metricpb.Metric_Histogram:
				h := metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality}
				for _, p := range d.Histogram.DataPoints {
					h.DataPoints = append(h.DataPoints, metricdata.HistogramDataPoint[float64]{
						Attributes: set(p.Attributes), StartTime: at(p.StartTimeUnixNano), Time: at(p.TimeUnixNano),
						Count: p.Count, Bounds: p.ExplicitBounds, BucketCounts: p.BucketCounts, Sum: p.GetSum(),
					})
				}
				mm.Data = h
			case *metricpb.Metric_Summary:
				var s metricdata.Summary
				for _, p := range d.Summary.DataPoints {
					dp := metricdata.SummaryDataPoint{Attributes: set(p.Attributes), StartTime: at(p.StartTimeUnixNano), Time: at(p.TimeUnixNano), Count: p.Count, Sum: p.Sum}
					for _, q := range p.QuantileValues {
						dp.QuantileValues = append(dp.QuantileValues, metricdata.QuantileValue{Quantile: q.Quantile, Value: q.Value})
					}
					s.DataPoints = append(s.DataPoints, dp)
				}
				mm.Data = s
			default:
				t.Fatalf("%s: %T is never made", m.Name, m.Data)
			}
			smd.Metrics = append(smd.Metrics, mm)
		}
		out.ScopeMetrics = append(out.ScopeMetrics, smd)
	}
	return out
}

// sent is what each exporter's export returned and what the receiver got
// from each.
type sent struct {
	sdkErr, ourErr error
	sdk, ours      []captured
}

// sendBoth exports rm once with the SDK's exporter (given md, the same as
// its data) and once with ours, both configured by endpoint and the
// process environment.
func sendBoth(t *testing.T, c *capture, endpoint string, rm *metricpb.ResourceMetrics, md *metricdata.ResourceMetrics) sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(endpoint), otlpmetrichttp.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("the SDK's exporter: %v", err)
	}
	var s sent
	s.sdkErr = exp.Export(ctx, md)
	_ = exp.Shutdown(ctx)
	s.sdk = c.take()
	e, err := newExporter(endpoint, "test", 10*time.Second, os.Getenv, os.ReadFile)
	if err != nil {
		t.Fatalf("newExporter: %v", err)
	}
	s.ourErr = e.Export(ctx, rm)
	e.close()
	s.ours = c.take()
	return s
}

// sameRequests fails unless both sides sent one request each, alike in
// path, body and every header but those that name the client or the
// body's length.
func sameRequests(t *testing.T, sdk, ours []captured) {
	t.Helper()
	if len(sdk) != 1 || len(ours) != 1 {
		t.Fatalf("%d requests from the SDK, %d from ours; want 1 each", len(sdk), len(ours))
	}
	if sdk[0].path != ours[0].path {
		t.Errorf("path %q, the SDK's %q", ours[0].path, sdk[0].path)
	}
	for _, h := range []http.Header{sdk[0].header, ours[0].header} {
		for _, k := range []string{"User-Agent", "Content-Length", "Accept-Encoding"} {
			h.Del(k)
		}
	}
	for k := range sdk[0].header {
		if got, want := ours[0].header.Values(k), sdk[0].header.Values(k); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("header %s: %q, the SDK's %q", k, got, want)
		}
	}
	for k := range ours[0].header {
		if len(sdk[0].header.Values(k)) == 0 {
			t.Errorf("header %s: %q, the SDK sends none", k, ours[0].header.Values(k))
		}
	}
	if !proto.Equal(sdk[0].request, ours[0].request) {
		t.Errorf("the request differs from the SDK's:\nours %.2000v\nSDK  %.2000v", ours[0].request, sdk[0].request)
	}
}

// TestExportMatchesSDK pins each header, compression and endpoint
// variable: with it set, the request equals the SDK exporter's, body
// included.
func TestExportMatchesSDK(t *testing.T) {
	rm, md := sample(t)
	c := &capture{}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	other := httptest.NewServer(http.NotFoundHandler()) // where the _ENDPOINT variables point; never used
	t.Cleanup(other.Close)
	for _, tc := range []struct {
		name string
		env  map[string]string
		// want, when set, is a header the request must carry.
		want map[string]string
	}{
		{name: "no variables"},
		{name: "headers, percent-encoded", env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20tok%2C1, X-Team = ml "},
			want: map[string]string{"Authorization": "Bearer tok,1", "X-Team": "ml"}},
		{name: "the signal's headers replace the generic ones", env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "X-A=generic,X-B=generic", "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "X-A=metrics"},
			want: map[string]string{"X-A": "metrics", "X-B": ""}},
		{name: "gzip", env: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}, want: map[string]string{"Content-Encoding": "gzip"}},
		{name: "the signal's compression wins", env: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION": "none"},
			want: map[string]string{"Content-Encoding": ""}},
		{name: "the signal's gzip wins", env: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "none", "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION": "gzip"},
			want: map[string]string{"Content-Encoding": "gzip"}},
		{name: "the flag wins over the endpoint variables", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": other.URL, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": other.URL + "/v1/metrics"}},
		{name: "the flag's timeout wins over the timeout variables", env: map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "1", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			s := sendBoth(t, c, srv.URL+"/api/v1/otlp/v1/metrics", rm, md)
			if s.sdkErr != nil || s.ourErr != nil {
				t.Fatalf("export: ours %v, the SDK's %v", s.ourErr, s.sdkErr)
			}
			sameRequests(t, s.sdk, s.ours)
			if len(s.ours) == 1 {
				for k, v := range tc.want {
					if got := s.ours[0].header.Get(k); got != v {
						t.Errorf("header %s=%q, want %q", k, got, v)
					}
				}
			}
		})
	}
}

// writeFile writes b to a file of dir and returns its path.
func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// selfSigned makes a certificate and key for name, PEM-encoded.
func selfSigned(t *testing.T, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// TestExportTLSMatchesSDK pins the certificate variables against a
// receiver that asks for a client certificate: each setting succeeds or
// fails as the SDK's exporter does, and sends what it sends.
func TestExportTLSMatchesSDK(t *testing.T) {
	rm, md := sample(t)
	dir := t.TempDir()
	clientCert, clientKey := selfSigned(t, "vllm-normalizer")
	otherCert, otherKey := selfSigned(t, "someone-else")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(clientCert)
	c := &capture{}
	srv := httptest.NewUnstartedServer(c)
	srv.TLS = &tls.Config{ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	serverCA := writeFile(t, dir, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	wrongCA := writeFile(t, dir, "wrong-ca.pem", otherCert)
	cert, key := writeFile(t, dir, "client.pem", clientCert), writeFile(t, dir, "client-key.pem", clientKey)
	otherC, otherK := writeFile(t, dir, "other.pem", otherCert), writeFile(t, dir, "other-key.pem", otherKey)
	for _, tc := range []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{name: "no CA: the receiver is not trusted", env: map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert, "OTEL_EXPORTER_OTLP_CLIENT_KEY": key}},
		{name: "CA and no client certificate: the receiver refuses", env: map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": serverCA}},
		{name: "generic CA and key pair", ok: true, env: map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": serverCA, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert, "OTEL_EXPORTER_OTLP_CLIENT_KEY": key}},
		{name: "the signal's CA wins", ok: true, env: map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": wrongCA, "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE": serverCA, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert, "OTEL_EXPORTER_OTLP_CLIENT_KEY": key}},
		{name: "the signal's wrong CA wins", env: map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": serverCA, "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE": wrongCA, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert, "OTEL_EXPORTER_OTLP_CLIENT_KEY": key}},
		{name: "the signal's key pair wins", ok: true, env: map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": serverCA, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": otherC, "OTEL_EXPORTER_OTLP_CLIENT_KEY": otherK, "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE": cert, "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY": key}},
		{name: "the signal's wrong key pair wins", env: map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": serverCA, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert, "OTEL_EXPORTER_OTLP_CLIENT_KEY": key, "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE": otherC, "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY": otherK}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			s := sendBoth(t, c, srv.URL+"/v1/metrics", rm, md)
			if (s.sdkErr == nil) != tc.ok || (s.ourErr == nil) != tc.ok {
				t.Fatalf("export: ours %v, the SDK's %v; want success %v", s.ourErr, s.sdkErr, tc.ok)
			}
			if tc.ok {
				sameRequests(t, s.sdk, s.ours)
			}
		})
	}
}

// TestExporterRefusesBadVariables: a value the SDK would log and drop
// stops the sidecar at start, naming the variable and the fix.
func TestExporterRefusesBadVariables(t *testing.T) {
	dir := t.TempDir()
	cert, _ := selfSigned(t, "ca")
	ca := writeFile(t, dir, "ca.pem", cert)
	notPEM := writeFile(t, dir, "not.pem", []byte("hello"))
	for _, tc := range []struct {
		endpoint string
		env      map[string]string
		want     string
	}{
		{"https://r/v1/metrics", map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, `OTEL_EXPORTER_OTLP_COMPRESSION="zstd": OTLP compression is gzip or none`},
		{"https://r/v1/metrics", map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "none", "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION": "br"}, `OTEL_EXPORTER_OTLP_METRICS_COMPRESSION="br"`},
		{"https://r/v1/metrics", map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "Authorization"}, `OTEL_EXPORTER_OTLP_HEADERS: "Authorization" is not name=value`},
		{"https://r/v1/metrics", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_HEADERS": "X-A=%zz"}, `OTEL_EXPORTER_OTLP_METRICS_HEADERS: "X-A=%zz"`},
		{"https://r/v1/metrics", map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "Bad Name=1"}, `"Bad Name=1" is not name=value with an HTTP header name`},
		{"https://r/v1/metrics", map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": filepath.Join(dir, "missing.pem")}, "OTEL_EXPORTER_OTLP_CERTIFICATE: open "},
		{"https://r/v1/metrics", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE": notPEM}, "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE=" + `"` + notPEM + `" holds no PEM certificate`},
		{"https://r/v1/metrics", map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": ca}, "a client certificate needs both"},
		{"https://r/v1/metrics", map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": ca, "OTEL_EXPORTER_OTLP_CLIENT_KEY": notPEM}, "name a PEM certificate and its key"},
		{"http://r/v1/metrics", map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": ca}, "is plain http, but OTEL_EXPORTER_OTLP_*CERTIFICATE variables are set"},
		{"https://r/v1/metrics", map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": ca, "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}, ""},
	} {
		_, err := newExporter(tc.endpoint, "test", time.Second, func(k string) string { return tc.env[k] }, os.ReadFile)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want it to contain %q", tc.env, err, tc.want)
		}
	}
}

// TestExportRetries: 429, 502, 503 and 504 are sent again until the
// receiver takes the request; other failures are not.
func TestExportRetries(t *testing.T) {
	rm, _ := sample(t)
	for _, tc := range []struct {
		status   int
		requests int
		ok       bool
	}{
		{http.StatusTooManyRequests, 3, true},
		{http.StatusBadGateway, 3, true},
		{http.StatusServiceUnavailable, 3, true},
		{http.StatusGatewayTimeout, 3, true},
		{http.StatusBadRequest, 1, false},
		{http.StatusInternalServerError, 1, false},
	} {
		c := &capture{answer: func(n int, w http.ResponseWriter) {
			if n < 2 {
				http.Error(w, "try later", tc.status)
				return
			}
			w.WriteHeader(http.StatusOK)
		}}
		srv := httptest.NewServer(c)
		e, err := newExporter(srv.URL+"/v1/metrics", "test", time.Minute, func(string) string { return "" }, os.ReadFile)
		if err != nil {
			t.Fatal(err)
		}
		e.firstBackoff = 10 * time.Millisecond
		err = e.Export(context.Background(), rm)
		srv.Close()
		if n := len(c.take()); (err == nil) != tc.ok || n != tc.requests {
			t.Errorf("answer %d: %d requests, error %v; want %d requests, success %v", tc.status, n, err, tc.requests, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "try later") {
			t.Errorf("answer %d: error %v, want the receiver's body in it", tc.status, err)
		}
	}
}

// TestExportHonoursRetryAfter: the wait before a retry is at least what
// the receiver asked for.
func TestExportHonoursRetryAfter(t *testing.T) {
	c := &capture{answer: func(n int, w http.ResponseWriter) {
		if n == 0 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	}}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	e, err := newExporter(srv.URL+"/v1/metrics", "test", time.Minute, func(string) string { return "" }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	e.firstBackoff = time.Millisecond
	rm, _ := sample(t)
	if err := e.Export(context.Background(), rm); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.at) != 2 {
		t.Fatalf("%d requests, want 2", len(c.at))
	}
	if gap := c.at[1].Sub(c.at[0]); gap < time.Second {
		t.Errorf("retried after %v, want Retry-After's 1s at least", gap)
	}
}

// TestRetriesEndAtTheTimeout: a receiver that always answers 503 holds
// the export until its timeout, then the push counts a timeout and is
// free for the next page.
func TestRetriesEndAtTheTimeout(t *testing.T) {
	c := &capture{answer: func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	pg := &page{fams: fixtures.Families(t, "13-"), at: time.Now()}
	p, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1/metrics", Interval: 2 * time.Second, Source: pg.source, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	p.tick(context.Background())
	waitIdle(t, p)
	if got := testutil.ToFloat64(p.exports.WithLabelValues(ResultTimeout)); got != 1 {
		t.Errorf("%v exports timed out, want 1 (errors: %v)", got, testutil.ToFloat64(p.exports.WithLabelValues(ResultError)))
	}
	if n := len(c.take()); n < 2 {
		t.Errorf("%d requests within the 1.8 s timeout, want retries", n)
	}
	if p.busy.Load() {
		t.Error("still busy after the export ended")
	}
}

// TestPartialSuccessIsAnError: a receiver that takes the request but
// rejects points makes the export fail, as with the SDK.
func TestPartialSuccessIsAnError(t *testing.T) {
	rm, md := sample(t)
	c := &capture{answer: func(_ int, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{PartialSuccess: &colmetricpb.ExportMetricsPartialSuccess{RejectedDataPoints: 3, ErrorMessage: "out of order"}})
		_, _ = w.Write(out)
	}}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	s := sendBoth(t, c, srv.URL+"/v1/metrics", rm, md)
	if s.sdkErr == nil {
		t.Fatal("the SDK's exporter took a partial success as success; the oracle changed")
	}
	if s.ourErr == nil || !strings.Contains(s.ourErr.Error(), "rejected 3 data points: out of order") {
		t.Errorf("error %v, want the rejected count and message", s.ourErr)
	}
	if _, ok := errors.AsType[*retryable](s.ourErr); ok {
		t.Error("a partial success is retried; the points it rejected would be rejected again")
	}
}

// TestBinaryLinksNoGRPC: the sidecar links neither gRPC, the OTLP
// collector package nor the OTel SDK (the SDK's exporter used here is a
// test import).
func TestBinaryLinksNoGRPC(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", "../cmd/vllm-normalizer").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for pkg := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(pkg, "google.golang.org/grpc") || strings.HasPrefix(pkg, "github.com/grpc-ecosystem/") ||
			strings.HasPrefix(pkg, "go.opentelemetry.io/proto/otlp/collector/") || strings.HasPrefix(pkg, "go.opentelemetry.io/otel") {
			t.Errorf("cmd/vllm-normalizer links %s: it costs steady RSS at start (docs/performance.md#memory)", pkg)
		}
	}
}
