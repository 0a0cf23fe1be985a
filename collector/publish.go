package collector

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/serve"
)

// snapshot is what the handlers serve until the next scrape ends.
type snapshot struct {
	page    *serve.Page
	routing *serve.Page // what endpoint pickers read (/metrics/routing)
	compat  *serve.Page // the routing listener's and the proxy's page
	genai   *serve.Page
	// asleep: every engine sleeps, in these states; the routing view
	// answers 503.
	asleep []string
	// failed is the reason of the scrape this snapshot follows when it
	// failed ("" after a success or before the first scrape): the routing
	// view answers 503 from that scrape on, not three intervals later.
	failed string
	// engines builds the routing view of one engine on demand.
	engines *engineViews
}

// publish builds the snapshot served until the next scrape ends. res is nil
// after a failed scrape: then only the sidecar's own metrics are served.
// Calls are serialised: New makes the first, ScrapeOnce (holding c.mu)
// every other.
func (c *Collector) publish(res *scrapeResult, now time.Time) {
	own := c.metrics.families()
	var ownRouting []exposition.Family
	for _, f := range own {
		if f.Name == "vllm_up" || f.Name == HistoryLimitedName {
			ownRouting = append(ownRouting, f)
		}
	}
	if age, ok := c.upstreamAge(now); ok {
		f := exposition.Family{
			Name: "vllm_normalizer_upstream_age_seconds",
			Help: "Seconds between the last successful scrape of vLLM and the moment this page was prepared.",
			Type: model.MetricTypeGauge,
			Samples: []exposition.Sample{{
				Labels: upstreamAgeLabels,
				Value:  age.Seconds(),
			}},
		}
		own = append(own, f)
		ownRouting = append(ownRouting, f)
	}

	var page, routing, compat [][]exposition.Family
	var gen []exposition.Family
	var asleep []string
	failed := ""
	engines := noEngineViews(c.cfg.Role)
	if res != nil {
		page, routing, compat, gen, asleep = res.page, res.routing, res.compat, res.genai, res.asleep
		engines = newEngineViews(res.routingIn, ownRouting, c.cfg.Role)
	} else if c.lastSuccess.Load() != 0 || c.lastReason != "" {
		failed = cmp.Or(c.lastReason, "unknown")
	}
	s := &snapshot{
		// The Gatherer's families (the version, Go and process
		// collectors) join the full page when it is first read (see
		// runtimeFamilies).
		page:    c.pageEnc.Prepare(merge(append(page, own)...), c.withRuntimeFamilies),
		routing: c.routingEnc.Prepare(merge(append(routing, ownRouting)...), nil),
		compat:  c.compatEnc.Prepare(merge(append(compat, ownRouting)...), nil),
		// After a failed scrape the GenAI view is empty: its series are
		// withdrawn, never served stale.
		genai:   c.genaiEnc.Prepare(gen, nil),
		asleep:  asleep,
		failed:  failed,
		engines: engines,
	}
	// Both pages are encoded by their first reader, as their gzip already
	// was: a view no router reads costs no encoding, and a router polling
	// many times a second pays one encoding per scrape, as before, its
	// first read after a scrape waiting for it (~0.1 ms on one engine).
	c.snap.Store(s)
}

var upstreamAgeLabels = labels.FromStrings(model.MetricNameLabel, "vllm_normalizer_upstream_age_seconds")

// withRuntimeFamilies adds the Gatherer's families to a page being
// encoded; a name the page already has keeps the page's family.
func (c *Collector) withRuntimeFamilies(fams []exposition.Family) []exposition.Family {
	return merge(fams, c.runtimeFamilies())
}

// gatherEvery is how long the Gatherer's families (the sidecar process
// itself) are reused before being gathered again, on the collector's clock.
const gatherEvery = time.Second

// runtimeFamilies returns the Gatherer's families (the version, Go and
// process collectors), gathered at most once per gatherEvery. They
// describe the sidecar process, not a scrape, so they are gathered when a
// full page is first read rather than when it is published: their cost
// follows the readers of /metrics (Prometheus, every 15 s or so), not the
// scrape interval, and what a reader gets is at most gatherEvery old.
func (c *Collector) runtimeFamilies() []exposition.Family {
	c.runtimeMu.Lock()
	defer c.runtimeMu.Unlock()
	now := c.cfg.Now()
	if c.runtimeFams != nil && now.Sub(c.runtimeAt) < gatherEvery && !now.Before(c.runtimeAt) {
		return c.runtimeFams
	}
	c.runtimeFams, c.runtimeAt = c.gather(c.cfg.Gatherer), now
	return c.runtimeFams
}

