package window

import (
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

func TestIncrease(t *testing.T) {
	for _, c := range []struct{ last, v, want float64 }{
		{10, 15, 5},
		{10, 10, 0},
		{10, 3, 3}, // restarted and counted 3 since
		{10, 0, 0},
		{0, 7, 7},
	} {
		if got := Increase(c.last, c.v); got != c.want {
			t.Errorf("Increase(%v, %v) = %v, want %v", c.last, c.v, got, c.want)
		}
	}
}

// TestIncreases walks two series through first sight, rises, a restart, a
// duplicate on one page, values that are not numbers, an absence shorter
// than keep (the series goes on where it was) and one longer (it is
// forgotten and comes back as new).
func TestIncreases(t *testing.T) {
	a := labels.FromStrings("__name__", "c_total", "engine", "0")
	b := labels.FromStrings("__name__", "c_total", "engine", "1")
	x := NewIncreases(4)
	type obs struct {
		l     labels.Labels
		v     float64
		inc   float64
		isNew bool
	}
	step := func(round int, want ...obs) {
		t.Helper()
		x.Next()
		for _, o := range want {
			inc, isNew := x.Observe(o.l, o.v)
			if inc != o.inc || isNew != o.isNew {
				t.Errorf("round %d: Observe(%s, %v) = %v, %v; want %v, %v", round, o.l, o.v, inc, isNew, o.inc, o.isNew)
			}
		}
	}
	step(1, obs{a, 100, 0, true}, obs{b, 5, 0, true})
	step(2, obs{a, 130, 30, false}, obs{b, 5, 0, false})
	step(3, obs{a, 4, 4, false}, obs{b, 9, 4, false})                                 // a restarted
	step(4, obs{a, 10, 6, false}, obs{a, 50, 0, false}, obs{b, math.NaN(), 0, false}) // a twice: the first stands
	step(5, obs{a, 11, 1, false}, obs{b, math.Inf(1), 0, false}, obs{b, 12, 3, false})
	// b is missing for three observations, then back: it counted 8 since.
	step(6, obs{a, 12, 1, false})
	step(7, obs{a, 13, 1, false})
	step(8, obs{a, 14, 1, false})
	step(9, obs{a, 15, 1, false}, obs{b, 20, 8, false})
	if n := x.Len(); n != 2 {
		t.Errorf("%d series kept, want 2", n)
	}
	// b is then missing for longer than keep: forgotten, it comes back new.
	for r := 10; r <= 16; r++ {
		step(r, obs{a, float64(r + 6), 1, false})
	}
	if n := x.Len(); n != 1 {
		t.Errorf("%d series kept after b was gone for 7 observations (keep 4), want 1", n)
	}
	step(17, obs{a, 23, 1, false}, obs{b, 25, 0, true})
}
