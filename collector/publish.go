package collector

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/genai"
	"github.com/fos-study/vllm-normalizer/routing"
	"github.com/fos-study/vllm-normalizer/serve"
)

// snapshot is what the handlers serve until the next scrape ends.
type snapshot struct {
	page *serve.Page
	// parts are what page is encoded from but the Gatherer's families,
	// merged into one sorted page by full when first read.
	parts    [][]exposition.Family
	order    *keptOrder // how parts are merged (the collector's, for every snapshot)
	fullOnce sync.Once
	fullFams []exposition.Family
	selected selections
	routing  *serve.Page // what endpoint pickers read (/metrics/routing)
	compat   *serve.Page // the routing listener's and the proxy's page
	genai    *serve.Page
	// asleep: every engine sleeps, in these states; the routing view
	// answers 503.
	asleep []string
	// failed is the reason of the scrape this snapshot follows when it
	// failed ("" after a success or before the first scrape): the routing
	// view answers 503 from that scrape on, not three intervals later.
	failed string
	// engines builds the routing view of one engine on demand.
	engines *engineViews
	// at is when the snapshot was published: the time of its samples for
	// readers that take families rather than a page (Families).
	at time.Time
	// restarts are the restarts announced up to this snapshot, and
	// upstream the families of the upstream's page (Published.RestartedAt).
	restarts *restartLog
	upstream []exposition.Family
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

	var page [][]exposition.Family
	var views *readerViews
	var asleep []string
	var upstream []exposition.Family
	failed := ""
	engines := noEngineViews(c.cfg.Role)
	if res != nil {
		page, views, asleep = res.page, res.views, res.asleep
		upstream = res.page[0]
		engines = newEngineViews(res.routingIn, ownRouting, c.cfg.Role)
	} else if c.lastSuccess.Load() != 0 || c.lastReason != "" {
		failed = cmp.Or(c.lastReason, "unknown")
	}
	s := &snapshot{
		parts: append(page, own),
		order: &c.fullOrder,
		// The views only readers need are built by their first reader
		// (readerViews), and encoded by it, as every page is: a view no
		// router reads costs no building and no encoding, and a router
		// polling many times a second pays one of each per scrape, its
		// first read after a scrape waiting for them.
		routing: c.routingEnc.Prepare(ownRouting, func(own []exposition.Family) []exposition.Family {
			return c.routingOrder.merge(views.epp(), own)
		}),
		compat: c.compatEnc.Prepare(ownRouting, func(own []exposition.Family) []exposition.Family {
			return c.compatOrder.merge(views.compat(), views.diagnosisFamilies(), own)
		}),
		// After a failed scrape the GenAI view is empty: its series are
		// withdrawn, never served stale.
		genai:    c.genaiEnc.Prepare(nil, func([]exposition.Family) []exposition.Family { return views.genaiView() }),
		asleep:   asleep,
		failed:   failed,
		engines:  engines,
		at:       now,
		restarts: c.restarts,
		upstream: upstream,
	}
	// The parts are merged, and the Gatherer's families (the version, Go
	// and process collectors) join them, when the full page is first read
	// (see runtimeFamilies): a scrape nobody reads /metrics after (at
	// 100 ms, 149 of Prometheus's 150) pays for neither.
	s.page = c.pageEnc.Prepare(nil, func([]exposition.Family) []exposition.Family {
		return c.withRuntimeFamilies(s.full())
	})
	c.snap.Store(s)
}

// full returns the full page but the Gatherer's families, merged from the
// scrape's parts on first use; the pages of /metrics?name[]= are cut from
// it.
func (s *snapshot) full() []exposition.Family {
	s.fullOnce.Do(func() {
		if s.order == nil {
			s.fullFams = merge(s.parts...)
			return
		}
		s.fullFams = s.order.merge(s.parts...)
	})
	return s.fullFams
}

// readerViews are the pages of one scrape that only readers need: the
// routing view, the compatibility page and the GenAI view. The scrape
// keeps what they are built from (the collapsed gauges and the sums,
// which it advances every scrape: routing.Collapsed) and the first reader
// of any of them builds the routing views, once, on its own goroutine; the
// GenAI view is built by its own first reader. A nil *readerViews (after
// a failed scrape) has no families.
type readerViews struct {
	collapsed *routing.Collapsed
	genai     *genai.Viewer
	server    string
	diagnosis []exposition.Family // the diagnosis' gauges, also on the compatibility page
	// nanSkipped counts the NaN samples the build left out.
	nanSkipped func(int)

	once                sync.Once
	eppFams, compatFams []exposition.Family
}

func (v *readerViews) build() {
	v.once.Do(func() {
		// The pod role is put on by Build (Input.Label), on the families
		// it makes; the routing derived gauges it shares with the scrape
		// carry it already.
		epp, compat, nan := v.collapsed.Build()
		v.nanSkipped(nan)
		v.eppFams, v.compatFams = epp, compat
	})
}

