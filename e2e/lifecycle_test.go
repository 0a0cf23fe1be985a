package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// waitExit waits up to d for p to end and returns its exit code.
func waitExit(t *testing.T, p *testbin.Process, d time.Duration) int {
	t.Helper()
	waitFor(t, d, "the sidecar to exit", p.Exited)
	return p.Cmd.ProcessState.ExitCode()
}

// TestSIGTERMFinishesInFlightResponse: SIGTERM closes the listener at
// once, lets a response that a slow client is still reading finish, and
// the process exits 0 right after.
func TestSIGTERMFinishesInFlightResponse(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): pauses a large response across a SIGTERM")
	}
	// A page far larger than what loopback socket buffers hold, so the
	// handler is still writing while the client pauses.
	var page bytes.Buffer
	page.WriteString("# TYPE vllm:e2e_big gauge\n")
	pad := strings.Repeat("x", 60)
	for i := range 150_000 {
		fmt.Fprintf(&page, "vllm:e2e_big{i=\"%d\",pad=\"%s\"} %d\n", i, pad, i)
	}
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, static(page.Bytes()))
	p := testbin.Start(t, "--vllm.scrape-uri=http://"+ln.Addr().String()+"/metrics",
		"--vllm.scrape-interval=1s", "--vllm.timeout=900ms", "--derive.window=2s", "--vllm.sample-limit=0", "--vllm.max-body-bytes=32MiB") // the page is 12 MiB
	served := time.Now()
	waitFor(t, settle, "the big page to be served", func() bool {
		q, _ := quick(t, p)
		return q["vllm_up"] == 1
	})

	// A slow client: a small receive buffer, and a pause mid-body.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := d.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: e2e\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := strconv.Atoi(resp.Header.Get("Content-Length"))
	if resp.StatusCode != http.StatusOK || want < 10<<20 {
		t.Fatalf("answered %d with Content-Length %d, want 200 and over 10 MiB", resp.StatusCode, want)
	}
	t.Logf("page served after %s", time.Since(served).Round(time.Millisecond))
	head := make([]byte, 64<<10)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}

	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// While the client pauses the process must wait for it, and no longer
	// accept connections.
	time.Sleep(300 * time.Millisecond)
	refused := false
	for range 50 {
		c, err := net.DialTimeout("tcp", p.Addr, time.Second)
		if err != nil {
			refused = true
			break
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
	if !refused {
		t.Error("the listener still accepts connections after SIGTERM")
	}
	time.Sleep(time.Second)
	if p.Exited() {
		t.Fatalf("the process exited while a response was in flight\n%s", p.Logs())
	}

	readStart := time.Now()
	rest, err := io.ReadAll(resp.Body)
	t.Logf("rest read in %s", time.Since(readStart).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("the in-flight response was cut: %v after %d bytes", err, len(head)+len(rest))
	}
	body := append(head, rest...)
	if len(body) != want {
		t.Fatalf("read %d bytes, Content-Length %d", len(body), want)
	}
	if !bytes.Contains(body, []byte("\nvllm:e2e_big{i=\"149999\",")) || !bytes.HasSuffix(body, []byte("\n")) {
		t.Error("the in-flight page is incomplete")
	}
	start := time.Now()
	if code := waitExit(t, p, 3*time.Second); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0\n%s", code, p.Logs())
	}
	t.Logf("exited %s after the in-flight response ended", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(p.Logs(), "shutting down") {
		t.Errorf("no shutdown log line:\n%s", p.Logs())
	}
}

// TestSIGTERMIdle: an idle sidecar exits 0 promptly on SIGTERM.
func TestSIGTERMIdle(t *testing.T) {
	p := testbin.Start(t, sidecarArgs("http://"+testbin.FreeAddr(t)+"/metrics", fastInterval, fastTimeout)...)
	mustGet(t, p.URL+"/metrics")
	start := time.Now()
	if err := p.Stop(3 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.Logs())
	}
	t.Logf("exited 0 %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}

const (
	keepAll = "metric_relabel_configs: []\n"
	// dropWaiting drops one family by name.
	dropWaiting = `metric_relabel_configs:
  - source_labels: [__name__]
    regex: "vllm:num_requests_kept_anyway"
    action: drop
  - source_labels: [__name__]
    regex: "vllm:num_requests_waiting"
    action: drop
`
	// badRule is invalid in its second rule.
	badRule = `metric_relabel_configs:
  - source_labels: [__name__]
    regex: "vllm:num_requests_waiting"
    action: drop
  - source_labels: [__name__]
    regex: "vllm:("
    action: drop
`
)

func hasWaiting(s series) bool {
	return len(s.with("vllm:num_requests_waiting{")) > 0
}

// TestSIGHUPReload: SIGHUP applies a changed relabel rule from the next
// scrape on; a bad file keeps the previous configuration and says so.
func TestSIGHUPReload(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yml")
	writeFile(t, cfg, keepAll)
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, static(fixture(t, "13")))
	p := testbin.Start(t, sidecarArgs("http://"+ln.Addr().String()+"/metrics", fastInterval, fastTimeout, "--config.file="+cfg)...)
	waitFor(t, settle, "vllm:num_requests_waiting served", func() bool {
		s, _ := metrics(t, p)
		return hasWaiting(s)
	})

	writeFile(t, cfg, dropWaiting)
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, settle, "vllm:num_requests_waiting dropped after SIGHUP", func() bool {
		s, _ := metrics(t, p)
		return !hasWaiting(s)
	})
	s, _ := metrics(t, p)
	if s["vllm_normalizer_config_last_reload_successful"] != 1 || s[`vllm_normalizer_config_reloads_total{outcome="success"}`] != 1 {
		t.Errorf("after a good reload: %v", s.with("vllm_normalizer_config_"))
	}

	writeFile(t, cfg, badRule)
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, settle, "vllm_normalizer_config_last_reload_successful 0 after a bad file", func() bool {
		s, _ := metrics(t, p)
		return s["vllm_normalizer_config_last_reload_successful"] == 0
	})
	time.Sleep(3 * fastInterval) // scrapes with whatever configuration is in use
	s, _ = metrics(t, p)
	if hasWaiting(s) {
		t.Error("after a bad reload the previous configuration (dropping vllm:num_requests_waiting) is no longer applied")
	}
	if s["vllm_up"] != 1 {
		t.Errorf("vllm_up = %v after a bad reload", s["vllm_up"])
	}
	if got := s[`vllm_normalizer_config_reloads_total{outcome="failure"}`]; got != 1 {
		t.Errorf("reloads_total{outcome=failure} = %v, want 1", got)
	}
	if !strings.Contains(p.Logs(), "configuration reload failed") || !strings.Contains(p.Logs(), "metric_relabel_configs[1]") {
		t.Errorf("no log line naming the bad rule:\n%s", p.Logs())
	}
	if p.Exited() {
		t.Fatal("the sidecar exited on a bad reload")
	}
}

