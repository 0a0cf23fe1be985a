// Package harness runs the real vllm-normalizer binary for the consumer
// end-to-end tests next to it (e2e/consumers/*), serves raw pages the way
// vLLM does, and computes from a raw page, with code of its own, the values
// a consumer should read ("the truth").
//
// It is a module of its own that needs nothing but the standard library, so
// that each consumer's test module builds that consumer's code with exactly
// the dependency versions the consumer pins (the product's newer
// prometheus/common would otherwise replace theirs).
package harness

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// RepoRoot is the product's module root.
func RepoRoot() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "..")
}

// Fixture returns testdata/fixtures/<prefix>-*.prom of the product.
func Fixture(t testing.TB, prefix string) []byte {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(RepoRoot(), "testdata", "fixtures", prefix+"-*.prom"))
	if err != nil || len(m) != 1 {
		t.Fatalf("fixture %s: %v %v", prefix, m, err)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// build compiles the sidecar and the demo page dumper once per test process.
func build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "vllm-normalizer-consumers-")
		if buildErr != nil {
			return
		}
		for _, pkg := range []string{"./cmd/vllm-normalizer", "./scripts/staticupstream"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, filepath.Base(pkg)), pkg)
			cmd.Dir = RepoRoot()
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

// DemoPage returns one page of the product's demo upstream (the V1 fixture
// the demo replays, with its load simulation warmed up) with the given
// number of data-parallel engines: a real V1 page with engine="0",
// engine="1", ... and values that differ between engines.
func DemoPage(t testing.TB, engines int) []byte {
	t.Helper()
	dir := build(t)
	out := filepath.Join(t.TempDir(), "demo.prom")
	cmd := exec.Command(filepath.Join(dir, "staticupstream"), "-demo-engines", fmt.Sprint(engines), "-dump", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dumping a demo page: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Upstream serves one page at /metrics as vLLM does (text format 0.0.4);
// Set replaces it.
type Upstream struct {
	URL  string // base URL, http://127.0.0.1:port
	Host string // 127.0.0.1:port
	page atomic.Pointer[[]byte]
	down atomic.Bool
}

// NewUpstream serves page on a loopback port until the test ends.
func NewUpstream(t testing.TB, page []byte) *Upstream {
	t.Helper()
	u := &Upstream{}
	u.Set(page)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		if u.down.Load() {
			http.Error(w, "engine core died", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(*u.page.Load())
	}))
	t.Cleanup(srv.Close)
	u.URL = srv.URL
	u.Host = strings.TrimPrefix(srv.URL, "http://")
	return u
}

// Set replaces the served page.
func (u *Upstream) Set(page []byte) {
	b := bytes.Clone(page)
	u.page.Store(&b)
}

// Fail makes every later request answer 500 (a dead engine behind a live
// API server) until Fail(false).
func (u *Upstream) Fail(down bool) { u.down.Store(down) }

// FreeAddr returns a loopback address nothing listens on right now and
// that FreeAddr has not returned before in this process: the kernel may hand
// a just-closed port out again, and two listener flags on one port make the
// sidecar refuse to start.
func FreeAddr(t testing.TB) string {
	t.Helper()
	handedMu.Lock()
	defer handedMu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if !handed[addr] {
			handed[addr] = true
			return addr
		}
	}
	t.Fatal("no loopback port that was not handed out before in 100 tries")
	return ""
}

var (
	handedMu sync.Mutex
	handed   = map[string]bool{}
)

// Status returns the status code and body of GET url.
func Status(url string) (int, []byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Sidecar is a running vllm-normalizer.
type Sidecar struct {
	URL  string // base URL
	Host string
	// The routing listener's and the inference-port proxy's base URLs
	// (both serve the compatibility page at /metrics) and hosts.
	RoutingURL, ProxyURL   string
	RoutingHost, ProxyHost string
	logs                   *bytes.Buffer
	mu                     *sync.Mutex
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// Interval is the sidecar's scrape interval in these tests: short, yet
// long enough for a loaded CI machine to finish every scrape in time.
const Interval = 500 * time.Millisecond

// StartSidecar runs the binary against upstream (its /metrics) with the
// default configuration, the routing listener and the proxy on, plus extra flags, and returns once it has served a
// page with vllm_up 1.
func StartSidecar(t testing.TB, upstream *Upstream, extra ...string) *Sidecar {
	t.Helper()
	dir := build(t)
	addr, routingAddr, proxyAddr := FreeAddr(t), FreeAddr(t), FreeAddr(t)
	args := append([]string{
		"--web.listen-address=" + addr,
		"--web.routing-listen-address=" + routingAddr,
		"--proxy.listen-address=" + proxyAddr,
		"--vllm.scrape-uri=" + upstream.URL + "/metrics",
		"--vllm.scrape-interval=" + Interval.String(),
		"--derive.window=30s",
		"--log.level=warn",
	}, extra...)
	s := &Sidecar{URL: "http://" + addr, Host: addr, logs: &bytes.Buffer{}, mu: &sync.Mutex{},
		RoutingURL: "http://" + routingAddr, ProxyURL: "http://" + proxyAddr, RoutingHost: routingAddr, ProxyHost: proxyAddr}
	cmd := exec.Command(filepath.Join(dir, "vllm-normalizer"), args...)
	cmd.Stdout = lockedWriter{s.mu, s.logs}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			t.Fatalf("vllm-normalizer exited at start:\n%s", s.Logs())
		default:
		}
		if status, body, err := s.get("/metrics"); err == nil && status == http.StatusOK && bytes.Contains(body, []byte("\nvllm_up 1\n")) {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("vllm-normalizer did not serve vllm_up 1 on %s within 20s:\n%s", addr, s.Logs())
	return nil
}

// Logs returns what the sidecar printed so far.
func (s *Sidecar) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

func (s *Sidecar) get(path string) (int, []byte, error) {
	if strings.HasPrefix(path, "http://") {
		return Status(path)
	}
	resp, err := http.Get(s.URL + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Get returns the body of path (or of a full http:// URL, such as the
// proxy's), failing the test on anything but 200.
func (s *Sidecar) Get(t testing.TB, path string) []byte {
	t.Helper()
	status, b, err := s.get(path)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET %s%s: status %d, %v\n%s", s.URL, path, status, err, b)
	}
	return b
}

// WaitFor polls path (or a full http:// URL) until ok accepts its body (at most 10 s), and returns
// that body.
func (s *Sidecar) WaitFor(t testing.TB, path string, ok func(body []byte) bool) []byte {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last []byte
	for time.Now().Before(deadline) {
		if status, b, err := s.get(path); err == nil && status == http.StatusOK {
			if ok(b) {
				return b
			}
			last = b
		}
		time.Sleep(Interval / 2)
	}
	t.Fatalf("%s never reached the expected state within 10s; last body:\n%s", path, last)
	return nil
}
