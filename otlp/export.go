package otlp

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// exporter sends one ExportMetricsServiceRequest per export over
// OTLP/HTTP with a protobuf body, configured by the OTel exporter
// variables as the SDK's otlpmetrichttp reads them (export_test.go checks
// each against it). Hand-written for a measured RSS figure: that exporter
// links the OTLP collector package, whose gRPC and grpc-gateway stubs
// faulted in 2.2-2.4 MiB of steady RSS on one engine even with the push
// off; without it and the rest of the SDK, one engine at 1 s went from
// 24.5 to 22.1 MiB (docs/performance.md#memory).
type exporter struct {
	url     string
	headers http.Header
	gzip    bool
	client  *http.Client
	// firstBackoff is the wait before the first retry; it doubles after
	// each, with jitter, until the export's deadline.
	firstBackoff time.Duration
}

// envPrefix and metricsPrefix name the exporter variables; a signal's own
// variable, when set, wins over the generic one (OTel specification).
const (
	envPrefix     = "OTEL_EXPORTER_OTLP_"
	metricsPrefix = "OTEL_EXPORTER_OTLP_METRICS_"
)

// maxResponse bounds what is read of a receiver's answer; maxShown what
// of a refusal's body an error (and so the log) repeats.
const (
	maxResponse = 1 << 20
	maxShown    = 512
)

// newExporter builds the exporter for endpoint (the flag, which wins over
// the _ENDPOINT variables) with timeout per export (which wins over the
// _TIMEOUT variables), reading _HEADERS, _COMPRESSION, _CERTIFICATE,
// _CLIENT_CERTIFICATE and _CLIENT_KEY through getenv and the files they
// name through readFile. Unlike the SDK, which logs a bad value and goes
// on without it, it refuses one: a push without its credentials or TLS
// would fail at every export.
func newExporter(endpoint, version string, timeout time.Duration, getenv func(string) string, readFile func(string) ([]byte, error)) (*exporter, error) {
	lookup := func(name string) (string, string) {
		if v := strings.TrimSpace(getenv(metricsPrefix + name)); v != "" {
			return metricsPrefix + name, v
		}
		return envPrefix + name, strings.TrimSpace(getenv(envPrefix + name))
	}
	e := &exporter{url: endpoint, headers: http.Header{}, firstBackoff: min(5*time.Second, timeout/10)}
	if env, v := lookup("HEADERS"); v != "" {
		h, err := parseHeaders(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", env, err)
		}
		for k, v := range h {
			e.headers.Set(k, v)
		}
	}
	e.headers.Set("Content-Type", "application/x-protobuf")
	e.headers.Set("User-Agent", "vllm-normalizer/"+version)
	switch env, v := lookup("COMPRESSION"); v {
	case "", "none":
	case "gzip":
		e.gzip = true
		e.headers.Set("Content-Encoding", "gzip")
	default:
		return nil, fmt.Errorf("%s=%q: OTLP compression is gzip or none; set one of them or unset it", env, v)
	}
	tlsConf, err := tlsFromEnv(lookup, getenv, readFile)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if tlsConf != nil {
		if strings.HasPrefix(endpoint, "http:") {
			return nil, fmt.Errorf("--otlp.endpoint=%q is plain http, but OTEL_EXPORTER_OTLP_*CERTIFICATE variables are set; give an https endpoint or unset them", endpoint)
		}
		transport.TLSClientConfig = tlsConf
	}
	e.client = &http.Client{Transport: transport, Timeout: timeout}
	return e, nil
}

// tlsFromEnv reads the receiver's CA and the client's key pair; nil when
// no variable names either.
func tlsFromEnv(lookup func(string) (string, string), getenv func(string) string, readFile func(string) ([]byte, error)) (*tls.Config, error) {
	var conf *tls.Config
	if env, path := lookup("CERTIFICATE"); path != "" {
		pem, err := readFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w; name a readable PEM file of the receiver's CA", env, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s=%q holds no PEM certificate; name the receiver's CA in PEM", env, path)
		}
		conf = &tls.Config{RootCAs: pool}
	}
	// The pair is taken whole from the signal's variables or else the
	// generic ones, as the SDK does.
	for _, prefix := range []string{metricsPrefix, envPrefix} {
		certEnv, keyEnv := prefix+"CLIENT_CERTIFICATE", prefix+"CLIENT_KEY"
		cert, key := strings.TrimSpace(getenv(certEnv)), strings.TrimSpace(getenv(keyEnv))
		if cert == "" && key == "" {
			continue
		}
		if cert == "" || key == "" {
			return nil, fmt.Errorf("%s=%q and %s=%q: a client certificate needs both; set both or neither", certEnv, cert, keyEnv, key)
		}
		certPEM, err := readFile(cert)
		if err != nil {
			return nil, fmt.Errorf("%s: %w; name a readable PEM file", certEnv, err)
		}
		keyPEM, err := readFile(key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w; name a readable PEM file", keyEnv, err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s=%q and %s=%q: %w; name a PEM certificate and its key", certEnv, cert, keyEnv, key, err)
		}
		if conf == nil {
			conf = &tls.Config{}
		}
		conf.Certificates = []tls.Certificate{pair}
		break
	}
	return conf, nil
}

