package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// twoEngines turns the real single-engine V1 page of fixture 13 into the
// page of a server with two data-parallel engines: every engine="0" series
// gets an engine="1" twin, and the routing gauges get distinct values per
// engine, so that a consumer reading one series of each family reads a
// wrong number.
func twoEngines(t testing.TB) []byte {
	t.Helper()
	var out bytes.Buffer
	set := map[string]string{
		`vllm:num_requests_running{engine="0",model_name="TinyLlama"}`: "3.0",
		`vllm:num_requests_running{engine="1",model_name="TinyLlama"}`: "4.0",
		`vllm:num_requests_waiting{engine="0",model_name="TinyLlama"}`: "1.0",
		`vllm:num_requests_waiting{engine="1",model_name="TinyLlama"}`: "5.0",
	}
	write := func(line string) {
		name, _, _ := strings.Cut(line, " ")
		if v, ok := set[name]; ok {
			line = name + " " + v
			delete(set, name)
		}
		out.WriteString(line + "\n")
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(fixture(t, "13")), "\n"), "\n") {
		write(line)
		if !strings.HasPrefix(line, "#") && strings.Contains(line, `engine="0"`) {
			write(strings.Replace(line, `engine="0"`, `engine="1"`, 1))
		}
	}
	if len(set) != 0 {
		t.Fatalf("fixture 13 lacks %v", set)
	}
	return out.Bytes()
}

// sumOf adds up every series of name on a parsed page.
func (s series) sumOf(name string) (float64, int) {
	var sum float64
	n := 0
	for k, v := range s {
		if k == name || strings.HasPrefix(k, name+"{") {
			sum += v
			n++
		}
	}
	return sum, n
}

// fakeVLLM is an upstream with vLLM's shape: /metrics (switchable), a
// streaming completion whose chunks the test releases one at a time, and
// /v1/models.
type fakeVLLM struct {
	metrics   *switchable
	next      chan struct{} // releases the next chunk of a stream
	started   chan struct{} // one value per stream that began
	cancelled chan struct{} // one value per stream whose context ended early

	mu    sync.Mutex
	ended []string // how each stream ended, for failure messages
}

func newFakeVLLM(page []byte) *fakeVLLM {
	return &fakeVLLM{
		metrics:   newSwitchable(static(page)),
		next:      make(chan struct{}),
		started:   make(chan struct{}, 8),
		cancelled: make(chan struct{}, 8),
	}
}

func (v *fakeVLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/metrics":
		v.metrics.ServeHTTP(w, r)
	case "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "models-1")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"TinyLlama","object":"model"}]}`)
	case "/v1/completions":
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		v.started <- struct{}{}
		for i := 0; ; i++ {
			select {
			case _, ok := <-v.next:
				if !ok {
					_, _ = io.WriteString(w, "data: [DONE]\n\n")
					v.end(fmt.Sprintf("done after %d chunks", i))
					return
				}
			case <-r.Context().Done():
				v.end(fmt.Sprintf("cancelled after %d chunks: %v", i, context.Cause(r.Context())))
				v.cancelled <- struct{}{}
				return
			case <-time.After(20 * time.Second):
				v.end(fmt.Sprintf("gave up waiting after %d chunks", i))
				return
			}
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"t%d\"}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
	default:
		http.NotFound(w, r)
	}
}

func (v *fakeVLLM) end(how string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ended = append(v.ended, how)
}

// release lets the running stream write its next chunk.
func (v *fakeVLLM) release(t *testing.T) {
	t.Helper()
	select {
	case v.next <- struct{}{}:
	case <-time.After(10 * time.Second):
		v.mu.Lock()
		defer v.mu.Unlock()
		t.Fatalf("the upstream stream is not waiting for its next chunk; streams so far ended: %q", v.ended)
	}
}

// await waits for a value on ch, failing with what after 10 s.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for " + what)
	}
}

