package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/derive"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/genai"
	"github.com/fos-study/vllm-normalizer/internal/setting"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/routing"
	"github.com/fos-study/vllm-normalizer/scrape"
	"github.com/fos-study/vllm-normalizer/serve"
	"github.com/fos-study/vllm-normalizer/window"
)

// Config is everything the collector needs; cmd/vllm-normalizer fills it
// from flags.
type Config struct {
	ScrapeURI    string
	Interval     time.Duration // between scrape starts
	Timeout      time.Duration // for one scrape; 0 means 90% of Interval
	MaxBodyBytes int64         // decompressed page size limit
	// AskGzip asks the upstream for a gzip body; a gzip body is read
	// either way (see scrape.Fetcher.AskGzip).
	AskGzip     bool
	SampleLimit int // 0 means no limit
	// LabelLimits are Prometheus's per-scrape label limits; zero fields
	// set no limit.
	LabelLimits exposition.LabelLimits
	// MaxSeries bounds the series the history keeps; 0 means no bound.
	// MaxSeriesFor(MaxBodyBytes) admits every page of a few models
	// MaxBodyBytes admits.
	MaxSeries int
	// MaxModels bounds the model_name values whose state is kept across
	// scrapes (windows, idle times, the diagnosis); 0 means no bound.
	// MaxModelsFor(MaxSeries) is the most MaxSeries admits.
	MaxModels int
	Windows   []time.Duration
	// SLOs are the latency targets of vllm_derived_slo_attainment_ratio;
	// none means no attainment series.
	SLOs derive.SLOTargets
	// LegacyLabels labels the latency quantiles quantile and the SLO
	// targets le, the names before q and target (deprecated).
	LegacyLabels bool
	Mapper       *mapping.Mapper
	// Registry holds what describes the sidecar process (New registers its
	// version; cmd/ adds its own). Its families are served with the page,
	// gathered when the page is read. The scrape's own series (vllm_up and
	// friends) are not on it: see selfMetrics.
	Registry *prometheus.Registry
	// Gatherer is what is served besides the upstream page and the
	// scrape's own series: usually Registry, plus the Go and process
	// collectors unless disabled.
	Gatherer prometheus.Gatherer
	Logger   *slog.Logger
	Client   *http.Client     // nil: a client without proxy from environment
	Now      func() time.Time // nil: time.Now
	// Diagnosis, when set, is fed every successful scrape; its gauges are
	// served on both pages.
	Diagnosis *diagnosis.Diagnoser
	// GenAI sets the OpenTelemetry GenAI view's attributes and names.
	GenAI genai.Options
	// Role is the pod role, a value of llm-d's llm-d.ai/role label ("" means
	// both; mapping.ParsePodRole). It labels the derived and routing series
	// and the upstream info; its stages tell the diagnosis what the pod serves.
	Role string
	// QueuedReqsCap is the server's cap on waiting + running requests
	// (vLLM's --max-num-queued-reqs), 0 when not known: with it,
	// vllm_derived_admission_at_cap says a server at its cap before it
	// refuses.
	QueuedReqsCap int
	// ModelName names the model of a page whose server prints none
	// (llama.cpp); empty asks the upstream's /v1/models.
	ModelName string
	// CreatedTimestamps serves the start time of the summed counters and
	// histograms (the compatibility page, the GenAI view) as _created
	// lines on their OpenMetrics pages.
	CreatedTimestamps bool
}

// DefaultMaxBodyBytes is the default page size limit (--vllm.max-body-bytes).
const DefaultMaxBodyBytes = 4 << 20

// DefaultMaxSeries is the default history series limit: one kept series per
// 256 bytes of the largest page admitted. The densest pages measured have
// 252 to 259 bytes per kept series (single-engine vLLM V0 and SGLang pages,
// fixtures 02 and 04) and data-parallel vLLM V1 pages 407 to 445 (the demo
// upstream, 110 kept series an engine with its NIXL histograms, ~107 engines in 4 MiB), so a page
// within the size limit is never cut by the series limit.
const DefaultMaxSeries = DefaultMaxBodyBytes / PageBytesPerSeries

// PageBytesPerSeries is the page bytes a kept series is given room for:
// the densest pages measured print one per 252 to 259 bytes.
const PageBytesPerSeries = 256

// MaxSeriesFor is MaxSeries' default for a body limit, DefaultMaxSeries at
// DefaultMaxBodyBytes: one series per PageBytesPerSeries, so that a page of
// a few models the limit admits is kept whole (cmd's --history.max-series
// left unset follows --vllm.max-body-bytes with it).
func MaxSeriesFor(maxBodyBytes int64) int {
	return int(maxBodyBytes / PageBytesPerSeries)
}

