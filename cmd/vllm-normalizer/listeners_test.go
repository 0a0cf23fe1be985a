package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/fos-study/vllm-normalizer/collector"
	"github.com/fos-study/vllm-normalizer/diagnosis"
)

func TestListenerFlagChecks(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--web.routing-listen-address=9401"}, `--web.routing-listen-address="9401" is not host:port`},
		{[]string{"--proxy.listen-address=localhost"}, `--proxy.listen-address="localhost" is not host:port`},
		{[]string{"--proxy.listen-address=:9400"}, "--proxy.listen-address=:9400 is also a --web.listen-address"},
		{[]string{"--web.routing-listen-address=:9401", "--proxy.listen-address=:9401"}, "are both :9401"},
		{[]string{"--proxy.upstream=http://127.0.0.1:8000"}, "--proxy.upstream is set but --proxy.listen-address is not"},
		{[]string{"--proxy.listen-address=:8001", "--proxy.upstream=127.0.0.1:8000"}, "--proxy.upstream: upstream is not a URL"},
		{[]string{"--proxy.listen-address=:8001", "--proxy.upstream=http://127.0.0.1:8000/v1"}, `--proxy.upstream: upstream "http://127.0.0.1:8000/v1" has a path`},
		{[]string{"--proxy.listen-address=:8001", "--proxy.upstream=http://u:pw-secret@127.0.0.1:8000"}, "carries user info"},
		{[]string{"--web.listen-address=:99999"}, `--web.listen-address=":99999" is not host:port (address 99999: invalid port); give e.g. :9400`},
		{[]string{"--web.listen-address=9400"}, `--web.listen-address="9400" is not host:port`},
		{[]string{"--web.routing-listen-address=:99999"}, `--web.routing-listen-address=":99999" is not host:port (address 99999: invalid port); give e.g. :9401`},
		{[]string{"--proxy.listen-address=:70000"}, `--proxy.listen-address=":70000" is not host:port (address 70000: invalid port); give e.g. :8001`},
		{[]string{"--web.listen-address=vsock://:port"}, `--web.listen-address="vsock://:port" is not vsock://[CID]:PORT (parse "vsock://:port": invalid port ":port" after host); give e.g. vsock://:9400`},
		{[]string{"--web.listen-address=vsock://:4294967296"}, `--web.listen-address="vsock://:4294967296" is not vsock://[CID]:PORT (vsock port "4294967296": strconv.ParseUint: parsing "4294967296": value out of range); give e.g. vsock://:9400`},
		{[]string{"--web.listen-address=vsock://9400"}, `--web.listen-address="vsock://9400" is not vsock://[CID]:PORT (address 9400: missing port in address); give e.g. vsock://:9400`},
	} {
		_, err := parseFlags(tc.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("%v: the error shows the password: %v", tc.args, err)
		}
	}
	if _, err := parseFlags([]string{"--web.listen-address=vsock://:9400"}, io.Discard, io.Discard); err != nil {
		t.Errorf("a valid vsock address rejected: %v", err)
	}
	if _, err := parseFlags([]string{"--web.routing-listen-address=127.0.0.1:9401", "--proxy.listen-address=:8001", "--proxy.upstream=https://vllm:8443"}, io.Discard, io.Discard); err != nil {
		t.Errorf("valid listener flags rejected: %v", err)
	}
}

