package derive

import (
	"math"
	"time"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/window"
)

// testDeriver is the Deriver of the built-in catalogue's roles.
var testDeriver = func() *Deriver {
	cat, err := mapping.LoadCatalogue()
	if err != nil {
		panic(err)
	}
	return New(cat.Roles())
}()

// Inputs is testDeriver's.
func Inputs() *window.Inputs { return testDeriver.Inputs() }

// testHistory is a window.History keeping what the derivations read, with
// Derive as a method so that tests read as one scrape after another.
type testHistory struct {
	*window.History
	d *Deriver
}

// NewHistory returns a history over windows at resolution that keeps the
// derivations' inputs.
func NewHistory(windows []time.Duration, resolution time.Duration) testHistory {
	return testHistory{window.New(windows, resolution, Inputs()), testDeriver}
}

// newHistorySLO is NewHistory for derivations with SLO targets.
func newHistorySLO(windows []time.Duration, resolution time.Duration, slos SLOTargets) testHistory {
	d, err := testDeriver.WithSLOs(slos)
	if err != nil {
		panic(err)
	}
	return testHistory{window.New(windows, resolution, d.Inputs()), d}
}

func (h testHistory) Derive(now time.Time, groupBy []string) []exposition.Family {
	return h.d.Derive(h.History, now, groupBy)
}

func (h testHistory) Groupings(now time.Time, groupBys ...[]string) [][]exposition.Family {
	return h.d.Groupings(h.History, now, groupBys...)
}

// windowedFamilies is the number of derived families with a window label
// that a single-engine page without KV connector or admission control has
// (topologyGauges and admissionGauges are checked on their own pages).
func windowedFamilies() int {
	n := 0
	for _, s := range specs {
		if !s.Now && !topologyGauges[s.Name] && !admissionGauges[s.Name] {
			n++
		}
	}
	return n
}

func (h testHistory) storedSeries() int { return h.StoredSeries() }
func (h testHistory) storedPoints() int { return h.StoredPoints() }

// sameFloat compares floats to 1e-9 relative, NaN equal to NaN.
func sameFloat(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b))
}