func (c *Collector) gather(g prometheus.Gatherer) []exposition.Family {
	mfs, err := g.Gather()
	if err != nil {
		c.cfg.Logger.Error("gathering the sidecar's own metrics failed", "err", err)
	}
	return fromDTO(mfs)
}

func (c *Collector) upstreamAge(now time.Time) (time.Duration, bool) {
	last := c.lastSuccess.Load()
	if last == 0 {
		return 0, false
	}
	return now.Sub(time.Unix(0, last)), true
}

// merge returns the families of every part in one new slice, sorted by
// name. A name two parts use keeps the earlier part's family: vLLM's own
// process_* series, for instance, are what a dashboard means by that
// name, not the sidecar's.
func merge(parts ...[]exposition.Family) []exposition.Family {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]exposition.Family, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	// Stable: of families of one name, the earliest part's comes first.
	slices.SortStableFunc(out, func(a, b exposition.Family) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b exposition.Family) bool { return a.Name == b.Name })
}

// MetricsHandler serves the full page: vLLM's families under current names,
// derived gauges, statuses and the sidecar's own metrics.
func (c *Collector) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve.Write(w, r, c.snap.Load().page)
	})
}

// GenAIHandler serves the OpenTelemetry GenAI view: the gen_ai_server_*
// histograms of the last successful scrape, nothing after a failed one.
func (c *Collector) GenAIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve.Write(w, r, c.snap.Load().genai)
	})
}

// RoutingHandler serves the small routing view. It answers 503 from the
// first failed scrape on (a router must not read a page without vLLM's
// series as an idle server), and when the last successful scrape is older
// than three intervals (a scrape loop that stopped), so that a router's
// own staleness handling takes over instead of trusting old numbers.
func (c *Collector) RoutingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.refuseRouting(w) {
			return
		}
		serve.Write(w, r, c.snap.Load().routing)
	})
}

// CompatHandler serves the compatibility page: the routing view and
// everything else the routers that read a fixed path read (legacy gauges,
// summed counters and histograms, derived gauges), for the routing
// listener and the proxy's /metrics. 503 as RoutingHandler.
func (c *Collector) CompatHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.refuseRouting(w) {
			return
		}
		serve.Write(w, r, c.snap.Load().compat)
	})
}

// RouterPaths are the paths other than /metrics that routers ask of the
// routing listener (AIBrix asks TensorRT-LLM pods for /prometheus/metrics).
func (c *Collector) RouterPaths() []string { return c.readers.Paths() }

// refuseRouting answers 503 when the routing view must not be served: no
// successful scrape yet, the last one older than three intervals, or every
// engine asleep. It reports whether it answered.
func (c *Collector) refuseRouting(w http.ResponseWriter) bool {
	age, ok := c.upstreamAge(c.cfg.Now())
	if !ok || age > 3*c.cfg.Interval {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(c.cfg.Interval.Seconds()))))
		w.WriteHeader(http.StatusServiceUnavailable)
		if !ok {
			_, _ = w.Write([]byte("vLLM has not been scraped successfully yet; see vllm_normalizer_scrape_failures_total on /metrics\n"))
			return true
		}
		_, _ = w.Write([]byte("the last successful scrape of vLLM is " + age.Truncate(time.Millisecond).String() + " old (more than three scrape intervals); see vllm_normalizer_scrape_failures_total on /metrics\n"))
		return true
	}
	snap := c.snap.Load()
	if snap.failed != "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(c.cfg.Interval.Seconds()))))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("the last scrape of vLLM failed (reason " + snap.failed + "); the last successful one is " + age.Truncate(time.Millisecond).String() + " old; see vllm_normalizer_scrape_failures_total on /metrics\n"))
		return true
	}
	if len(snap.asleep) > 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(c.cfg.Interval.Seconds()))))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("every engine of the upstream is asleep (sleep_state " + strings.Join(snap.asleep, ", ") + "): it reports no load but serves nothing; see " + AsleepName + " on /metrics\n"))
		return true
	}
	return false
}
