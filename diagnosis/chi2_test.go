package diagnosis

import (
	"math"
	"testing"
)

// TestChi2AgainstPrintedTables: the χ² distribution function the starved
// reference's bound reads (phiUpper) against printed χ² tables' points, and
// the bound itself on 4 and 11 degrees of freedom (df over the 30 % point:
// 4 / 2.195, 11 / 8.148).
func TestChi2AgainstPrintedTables(t *testing.T) {
	for _, c := range []struct {
		df      int
		x, want float64
	}{
		{1, 3.841, 0.95}, {4, 7.779, 0.90}, {4, 2.195, 0.30}, {10, 18.307, 0.95}, {11, 8.148, 0.30}, {30, 50.892, 0.99},
	} {
		if got := chi2CDF(c.df, c.x); math.Abs(got-c.want) > 0.001 {
			t.Errorf("P(χ²_%d ≤ %g) = %.4f, want %.3f", c.df, c.x, got, c.want)
		}
	}
	for df, want := range map[int]float64{4: 4 / 2.195, 11: 11 / 8.148} {
		if got := phiUpper(df); math.Abs(got-want) > 0.002 {
			t.Errorf("phiUpper(%d) = %.4f, want %.3f", df, got, want)
		}
	}
}
