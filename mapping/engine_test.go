package mapping

import (
	"slices"
	"testing"
)

// TestCompareEngines: engine labels sort as numbers where both are (data
// parallel ranks "0" to "15"), as strings otherwise, and equal ones are 0.
func TestCompareEngines(t *testing.T) {
	engines := []string{"10", "2", "b", "0", "a", "1"}
	slices.SortFunc(engines, CompareEngines)
	if want := []string{"0", "1", "2", "10", "a", "b"}; !slices.Equal(engines, want) {
		t.Errorf("sorted %q, want %q", engines, want)
	}
	for _, c := range []struct {
		a, b string
		want int
	}{{"2", "10", -1}, {"10", "2", 1}, {"7", "7", 0}, {"10", "9x", -1}, {"rank-2", "rank-10", 1}} {
		if got := CompareEngines(c.a, c.b); got != c.want {
			t.Errorf("CompareEngines(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
