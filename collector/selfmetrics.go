package collector

import (
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/routing"
	"github.com/fos-study/vllm-normalizer/scrape"
)

// selfMetrics are the sidecar's own health series (vllm_up, the scrape's
// figures, failures and drops by reason, reloads). They change at every
// scrape and are published with it, so they are kept as plain values that
// publish renders straight into families. Gathering them through a
// client_golang Registry at every publish (a goroutine per collector,
// protobuf structs, consistency checks, then a conversion) was 5–12 % of
// a small page's scrape cycle and a sixth of the bytes it allocated
// (BenchmarkScrapeCycle; docs/performance.md). What describes the process
// rather than a scrape (the version, Go and process collectors, and what
// cmd/ registers) stays on the Registry and is gathered when the page is
// read (runtimeFamilies).
//
// The scrape loop writes most values, Reload the reload ones, publish reads
// them all; mu serialises the three.
type selfMetrics struct {
	mu   sync.Mutex
	fams []*ownFamily
	// now, when set (--output.created-timestamps), dates each series as
	// it is made, and the counters are served with those start times.
	now func() time.Time

	up, duration, lastSuccess, bytes, samples, historySeries *ownFamily
	historyLimited                                           *ownFamily
	failures, dropped, disagreements                         *ownFamily
	unwindowed, layoutChanges, restarts, jitter              *ownFamily
	invalidHistograms                                        *ownFamily
	kvDisagreements, nanSkipped, outOfRange                  *ownFamily
	unsummed                                                 *ownFamily
	historyModels, modelsLeftOut                             *ownFamily
	reloadOK, reloadOKTime, reloads                          *ownFamily
}

// ownFamily is one family of the sidecar's own: a single series, or a
// vector over one label whose series are kept sorted by its value, as a
// client_golang registry would print them.
type ownFamily struct {
	name, help string
	typ        model.MetricType
	label      string // the vector's label; "" for a single series
	series     []ownSeries
	now        func() time.Time // the selfMetrics' now
}

type ownSeries struct {
	value   string // the label's value
	labels  labels.Labels
	v       float64
	created float64 // Unix seconds; 0 without selfMetrics.now
}

// find returns the series of label value lv, created at 0 if new.
func (f *ownFamily) find(lv string) *ownSeries {
	i, ok := slices.BinarySearchFunc(f.series, lv, func(s ownSeries, v string) int { return strings.Compare(s.value, v) })
	if !ok {
		ls := labels.FromStrings(model.MetricNameLabel, f.name)
		if f.label != "" {
			ls = labels.FromStrings(model.MetricNameLabel, f.name, f.label, lv)
		}
		created := 0.0
		if f.now != nil {
			created = float64(f.now().UnixNano()) / 1e9
		}
		f.series = slices.Insert(f.series, i, ownSeries{value: lv, labels: ls, created: created})
	}
	return &f.series[i]
}

func (m *selfMetrics) set(f *ownFamily, v float64) {
	m.mu.Lock()
	f.find("").v = v
	m.mu.Unlock()
}

// add adds v to the series of label value lv ("" for a single series).
func (m *selfMetrics) add(f *ownFamily, lv string, v float64) {
	m.mu.Lock()
	f.find(lv).v += v
	m.mu.Unlock()
}

// families renders every family with its current values. The families are
// new at each call (snapshots keep them while they are served); the label
// sets are shared, being immutable.
func (m *selfMetrics) families() []exposition.Family {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, f := range m.fams {
		n += len(f.series)
	}
	// A vector without series is left out, as a registry leaves it out.
	out := make([]exposition.Family, 0, len(m.fams))
	samples := make([]exposition.Sample, n)
	for _, f := range m.fams {
		if len(f.series) == 0 {
			continue
		}
		s := samples[:len(f.series):len(f.series)]
		samples = samples[len(f.series):]
		for j, se := range f.series {
			s[j] = exposition.Sample{Labels: se.labels, Value: se.v}
		}
		fam := exposition.Family{Name: f.name, Help: f.help, Type: f.typ, Samples: s}
		if m.now != nil && f.typ == model.MetricTypeCounter {
			fam.Created = make([]exposition.Created, len(f.series))
			for j, se := range f.series {
				fam.Created[j] = exposition.Created{Labels: withoutName(se.labels), Time: se.created}
			}
		}
		out = append(out, fam)
	}
	return out
}

