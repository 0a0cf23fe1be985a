package prometheus_test

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// genaiHist is one vLLM V1 histogram of the GenAI upstream, with vLLM's
// default bounds, and the OpenTelemetry view's name for it and its advised
// bounds (nil where the view keeps the engine's). Each engine observes
// fixed values at fixed rates (per second).
type genaiHist struct {
	engine, view string
	les          []float64 // finite bounds, as vLLM's defaults
	advised      []float64
	obs          [2][]genaiObs
}

type genaiObs struct{ value, perSecond float64 }

var (
	vllmTTFTBounds = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	vllmTPOTBounds = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	vllmE2EBounds  = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// genaiHists: values chosen so that the advised bounds cut some engine
// buckets (0.3 s TTFT falls in the engine's (0.25, 0.5], 15 s in (10, 20],
// which the advised bounds only have as (10, +Inf]).
var genaiHists = []genaiHist{
	{"vllm:time_to_first_token_seconds", "gen_ai_server_time_to_first_token_seconds", vllmTTFTBounds,
		[]float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0},
		[2][]genaiObs{{{0.03, 2}, {0.07, 1}, {0.3, 1}, {1.5, 0.5}, {15, 0.1}}, {{0.009, 1}, {0.045, 1}, {0.6, 2}, {3, 0.5}}}},
	{"vllm:request_time_per_output_token_seconds", "gen_ai_server_time_per_output_token_seconds", vllmTPOTBounds,
		[]float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5},
		[2][]genaiObs{{{0.02, 3}, {0.06, 1}}, {{0.012, 1}, {0.2, 1}, {3, 0.2}}}},
	{"vllm:e2e_request_latency_seconds", "gen_ai_server_request_duration_seconds", vllmE2EBounds, nil,
		[2][]genaiObs{{{0.4, 2}, {2.2, 1}, {12, 0.5}}, {{0.9, 1}, {6, 1}, {100, 0.1}}}},
}

// cumRates is each bound's cumulative observations per second of engine e
// (the last for +Inf), and the observed total per second.
func (h genaiHist) cumRates(e int, les []float64) ([]float64, float64) {
	cum := make([]float64, len(les)+1)
	sum := 0.0
	for _, o := range h.obs[e] {
		sum += o.value * o.perSecond
		for i, le := range les {
			if o.value <= le {
				cum[i] += o.perSecond
			}
		}
		cum[len(les)] += o.perSecond
	}
	return cum, sum
}

// vllmBound prints a bound as vLLM (Python) does: 1.0, 0.025.
func vllmBound(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// genaiUpstream serves the histograms above for engines "0" and "1". On
// its first request after restart, engine 1 restarts: its counts start
// again from zero at the time of the previous request (so nothing observed
// is lost to a reader that counts a drop as a restart), engine 0 counts on.
type genaiUpstream struct {
	mu       sync.Mutex
	start    time.Time
	pending  bool // restart engine 1 on the next request
	restarts int
	last     float64
	origin   [2]float64
}

// restart restarts engine 1 on the next request.
func (u *genaiUpstream) restart() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.pending = true
}

func (u *genaiUpstream) restarted() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.restarts
}