// viewRoles is withRole for the routing views, remembering each label
// set's labelled form from one build to the next as the scrape's derived
// gauges do (roleLabeler): the views' series keep their label sets across
// scrapes, and labelling each anew was two thirds of building the views
// (BenchmarkScrapeCycle read=all's profile). Builds run on readers'
// goroutines, two snapshots' at once at worst: hence the lock.
type viewRoles struct {
	mu sync.Mutex
	l  roleLabeler
}

func (r *viewRoles) label(fams []exposition.Family, role string) []exposition.Family {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.l.label(fams, role)
}

// epp returns the routing view's families (what endpoint pickers read).
func (v *readerViews) epp() []exposition.Family {
	if v == nil {
		return nil
	}
	v.build()
	return v.eppFams
}

// compat returns the compatibility page's families but the diagnosis'.
func (v *readerViews) compat() []exposition.Family {
	if v == nil {
		return nil
	}
	v.build()
	return v.compatFams
}

func (v *readerViews) diagnosisFamilies() []exposition.Family {
	if v == nil {
		return nil
	}
	return v.diagnosis
}

// genaiView returns the GenAI view, from the sums the compatibility page
// prints: the two agree.
func (v *readerViews) genaiView() []exposition.Family {
	if v == nil {
		return nil
	}
	return v.genai.Render(v.collapsed.Totals(), v.server)
}

var upstreamAgeLabels = labels.FromStrings(model.MetricNameLabel, "vllm_normalizer_upstream_age_seconds")

// withRuntimeFamilies adds the Gatherer's families to a page being
// encoded; a name the page already has keeps the page's family.
func (c *Collector) withRuntimeFamilies(fams []exposition.Family) []exposition.Family {
	return c.runtimeOrder.merge(fams, c.runtimeFamilies())
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
	return fromDTO(mfs, c.cfg.CreatedTimestamps)
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

// keptOrder is merge for a page merged from parts of the same families
// every scrape (the routing view, the compatibility page, the full page
// with and without the Gatherer's families): the order the
// last merge sorted its families into is taken again when the names come
// in the same order, instead of sorting about sixty families again. Pages
// of two scrapes may be merged at once, by their readers: hence the lock.
type keptOrder struct {
	mu    sync.Mutex
	names []string // the last merge's names, as they came
	lens  []int    // the last merge's parts' lengths: order's places are by part
	order []at     // the last merge's result, by part and place
}

type at struct{ part, i int }

func (k *keptOrder) merge(parts ...[]exposition.Family) []exposition.Family {
	k.mu.Lock()
	defer k.mu.Unlock()
	n, same := 0, len(parts) == len(k.lens)
	for pi, p := range parts {
		same = same && len(p) == k.lens[pi]
		for j := 0; same && j < len(p); j++ {
			same = n+j < len(k.names) && p[j].Name == k.names[n+j]
		}
		n += len(p)
	}
	if !same || n != len(k.names) {
		k.names, k.order, k.lens = k.names[:0], k.order[:0], k.lens[:0]
		for pi, p := range parts {
			k.lens = append(k.lens, len(p))
			for j, f := range p {
				k.names = append(k.names, f.Name)
				k.order = append(k.order, at{pi, j})
			}
		}
		// As merge: stable by name, the earliest part's family kept.
		slices.SortStableFunc(k.order, func(a, b at) int {
			return strings.Compare(parts[a.part][a.i].Name, parts[b.part][b.i].Name)
		})
		k.order = slices.CompactFunc(k.order, func(a, b at) bool { return parts[a.part][a.i].Name == parts[b.part][b.i].Name })
	}
	out := make([]exposition.Family, len(k.order))
	for i, o := range k.order {
		out[i] = parts[o.part][o.i]
	}
	return out
}

// MetricsHandler serves the full page: vLLM's families under current names,
// derived gauges, statuses and the sidecar's own metrics. With name[]
// query parameters (client_golang's promhttp convention) it serves only
// the families of those names (the name on the TYPE line), none when no
// name matches, so that a Prometheus that records a few rules reads a few
// families.
func (c *Collector) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		snap := c.snap.Load()
		if names := r.URL.Query()[nameParam]; len(names) > 0 {
			serve.Write(w, r, c.selection(snap, names))
			return
		}
		serve.Write(w, r, snap.page)
	})
}

// nameParam is the query parameter that selects families by name.
const nameParam = "name[]"

// selections are the pages of /metrics?name[]= of one snapshot, by their
// selection: each distinct selection is cut and encoded once per scrape.
type selections struct {
	mu    sync.Mutex
	pages map[string]*serve.Page
}