// newSelfMetrics makes the sidecar's own series; with now set, dated.
func newSelfMetrics(now func() time.Time) *selfMetrics {
	m := &selfMetrics{now: now}
	gauge := func(name, help string) *ownFamily {
		f := &ownFamily{name: name, help: help, typ: model.MetricTypeGauge, now: now}
		f.find("")
		m.fams = append(m.fams, f)
		return f
	}
	counter := func(name, help string) *ownFamily {
		f := gauge(name, help)
		f.typ = model.MetricTypeCounter
		return f
	}
	// A vector's series exist from the start for the values given, so
	// that rate() sees the first increment.
	vector := func(name, help, label string, values ...string) *ownFamily {
		f := &ownFamily{name: name, help: help, typ: model.MetricTypeCounter, label: label, now: now}
		for _, v := range values {
			f.find(v)
		}
		m.fams = append(m.fams, f)
		return f
	}
	m.up = gauge("vllm_up",
		"1 if the last scrape of vLLM's /metrics succeeded and parsed, else 0 (then no vLLM series are served).")
	m.duration = gauge("vllm_normalizer_scrape_duration_seconds",
		"Seconds the last scrape cycle took: fetch, parse, normalise, derive.")
	m.failures = vector("vllm_normalizer_scrape_failures_total",
		"Failed scrapes of vLLM by reason: "+strings.Join(scrape.FailureReasons, ", ")+".",
		"reason", scrape.FailureReasons...)
	m.lastSuccess = gauge("vllm_normalizer_last_scrape_success_timestamp_seconds",
		"Unix time of the last successful scrape of vLLM; 0 before the first.")
	m.bytes = gauge("vllm_normalizer_upstream_bytes",
		"Size in bytes of the last page read from vLLM, after decompression.")
	m.samples = gauge("vllm_normalizer_upstream_samples",
		"Samples on the last page parsed from vLLM.")
	m.dropped = vector("vllm_normalizer_dropped_series_total",
		"Upstream series left out of the output by reason: duplicate (same series twice on a page), invalid_name (UTF-8-only names, a label name repeated in one series), invalid_bound (a histogram le or summary quantile that is not a number), relabel (dropped by metric_relabel_configs), collision (two families mapped to one name, or a family named as a histogram's or summary's samples that could not join it).",
		"reason", dropReasons...)
	m.disagreements = vector("vllm_normalizer_rename_disagreements_total",
		"Scrapes in which a legacy vLLM name and its current name were both exposed with different values; the current name is served.",
		"metric")
	m.unwindowed = counter("vllm_normalizer_history_unwindowed_samples_total",
		"Upstream samples that derivations read but the history did not keep because it already held its series limit; the derived gauges of their model_name and engine are left out meanwhile.")
	m.layoutChanges = counter("vllm_normalizer_bucket_layout_changes_total",
		"Histogram children whose set of bucket bounds changed (a vLLM upgrade): their window restarted from the new layout, so quantiles never mix two layouts.")
	m.invalidHistograms = counter("vllm_normalizer_invalid_histograms_total",
		"Histogram children (of those the derived gauges read) whose bucket counts fell as the bound grew, or that had no +Inf bucket, counted each scrape: no client library prints them, so the page was corrupted upstream. Their quantiles are read as PromQL's histogram_quantile reads them (counts raised to be monotonic; none without +Inf, nor for a sum over engines or ranks that holds one without +Inf); the server's series are served as printed.")
	m.restarts = counter("vllm_normalizer_upstream_restarts_detected_total",
		"Counter series found restarted by their _created time or vLLM's process_start_time_seconds (moved past the previous scrape) although their value did not go down; they counted from zero.")
	m.jitter = vector("vllm_normalizer_metadata_jitter_total",
		"Changes of an upstream start time that were not a restart, by metadata: _created (per sample) or process_start_time_seconds. A restart is a start time that moved past the previous scrape; any other change is ignored.",
		"metadata", MetadataCreated, MetadataProcessStart)
	m.kvDisagreements = counter("vllm_normalizer_kv_capacity_disagreements_total",
		"Engine-scrapes whose page printed the KV cache's size in tokens (vLLM's kv_cache_size_tokens) beside blocks and block size whose product differs; the printed tokens are used (on hybrid-KV models block_size is the smallest group's).")
	m.nanSkipped = counter("vllm_normalizer_collapse_nan_samples_total",
		"NaN samples left out where the series of ranks, processes or engines are combined into one (as PromQL's max and min leave NaN out); where all are NaN there is no series, never a NaN.")
	m.unsummed = vector("vllm_normalizer_unsummed_histograms_total",
		"Model histograms left out of the compatibility page's sums over engines, ranks and processes, once a scrape each, by reason: no_inf (a child printed no +Inf bucket, so the sum would have no total count; the derived quantiles leave such a sum out too), bucket_bounds (the children print different bounds). The server's own series are served as printed.",
		"reason", routing.UnsummedReasons[:]...)
	m.outOfRange = vector("vllm_normalizer_out_of_range_samples_total",
		"Samples of a gauge role outside its range (a negative count, a usage outside 0..1, an infinite size, a count past 2^53), and of a counter or histogram role below zero (a reset, then an increase of all it had counted, otherwise), by canonical family: read as NaN by every combination of ranks, processes and engines (left out of maxima, a sum with one withdrawn), as a NaN the server printed. The server's own series are served as printed.",
		"family")
	m.historySeries = gauge("vllm_normalizer_history_series",
		"Upstream series the history keeps for the derived gauges.")
	m.historyLimited = gauge(HistoryLimitedName,
		"1 when the last scrape had samples the history could not keep (--history.max-series) or models beyond --history.max-models: the models they belong to have none of their derived gauges (nor a diagnosis, for the models left out), so that none reads less load than there is. 0 otherwise.")
	m.historyModels = gauge("vllm_normalizer_history_models",
		"model_name values whose state (windows, idle times, the diagnosis) is kept across scrapes, at most --history.max-models.")
	m.modelsLeftOut = gauge("vllm_normalizer_history_models_left_out",
		"model_name values of the last page beyond --history.max-models: none of their derived gauges and no diagnosis are served.")
	m.reloadOK = gauge("vllm_normalizer_config_last_reload_successful",
		"1 if the last load of the configuration succeeded, 0 if it failed (the previous one is still in use).")
	m.reloadOKTime = gauge("vllm_normalizer_config_last_reload_success_timestamp_seconds",
		"Unix time of the last successful load of the configuration.")
	m.reloads = vector("vllm_normalizer_config_reloads_total",
		"Reloads of the configuration (SIGHUP or POST /-/reload) by outcome: success or failure.",
		"outcome", "success", "failure")
	return m
}

