package diagnosis

import (
	"testing"
	"time"
)

// TestRelapseRunsAtTheLoad: at DIAGNOSIS_LOAD the relapse scenario runs on
// the overload's pod at the load's share of its capacity, as the overload
// does (its overload 2x, its flash 3x, its relapse 1.8x that), and at the
// scenarios' own rate (20 requests/s) without a load. At 20 requests/s at
// every load the self-exciting pod, 6.4 saturated, was overloaded before,
// between and after its overloads, and the relapse never tested its shift.
func TestRelapseRunsAtTheLoad(t *testing.T) {
	for _, c := range []struct {
		name string
		tr   simTraffic
	}{{"bursty", &simBursty}, {"selfexciting", &simSelfExciting}} {
		for _, load := range []float64{0, 0.5, 0.95} {
			over := simBurstyPlan(c.tr, simOverload, 1, load)
			pl := simBurstyPlan(c.tr, simRelapse, 1, load)
			want := over.load(time.Second).rate
			if load == 0 && want != simOverloadPod.rate {
				t.Fatalf("%s: the overload's pod at its own rate runs %.3g requests/s, want %.3g", c.name, want, simOverloadPod.rate)
			}
			long := pl.shift + 3*pl.baseline/2
			for _, at := range []struct {
				what   string
				at     time.Duration
				factor float64
			}{
				{"before the shift", time.Second, 1},
				{"in the long overload", pl.shift + time.Second, 2},
				{"in the calm after it", long + time.Second, 1},
				{"in the relapse", pl.back + time.Second, 1.8},
			} {
				l := pl.load(at.at)
				if got := l.rate; got != want*at.factor {
					t.Errorf("%s at load %.0f %%, %s: %.3g requests/s, want %.3g (the overload pod's %.3g × %.1f)", c.name, 100*load, at.what, got, want*at.factor, want, at.factor)
				}
				if l.traffic != c.tr {
					t.Errorf("%s at load %.0f %%, %s: another traffic than the run's", c.name, 100*load, at.what)
				}
			}
		}
	}
}