// Collector owns the scrape loop and the prepared output.
type Collector struct {
	cfg     Config
	roles   *mapping.Roles
	podRole mapping.PodRole  // what the pod serves (cfg.Role read)
	readers *routing.Readers // which names routers read of each server
	deriver *derive.Deriver
	idle    *derive.IdleTracker // owned by the scrape loop
	fetch   *scrape.Fetcher
	mapper  atomic.Pointer[mapping.Mapper]
	history *window.History
	metrics *selfMetrics
	symbols *labels.SymbolTable
	scratch exposition.ParseScratch // reused by every parse; scrapes are serialised
	shape   shapeKept
	viewer  routing.Viewer // builds every routing view; scrapes are serialised
	genai   *genai.Viewer  // builds every GenAI view; scrapes are serialised

	// The Gatherer's families beyond the Registry's, and when they were
	// gathered (collector clock); see runtimeFamilies. Handlers gather
	// them, hence the lock.
	runtimeMu   sync.Mutex
	runtimeFams []exposition.Family
	runtimeAt   time.Time

	snap atomic.Pointer[snapshot]
	// Reused by publish for the full page and the two views.
	pageEnc, routingEnc, compatEnc, genaiEnc serve.Encoder

	reloadMu    sync.Mutex // serialises Reload
	mu          sync.Mutex // serialises scrapes (the loop, and tests calling ScrapeOnce)
	lastSuccess atomic.Int64
	lastReason  string   // "" = last scrape fine; for log-once-per-change
	legacyLog   []string // legacy names last logged
	// The last report's statuses and upstream, and the families rendered
	// from them; see statusFamilies.
	lastStatus     mapping.Report
	lastStatusFams []exposition.Family
	diagIn         diagnosisInput
	restarts       *restartLog   // owned by the scrape loop; snapshots share it
	models         modelCap      // which models state is kept for; owned by the scrape loop
	roleLabels     roleLabeler   // the pod role on the derived gauges; owned by the scrape loop
	viewRoles      viewRoles     // the pod role on the reader views, built by their first readers
	routingOrder   keptOrder     // the routing view's families' order, merged by its first readers
	compatOrder    keptOrder     // the compatibility page's
	fullOrder      keptOrder     // the full page's, merged by its first reader
	runtimeOrder   keptOrder     // the full page's with the Gatherer's families
	model          upstreamModel // for pages that name no model
}

// MinInterval is the shortest scrape interval accepted: the EPP's own
// shortest poll. MinTimeout is the shortest scrape timeout, above what
// rendering a one-engine vLLM page takes (docs/performance.md).
const (
	MinInterval = 50 * time.Millisecond
	MinTimeout  = 10 * time.Millisecond
)

// Validate checks the settings New checks, without building anything: a
// rejected setting is a *setting.Error naming the Config field.
func (cfg Config) Validate() error {
	bad := func(field, value, rule, fix string) error {
		return &setting.Error{Setting: "collector.Config." + field, Value: value, Rule: rule, Fix: fix}
	}
	if cfg.Interval <= 0 {
		return bad("Interval", cfg.Interval.String(), "is not positive", "give the time between scrapes, e.g. 1s")
	}
	if cfg.Interval < MinInterval {
		return bad("Interval", cfg.Interval.String(), fmt.Sprintf("is below the floor of %s: vLLM renders its page anew for every scrape, in Python on the event loop that serves inference (3.6 ms of CPU or more a page), and no reader polls faster than the EPP's 50 ms", MinInterval),
			fmt.Sprintf("give %s or more (100ms for an EPP deployment, 1s by default)", MinInterval))
	}
	if cfg.Timeout < 0 {
		return bad("Timeout", cfg.Timeout.String(), "is negative", "give 0 (90% of the interval) or a positive duration")
	}
	if cfg.Timeout > 0 && cfg.Timeout < MinTimeout {
		return bad("Timeout", cfg.Timeout.String(), fmt.Sprintf("is below the floor of %s: vLLM takes 3.6 ms of CPU or more to render its page, so a healthy server's scrapes would fail as timeouts", MinTimeout),
			fmt.Sprintf("give 0 (90%% of the interval) or %s or more", MinTimeout))
	}
	if cfg.Timeout > cfg.Interval {
		return bad("Timeout", cfg.Timeout.String(), fmt.Sprintf("is longer than the scrape interval (%s): scrapes never overlap, so a slow upstream would delay every later scrape", cfg.Interval),
			"give at most the interval (0 means 90% of it) or lengthen the interval")
	}
	if cfg.MaxBodyBytes <= 0 {
		return bad("MaxBodyBytes", strconv.FormatInt(cfg.MaxBodyBytes, 10), "is not positive", "give the largest page to accept, e.g. 4MiB")
	}
	for _, n := range []struct {
		field string
		v     int
	}{{"SampleLimit", cfg.SampleLimit}, {"LabelLimits.Labels", cfg.LabelLimits.Labels}, {"LabelLimits.NameLength", cfg.LabelLimits.NameLength}, {"LabelLimits.ValueLength", cfg.LabelLimits.ValueLength}, {"MaxSeries", cfg.MaxSeries}, {"MaxModels", cfg.MaxModels}} {
		if n.v < 0 {
			return bad(n.field, strconv.Itoa(n.v), "is negative", "give 0 (no limit) or a positive number")
		}
	}
	if cfg.MaxSeries > 0 && cfg.MaxSeries <= modelSeries {
		return bad("MaxSeries", strconv.Itoa(cfg.MaxSeries), fmt.Sprintf("admits no model: each model kept takes %d series for its own state beside its page's", modelSeries),
			fmt.Sprintf("give 0 (no limit) or room for the models' pages, %d series a model beside them", modelSeries))
	}
	if len(cfg.Windows) == 0 {
		return bad("Windows", "", "is empty", "give at least one derivation window, e.g. 1m")
	}
	for _, w := range cfg.Windows {
		if err := setting.TwoIntervals("collector.Config.Windows", w, cfg.Interval); err != nil {
			return err
		}
	}
	if err := cfg.SLOs.Validate(); err != nil {
		return err
	}
	if cfg.QueuedReqsCap < 0 {
		return bad("QueuedReqsCap", strconv.Itoa(cfg.QueuedReqsCap), "is negative", "give the server's --max-num-queued-reqs, or 0 when it runs without one")
	}
	_, err := setting.ScrapeURL("collector.Config.ScrapeURI", cfg.ScrapeURI)
	return err
}

