package main

import (
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fos-study/vllm-normalizer/mapping"
)

// mapperLoader builds a Mapper from the flags and the config file. Every
// load parses into a new value; the collector swaps it in only on success,
// so a bad file never replaces a good configuration.
type mapperLoader struct {
	path      string
	catalogue *mapping.Catalogue
	opts      mapping.Options
}

func (l *mapperLoader) load() (*mapping.Mapper, error) {
	opts := l.opts
	if l.path != "" {
		b, err := os.ReadFile(l.path)
		if err != nil {
			return nil, fmt.Errorf("--config.file: %w", err)
		}
		cfg, err := mapping.LoadConfig(b)
		if err != nil {
			return nil, fmt.Errorf("--config.file %s: %w", l.path, err)
		}
		opts.Config = cfg
	}
	return mapping.New(l.catalogue, opts)
}

type reloadMetrics struct {
	ok        prometheus.Gauge
	okTime    prometheus.Gauge
	reloads   *prometheus.CounterVec
	firstLoad bool
}

func newReloadMetrics(reg prometheus.Registerer) *reloadMetrics {
	m := &reloadMetrics{
		ok: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_normalizer_config_last_reload_successful",
			Help: "1 if the last load of the configuration succeeded, 0 if it failed (the previous one is still in use).",
		}),
		okTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_normalizer_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful load of the configuration.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm_normalizer_config_reloads_total",
			Help: "Reloads of the configuration (SIGHUP or POST /-/reload) by outcome: success or failure.",
		}, []string{"outcome"}),
		firstLoad: true,
	}
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	reg.MustRegister(m.ok, m.okTime, m.reloads)
	return m
}

func (m *reloadMetrics) succeeded(t time.Time) {
	m.ok.Set(1)
	m.okTime.Set(float64(t.UnixNano()) / 1e9)
	if m.firstLoad {
		m.firstLoad = false
		return
	}
	m.reloads.WithLabelValues("success").Inc()
}

func (m *reloadMetrics) failed() {
	m.ok.Set(0)
	m.reloads.WithLabelValues("failure").Inc()
}
