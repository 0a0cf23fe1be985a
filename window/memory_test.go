package window

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// BenchmarkHistoryMemory measures the history's own bytes with a full 5m
// window at one point a second (the default windows at a 1 s or shorter
// interval): heap in use after filling a History with series counters of
// 301 points each, less the heap before (the pages' samples and labels are
// the parser's, allocated before). It reports B/series, all of one series'
// cost, and B/point, that divided by the points kept: the model
// docs/performance.md states.
func BenchmarkHistoryMemory(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run("series="+strconv.Itoa(n), func(b *testing.B) {
			in := NewInputs(map[string]Input{"c_total": {Key: 1, Kind: Counter}})
			samples := make([]exposition.Sample, n)
			for i := range samples {
				samples[i].Labels = labels.FromStrings(model.MetricNameLabel, "c_total", "engine", strconv.Itoa(i), "model_name", "m")
			}
			fams := []exposition.Family{{Name: "c_total", Type: model.MetricTypeCounter, Samples: samples}}
			start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			var perSeries, points float64
			for b.Loop() {
				before := heapInUse()
				h := New([]time.Duration{time.Minute, 5 * time.Minute}, time.Second, in)
				for t := range 400 {
					for i := range samples {
						samples[i].Value = float64(t * i)
					}
					h.Observe(start.Add(time.Duration(t)*time.Second), fams)
				}
				after := heapInUse()
				runtime.KeepAlive(h)
				if h.StoredSeries() != n {
					b.Fatalf("%d series stored, want %d", h.StoredSeries(), n)
				}
				points = float64(h.StoredPoints())
				perSeries = float64(after-before) / float64(n)
			}
			b.ReportMetric(perSeries, "B/series")
			b.ReportMetric(perSeries/points, "B/point")
			b.ReportMetric(points, "points")
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkHistoryObserve measures one Observe at steady state (both
// default windows full, a point pruned every scrape) of a constructed page
// shaped like vLLM V1's per engine: three counters, two histograms of 13
// buckets with _sum, _count and _created, two gauges and the process start
// time.
func BenchmarkHistoryObserve(b *testing.B) {
	for _, engines := range []int{1, 16} {
		b.Run("engines="+strconv.Itoa(engines), func(b *testing.B) {
			bySample := map[string]Input{"g0": {Key: 1, Kind: Gauge}, "g1": {Key: 2, Kind: Gauge}}
			var fams []exposition.Family
			add := func(name string, typ model.MetricType, lbls ...string) {
				if len(fams) == 0 || fams[len(fams)-1].Name != name {
					fams = append(fams, exposition.Family{Name: name, Type: typ})
				}
				f := &fams[len(fams)-1]
				f.Samples = append(f.Samples, exposition.Sample{Labels: labels.FromStrings(lbls...)})
			}
			bounds := []string{"0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "25", "50", "+Inf"}
			for k, c := range []string{"c0", "c1", "c2"} {
				bySample[c+"_total"] = Input{Key: Key(10 + k), Kind: Counter}
				for e := range engines {
					add(c+"_total", model.MetricTypeCounter, model.MetricNameLabel, c+"_total", "engine", strconv.Itoa(e), "model_name", "m")
				}
			}
			for k, hn := range []string{"h0", "h1"} {
				bySample[hn+"_bucket"] = Input{Key: Key(20 + 3*k), Kind: Bucket}
				bySample[hn+"_sum"] = Input{Key: Key(21 + 3*k), Kind: Counter}
				bySample[hn+"_count"] = Input{Key: Key(22 + 3*k), Kind: Counter}
				for e := range engines {
					for _, le := range bounds {
						add(hn+"_bucket", model.MetricTypeHistogram, model.MetricNameLabel, hn+"_bucket", "engine", strconv.Itoa(e), "le", le, "model_name", "m")
					}
				}
				for _, suf := range []string{"_sum", "_count"} {
					for e := range engines {
						add(hn+suf, model.MetricTypeHistogram, model.MetricNameLabel, hn+suf, "engine", strconv.Itoa(e), "model_name", "m")
					}
				}
				for e := range engines {
					add(hn+"_created", model.MetricTypeGauge, model.MetricNameLabel, hn+"_created", "engine", strconv.Itoa(e), "model_name", "m")
				}
			}
			for _, g := range []string{"g0", "g1"} {
				for e := range engines {
					add(g, model.MetricTypeGauge, model.MetricNameLabel, g, "engine", strconv.Itoa(e), "model_name", "m")
				}
			}
			add("process_start_time_seconds", model.MetricTypeGauge, model.MetricNameLabel, "process_start_time_seconds")
			start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			born := float64(start.Unix()) - 3600
			h := New([]time.Duration{time.Minute, 5 * time.Minute}, time.Second, NewInputs(bySample))
			step := 0
			observe := func() {
				for fi := range fams {
					f := &fams[fi]
					for si := range f.Samples {
						switch {
						case f.Name == "process_start_time_seconds" || strings.HasSuffix(f.Name, "_created"):
							f.Samples[si].Value = born
						case f.Type == model.MetricTypeGauge:
							f.Samples[si].Value = float64((step + si) % 7)
						default:
							f.Samples[si].Value = float64(step * (si%13 + 1))
						}
					}
				}
				h.Observe(start.Add(time.Duration(step)*time.Second), fams)
				step++
			}
			for range 400 {
				observe()
			}
			for b.Loop() {
				observe()
			}
		})
	}
}
