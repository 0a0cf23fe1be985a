package e2e

import (
	"os"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// TestGOMAXPROCS: the sidecar runs on one CPU unless --runtime.gomaxprocs
// or the GOMAXPROCS environment variable says otherwise, and 0 leaves the
// choice to Go (at least 2 on this machine's 2 CPUs or more). Read back
// from the Go collector's go_sched_gomaxprocs_threads.
func TestGOMAXPROCS(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, static(v1Page(1, 1)))
	uri := "http://" + ln.Addr().String() + "/metrics"
	procs := regexp.MustCompile(`(?m)^go_sched_gomaxprocs_threads (\d+)$`)
	// Go's own choice is the CPUs the machine or container gives, and at
	// least 2 where it reads a container's limit.
	goOwn := max(2, runtime.NumCPU())
	if runtime.NumCPU() < 2 {
		goOwn = 1
	}
	for _, c := range []struct {
		env  string // GOMAXPROCS in the sidecar's environment; "" unset
		args []string
		want int // 0: Go's own choice
	}{
		{"", nil, 1},
		{"", []string{"--runtime.gomaxprocs=2"}, 2},
		{"2", nil, 2},
		{"", []string{"--runtime.gomaxprocs=0"}, 0},
	} {
		if c.env != "" {
			t.Setenv("GOMAXPROCS", c.env)
		} else {
			t.Setenv("GOMAXPROCS", "")
			os.Unsetenv("GOMAXPROCS")
		}
		p := testbin.Start(t, sidecarArgs(uri, fastInterval, fastTimeout, c.args...)...)
		m := procs.FindSubmatch(mustGet(t, p.URL+"/metrics").body)
		if m == nil {
			t.Fatalf("GOMAXPROCS=%q %v: /metrics has no go_sched_gomaxprocs_threads", c.env, c.args)
		}
		got, _ := strconv.Atoi(string(m[1]))
		if c.want == 0 {
			// In a container with a CPU limit Go takes the limit (at
			// least 2), which may be below the machine's CPUs.
			if got < min(2, goOwn) || got > goOwn {
				t.Errorf("GOMAXPROCS=%q %v: the runtime runs on %d CPUs, want Go's own choice, 2 to %d", c.env, c.args, got, goOwn)
			}
		} else if got != c.want {
			t.Errorf("GOMAXPROCS=%q %v: the runtime runs on %d CPUs, want %d", c.env, c.args, got, c.want)
		}
		_ = p.Stop(5 * time.Second)
	}
}
