package e2e

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// TestUpstreamCompression: the binary asks the upstream for an identity
// page by default and for gzip with --vllm.enable-compression, and serves
// the same values either way, as docs/flags.md says.
func TestUpstreamCompression(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): scrapes for seconds with and without gzip")
	}
	page := v1Page(1234, 567)
	gz := gzipOf(page)
	var mu sync.Mutex
	var asked []string
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ae := r.Header.Get("Accept-Encoding")
		mu.Lock()
		asked = append(asked, ae)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if strings.Contains(ae, "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(gz)
			return
		}
		_, _ = w.Write(page)
	}))
	uri := "http://" + ln.Addr().String() + "/metrics"
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "identity"},
		{[]string{"--vllm.enable-compression"}, "gzip"},
	} {
		mu.Lock()
		asked = nil
		mu.Unlock()
		p := testbin.Start(t, sidecarArgs(uri, fastInterval, fastTimeout, c.args...)...)
		var s series
		waitFor(t, settle, "a successful scrape", func() bool {
			s, _ = metrics(t, p)
			return s["vllm_up"] == 1
		})
		if got := s[`vllm:prompt_tokens_total{engine="0",model_name="m"}`]; got != 1234 {
			t.Errorf("%v: vllm:prompt_tokens_total = %v, want 1234", c.args, got)
		}
		_ = p.Stop(5 * time.Second)
		mu.Lock()
		for _, a := range asked {
			if a != c.want {
				t.Errorf("%v: the upstream was asked for Accept-Encoding %q, want %q", c.args, a, c.want)
			}
		}
		if len(asked) == 0 {
			t.Errorf("%v: the upstream was never asked", c.args)
		}
		mu.Unlock()
	}
}
