package window

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// histFamily is histogram h of two engines with cumulative bucket counts
// counts[e] at bounds les (the last "+Inf" unless left out), in the order
// given (vLLM prints them by bound).
func histFamily(les []string, counts [][]float64) []exposition.Family {
	f := exposition.Family{Name: "h", Type: model.MetricTypeHistogram}
	for e, cs := range counts {
		for i, le := range les {
			f.Samples = append(f.Samples, exposition.Sample{
				Labels: labels.FromStrings(model.MetricNameLabel, "h_bucket", "engine", strconv.Itoa(e), "le", le),
				Value:  cs[i],
			})
		}
	}
	return []exposition.Family{f}
}

// TestInvalidHistogramsCounted: a histogram child whose bucket counts fall
// as the bound grows, or that has no +Inf bucket, is one no server's
// client library prints (a page cut or corrupted upstream); the quantiles
// read it as PromQL's histogram_quantile does, and each observation counts
// it, so that the sidecar's own metrics show it. Valid children, equal
// neighbouring counts and bounds printed out of order count nothing.
func TestInvalidHistogramsCounted(t *testing.T) {
	inputs := NewInputs(map[string]Input{"h_bucket": {Key: 3, Kind: Bucket}})
	for _, c := range []struct {
		name   string
		les    []string
		counts [][]float64
		want   int
	}{
		{"valid", []string{"0.1", "1", "+Inf"}, [][]float64{{1, 5, 5}, {0, 0, 2}}, 0},
		{"out of order, valid", []string{"1", "+Inf", "0.1"}, [][]float64{{5, 6, 1}, {2, 2, 0}}, 0},
		{"one child falls", []string{"0.1", "1", "+Inf"}, [][]float64{{1, 5, 4}, {0, 0, 2}}, 1},
		{"falls out of order", []string{"1", "+Inf", "0.1"}, [][]float64{{5, 6, 7}, {2, 2, 0}}, 1},
		{"no +Inf", []string{"0.1", "1"}, [][]float64{{1, 5}, {0, 2}}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := New([]time.Duration{time.Minute}, time.Second, inputs)
			for i := range 3 {
				h.Observe(at(float64(i)), histFamily(c.les, c.counts))
				if got := h.LastObservation().InvalidHistograms; got != c.want {
					t.Errorf("observation %d: %d invalid histogram children, want %d", i, got, c.want)
				}
				// Only the children without +Inf are kept out of sums.
				h.Read(at(float64(i)), func(r *Reader) {
					for _, s := range r.Series() {
						if want := !slices.Contains(c.les, "+Inf"); s.WithoutInf() != want {
							t.Errorf("observation %d: %s WithoutInf %v, want %v", i, s.Labels(), s.WithoutInf(), want)
						}
					}
				})
			}
		})
	}
}