// TestReloadEndpoint: POST /-/reload is refused (403) without
// --web.enable-lifecycle, and reloads with it.
func TestReloadEndpoint(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yml")
	writeFile(t, cfg, keepAll)
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, static(fixture(t, "13")))
	uri := "http://" + ln.Addr().String() + "/metrics"
	post := func(p *testbin.Process) response {
		t.Helper()
		resp, err := client.Post(p.URL+"/-/reload", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return response{status: resp.StatusCode, body: b}
	}

	off := testbin.Start(t, sidecarArgs(uri, fastInterval, fastTimeout, "--config.file="+cfg)...)
	if r := post(off); r.status != http.StatusForbidden {
		t.Errorf("POST /-/reload without --web.enable-lifecycle answered %d, want 403", r.status)
	}
	_ = off.Stop(5 * time.Second)

	on := testbin.Start(t, sidecarArgs(uri, fastInterval, fastTimeout, "--config.file="+cfg, "--web.enable-lifecycle")...)
	if r := mustGet(t, on.URL+"/-/reload"); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET /-/reload answered %d, want 405", r.status)
	}
	writeFile(t, cfg, dropWaiting)
	if r := post(on); r.status != http.StatusOK {
		t.Errorf("POST /-/reload of a good file answered %d: %s", r.status, r.body)
	}
	waitFor(t, settle, "vllm:num_requests_waiting dropped after POST /-/reload", func() bool {
		s, _ := metrics(t, on)
		return !hasWaiting(s)
	})
	writeFile(t, cfg, badRule)
	r := post(on)
	if r.status != http.StatusInternalServerError || !strings.Contains(string(r.body), "metric_relabel_configs[1]") {
		t.Errorf("POST /-/reload of a bad file answered %d %q, want 500 naming metric_relabel_configs[1]", r.status, r.body)
	}
	// The page shows it from the next scrape on.
	waitFor(t, settle, "vllm_normalizer_config_last_reload_successful 0 after a failed POST /-/reload", func() bool {
		s, _ := metrics(t, on)
		return s["vllm_normalizer_config_last_reload_successful"] == 0
	})
}

// TestConfigCheck: --config.check exits 0 for a good file, 1 naming the
// bad rule for a bad one, and serves nothing.
func TestConfigCheck(t *testing.T) {
	bin := testbin.Build(t)
	dir := t.TempDir()
	for _, c := range []struct {
		name, content string
		code          int
		out           string
	}{
		{"good", dropWaiting, 0, "is valid"},
		{"empty", "", 0, "is valid"},
		{"bad regex", badRule, 1, "metric_relabel_configs[1]"},
		{"bad action", "metric_relabel_configs:\n  - action: explode\n", 1, "metric_relabel_configs[0]"},
		{"unknown key", "metric_relabel_config: []\n", 1, "metric_relabel_config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yml")
			writeFile(t, path, c.content)
			cmd := exec.Command(bin, "--config.check", "--config.file="+path)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("--config.check did not exit")
			}
			if got := cmd.ProcessState.ExitCode(); got != c.code {
				t.Errorf("exit status %d, want %d; output:\n%s", got, c.code, out.String())
			}
			if !strings.Contains(out.String(), c.out) {
				t.Errorf("output does not mention %q:\n%s", c.out, out.String())
			}
		})
	}
}