// New validates cfg and prepares a collector whose page, until the first
// scrape ends, says vllm_up 0.
func New(cfg Config) (*Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = cfg.Interval * 9 / 10
	}
	if cfg.Mapper == nil {
		return nil, errors.New("collector needs a mapping.Mapper")
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = cfg.Registry
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	podRole, warning := mapping.ParsePodRole(cfg.Role)
	if warning != "" {
		cfg.Logger.Warn(warning)
	}
	cfg.Role = podRole.Value
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{CheckRedirect: scrape.SameHostRedirects, Transport: &http.Transport{
			Proxy:               nil, // the upstream is local; never route it through an environment proxy
			MaxIdleConns:        2,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: cfg.Timeout,
		}}
	}
	f, err := scrape.NewFetcher(cfg.Client, cfg.ScrapeURI, cfg.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	f.AskGzip(cfg.AskGzip)
	if err := registerVersion(cfg.Registry); err != nil {
		return nil, err
	}
	var dated func() time.Time
	if cfg.CreatedTimestamps {
		dated = cfg.Now
	}
	m := newSelfMetrics(dated)
	roles := cfg.Mapper.Catalogue().Roles()
	readers, err := routing.LoadReaders()
	if err != nil {
		return nil, err
	}
	if cfg.Diagnosis != nil {
		cfg.Diagnosis.SetInputNames(diagnosisInputNames(roles))
	}
	base := derive.New(roles)
	if cfg.LegacyLabels {
		base = base.WithLegacyLabels()
	}
	deriver, err := base.WithQueuedReqsCap(cfg.QueuedReqsCap).WithSLOs(cfg.SLOs)
	if err != nil {
		return nil, err
	}
	gv, err := genai.New(cfg.GenAI)
	if err != nil {
		return nil, fmt.Errorf("the GenAI view: %w", err)
	}
	c := &Collector{
		cfg:     cfg,
		roles:   roles,
		readers: readers,
		deriver: deriver,
		genai:   gv,
		fetch:   f,
		history: window.New(cfg.Windows, cfg.Interval, deriver.Inputs()),
		idle:    deriver.NewIdleTracker(cfg.Now()),
		metrics: m,
		symbols: labels.NewSymbolTable(),
		podRole: podRole,
	}
	c.history.SetMaxSeries(cfg.MaxSeries)
	// The views are built from the same label sets every scrape and may be
	// read every scrape: their text is mostly kept lines. /metrics, read
	// every 15 s or so, is not worth the memory.
	c.routingEnc.KeepLines()
	c.compatEnc.KeepLines()
	c.genaiEnc.KeepLines()
	c.models.max, c.models.maxSeries, c.models.inputs = cfg.MaxModels, cfg.MaxSeries, deriver.Inputs()
	c.mapper.Store(cfg.Mapper)
	m.set(m.reloadOK, 1)
	m.set(m.reloadOKTime, float64(cfg.Now().UnixNano())/1e9)
	c.publish(nil, cfg.Now())
	return c, nil
}

