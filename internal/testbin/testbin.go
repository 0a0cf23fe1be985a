package testbin

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Build compiles cmd/vllm-normalizer once per test process and returns the
// binary's path.
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vllm-normalizer-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "vllm-normalizer")
		_, self, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(self), "..", "..")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/vllm-normalizer")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

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

// syncBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Process is a running sidecar.
type Process struct {
	Cmd  *exec.Cmd
	Addr string // host:port it listens on
	URL  string // http://Addr
	logs *syncBuffer
	done chan struct{}
	err  error
}

// Logs returns what the process wrote to stdout and stderr so far.
func (p *Process) Logs() string { return p.logs.String() }

// Start runs the binary with args plus --web.listen-address on a free port
// (unless args set one, then pass addr) and waits until /-/healthy answers.
// The process is stopped when the test ends.
func Start(t testing.TB, args ...string) *Process {
	t.Helper()
	return StartAt(t, FreeAddr(t), "http", args...)
}

// StartAt is Start with a chosen address and scheme (https for TLS tests;
// readiness is then only checked by the port accepting connections).
func StartAt(t testing.TB, addr, scheme string, args ...string) *Process {
	t.Helper()
	return StartBinary(t, Build(t), addr, scheme, args...)
}

// StartBinary is StartAt with a binary built otherwise (by make, with
// stamped version fields).
func StartBinary(t testing.TB, bin, addr, scheme string, args ...string) *Process {
	t.Helper()
	logs := &syncBuffer{}
	cmd := exec.Command(bin, append([]string{"--web.listen-address=" + addr}, args...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Cmd: cmd, Addr: addr, URL: scheme + "://" + addr, logs: logs, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.Kill() })
	// A minute: on a busy machine (load 30 on 2 cores) a healthy start has
	// been seen to take over 10 s; a start that fails exits or logs why.
	deadline := time.Now().Add(startDeadline)
	probe := &http.Client{Timeout: 5 * time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("vllm-normalizer exited at start: %v\n%s", p.err, logs)
		default:
		}
		if scheme == "http" {
			if resp, err := probe.Get(p.URL + "/-/healthy"); err == nil {
				resp.Body.Close()
				return p
			}
		} else if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return p
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("vllm-normalizer did not come up on %s within %s\n%s", addr, startDeadline, logs)
	return nil
}

// startDeadline is how long Start waits for /-/healthy.
const startDeadline = time.Minute

// Stop sends SIGTERM and waits up to timeout for the exit; it returns the
// exit error (nil for status 0) or an error if the process did not exit.
func (p *Process) Stop(timeout time.Duration) error {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("no exit within %s after SIGTERM", timeout)
	}
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill ends the process if it still runs.
func (p *Process) Kill() {
	if !p.Exited() {
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}
