package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fos-study/vllm-normalizer/collector"
	"github.com/fos-study/vllm-normalizer/diagnosis"
)

// landingMux is the main mux of a sidecar started with args.
func landingMux(t *testing.T, args ...string) http.Handler {
	t.Helper()
	m := testMapper(t)
	f, err := parseFlags(args, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	coll, err := collector.New(collector.Config{ScrapeURI: "http://127.0.0.1:1/metrics", Interval: f.scrapeInterval, MaxBodyBytes: int64(f.maxBody),
		Windows: uniqueWindows(f.windows), Mapper: m, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	diag, err := diagnosis.New(f.diagnosisOptions())
	if err != nil {
		t.Fatal(err)
	}
	mux, err := newMux(f, coll, diag, func() error { return nil }, "")
	if err != nil {
		t.Fatal(err)
	}
	return mux
}

func serveGet(h http.Handler, path string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

var hrefs = regexp.MustCompile(`href="([^"]*)"`)

// TestLandingPprofLinks: the landing page links to profiles only when they
// are served, every link it has answers (none 404), none leaves the
// sidecar, and the CPU profile it offers is within the bound.
func TestLandingPprofLinks(t *testing.T) {
	for _, c := range []struct {
		args  []string
		pprof bool
	}{
		{nil, false},
		{[]string{"--web.enable-pprof", "--web.write-timeout=4s"}, true},
	} {
		mux := landingMux(t, c.args...)
		code, body := serveGet(mux, "/")
		if code != http.StatusOK {
			t.Fatalf("%v: landing page %d", c.args, code)
		}
		if got := strings.Contains(body, "debug/pprof"); got != c.pprof {
			t.Errorf("%v: landing page mentions debug/pprof: %v, want %v", c.args, got, c.pprof)
		}
		links := hrefs.FindAllStringSubmatch(body, -1)
		if len(links) < 5 {
			t.Fatalf("%v: only %d links on the landing page", c.args, len(links))
		}
		for _, l := range links {
			href := l[1]
			if !strings.HasPrefix(href, "/") || strings.HasPrefix(href, "//") {
				t.Errorf("%v: link %q leaves the sidecar", c.args, href)
				continue
			}
			if strings.Contains(href, "/debug/pprof/profile") {
				s, err := strconv.Atoi(strings.TrimPrefix(href, "/debug/pprof/profile?seconds="))
				if err != nil || s != 2 {
					t.Errorf("%v: CPU profile link %q, want seconds=2 (half of --web.write-timeout=4s)", c.args, href)
				}
				continue // timed; served in TestPprofBound
			}
			// The routing view is 503 before the first scrape; a link
			// must lead somewhere, not to 404.
			if code, _ := serveGet(mux, href); code == http.StatusNotFound || code >= 500 && code != http.StatusServiceUnavailable {
				t.Errorf("%v: link %s answers %d", c.args, href, code)
			}
		}
		if strings.Contains(body, "pprof.me") || strings.Contains(body, "seconds=60") {
			t.Errorf("%v: the toolkit's profiling box is on the page", c.args)
		}
		if code, _ := serveGet(mux, "/debug/pprof/heap"); (code == http.StatusOK) != c.pprof {
			t.Errorf("%v: /debug/pprof/heap answered %d", c.args, code)
		}
	}
}

// TestPprofBound: a timed profile as long as --web.write-timeout or longer
// (Go's default CPU profile of 30 s under the default 10 s) is refused
// with 400 at once, naming the flag; a shorter one is served; nonsense
// durations are refused too.
func TestPprofBound(t *testing.T) {
	mux := landingMux(t, "--web.enable-pprof")
	for _, path := range []string{
		"/debug/pprof/profile", // Go's default of 30 s
		"/debug/pprof/profile?seconds=10",
		"/debug/pprof/trace?seconds=30",
		"/debug/pprof/heap?seconds=11",
		"/debug/pprof/profile?seconds=abc",
		"/debug/pprof/profile?seconds=-1",
	} {
		start := time.Now()
		code, body := serveGet(mux, path)
		if code != http.StatusBadRequest {
			t.Errorf("%s answered %d, want 400", path, code)
		}
		if !strings.Contains(body, "seconds=5") {
			t.Errorf("%s: the answer %q does not suggest ?seconds=5", path, body)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s took %s to be refused", path, took)
		}
	}
	if _, body := serveGet(mux, "/debug/pprof/profile"); !strings.Contains(body, "--web.write-timeout=10s") {
		t.Errorf("the refusal does not name the bound's flag: %q", body)
	}
	if code, body := serveGet(mux, "/debug/pprof/profile?seconds=1"); code != http.StatusOK || len(body) == 0 {
		t.Errorf("a 1 s CPU profile answered %d with %d bytes, want 200 and a profile", code, len(body))
	}
}

// TestPprofOneAtATime: while a timed profile runs, a second one is
// answered 429 at once with Retry-After; untimed profiles are still
// served; after the first ends the next is served.
func TestPprofOneAtATime(t *testing.T) {
	g := &pprofGuard{bound: 10 * time.Second}
	mux := http.NewServeMux()
	g.register(mux)
	first := make(chan int, 1)
	go func() {
		code, _ := serveGet(mux, "/debug/pprof/profile?seconds=2")
		first <- code
	}()
	// Wait until the first holds the slot.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		g.mu.Lock()
		running := !g.until.IsZero()
		g.mu.Unlock()
		if running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first profile did not start")
		}
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/trace?seconds=1", nil))
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("a second timed profile answered %d, want 429", rec.Code)
	}
	if ra, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || ra < 1 || ra > 2 {
		t.Errorf("Retry-After %q, want 1 or 2 seconds", rec.Header().Get("Retry-After"))
	}
	if code, _ := serveGet(mux, "/debug/pprof/profile?seconds=1"); code != http.StatusTooManyRequests {
		t.Errorf("a second CPU profile answered %d, want 429", code)
	}
	// Judged by order, not by a wall-clock bound a busy machine stretches:
	// the 429 must come while the first profile still holds the slot.
	g.mu.Lock()
	held := !g.until.IsZero()
	g.mu.Unlock()
	if !held {
		t.Errorf("the 429 came only after the running profile had ended")
	}
	if code, _ := serveGet(mux, "/debug/pprof/goroutine"); code != http.StatusOK {
		t.Errorf("goroutine profile during a CPU profile answered %d, want 200", code)
	}
	select {
	case code := <-first:
		if code != http.StatusOK {
			t.Errorf("the first profile answered %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the first profile did not end")
	}
	if code, _ := serveGet(mux, "/debug/pprof/trace?seconds=0.1"); code != http.StatusOK {
		t.Errorf("a profile after the first ended answered %d, want 200", code)
	}
}
