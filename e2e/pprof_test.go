package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// TestPprofBoundAndConcurrency: against the binary, Go's default 30 s CPU
// profile is refused with 400 at once under the default 10 s write
// timeout, and of two concurrent 2 s profiles one is served and the other
// answered 429 without waiting.
func TestPprofBoundAndConcurrency(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, static(v1Page(1, 1)))
	p := testbin.Start(t, sidecarArgs("http://"+ln.Addr().String()+"/metrics", fastInterval, fastTimeout, "--web.enable-pprof")...)

	start := time.Now()
	if r := mustGet(t, p.URL+"/debug/pprof/profile"); r.status != http.StatusBadRequest {
		t.Errorf("the default 30 s profile answered %d, want 400: %s", r.status, r.body)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the refusal took %s: half the profile it refuses", took)
	}

	// Answers in the order they arrive; judged by that order, not by a
	// wall-clock bound a busy machine stretches.
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			r, err := get(client, p.URL+"/debug/pprof/profile?seconds=2", nil)
			if err != nil {
				codes <- 0
				return
			}
			codes <- r.status
		}()
	}
	order := []int{<-codes, <-codes}
	if order[0] != http.StatusTooManyRequests || order[1] != http.StatusOK {
		t.Errorf("two concurrent profiles answered %v in that order, want 429 (at once) then 200", order)
	}
}