// Reload swaps in the mapper that load builds, from the next scrape on.
// When load fails the current mapper stays: a bad configuration file never
// replaces a good one. Both outcomes are counted.
func (c *Collector) Reload(load func() (*mapping.Mapper, error)) error {
	c.reloadMu.Lock()
	defer c.reloadMu.Unlock()
	m, err := load()
	if err != nil {
		c.metrics.set(c.metrics.reloadOK, 0)
		c.metrics.add(c.metrics.reloads, "failure", 1)
		return err
	}
	c.mapper.Store(m)
	c.metrics.set(c.metrics.reloadOK, 1)
	c.metrics.set(c.metrics.reloadOKTime, float64(c.cfg.Now().UnixNano())/1e9)
	c.metrics.add(c.metrics.reloads, "success", 1)
	return nil
}

// Run scrapes at every interval until ctx ends. Scrapes never overlap: a
// tick that comes while one is still running is skipped.
func (c *Collector) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	c.ScrapeOnce(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.ScrapeOnce(ctx)
		}
	}
}

// ScrapeOnce runs one whole cycle and publishes its result.
func (c *Collector) ScrapeOnce(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.cfg.Now()
	sctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()

	res, err := c.scrape(sctx, start)
	end := c.cfg.Now()
	c.metrics.set(c.metrics.duration, end.Sub(start).Seconds())
	if err != nil && ctx.Err() != nil {
		// Shutting down: the scrape was cut short by the sidecar itself,
		// not by vLLM; neither count nor log it as a failure.
		return
	}
	if err != nil {
		reason := scrape.ReasonNetwork
		if se, ok := errors.AsType[*scrape.Error](err); ok {
			reason = se.Reason
		}
		c.metrics.set(c.metrics.up, 0)
		c.metrics.add(c.metrics.failures, reason, 1)
		if reason != c.lastReason {
			attrs := []any{"reason", reason, "err", err}
			if reason == scrape.ReasonTimeout {
				// The limit broken, which the operator would otherwise derive from the interval.
				attrs = append(attrs, "timeout", c.cfg.Timeout)
			}
			c.cfg.Logger.Warn("scrape of vLLM failed; upstream series are withdrawn until it recovers", attrs...)
			c.lastReason = reason
		}
		if c.cfg.Diagnosis != nil {
			c.cfg.Diagnosis.Fail(end)
		}
		c.publish(nil, end)
		return
	}
	if c.lastReason != "" {
		c.cfg.Logger.Info("scrape of vLLM recovered", "after", c.lastReason)
		c.lastReason = ""
	}
	c.metrics.set(c.metrics.up, 1)
	c.lastSuccess.Store(end.UnixNano())
	c.metrics.set(c.metrics.lastSuccess, float64(end.UnixNano())/1e9)
	c.publish(res, end)
}

// scrapeResult is what one successful scrape yields for publishing.
type scrapeResult struct {
	// The parts of the full page, merged into one sorted page at publish:
	// presented upstream families, derived gauges and statuses, the
	// diagnosis.
	page [][]exposition.Family
	// views builds the routing view, the compatibility page and the GenAI
	// view when they are first read.
	views *readerViews
	// asleep holds the sleep states when every engine sleeps; the routing
	// view then answers 503.
	asleep []string
	// What the routing view of one engine is built from (engineViews).
	routingIn routing.Input
}

// AsleepName is the gauge that says every engine of the upstream sleeps.
const AsleepName = "vllm_normalizer_upstream_asleep"

// asleepFamily is 1 when every engine of the upstream reports a sleep state
// other than awake (the routing view then answers 503), else 0.
func asleepFamily(asleep bool) exposition.Family {
	v := 0.0
	if asleep {
		v = 1
	}
	return exposition.Family{
		Name: AsleepName,
		Type: model.MetricTypeGauge,
		Help: "1 when every engine of the upstream reports a sleep state other than awake (vLLM sleep mode): it reports no load but serves nothing, so the routing view answers 503. 0 otherwise, also when the upstream reports no sleep state.",
		Samples: []exposition.Sample{{
			Labels: labels.FromStrings(model.MetricNameLabel, AsleepName),
			Value:  v,
		}},
	}
}