// parseHeaders reads key1=value1,key2=value2 with percent-encoded values
// (the OTel specification's format for _HEADERS).
func parseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsFunc(k, func(r rune) bool { return !isTokenRune(r) }) {
			return nil, fmt.Errorf("%q is not name=value with an HTTP header name; write key1=value1,key2=value2", pair)
		}
		dec, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("%q: %w; percent-encode the value (a space as %%20)", pair, err)
		}
		h[k] = strings.TrimSpace(dec)
	}
	return h, nil
}

// isTokenRune: RFC 9110's token characters, what a header name may hold.
func isTokenRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// retryable is an answer worth sending again (429, 502, 503, 504), with the
// wait the receiver asked for in Retry-After.
type retryable struct {
	err   error
	after time.Duration
}

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

// Export sends rm, retrying a retryable answer with backoff until ctx
// ends.
func (e *exporter) Export(ctx context.Context, rm *metricpb.ResourceMetrics) error {
	body, err := encodeRequest(rm)
	if err != nil {
		return err
	}
	if e.gzip {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		if _, err := zw.Write(body); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		body = buf.Bytes()
	}
	wait := e.firstBackoff
	for {
		err := e.send(ctx, body)
		var r *retryable
		if err == nil || !errors.As(err, &r) {
			return err
		}
		// Jitter of ±50 % spreads the retries of many pods.
		d := max(r.after, wait/2+rand.N(wait+1))
		wait *= 2
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// send posts body once.
func (e *exporter) send(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = e.headers.Clone()
	resp, err := e.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		if resp.Header.Get("Content-Type") != "application/x-protobuf" {
			return nil
		}
		return partialSuccess(answer)
	}
	answer = bytes.TrimSpace(answer)
	if len(answer) > maxShown {
		answer = append(answer[:maxShown:maxShown], "..."...)
	}
	err = fmt.Errorf("the receiver answered %s: %s", resp.Status, answer)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return &retryable{err: err, after: retryAfter(resp.Header.Get("Retry-After"))}
	}
	return err
}

// retryAfter reads Retry-After as seconds or an HTTP date; 0 when absent
// or unreadable.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(min(s, int64(time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// partialSuccess reads an ExportMetricsServiceResponse (field 1,
// partial_success: 1 rejected_data_points, 2 error_message) and returns
// an error when the receiver rejected points or said why, as the SDK does.
func partialSuccess(b []byte) error {
	var rejected int64
	var msg string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("the receiver's answer is not an ExportMetricsServiceResponse: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("the receiver's answer is not an ExportMetricsServiceResponse: %w", protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		ps, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("the receiver's answer is not an ExportMetricsServiceResponse: %w", protowire.ParseError(n))
		}
		b = b[n:]
		for len(ps) > 0 {
			num, typ, n := protowire.ConsumeTag(ps)
			if n < 0 {
				return fmt.Errorf("the receiver's partial_success is malformed: %w", protowire.ParseError(n))
			}
			ps = ps[n:]
			switch {
			case num == 1 && typ == protowire.VarintType:
				v, m := protowire.ConsumeVarint(ps)
				n = m
				rejected = int64(v)
			case num == 2 && typ == protowire.BytesType:
				v, m := protowire.ConsumeBytes(ps)
				n = m
				msg = string(v)
			default:
				n = protowire.ConsumeFieldValue(num, typ, ps)
			}
			if n < 0 {
				return fmt.Errorf("the receiver's partial_success is malformed: %w", protowire.ParseError(n))
			}
			ps = ps[n:]
		}
	}
	if rejected != 0 || msg != "" {
		return fmt.Errorf("the receiver rejected %d data points: %s", rejected, msg)
	}
	return nil
}

// close drops the idle connections (at shutdown).
func (e *exporter) close() { e.client.CloseIdleConnections() }

// encodeRequest writes an ExportMetricsServiceRequest, whose only field
// (1) is repeated ResourceMetrics: the collector package that defines the
// message also defines its gRPC service, which this file exists to avoid.
func encodeRequest(msg *metricpb.ResourceMetrics) ([]byte, error) {
	size := proto.Size(msg)
	b := make([]byte, 0, size+protowire.SizeTag(1)+protowire.SizeVarint(uint64(size)))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	return proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, msg)
}