// Reasons an upstream series is left out, the values of
// vllm_normalizer_dropped_series_total's reason label.
const (
	dropDuplicate    = "duplicate"     // the same series twice on a page
	dropInvalidName  = "invalid_name"  // a name valid only under UTF-8 naming, or a label name repeated
	dropInvalidBound = "invalid_bound" // a bucket le or summary quantile that is not a number
	dropRelabel      = "relabel"       // dropped by metric_relabel_configs
	dropCollision    = "collision"     // two families served under one name
)

// dropReasons lists every reason, so that each counter series exists from
// the start and the docs test can check them all.
var dropReasons = []string{dropDuplicate, dropInvalidName, dropInvalidBound, dropRelabel, dropCollision}

// HistoryLimitedName is the gauge, on both pages, that says the series cap
// bit.
const HistoryLimitedName = "vllm_normalizer_history_limited"

// The metadata label values of vllm_normalizer_metadata_jitter_total.
const (
	MetadataCreated      = "_created"
	MetadataProcessStart = "process_start_time_seconds"
)

// registerVersion puts on reg the one collector of its own that describes
// the sidecar process rather than a scrape: its build version.
func registerVersion(reg prometheus.Registerer) error {
	return reg.Register(versioncollector.NewCollector("vllm_normalizer"))
}

