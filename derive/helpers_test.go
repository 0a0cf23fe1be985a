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
type testHistory struct{ *window.History }

// NewHistory returns a history over windows at resolution that keeps the
// derivations' inputs.
func NewHistory(windows []time.Duration, resolution time.Duration) testHistory {
	return testHistory{window.New(windows, resolution, Inputs())}
}

func (h testHistory) Derive(now time.Time, groupBy []string) []exposition.Family {
	return testDeriver.Derive(h.History, now, groupBy)
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