// scrape runs one cycle. Its points are stamped sent, the moment the
// request went out, as Prometheus stamps a scrape: the upstream's latency,
// and the time to read and parse the page, must not shift them.
func (c *Collector) scrape(ctx context.Context, sent time.Time) (*scrapeResult, error) {
	body, contentType, err := c.fetch.Fetch(ctx)
	if err != nil {
		return nil, err
	}
	c.metrics.set(c.metrics.bytes, float64(len(body)))
	fams, stats, err := exposition.Parse(body, contentType, exposition.ParseOptions{
		SampleLimit: c.cfg.SampleLimit, LabelLimits: c.cfg.LabelLimits, SymbolTable: c.symbols, Scratch: &c.scratch,
	})
	if err != nil {
		if errors.Is(err, exposition.ErrSampleLimit) {
			return nil, &scrape.Error{Reason: scrape.ReasonSampleLimit, Err: err}
		}
		if le, ok := errors.AsType[*exposition.LabelLimitError](err); ok {
			// The reasons are the limits' own names.
			return nil, &scrape.Error{Reason: le.Limit, Err: fmt.Errorf("GET %s: %w", c.fetch.Redacted(), err)}
		}
		return nil, &scrape.Error{Reason: scrape.ReasonParse, Err: fmt.Errorf("GET %s: %w", c.fetch.Redacted(), err)}
	}
	if len(fams) == 0 {
		return nil, &scrape.Error{Reason: scrape.ReasonEmpty, Err: fmt.Errorf("GET %s: the page holds no metric family", c.fetch.Redacted())}
	}
	c.metrics.set(c.metrics.samples, float64(stats.Samples))
	c.metrics.add(c.metrics.dropped, dropDuplicate, float64(stats.DuplicateSeries))
	c.metrics.add(c.metrics.dropped, dropInvalidName, float64(stats.InvalidNames))
	c.metrics.add(c.metrics.dropped, dropInvalidBound, float64(stats.InvalidBounds))
	c.metrics.add(c.metrics.dropped, dropCollision, float64(stats.Collisions))

	// Restarts are read from the _created samples before they are dropped;
	// with --output.created-timestamps, the series' own start times too.
	c.history.NoteStarts(fams)
	var starts map[startKey]float64
	if c.cfg.CreatedTimestamps {
		starts = upstreamStarts(fams)
	}
	// A page of the last one's shape (only its values changed) drops the
	// same families, normalises to the same statuses, is the same server's
	// and is presented in the same order: those are kept (shapeKept)
	// rather than found again.
	mapper := c.mapper.Load()
	shape := c.scratch.Shape()
	same := shape != 0 && shape == c.shape.id && mapper == c.shape.mapper
	if !same {
		c.shape.dropped = exposition.CreatedDropped(fams)
	}
	fams = exposition.DropAt(fams, c.shape.dropped)
	// The report's statuses are read here, never changed in place
	// (statusFamilies and logLegacy keep copies).
	c.shape.normalize.ReadOnly = true
	norm, report := mapper.NormalizeShape(fams, &c.shape.normalize, same)
	for _, name := range report.Disagreements {
		c.metrics.add(c.metrics.disagreements, name, 1)
	}
	c.logLegacy(report.LegacyInUse)

	// Derivations and the routing view read the canonical page: the
	// families that play a role, under vLLM V1's names, whatever the server.
	if !same {
		c.shape.detection = mapper.Profiles().DetectionOf(norm, stats.OpenMetrics)
	}
	c.shape.id, c.shape.mapper = shape, mapper
	detection := c.shape.detection
	profile := detection.Profile
	report.SetServer(detection, stats.OpenMetrics)
	report.FitServer(profile, c.roles, norm)
	report.Upstream.Role = c.cfg.Role
	var canon []exposition.Family
	if profile != nil {
		var cst mapping.CanonicalStats
		canon, cst = profile.CanonicalStats(norm, c.roles)
		// Clipped: it may be norm itself, which Present's input extends.
		canon = slices.Clip(canon)
		c.metrics.add(c.metrics.kvDisagreements, "", float64(cst.KVCapacityDisagreements))
		c.metrics.add(c.metrics.nanSkipped, "", float64(cst.NaNSkipped))
		for fam, n := range cst.OutOfRange {
			c.metrics.add(c.metrics.outOfRange, fam, float64(n))
		}
	}

	if profile != nil && profile.Labels.Model == "" && len(canon) > 0 {
		// The server names no model (llama.cpp): routers that key by
		// model (AIBrix) read nothing without one.
		if name, source := c.modelFor(ctx, sent); name != "" {
			withModel(canon, name)
			report.Upstream.Labels["model_name"], report.Upstream.Labels["model_source"] = name, source
		}
	}

	// State kept across scrapes is kept for the admitted models only;
	// kept is canon without the others.
	kept, leftOut, gone := c.models.admit(canon)
	for _, m := range gone {
		c.diagIn.forget(m)
		if d := c.cfg.Diagnosis; d != nil {
			d.Forget(m)
		}
	}
	if d := c.cfg.Diagnosis; d != nil {
		if len(leftOut) == 0 {
			d.SetLeftOut(nil, "") // nothing built on a scrape that leaves none out
		} else {
			d.SetLeftOut(slices.Collect(maps.Keys(leftOut)), c.leftOutReason())
		}
	}
	c.metrics.set(c.metrics.historyModels, float64(c.models.Len()))
	c.metrics.set(c.metrics.modelsLeftOut, float64(len(leftOut)))

	now := sent // everything windowed is stamped when the request went out
	c.history.Observe(now, kept)
	obs := c.history.LastObservation()
	c.metrics.add(c.metrics.unwindowed, "", float64(obs.Unwindowed))
	c.metrics.add(c.metrics.layoutChanges, "", float64(obs.LayoutChanges))
	c.metrics.add(c.metrics.invalidHistograms, "", float64(obs.InvalidHistograms))
	c.metrics.add(c.metrics.restarts, "", float64(obs.Restarts))
	c.restarts = c.restarts.with(now, obs.ProcessRestarted, obs.Announced)
	c.metrics.add(c.metrics.jitter, MetadataCreated, float64(obs.CreatedJitter))
	c.metrics.add(c.metrics.jitter, MetadataProcessStart, float64(obs.ProcessStartJitter))
	c.metrics.set(c.metrics.historySeries, float64(c.history.StoredSeries()))
	both := c.deriver.Groupings(c.history, now, []string{mapping.LabelModel, mapping.LabelEngine}, []string{mapping.LabelModel})
	c.idle.Observe(now, kept)
	// Both pages are sorted by family name when published (merge).
	capByEngine, capByModel := c.deriver.Capacities(kept, c.idle, now)
	derived := c.roleLabels.label(slices.Concat(both[0], capByEngine), c.cfg.Role)
	routingDerived := slices.Concat(both[1], capByModel)
	// A model the series cap bit has all its derived gauges or none.
	limited := derive.LimitedBy(c.history, now)
	derived, routingDerived = limited.Without(derived), limited.Without(routingDerived)
	c.metrics.set(c.metrics.historyLimited, b2f(limited.Any() || len(leftOut) > 0))

	// The page serves legacy families as the upstream printed them beside
	// their current names; windows, derived gauges and the routing view
	// only see the current names.
	// Normalize leaves room for a few kept legacy families at the end of
	// norm: most pages need no new slice.
	printed := append(norm, report.Kept...) // every family the server printed, current names added
	page, pstats := mapper.PresentShape(printed, &c.shape.present, same)
	if starts != nil {
		withUpstreamStarts(page, starts) // Present's families are its own
	}
	c.metrics.add(c.metrics.dropped, dropRelabel, float64(pstats.Dropped))
	c.metrics.add(c.metrics.dropped, dropCollision, float64(pstats.Collisions))
	parts := [][]exposition.Family{page, derived, c.statusFamilies(report)}

	server := ""
	if profile != nil {
		server = profile.Server
	}
	in := routing.Input{
		Canon: canon, Derived: routingDerived, HitRatio: derive.PrefixCacheHitRatio(routingDerived),
		Roles: c.roles, Upstream: report.Upstream.Engine, Server: server, Readers: c.readers, Style: mapper.StyleName,
		// The sums restart where the history found the page announcing it.
		Restarts: routing.Restarts{All: obs.ProcessRestarted, Series: obs.Announced},
	}
	if role := c.cfg.Role; role != "" {
		// On the views' own families, by their first reader: labelling
		// them in Build spares copying every sample to label it.
		in.Label = func(fams []exposition.Family) []exposition.Family { return c.viewRoles.label(fams, role) }
	}
	if c.cfg.CreatedTimestamps {
		// The sums are dated by the starts the history read from the page.
		in.Restarts.StartOf, in.Restarts.Now = c.history.StartOf, float64(now.UnixNano())/1e9
	}
	if profile != nil {
		in.BlockSize, _ = profile.KVBlockSize(norm)
		in.Native = func(name string) *exposition.Family {
			if f, ok := profile.Native(printed, c.roles, name); ok {
				return &f
			}
			return nil
		}
		in.Page = printed
	}
	// What the diagnosis reads (the collapsed gauges) and what carries
	// state from scrape to scrape (the sums) is done now; the pages only
	// readers need are built from it when first read (readerViews).
	views := &readerViews{collapsed: c.viewer.Collapse(in), genai: c.genai, server: server, nanSkipped: c.countNaN}
	c.countNaN(c.viewer.TakeNaN())
	for i, n := range c.viewer.TakeUnsummed() {
		if n > 0 {
			c.metrics.add(c.metrics.unsummed, routing.UnsummedReasons[i], float64(n))
		}
	}
	asleep, states := routing.Asleep(canon, c.roles)
	parts = append(parts, []exposition.Family{asleepFamily(asleep)})
	if d := c.cfg.Diagnosis; d != nil {
		gauges := c.viewer.Gauges()
		if len(leftOut) > 0 {
			gauges = maps.Clone(gauges)
			maps.DeleteFunc(gauges, func(m string, _ routing.ModelGauges) bool { return leftOut[m] })
		}
		views.diagnosis = d.Observe(now, c.diagIn.observations(kept, gauges, c.roles, server, c.podRole.DiagnosisRole()))
		parts = append(parts, views.diagnosis)
	}
	return &scrapeResult{page: parts, views: views, asleep: states, routingIn: in}, nil
}

