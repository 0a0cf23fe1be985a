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
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the refusal took %s", took)
	}

	codes := make(chan int, 2)
	took := make(chan time.Duration, 2)
	for range 2 {
		go func() {
			s := time.Now()
			r, err := get(client, p.URL+"/debug/pprof/profile?seconds=2", nil)
			if err != nil {
				codes <- 0
				took <- time.Since(s)
				return
			}
			codes <- r.status
			took <- time.Since(s)
		}()
	}
	got := map[int]int{}
	fastest := time.Hour
	for range 2 {
		got[<-codes]++
		fastest = min(fastest, <-took)
	}
	if got[http.StatusOK] != 1 || got[http.StatusTooManyRequests] != 1 {
		t.Errorf("two concurrent profiles answered %v, want one 200 and one 429", got)
	}
	if fastest > 1500*time.Millisecond {
		t.Errorf("the 429 took %s; it must not wait for the running profile", fastest)
	}
}