// TestProxyUpstreamDefault: without --proxy.upstream the proxy forwards to
// scheme, host and port of --vllm.scrape-uri, never to its credentials or
// path.
func TestProxyUpstreamDefault(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--proxy.listen-address=:8001"}, "http://127.0.0.1:8000"},
		{[]string{"--proxy.listen-address=:8001", "--vllm.scrape-uri=https://scraper:pw@10.0.0.5:8443/metrics?x=1"}, "https://10.0.0.5:8443"},
		{[]string{"--proxy.listen-address=:8001", "--vllm.scrape-uri=http://10.0.0.5:8000/metrics", "--proxy.upstream=http://10.0.0.6:8000"}, "http://10.0.0.6:8000"},
	} {
		f, err := parseFlags(tc.args, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.proxyUpstreamURL()
		if err != nil || got != tc.want {
			t.Errorf("%v: upstream %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
	// The flags refuse such a scrape URI (the collector could not scrape
	// it); the proxy's own check is what stands behind that.
	if _, err := parseFlags([]string{"--proxy.listen-address=:8001", "--vllm.scrape-uri=unix:///run/vllm.sock"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--vllm.scrape-uri=unix:///run/vllm.sock is not http(s)") {
		t.Errorf("a unix scrape URI: %v, want it refused naming --vllm.scrape-uri", err)
	}
	f, err := parseFlags([]string{"--proxy.listen-address=:8001"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	f.scrapeURI = "unix:///run/vllm.sock"
	if _, err := f.proxyUpstreamURL(); err == nil || !strings.Contains(err.Error(), "set --proxy.upstream") {
		t.Errorf("a scrape URI the proxy cannot use: %v, want a hint to set --proxy.upstream", err)
	}
}

// TestRoutingMux: the routing listener serves the routing view (the
// collector's handler, 503 before any good scrape) at /metrics, its own
// health endpoint and a landing page, and nothing else.
func TestRoutingMux(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, smallPage) }))
	defer up.Close()
	m := testMapper(t)
	f, err := parseFlags([]string{"--web.routing-listen-address=:9401", "--proxy.listen-address=:8001"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	coll, err := collector.New(collector.Config{ScrapeURI: up.URL, Interval: f.scrapeInterval, MaxBodyBytes: int64(f.maxBody),
		Windows: uniqueWindows(f.windows), Mapper: m, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	rmux, err := newRoutingMux(coll)
	if err != nil {
		t.Fatal(err)
	}
	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(rmux, "/metrics"); code != http.StatusServiceUnavailable {
		t.Errorf("/metrics before any scrape: %d %q, want 503", code, body)
	}
	coll.ScrapeOnce(context.Background())
	if code, body := get(rmux, "/metrics"); code != 200 || !strings.Contains(body, `vllm:num_requests_running{model_name="m",role="both"} 7`) || strings.Contains(body, `engine="1"`) {
		t.Errorf("/metrics answered %d without the routing view:\n%s", code, body)
	}
	// AIBrix asks trtllm pods for /prometheus/metrics: the same page.
	if code, body := get(rmux, "/prometheus/metrics"); code != 200 || !strings.Contains(body, `vllm:num_requests_running{model_name="m",role="both"} 7`) {
		t.Errorf("/prometheus/metrics answered %d without the compatibility page:\n%s", code, body)
	}
	if code, _ := get(rmux, "/-/healthy"); code != 200 {
		t.Errorf("/-/healthy: %d", code)
	}
	if code, body := get(rmux, "/"); code != 200 || !strings.Contains(body, `href="/metrics"`) {
		t.Errorf("landing page %d:\n%s", code, body)
	}
	for _, p := range []string{"/metrics/routing", "/-/reload", "/debug/pprof/", "/x"} {
		if code, _ := get(rmux, p); code != http.StatusNotFound {
			t.Errorf("%s on the routing listener: %d, want 404", p, code)
		}
	}

	diag, err := diagnosis.New(f.diagnosisOptions())
	if err != nil {
		t.Fatal(err)
	}
	mux, err := newMux(f, coll, diag, func() error { return nil }, "http://127.0.0.1:8000")
	if err != nil {
		t.Fatal(err)
	}
	_, body := get(mux, "/")
	for _, want := range []string{"Routing listener on :9401", "Inference-port proxy on :8001", "vLLM at http://127.0.0.1:8000"} {
		if !strings.Contains(body, want) {
			t.Errorf("the main landing page does not say %q:\n%s", want, body)
		}
	}
}

// TestGOMAXPROCSDefault: one CPU by default, Go's own choice (0) once the
// proxy runs, unless the flag or the GOMAXPROCS variable says otherwise.
func TestGOMAXPROCSDefault(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	os.Unsetenv("GOMAXPROCS")
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 1},
		{[]string{"--proxy.listen-address=:8001"}, 0},
		{[]string{"--proxy.listen-address=:8001", "--runtime.gomaxprocs=1"}, 1},
		{[]string{"--runtime.gomaxprocs=3"}, 3},
	} {
		f, err := parseFlags(tc.args, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if f.maxProcs != tc.want {
			t.Errorf("%v: GOMAXPROCS %d, want %d", tc.args, f.maxProcs, tc.want)
		}
	}
	t.Setenv("GOMAXPROCS", "2")
	if f, err := parseFlags([]string{"--proxy.listen-address=:8001"}, io.Discard, io.Discard); err != nil || f.maxProcs != 2 {
		t.Errorf("GOMAXPROCS=2 with the proxy: %v, %v; want 2 (the variable wins over the proxy's default)", f, err)
	}
}

// TestListenFailureNamesItsFlag: a listener that cannot listen (its port
// taken) ends the start naming its own flag, the address and the fix; the
// routing listener's failure named --web.listen-address (fails on main).
func TestListenFailureNamesItsFlag(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	for _, flag := range []string{"--web.listen-address", "--web.routing-listen-address"} {
		srv := newServers(slog.New(slog.DiscardHandler))
		noSystemd := false
		srv.serveWeb(flag, "test", http.NotFoundHandler(), &web.FlagConfig{WebListenAddresses: &[]string{addr}, WebSystemdSocket: &noSystemd, WebConfigFile: new(string)})
		err := <-srv.errs
		srv.shutdown()
		for _, want := range []string{flag + "=" + addr + ":", "address already in use", "give an address no other process listens on, e.g. :"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s taken: error %v, want it to say %q", flag, err, want)
			}
		}
	}
}