// shapeKept is what the last scrape found of its page that depends on the
// page's shape only (its families, types, help and series, not their
// values), kept for the next page of that shape (exposition's
// ParseScratch.Shape): finding them again was about a tenth of a
// one-engine scrape's CPU (the binary's profile at 10 ms, 150 s); with
// the model cap's same page, BenchmarkScrapeCycle's one-engine cpu-ns/op
// fell a fifth (docs/performance.md, "The scrape path, third pass").
type shapeKept struct {
	id     uint64          // the shape; 0: none kept
	mapper *mapping.Mapper // what normalised it: a reload finds all again
	// the indexes of the _created families dropped
	dropped   []int
	normalize mapping.ShapeMemo
	detection mapping.Detection
	present   mapping.PresentMemo
}

// countNaN counts NaN samples the views left out.
func (c *Collector) countNaN(n int) {
	if n > 0 {
		c.metrics.add(c.metrics.nanSkipped, "", float64(n))
	}
}

func (c *Collector) logLegacy(names []string) {
	if slices.Equal(names, c.legacyLog) {
		return
	}
	c.legacyLog = slices.Clone(names)
	if len(names) > 0 {
		c.cfg.Logger.Info("the upstream still exposes metric names that newer vLLM releases renamed or removed: renamed ones are served as printed and under their current names, removed ones passed through; see vllm_normalizer_metric_status", "legacy", names)
	}
}

