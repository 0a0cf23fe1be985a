package window

import (
	"runtime"
	"strconv"
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