// streamClient has no overall timeout (a stream lasts as long as the
// test needs) and no connections shared with other tests.
func streamClient(t *testing.T) *http.Client {
	tr := &http.Transport{Proxy: nil, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// readEvent reads one server-sent event (up to its blank line).
func readEvent(rd *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := rd.ReadString('\n')
		b.WriteString(line)
		if err != nil || line == "\n" {
			return b.String(), err
		}
	}
}

// routingCheck asserts a routing page: parseable by the routers' parser,
// one series per model, running and waiting summed over both engines as
// computed from the raw page.
func routingCheck(t *testing.T, where string, body []byte, raw series) {
	t.Helper()
	s := mustParse(t, body)
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting"} {
		want, n := raw.sumOf(name)
		if n != 2 {
			t.Fatalf("the raw page has %d %s series, want 2", n, name)
		}
		got, ok := s[name+`{model_name="TinyLlama",role="both"}`]
		if !ok || got != want {
			t.Errorf("%s: %s = %v (present %v), want the sum over engines %v", where, name, got, ok, want)
		}
	}
	for k := range s {
		if strings.Contains(k, `engine="`) {
			t.Errorf("%s: %s still carries an engine label", where, k)
		}
	}
}

// TestRoutingListenerAndProxy: the routing listener serves the routing view
// at /metrics, and the proxy answers GET /metrics with it and forwards
// inference to vLLM (chunk by chunk, cancellation included); both answer
// 503 when the data is stale, as /metrics/routing does, while inference
// keeps passing; a dead vLLM gives 502.
func TestRoutingListenerAndProxy(t *testing.T) {
	page := twoEngines(t)
	raw := mustParse(t, page)
	vllm := newFakeVLLM(page)
	ln := listen(t, "127.0.0.1:0")
	upSrv := serveOn(t, ln, vllm)
	routingAddr, proxyAddr := testbin.FreeAddr(t), testbin.FreeAddr(t)
	// No --proxy.upstream: scheme, host and port of the scrape URI.
	p := testbin.Start(t, sidecarArgs("http://"+ln.Addr().String()+"/metrics", fastInterval, fastTimeout,
		"--web.routing-listen-address="+routingAddr, "--proxy.listen-address="+proxyAddr)...)
	routingURL, proxyURL := "http://"+routingAddr, "http://"+proxyAddr
	sc := streamClient(t)

	waitFor(t, settle, "the routing listener and the proxy to serve a fresh view", func() bool {
		a, errA := get(client, routingURL+"/metrics", nil)
		b, errB := get(client, proxyURL+"/metrics", nil)
		return errA == nil && errB == nil && a.status == 200 && b.status == 200
	})
	for where, url := range map[string]string{"routing listener": routingURL + "/metrics", "proxy": proxyURL + "/metrics", "main /metrics/routing": p.URL + "/metrics/routing"} {
		r := mustGet(t, url)
		if r.status != 200 {
			t.Fatalf("%s answered %d: %s", where, r.status, r.body)
		}
		routingCheck(t, where, r.body, raw)
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
			t.Errorf("%s: Content-Type %q", where, ct)
		}
	}
	if r := mustGet(t, routingURL+"/-/healthy"); r.status != 200 {
		t.Errorf("routing listener /-/healthy: %d", r.status)
	}
	scrapes := vllm.metrics.requests.Load()

	t.Run("inference passes through", func(t *testing.T) {
		r := mustGet(t, proxyURL+"/v1/models")
		if r.status != 200 || r.header.Get("X-Request-Id") != "models-1" || !strings.Contains(string(r.body), `"id":"TinyLlama"`) {
			t.Errorf("/v1/models through the proxy: %d %v %s", r.status, r.header, r.body)
		}
		if r := mustGet(t, proxyURL+"/no-such-path"); r.status != http.StatusNotFound {
			t.Errorf("vLLM's 404 came back as %d", r.status)
		}
	})

	t.Run("stream chunk by chunk", func(t *testing.T) {
		resp, err := sc.Post(proxyURL+"/v1/completions", "application/json", strings.NewReader(`{"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		await(t, vllm.started, "the stream to reach vLLM")
		rd := bufio.NewReader(resp.Body)
		for i := range 3 {
			// The upstream writes chunk i only now, and the next only
			// after the client has read this one.
			vllm.release(t)
			ev, err := readEvent(rd)
			if want := fmt.Sprintf("data: {\"choices\":[{\"text\":\"t%d\"}]}\n\n", i); err != nil || ev != want {
				t.Fatalf("chunk %d: %q, %v; want %q", i, ev, err, want)
			}
		}
	})
	// The stream above ended when its client closed it.
	await(t, vllm.cancelled, "closing the client's stream to cancel the upstream request")

	t.Run("client gone cancels the upstream", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, proxyURL+"/v1/completions", strings.NewReader(`{"stream":true}`))
		resp, err := sc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		await(t, vllm.started, "the stream to reach vLLM")
		cancel()
		await(t, vllm.cancelled, "the client going away to cancel vLLM's request")
	})

	if n := vllm.metrics.requests.Load() - scrapes; n > 40 {
		t.Errorf("the upstream's /metrics got %d requests meanwhile: more than the sidecar's scrapes", n)
	}

	t.Run("stale data: 503 on both, inference still passes", func(t *testing.T) {
		vllm.metrics.set(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "engine busy", http.StatusInternalServerError)
		}))
		waitFor(t, settle, "503 on the routing listener, the proxy and /metrics/routing", func() bool {
			for _, url := range []string{routingURL + "/metrics", proxyURL + "/metrics", p.URL + "/metrics/routing"} {
				if r, err := get(client, url, nil); err != nil || r.status != http.StatusServiceUnavailable {
					return false
				}
			}
			return true
		})
		for _, url := range []string{routingURL + "/metrics", proxyURL + "/metrics"} {
			r := mustGet(t, url)
			if strings.Contains(string(r.body), "vllm:num_requests_running") || r.header.Get("Retry-After") == "" {
				t.Errorf("%s stale: %d, Retry-After %q, body %q", url, r.status, r.header.Get("Retry-After"), r.body)
			}
		}
		if r := mustGet(t, proxyURL+"/v1/models"); r.status != 200 {
			t.Errorf("inference through the proxy answered %d while only the metrics were stale", r.status)
		}
		vllm.metrics.set(static(page))
		waitFor(t, settle, "the routing listener to recover", func() bool {
			r, err := get(client, routingURL+"/metrics", nil)
			return err == nil && r.status == 200
		})
	})

	t.Run("dead vLLM: 502 with a reason", func(t *testing.T) {
		_ = upSrv.Close()
		r := mustGet(t, proxyURL+"/v1/models")
		if r.status != http.StatusBadGateway || !strings.Contains(string(r.body), "did not answer (refused)") || !strings.Contains(string(r.body), ln.Addr().String()) {
			t.Errorf("with vLLM gone: %d %q", r.status, r.body)
		}
		waitFor(t, settle, "the refused forward to be counted", func() bool {
			s, _ := metrics(t, p)
			return s[`vllm_normalizer_proxy_upstream_errors_total{reason="refused"}`] >= 1
		})
	})
}

// TestRoutingListenerBehindWebConfig: the routing listener uses the same
// --web.config.file as the main one (TLS, basic auth); the proxy, standing
// in for vLLM's own port, does not: its clients send vLLM's credentials,
// never the sidecar's.
func TestRoutingListenerBehindWebConfig(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("right-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig := filepath.Join(dir, "web.yml")
	writeFile(t, webConfig, "tls_server_config:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+
		"\nbasic_auth_users:\n  router: "+string(hash)+"\n")
	page := twoEngines(t)
	vllm := newFakeVLLM(page)
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, vllm)
	routingAddr, proxyAddr := testbin.FreeAddr(t), testbin.FreeAddr(t)
	testbin.StartAt(t, testbin.FreeAddr(t), "https", sidecarArgs("http://"+ln.Addr().String()+"/metrics", fastInterval, fastTimeout,
		"--web.config.file="+webConfig, "--web.routing-listen-address="+routingAddr, "--proxy.listen-address="+proxyAddr)...)

	https := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	defer https.CloseIdleConnections()
	do := func(c *http.Client, url, user, pass string) (response, error) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := c.Do(req)
		if err != nil {
			return response{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return response{status: resp.StatusCode, header: resp.Header, body: b}, err
	}
	waitFor(t, settle, "the routing view over https with the password", func() bool {
		r, err := do(https, "https://"+routingAddr+"/metrics", "router", "right-password")
		return err == nil && r.status == 200
	})
	r, err := do(https, "https://"+routingAddr+"/metrics", "router", "right-password")
	if err != nil || r.status != 200 {
		t.Fatalf("routing listener with the password: %d %v", r.status, err)
	}
	routingCheck(t, "routing listener over https", r.body, mustParse(t, page))
	for _, path := range []string{"/metrics", "/-/healthy"} {
		for _, c := range []struct{ user, pass string }{{"router", "wrong-password"}, {"", ""}} {
			r, err := do(https, "https://"+routingAddr+path, c.user, c.pass)
			if err != nil || r.status != http.StatusUnauthorized || strings.Contains(string(r.body), "vllm:") {
				t.Errorf("routing listener %s as %q/%q: %d %v, want 401 and no metrics", path, c.user, c.pass, r.status, err)
			}
		}
	}
	if r, err := do(client, "http://"+routingAddr+"/metrics", "router", "right-password"); err == nil && (r.status == 200 || strings.Contains(string(r.body), "vllm:")) {
		t.Errorf("plain http to the TLS routing listener answered %d with a page", r.status)
	}

	// The proxy: plain HTTP, no sidecar credentials, the client's own
	// Authorization (vLLM's API key) passed to vLLM.
	waitFor(t, settle, "the proxy's routing view", func() bool {
		r, err := do(client, "http://"+proxyAddr+"/metrics", "", "")
		return err == nil && r.status == 200
	})
	if r, err := do(client, "http://"+proxyAddr+"/v1/models", "", ""); err != nil || r.status != 200 {
		t.Errorf("inference through the proxy without sidecar credentials: %d %v", r.status, err)
	}
}

// TestSIGTERMLetsProxiedStreamsFinish: on SIGTERM the proxy stops taking
// connections but a generation in flight keeps streaming to its end; then
// the process exits 0.
func TestSIGTERMLetsProxiedStreamsFinish(t *testing.T) {
	vllm := newFakeVLLM(v1Page(1, 1))
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, vllm)
	proxyAddr := testbin.FreeAddr(t)
	p := testbin.Start(t, sidecarArgs("http://"+ln.Addr().String()+"/metrics", fastInterval, fastTimeout,
		"--proxy.listen-address="+proxyAddr, "--proxy.upstream=http://"+ln.Addr().String(), "--log.level=debug")...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar logs:\n%s", p.Logs())
		}
	})
	waitFor(t, settle, "the proxy to listen", func() bool {
		c, err := net.Dial("tcp", proxyAddr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	resp, err := streamClient(t).Post("http://"+proxyAddr+"/v1/completions", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	await(t, vllm.started, "the stream to reach vLLM")
	rd := bufio.NewReader(resp.Body)
	vllm.release(t)
	if ev, err := readEvent(rd); err != nil || !strings.Contains(ev, `"t0"`) {
		t.Fatalf("first chunk: %q, %v", ev, err)
	}

	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, settle, "the shutdown to begin", func() bool {
		return strings.Contains(p.Logs(), "shutting down")
	})
	waitFor(t, settle, "the proxy to stop accepting connections", func() bool {
		c, err := net.Dial("tcp", proxyAddr)
		if err == nil {
			c.Close()
		}
		return errors.Is(err, syscall.ECONNREFUSED)
	})
	for i := 1; i <= 3; i++ {
		vllm.release(t)
		if ev, err := readEvent(rd); err != nil || !strings.Contains(ev, fmt.Sprintf(`"t%d"`, i)) {
			t.Fatalf("chunk %d after SIGTERM: %q, %v", i, ev, err)
		}
	}
	if p.Exited() {
		t.Fatal("the sidecar exited while a proxied stream was still running")
	}
	close(vllm.next)
	if ev, err := readEvent(rd); err != nil || ev != "data: [DONE]\n\n" {
		t.Fatalf("end of stream: %q, %v", ev, err)
	}
	if rest, err := io.ReadAll(rd); err != nil || len(rest) != 0 {
		t.Errorf("after the last event: %q, %v (want a clean end)", rest, err)
	}
	if code := waitExit(t, p, 10*time.Second); code != 0 {
		t.Errorf("exit code %d after the stream finished, want 0\n%s", code, p.Logs())
	}
}