// fromDTO turns gathered client_golang families (the version, Go and
// process collectors, what cmd/ registers) into exposition families, so
// that they are encoded with the same writer as vLLM's; with dated, with
// the start times client_golang keeps for its counters and histograms.
func fromDTO(mfs []*dto.MetricFamily, dated bool) []exposition.Family {
	out := make([]exposition.Family, 0, len(mfs))
	var b labels.ScratchBuilder
	for _, mf := range mfs {
		name := mf.GetName()
		f := exposition.Family{Name: name, Help: mf.GetHelp()}
		add := func(m *dto.Metric, sample string, v float64, extra ...string) {
			b.Reset()
			b.Add(model.MetricNameLabel, sample)
			for _, lp := range m.GetLabel() {
				b.Add(lp.GetName(), lp.GetValue())
			}
			for i := 0; i+1 < len(extra); i += 2 {
				b.Add(extra[i], extra[i+1])
			}
			b.Sort()
			s := exposition.Sample{Labels: b.Labels(), Value: v}
			if dated && (sample == name || sample == name+"_count") {
				// One start per child: with its counter or its _count.
				if at, ok := startOf(m); ok {
					f.Created = append(f.Created, exposition.Created{Labels: withoutName(s.Labels), Time: float64(at.UnixNano()) / 1e9})
				}
			}
			if m.TimestampMs != nil {
				s.TimestampMs, s.HasTimestamp = m.GetTimestampMs(), true
			}
			f.Samples = append(f.Samples, s)
		}
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				f.Type = model.MetricTypeCounter
				add(m, name, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				f.Type = model.MetricTypeGauge
				add(m, name, m.GetGauge().GetValue())
			case dto.MetricType_SUMMARY:
				f.Type = model.MetricTypeSummary
				for _, q := range m.GetSummary().GetQuantile() {
					add(m, name, q.GetValue(), "quantile", string(exposition.AppendFloat(nil, q.GetQuantile())))
				}
				add(m, name+"_sum", m.GetSummary().GetSampleSum())
				add(m, name+"_count", float64(m.GetSummary().GetSampleCount()))
			case dto.MetricType_HISTOGRAM:
				f.Type = model.MetricTypeHistogram
				h := m.GetHistogram()
				inf := false
				for _, bk := range h.GetBucket() {
					inf = inf || math.IsInf(bk.GetUpperBound(), 1)
					add(m, name+"_bucket", float64(bk.GetCumulativeCount()), "le", string(exposition.AppendFloat(nil, bk.GetUpperBound())))
				}
				if !inf {
					add(m, name+"_bucket", float64(h.GetSampleCount()), "le", "+Inf")
				}
				add(m, name+"_sum", h.GetSampleSum())
				add(m, name+"_count", float64(h.GetSampleCount()))
			default:
				f.Type = model.MetricTypeUnknown
				add(m, name, m.GetUntyped().GetValue())
			}
		}
		out = append(out, f)
	}
	return out
}

// startOf is the start time client_golang keeps for a counter or
// histogram series, false for other types or none.
func startOf(m *dto.Metric) (time.Time, bool) {
	if ts := m.GetCounter().GetCreatedTimestamp(); ts != nil && ts.IsValid() {
		return ts.AsTime(), true
	}
	if ts := m.GetHistogram().GetCreatedTimestamp(); ts != nil && ts.IsValid() {
		return ts.AsTime(), true
	}
	return time.Time{}, false
}

// withoutName is l without __name__: a start time's child labels.
func withoutName(l labels.Labels) labels.Labels {
	return l.DropReserved(func(n string) bool { return n == model.MetricNameLabel })
}
