package e2e

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// loadDuration is how long TestLoad reads: E2E_LOAD_SECONDS, default 10.
func loadDuration(t *testing.T) time.Duration {
	s := os.Getenv("E2E_LOAD_SECONDS")
	if s == "" {
		return 10 * time.Second
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("E2E_LOAD_SECONDS=%q is not a positive number of seconds", s)
	}
	return time.Duration(n) * time.Second
}

// loadCap is the longest TestLoad reads when a busy machine is slow to make
// its requests.
const loadCap = 2 * time.Minute

// rssGrowthMargin is how much the sidecar's resident set may grow between
// the end of the warm-up and the end of the load.
const rssGrowthMargin = 16 * mib

// TestLoad: 50 clients read /metrics and /metrics/routing, plain and
// gzipped, while every other scrape fails with a 500. Every answer of
// /metrics must be 200 and a valid page; the routing view answers either
// a valid page or, after a failed scrape, 503 naming the failure. The
// resident set must stay flat once warm.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): reads under load for E2E_LOAD_SECONDS (10 s)")
	}
	const clients = 50
	d := loadDuration(t)
	warmup := min(2*time.Second, d/3)

	good := fixture(t, "13")
	var n atomic.Int64
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			http.Error(w, "flapping", http.StatusInternalServerError)
			return
		}
		static(good).ServeHTTP(w, r)
	})
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, up)
	// 500 ms between scrapes, not 200: the readers (in this process, with
	// the race detector) keep both cores busy, and the upstream, in this
	// process too, is answered late.
	// The timeout is the whole interval: the most headroom there is.
	const interval = 500 * time.Millisecond
	p := testbin.Start(t, sidecarArgs("http://"+ln.Addr().String()+"/metrics", interval, interval)...)
	waitFor(t, settle, "routing view 200", func() bool {
		return mustGet(t, p.URL+"/metrics/routing").status == http.StatusOK
	})

	// Pages are immutable between scrapes, so most answers repeat one
	// another byte for byte: each distinct body is parsed once.
	var (
		validated sync.Map // sha256 of a body -> error or nil
		requests  atomic.Int64
		failed    atomic.Int64
		// routing503: answers of the routing view after a failed scrape
		routing503 atomic.Int64
		// stale503: answers of the routing view because the last success
		// was more than three intervals old, as they said: only right if
		// scrapes timed out (judged at the end).
		stale503 atomic.Int64
		errMu    sync.Mutex
		errs     []string
	)
	fail := func(format string, args ...any) {
		failed.Add(1)
		errMu.Lock()
		if len(errs) < 10 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
		errMu.Unlock()
	}
	transport := &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: clients}
	defer transport.CloseIdleConnections()
	// Answers are judged for being right, not quick: a generous timeout.
	c := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	// The load lasts d and at least minRequests requests: a busy machine
	// (load 30 on 2 cores) serves these clients a few hundred requests in
	// 10 s, so there it reads on, up to loadCap, until the load happened.
	const minRequests = clients * 10
	begin := time.Now()
	hardStop := begin.Add(max(d, loadCap))
	more := func() bool {
		now := time.Now()
		return now.Before(hardStop) && (now.Before(begin.Add(d)) || requests.Load() < minRequests)
	}
	var wg sync.WaitGroup
	for i := range clients {
		path := "/metrics"
		if i%2 == 1 {
			path = "/metrics/routing"
		}
		var header map[string]string
		if i%4 >= 2 {
			header = map[string]string{"Accept-Encoding": "gzip"}
		}
		wg.Go(func() {
			for more() {
				requests.Add(1)
				r, err := get(c, p.URL+path, header)
				if err != nil {
					fail("%s: %v", path, err)
					continue
				}
				if path == "/metrics/routing" && r.status == http.StatusServiceUnavailable && strings.Contains(string(r.body), "last scrape of vLLM failed") {
					routing503.Add(1)
					continue
				}
				if path == "/metrics/routing" && r.status == http.StatusServiceUnavailable && staleFor(r.body) > 3*interval {
					stale503.Add(1)
					continue
				}
				if r.status != http.StatusOK {
					fail("%s answered %d: %s", path, r.status, r.body)
					continue
				}
				if gz := r.header.Get("Content-Encoding") == "gzip"; gz != (header != nil) {
					fail("%s: gzip requested %v, Content-Encoding %q", path, header != nil, r.header.Get("Content-Encoding"))
				}
				sum := sha256.Sum256(r.body)
				v, seen := validated.Load(sum)
				if !seen {
					_, err := parsePage(r.body)
					v, _ = validated.LoadOrStore(sum, err)
				}
				if v != nil {
					if err, _ := v.(error); err != nil {
						fail("%s: invalid page: %v", path, err)
					}
				}
				if !strings.Contains(string(r.body), "\nvllm_up ") && !strings.HasPrefix(string(r.body), "vllm_up ") {
					fail("%s: page without vllm_up", path)
				}
			}
		})
	}

	// Resident set: one sample at the end of the warm-up, one at the end.
	pid := p.Cmd.Process.Pid
	time.Sleep(warmup)
	rssWarm := procStatus(t, pid, "VmRSS")
	wg.Wait()
	took := time.Since(begin)
	rssEnd := procStatus(t, pid, "VmRSS")
	distinct := 0
	validated.Range(func(any, any) bool { distinct++; return true })

	t.Logf("%d requests in %s by %d clients (%.0f/s), %d distinct pages validated; VmRSS %.1f MiB after %s warm-up, %.1f MiB at the end (margin %d MiB); VmHWM %.1f MiB",
		requests.Load(), took.Round(time.Millisecond), clients, float64(requests.Load())/took.Seconds(), distinct,
		float64(rssWarm)/mib, warmup, float64(rssEnd)/mib, rssGrowthMargin/mib, float64(procStatus(t, pid, "VmHWM"))/mib)
	if routing503.Load() == 0 {
		t.Error("the routing view never answered 503 although every other scrape failed")
	}
	if f := failed.Load(); f > 0 {
		t.Errorf("%d of %d requests failed, e.g.:\n%s", f, requests.Load(), strings.Join(errs, "\n"))
	}
	if requests.Load() < minRequests {
		t.Errorf("only %d requests were made in %s, want %d; the load did not happen", requests.Load(), took.Round(time.Millisecond), minRequests)
	}
	if distinct < 4 {
		t.Errorf("only %d distinct pages were seen; the upstream did not flap under the readers", distinct)
	}
	if rssEnd > rssWarm+rssGrowthMargin {
		t.Errorf("VmRSS grew from %.1f MiB to %.1f MiB under steady load, more than %d MiB", float64(rssWarm)/mib, float64(rssEnd)/mib, rssGrowthMargin/mib)
	}
	s, _ := metrics(t, p)
	t.Logf("scrape failures: %v", s.with("vllm_normalizer_scrape_failures_total"))
	if s.failures("http_status") == 0 {
		t.Error("the upstream never failed a scrape; the test did not flap")
	}
	// Every other scrape fails, so the last success is one interval old
	// at most, plus a scrape: only scrapes that timed out on a busy
	// machine make it older than three.
	if n := stale503.Load(); n > 0 {
		t.Logf("%d routing answers were 503 for data older than three intervals, after %v scrapes timed out", n, s.failures("timeout"))
		if s.failures("timeout") == 0 {
			t.Errorf("%d routing answers were 503 for stale data, yet no scrape timed out", n)
		}
	}
	if p.Exited() {
		t.Fatalf("the sidecar exited\n%s", p.Logs())
	}
}

// staleFor is the age a 503 of the routing view says the last successful
// scrape had, 0 if it says none.
func staleFor(body []byte) time.Duration {
	_, rest, ok := strings.Cut(string(body), "the last successful scrape of vLLM is ")
	if !ok {
		return 0
	}
	age, _, _ := strings.Cut(rest, " ")
	d, err := time.ParseDuration(age)
	if err != nil {
		return 0
	}
	return d
}