func (u *genaiUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	now := time.Since(u.start).Seconds()
	if u.pending && u.last > 0 {
		u.origin[1] = u.last
		u.pending = false
		u.restarts++
	}
	u.last = now
	elapsed := [2]float64{now - u.origin[0], now - u.origin[1]}
	u.mu.Unlock()
	var b strings.Builder
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	b.WriteString("# HELP vllm:num_requests_running Number of requests in model execution batches.\n# TYPE vllm:num_requests_running gauge\n")
	for e := range 2 {
		fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"%d\",model_name=%q} %d\n", e, truthModel, 3+e)
	}
	for _, h := range genaiHists {
		fmt.Fprintf(&b, "# HELP %s Known-truth histogram.\n# TYPE %s histogram\n", h.engine, h.engine)
		for e := range 2 {
			cum, sum := h.cumRates(e, h.les)
			lbl := func(le string) string {
				if le == "" {
					return fmt.Sprintf(`{engine="%d",model_name=%q}`, e, truthModel)
				}
				return fmt.Sprintf(`{engine="%d",le=%q,model_name=%q}`, e, le, truthModel)
			}
			for i, le := range h.les {
				fmt.Fprintf(&b, "%s_bucket%s %s\n", h.engine, lbl(vllmBound(le)), f(cum[i]*elapsed[e]))
			}
			fmt.Fprintf(&b, "%s_bucket%s %s\n", h.engine, lbl("+Inf"), f(cum[len(h.les)]*elapsed[e]))
			fmt.Fprintf(&b, "%s_sum%s %s\n", h.engine, lbl(""), f(sum*elapsed[e]))
			fmt.Fprintf(&b, "%s_count%s %s\n", h.engine, lbl(""), f(cum[len(h.les)]*elapsed[e]))
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// classicQuantile is histogram_quantile's rule on one classic histogram:
// cumulative counts at les, the last one +Inf's.
func classicQuantile(q float64, les, cum []float64) float64 {
	total := cum[len(cum)-1]
	rank := q * total
	b := slices.IndexFunc(cum, func(c float64) bool { return c >= rank })
	if b == len(cum)-1 {
		return les[len(les)-1]
	}
	lower, below := 0.0, 0.0
	if b > 0 {
		lower, below = les[b-1], cum[b-1]
	}
	return lower + (les[b]-lower)*(rank-below)/(cum[b]-below)
}

// leMatcher is a regexp matching the bounds and +Inf however a bound is
// spelled (Prometheus 3 reads "1" and "1.0" alike, older ones do not).
func leMatcher(les []float64) string {
	var alts []string
	for _, le := range les {
		alts = append(alts, strings.ReplaceAll(vllmBound(le), ".", `\\.`), strings.ReplaceAll(strconv.FormatFloat(le, 'f', -1, 64), ".", `\\.`))
	}
	return strings.Join(slices.Compact(alts), "|") + `|\\+Inf`
}

// TestGenAIAgreesWithPrometheus is issue 25's proof: a real Prometheus
// scraping /metrics/genai computes the same histogram_quantile, and the
// same mean, as over the engines' own histograms on /metrics restricted to
// the view's bounds, per model over both engines, across a restart of one
// engine; and both equal the known truth. The view's histograms never go
// down while the engine's restarted.
func TestGenAIAgreesWithPrometheus(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()

	up := &genaiUpstream{start: time.Now()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(up)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	side := testbin.Start(t, "--vllm.scrape-uri="+srv.URL+"/metrics", "--vllm.scrape-interval=1s", "--genai.server-address=vllm.test.svc:8000")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar log:\n%s", side.Logs())
		}
	})
	prom := startPrometheus(t, promBin, []scrapeJob{
		{Name: "sidecar", Target: side.Addr},
		{Name: "genai", Target: side.Addr, MetricsPath: "/metrics/genai"},
	}, nil)
	prom.waitFor(t, `gen_ai_server_time_to_first_token_seconds_count{job="genai"}`, 20*time.Second)
	first := time.Now()
	// The 30s range must lie inside Prometheus's own samples and hold
	// engine 1's restart.
	time.Sleep(8 * time.Second)
	up.restart()
	if d := time.Until(first.Add(32 * time.Second)); d > 0 {
		time.Sleep(d)
	}
	if n := up.restarted(); n != 1 {
		t.Fatalf("engine 1 restarted %d times, want 1 (the sidecar scraped too slowly?)", n)
	}
	at := time.Now().Add(-500 * time.Millisecond).Truncate(time.Second)
	const w = "30s"

	one := func(q string) float64 {
		t.Helper()
		res := prom.mustQuery(t, q, at)
		if len(res) != 1 {
			t.Fatalf("%s: %d series, want 1: %v", q, len(res), res)
		}
		return res[0].Value
	}
	if n := one(fmt.Sprintf(`sum(resets(vllm:time_to_first_token_seconds_count{job="sidecar",engine="1"}[%s]))`, w)); n < 1 {
		t.Fatalf("engine 1 did not restart inside the window (%v resets): the test would prove nothing about restarts", n)
	}
	compared := 0
	for _, h := range genaiHists {
		bounds := h.advised
		if bounds == nil {
			bounds = h.les
		}
		// The view's series carry the attributes and the model.
		labels := prom.mustQuery(t, h.view+`_count{job="genai"}`, at)
		if len(labels) != 1 || labels[0].Metric["gen_ai_request_model"] != truthModel || labels[0].Metric["gen_ai_provider_name"] != "vllm" ||
			labels[0].Metric["gen_ai_operation_name"] != "chat" || labels[0].Metric["server_address"] != "vllm.test.svc" || labels[0].Metric["server_port"] != "8000" {
			t.Errorf("%s_count: %v, want one series of model %s with the GenAI attributes", h.view, labels, truthModel)
		}
		// Exactly the view's bounds, no other.
		les := prom.mustQuery(t, fmt.Sprintf(`count by (le) (%s_bucket{job="genai"})`, h.view), at)
		if len(les) != len(bounds)+1 {
			t.Errorf("%s has %d bounds, want %d (+Inf included): %v", h.view, len(les), len(bounds)+1, les)
		}
		for _, part := range []string{"_bucket", "_sum", "_count"} {
			if n := one(fmt.Sprintf(`sum(resets(%s%s{job="genai"}[%s]))`, h.view, part, w)); n != 0 {
				t.Errorf("%s%s went down %v times across engine 1's restart", h.view, part, n)
			}
		}
		// The truth: both engines' rates at the view's bounds.
		cum := make([]float64, len(bounds)+1)
		sum := 0.0
		for e := range 2 {
			c, s := h.cumRates(e, bounds)
			for i := range c {
				cum[i] += c[i]
			}
			sum += s
		}
		for _, q := range []float64{0.5, 0.9, 0.99} {
			view := fmt.Sprintf(`histogram_quantile(%g, sum by (le) (rate(%s_bucket{job="genai"}[%s])))`, q, h.view, w)
			engine := fmt.Sprintf(`histogram_quantile(%g, sum by (le) (rate(%s_bucket{job="sidecar",le=~"%s"}[%s])))`, q, h.engine, leMatcher(bounds), w)
			v, e := one(view), one(engine)
			truth := classicQuantile(q, bounds, cum)
			compared++
			if !nearly(v, e, 1e-9) {
				t.Errorf("q%g of %s: the view gives %.17g (%s), the engine's histogram at the shared bounds %.17g (%s)", q, h.view, v, view, e, engine)
			}
			if !nearly(v, truth, 1e-6) {
				t.Errorf("q%g of %s: Prometheus over the view %.17g, truth %.17g", q, h.view, v, truth)
			}
		}
		mv := one(fmt.Sprintf(`sum(rate(%s_sum{job="genai"}[%s])) / sum(rate(%s_count{job="genai"}[%s]))`, h.view, w, h.view, w))
		me := one(fmt.Sprintf(`sum(rate(%s_sum{job="sidecar"}[%s])) / sum(rate(%s_count{job="sidecar"}[%s]))`, h.engine, w, h.engine, w))
		if !nearly(mv, me, 1e-9) || !nearly(mv, sum/cum[len(cum)-1], 1e-6) {
			t.Errorf("mean of %s: view %.17g, engine %.17g, truth %.17g", h.view, mv, me, sum/cum[len(cum)-1])
		}
	}
	t.Logf("compared %d quantiles of the view with the engine's histograms and the truth", compared)
}

// nearly reports whether a and b agree to rel (relative), or both are 0.
func nearly(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))+1e-15
}
