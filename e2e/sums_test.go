package e2e

import (
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// TestSumsOneRestartRuleAgainstTheBinary is issue 32's restart item
// against the binary, on the demo's two engines served page by page: a
// bucket of one engine one lower for a single scrape is held, not taken
// for a restart (the compatibility page's and the GenAI view's summed
// histograms stay cumulative at every read, no restart is counted, and
// once it is back every bucket is the plain sum); then a fast restart,
// counted past the old totals before the next scrape and announced by the
// page, adds the new counts to the old ones on the compatibility page,
// and the GenAI view counts the same requests. collector's
// TestSumsOneScrapeDip and TestSumsFastRestartAnnounced hold the same in
// process (and fail on the code before 3d09c4b).
func TestSumsOneRestartRuleAgainstTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("serves the binary a page at a time for seconds")
	}
	t.Parallel()
	// The page's clock starts at the binary's: a restart is announced by a
	// start time past the previous scrape, which the binary takes on its own.
	clock := &virtualClock{t: time.Now()}
	up, err := demo.New(demo.Options{Now: clock.Now, Seed: 5, Engines: 2})
	if err != nil {
		t.Fatal(err)
	}
	var page, once atomic.Pointer[[]byte] // once: served to the next scrape only
	sw := newSwitchable(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b := once.Swap(nil)
		if b == nil {
			b = page.Load()
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(*b)
	}))
	first := up.Page()
	page.Store(&first)
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, sw)
	routingAddr := testbin.FreeAddr(t)
	p := testbin.Start(t, "--vllm.scrape-uri=http://"+ln.Addr().String()+"/metrics",
		"--vllm.scrape-interval=200ms", "--vllm.timeout=200ms", "--web.routing-listen-address="+routingAddr)
	// serve makes b the page and waits until a scrape that began after it
	// is done (scrapes are serialised: the third request from now).
	serve := func(b []byte) {
		page.Store(&b)
		from := sw.requests.Load()
		waitFor(t, settle, "two scrapes of the new page", func() bool { return sw.requests.Load()-from >= 3 })
	}
	next := func() []byte { clock.Advance(time.Second); return up.Page() }
	sum := func(s series, name string) float64 {
		v := 0.0
		for k, x := range s {
			if k == name || strings.HasPrefix(k, name+"{") {
				v += x
			}
		}
		return v
	}
	views := func() (compat, genai series) {
		return mustParse(t, mustGet(t, "http://"+routingAddr+"/metrics").body), mustParse(t, mustGet(t, p.URL+"/metrics/genai").body)
	}
	const bucket = "vllm:e2e_request_latency_seconds_bucket"
	var last []byte
	for range 10 {
		last = next()
		serve(last)
	}

	// A one-scrape dip of engine 0's highest finite bucket.
	re := regexp.MustCompile(`(?m)^vllm:e2e_request_latency_seconds_bucket\{engine="0",le="([0-9.e+]+)",model_name="[^"]*"\} ([0-9.e+]+)$`)
	highest := func(b []byte) []int {
		ms := re.FindAllSubmatchIndex(b, -1)
		if len(ms) == 0 {
			t.Fatal("no finite bucket of engine 0 on the demo page")
		}
		return ms[len(ms)-1]
	}
	dip := next()
	m, was := highest(dip), highest(last)
	v, _ := strconv.ParseFloat(string(last[was[4]:was[5]]), 64)
	dip = slices.Concat(dip[:m[4]], []byte(strconv.FormatFloat(v-1, 'f', -1, 64)), dip[m[5]:])
	after := next()
	page.Store(&after)
	from := sw.requests.Load()
	once.Store(&dip)
	for sw.requests.Load()-from < 4 { // the dip, then the page after it, read at every turn
		compat, genai := views()
		cumulative(t, "compatibility page", compat, bucket)
		cumulative(t, "GenAI view", genai, "gen_ai_server_request_duration_seconds_bucket")
		time.Sleep(20 * time.Millisecond)
	}
	compat, _ := views()
	upstream := byLe(t, mustParse(t, after), bucket)
	for le, got := range byLe(t, compat, bucket) {
		if want := upstream[le]; got != want {
			t.Errorf("after the dip, compatibility page le=%v %v, want the plain sum %v", le, got, want)
		}
	}
	if s, _ := metrics(t, p); s["vllm_normalizer_upstream_restarts_detected_total"] != 0 {
		t.Errorf("a one-scrape dip was counted as %v restarts", s["vllm_normalizer_upstream_restarts_detected_total"])
	}

	// A fast restart: 45 minutes of counting after it before the next scrape.
	const hits, count = "vllm:prefix_cache_hits_total", "vllm:e2e_request_latency_seconds_count"
	before := mustParse(t, after)
	clock.Advance(30 * time.Second) // past the last scrape, however slow the machine
	up.Restart()
	var restarted []byte
	for range 45 * 60 {
		restarted = next()
	}
	now := mustParse(t, restarted)
	for _, name := range []string{hits, count} {
		if sum(now, name) <= sum(before, name) {
			t.Fatalf("%s counted %v since the restart, not past its %v: no fast restart", name, sum(now, name), sum(before, name))
		}
	}
	serve(restarted)
	if s, _ := metrics(t, p); s["vllm_normalizer_upstream_restarts_detected_total"] < 1 {
		t.Fatal("the restart the page announces was not detected")
	}
	compat, genai := views()
	for _, name := range []string{hits, count} {
		if got, want := sum(compat, name), sum(before, name)+sum(now, name); got != want {
			t.Errorf("compatibility page %s = %v after a fast restart, want %v (%v before it plus %v since)", name, got, want, sum(before, name), sum(now, name))
		}
	}
	if g, w := sum(genai, "gen_ai_server_request_duration_seconds_count"), sum(compat, count); g != w {
		t.Errorf("the GenAI view counts %v requests, the compatibility page %v", g, w)
	}
}

// byLe sums the buckets named name per le.
func byLe(t *testing.T, s series, name string) map[float64]float64 {
	t.Helper()
	out := map[float64]float64{}
	for k, v := range s {
		if !strings.HasPrefix(k, name+"{") {
			continue
		}
		i := strings.Index(k, `le="`) + 4
		le, err := strconv.ParseFloat(k[i:i+strings.IndexByte(k[i:], '"')], 64)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		out[le] += v
	}
	return out
}

// cumulative checks that the buckets named name (one model) grow with le.
func cumulative(t *testing.T, what string, s series, name string) {
	t.Helper()
	bs := byLe(t, s, name)
	if len(bs) < 3 {
		t.Fatalf("%s: %d buckets of %s", what, len(bs), name)
	}
	les := slices.Sorted(maps.Keys(bs))
	for i := 1; i < len(les); i++ {
		if bs[les[i]] < bs[les[i-1]] {
			t.Fatalf("%s: %s is not cumulative: le=%v holds %v, le=%v %v", what, name, les[i-1], bs[les[i-1]], les[i], bs[les[i]])
		}
	}
}