// maxSelections bounds the selections a snapshot keeps, and
// maxSelectionKey the size of one kept: a client asking for ever new
// selections gets its pages encoded for it alone and kept by nobody, so
// that it cannot grow memory. Fleet-wide scrape configs use one or two.
const (
	maxSelections   = 16
	maxSelectionKey = 4 << 10
)

// selection returns the page of snap holding only the families named in
// names (the Gatherer's included), kept for the snapshot's other readers
// of the same names in any order unless the cache is full.
func (c *Collector) selection(snap *snapshot, names []string) *serve.Page {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	key := strings.Join(quoted, ",")
	sel := &snap.selected
	sel.mu.Lock()
	defer sel.mu.Unlock()
	if p, ok := sel.pages[key]; ok {
		return p
	}
	var enc serve.Encoder
	p := enc.Prepare(nil, func([]exposition.Family) []exposition.Family {
		return selectFamilies(c.withRuntimeFamilies(snap.full()), names)
	})
	if len(sel.pages) < maxSelections && len(key) <= maxSelectionKey {
		if sel.pages == nil {
			sel.pages = map[string]*serve.Page{}
		}
		sel.pages[key] = p
	}
	return p
}

// selectFamilies returns the families of fams (sorted by name) whose names
// are in names (sorted).
func selectFamilies(fams []exposition.Family, names []string) []exposition.Family {
	var out []exposition.Family
	for _, n := range names {
		if i, ok := slices.BinarySearchFunc(fams, n, func(f exposition.Family, n string) int { return strings.Compare(f.Name, n) }); ok {
			out = append(out, fams[i])
		}
	}
	return out
}

// GenAIHandler serves the OpenTelemetry GenAI view: the gen_ai_server_*
// histograms of the last successful scrape, nothing after a failed one.
func (c *Collector) GenAIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve.Write(w, r, c.snap.Load().genai)
	})
}

// View names a page for Families.
type View string

// The views Families serves.
const (
	ViewFull    View = "full"    // /metrics
	ViewRouting View = "routing" // /metrics/routing
	ViewGenAI   View = "genai"   // /metrics/genai
)

// Families returns the families the page of view serves in the last
// published snapshot (the full page with the Gatherer's families, as
// /metrics serves it), when that snapshot was published, and the restarts
// announced up to it; false for the routing view when its page would
// answer 503. Readers that push the page elsewhere (the OTLP push) call it.
func (c *Collector) Families(view View) (Published, bool) {
	snap := c.snap.Load()
	p := Published{At: snap.at, restarts: snap.restarts}
	switch view {
	case ViewRouting:
		if c.routingRefusal() != "" {
			return p, false
		}
		p.Families = snap.routing.Families()
	case ViewGenAI:
		p.Families = snap.genai.Families()
	default:
		p.Families = snap.page.Families()
	}
	if snap.restarts != nil && !snap.restarts.process.IsZero() {
		p.upstream = make(map[string]bool, len(snap.upstream))
		for _, f := range snap.upstream {
			p.upstream[f.Name] = true
		}
	}
	return p, true
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

// refuseRouting answers 503 when the routing view must not be served
// (routingRefusal). It reports whether it answered.
func (c *Collector) refuseRouting(w http.ResponseWriter) bool {
	why := c.routingRefusal()
	if why == "" {
		return false
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(c.cfg.Interval.Seconds()))))
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(why))
	return true
}

// routingRefusal says why the routing view must not be served, "" when it
// may: no successful scrape yet, the last one older than three intervals,
// the last one failed, or every engine asleep.
func (c *Collector) routingRefusal() string {
	age, ok := c.upstreamAge(c.cfg.Now())
	snap := c.snap.Load()
	if !ok {
		failed := ""
		if snap.failed != "" {
			failed = "; the last scrape failed (reason " + snap.failed + ")"
		}
		return "vLLM has not been scraped successfully yet" + failed + "; see vllm_normalizer_scrape_failures_total on /metrics\n"
	}
	if age > 3*c.cfg.Interval {
		// The reason too: an operator reading the 503 should not need the log to tell refused from timeout.
		failed := ""
		if snap.failed != "" {
			failed = " and the last scrape failed (reason " + snap.failed + ")"
		}
		return "the last successful scrape of vLLM is " + age.Truncate(time.Millisecond).String() + " old (more than three scrape intervals)" + failed + "; see vllm_normalizer_scrape_failures_total on /metrics\n"
	}
	if snap.failed != "" {
		return "the last scrape of vLLM failed (reason " + snap.failed + "); the last successful one is " + age.Truncate(time.Millisecond).String() + " old; see vllm_normalizer_scrape_failures_total on /metrics\n"
	}
	if len(snap.asleep) > 0 {
		return "every engine of the upstream is asleep (sleep_state " + boundedList(snap.asleep, "states") + "): it reports no load but serves nothing; see " + AsleepName + " on /metrics\n"
	}
	return ""
}