// statusFamilies returns mapping.StatusFamilies(r), reusing the last
// scrape's families when the report's statuses and upstream are the
// same, as they are from one scrape to the next: the families are never
// modified once built, so snapshots may share them.
func (c *Collector) statusFamilies(r mapping.Report) []exposition.Family {
	if c.lastStatusFams != nil && slices.Equal(r.Statuses, c.lastStatus.Statuses) && sameUpstream(r.Upstream, c.lastStatus.Upstream) {
		return c.lastStatusFams
	}
	c.lastStatus = mapping.Report{Statuses: slices.Clone(r.Statuses), Upstream: r.Upstream}
	c.lastStatus.Upstream.Labels = maps.Clone(r.Upstream.Labels)
	c.lastStatusFams = slices.Clip(mapping.StatusFamilies(r))
	return c.lastStatusFams
}

func sameUpstream(a, b mapping.UpstreamInfo) bool {
	return a.Server == b.Server && a.Engine == b.Engine && a.Frontend == b.Frontend && a.Role == b.Role && maps.Equal(a.Labels, b.Labels)
}

// withRole labels every sample of fams with the pod role, in place (the
// families are this scrape's own): a router or autoscaler that reads
// several pods tells prefill from decode by it, as vLLM's page cannot.
// Labels with empty values stay as printed (labels.Builder would drop
// them: AIBrix reads the LoRA series' empty adapter lists as "").
func withRole(fams []exposition.Family, role string) []exposition.Family {
	if role == "" {
		return fams
	}
	var b labels.ScratchBuilder
	for i := range fams {
		for j := range fams[i].Samples {
			s := &fams[i].Samples[j]
			s.Labels = roleLabels(&b, s.Labels, role)
		}
		createdWithRole(&b, &fams[i], role)
	}
	return fams
}

// createdWithRole labels the start times of f with the pod role, on a
// copy: they name the children the samples now name.
func createdWithRole(b *labels.ScratchBuilder, f *exposition.Family, role string) {
	if len(f.Created) == 0 {
		return
	}
	created := slices.Clone(f.Created)
	for j := range created {
		created[j].Labels = roleLabels(b, created[j].Labels, role)
	}
	f.Created = created
}

