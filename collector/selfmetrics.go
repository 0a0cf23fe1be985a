package collector

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/scrape"
)

// selfMetrics are the sidecar's own health series. They live on a
// client_golang registry so that the version, Go and process collectors
// and the config-reload metrics of cmd/ sit beside them.
type selfMetrics struct {
	up            prometheus.Gauge
	duration      prometheus.Gauge
	failures      *prometheus.CounterVec
	lastSuccess   prometheus.Gauge
	bytes         prometheus.Gauge
	samples       prometheus.Gauge
	dropped       *prometheus.CounterVec
	disagreements *prometheus.CounterVec
	unwindowed    prometheus.Counter
	layoutChanges prometheus.Counter
	restarts      prometheus.Counter
	historySeries prometheus.Gauge
	reloadOK      prometheus.Gauge
	reloadOKTime  prometheus.Gauge
	reloads       *prometheus.CounterVec
}

func newSelfMetrics(reg prometheus.Registerer) (*selfMetrics, error) {
	m := &selfMetrics{
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_up",
			Help: "1 if the last scrape of vLLM's /metrics succeeded and parsed, else 0 (then no vLLM series are served).",
		}),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_normalizer_scrape_duration_seconds",
			Help: "Seconds the last scrape cycle took: fetch, parse, normalise, derive.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm_normalizer_scrape_failures_total",
			Help: "Failed scrapes of vLLM by reason: refused, network, timeout, http_status, body_too_large, empty, parse, sample_limit, truncated, label_limit, label_name_length_limit, label_value_length_limit.",
		}, []string{"reason"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_normalizer_last_scrape_success_timestamp_seconds",
			Help: "Unix time of the last successful scrape of vLLM; 0 before the first.",
		}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_normalizer_upstream_bytes",
			Help: "Size in bytes of the last page read from vLLM, after decompression.",
		}),
		samples: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_normalizer_upstream_samples",
			Help: "Samples on the last page parsed from vLLM.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm_normalizer_dropped_series_total",
			Help: "Upstream series left out of the output by reason: duplicate (same series twice on a page), invalid_name (UTF-8-only names), invalid_bound (a histogram le or summary quantile that is not a number), relabel (dropped by metric_relabel_configs), collision (two families mapped to one name).",
		}, []string{"reason"}),
		disagreements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm_normalizer_rename_disagreements_total",
			Help: "Scrapes in which a legacy vLLM name and its current name were both exposed with different values; the current name is served.",
		}, []string{"metric"}),
		unwindowed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vllm_normalizer_history_unwindowed_samples_total",
			Help: "Upstream samples that derivations read but the history did not keep because it already held its series limit; the derived gauges of their model_name and engine are left out meanwhile.",
		}),
		layoutChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vllm_normalizer_histogram_layout_changes_total",
			Help: "Histogram children whose set of bucket bounds changed (a vLLM upgrade): their window restarted from the new layout, so quantiles never mix two layouts.",
		}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vllm_normalizer_upstream_restarts_detected_total",
			Help: "Counter series found restarted by their _created time or vLLM's process_start_time_seconds although their value did not go down; they counted from zero.",
		}),
		historySeries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_normalizer_history_series",
			Help: "Upstream series the history keeps for the derived gauges.",
		}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_normalizer_config_last_reload_successful",
			Help: "1 if the last load of the configuration succeeded, 0 if it failed (the previous one is still in use).",
		}),
		reloadOKTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_normalizer_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful load of the configuration.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm_normalizer_config_reloads_total",
			Help: "Reloads of the configuration (SIGHUP or POST /-/reload) by outcome: success or failure.",
		}, []string{"outcome"}),
	}
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	for _, r := range scrape.FailureReasons {
		m.failures.WithLabelValues(r)
	}
	for _, r := range []string{"duplicate", "invalid_name", "invalid_bound", "relabel", "collision"} {
		m.dropped.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.up, m.duration, m.failures, m.lastSuccess, m.bytes, m.samples, m.dropped, m.disagreements,
		m.unwindowed, m.layoutChanges, m.restarts, m.historySeries,
		m.reloadOK, m.reloadOKTime, m.reloads, versioncollector.NewCollector("vllm_normalizer")} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// fromDTO turns gathered client_golang families into exposition families,
// so the sidecar's own metrics are encoded with the same writer as vLLM's.
func fromDTO(mfs []*dto.MetricFamily) []exposition.Family {
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