// roleLabels returns ls with the role label set to role.
func roleLabels(b *labels.ScratchBuilder, ls labels.Labels, role string) labels.Labels {
	if ls.Get(mapping.LabelRole) == role {
		return ls
	}
	b.Reset()
	ls.Range(func(l labels.Label) {
		if l.Name != mapping.LabelRole {
			b.Add(l.Name, l.Value)
		}
	})
	b.Add(mapping.LabelRole, role)
	b.Sort()
	return b.Labels()
}

// roleLabeler is withRole for the scrape's derived gauges, remembering
// each label set's labelled form from one scrape to the next: derived
// series keep their label sets across scrapes, and building each anew
// was about 3 % of a one-engine scrape's CPU and 10 KB of its
// allocations (BenchmarkScrapeCycle's profile). Owned by the scrape loop.
type roleLabeler struct {
	b labels.ScratchBuilder
	// The last call's and this call's label sets, by their place: a
	// scrape of the same series labels the same sets in the same order,
	// each then one labels.Equal (a pointer comparison when the set is
	// the one the last scrape had there). byHash finds a set the last
	// call labelled elsewhere; it is indexed at a call's first miss.
	last, next []roleLabelled
	byHash     map[uint64]roleLabelled
}

type roleLabelled struct{ from, to labels.Labels }

func (r *roleLabeler) label(fams []exposition.Family, role string) []exposition.Family {
	if role == "" {
		return fams
	}
	r.next = r.next[:0]
	indexed := false
	for i := range fams {
		for j := range fams[i].Samples {
			s := &fams[i].Samples[j]
			k := len(r.next)
			e, ok := roleLabelled{}, false
			if k < len(r.last) && labels.Equal(r.last[k].from, s.Labels) {
				e, ok = r.last[k], true
			} else {
				if !indexed {
					r.index()
					indexed = true
				}
				e, ok = r.byHash[s.Labels.Hash()]
				ok = ok && labels.Equal(e.from, s.Labels)
			}
			if !ok {
				e = roleLabelled{from: s.Labels, to: roleLabels(&r.b, s.Labels, role)}
			}
			r.next = append(r.next, e)
			s.Labels = e.to
		}
		createdWithRole(&r.b, &fams[i], role)
	}
	if indexed {
		clear(r.byHash) // holds no set past its call
	}
	clear(r.last)
	r.last, r.next = r.next, r.last
	return fams
}

// index fills byHash with the last call's sets.
func (r *roleLabeler) index() {
	if r.byHash == nil {
		r.byHash = make(map[uint64]roleLabelled, len(r.last))
	}
	clear(r.byHash)
	for _, e := range r.last {
		r.byHash[e.from.Hash()] = e
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// upstreamStarts indexes the _created samples of a page (Python's
// prometheus_client prints them as gauge families beside each counter and
// histogram) by the name of what they date and their labels.
func upstreamStarts(fams []exposition.Family) map[startKey]float64 {
	starts := map[startKey]float64{}
	var buf []byte
	for _, f := range fams {
		base, ok := strings.CutSuffix(f.Name, "_created")
		if f.Type == model.MetricTypeCounter || !ok {
			continue
		}
		for _, s := range f.Samples {
			if s.Value > 0 && !math.IsInf(s.Value, 0) {
				var h uint64
				h, buf = s.Labels.HashWithoutLabels(buf)
				starts[startKey{base, h}] = s.Value
			}
		}
	}
	return starts
}

// startKey is what a _created sample dates: the family's name without
// _total, and the hash of the child's labels but __name__ and le.
type startKey struct {
	base  string
	child uint64
}

// withUpstreamStarts gives the counters and histograms of page the start
// times their server printed for them: a series served under the name and
// labels it was printed with keeps its own _created time; one renamed or
// relabelled finds none and gets none.
func withUpstreamStarts(page []exposition.Family, starts map[startKey]float64) {
	if len(starts) == 0 {
		return
	}
	var buf []byte
	for i := range page {
		f := &page[i]
		if f.Type != model.MetricTypeCounter && f.Type != model.MetricTypeHistogram {
			continue
		}
		base := f.BaseName()
		var created []exposition.Created
		last, seen := uint64(0), false
		for _, s := range f.Samples {
			var h uint64
			h, buf = s.Labels.HashWithoutLabels(buf, model.BucketLabel)
			if seen && h == last {
				continue // a histogram's next series
			}
			last, seen = h, true
			if at, ok := starts[startKey{base, h}]; ok {
				child := s.Labels.DropReserved(func(n string) bool { return n == model.MetricNameLabel })
				if s.Labels.Has(model.BucketLabel) {
					b := labels.NewBuilder(child)
					child = b.Del(model.BucketLabel).Labels()
				}
				created = append(created, exposition.Created{Labels: child, Time: at})
			}
		}
		f.Created = created
	}
}
