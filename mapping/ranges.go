package mapping

import (
	"math"
	"slices"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// MaxCount is the largest count a float64 holds exactly (2^53): a number
// of requests or tokens beyond it is none a server can have.
const MaxCount = 1 << 53

// Range is the values a sample of a gauge role can take, ok false for a
// role without one (counters and histograms, whose restarts the history
// reads; info and state gauges, whose labels carry the data): the range
// roles.yaml gives, else a share (unit ratio) 0 to 1, a number of requests
// or tokens 0 to MaxCount.
func (d RoleDef) Range() (lo, hi float64, ok bool) {
	if d.Type != RoleTypeGauge {
		return 0, 0, false
	}
	if len(d.Bounds) == 2 {
		return d.Bounds[0], d.Bounds[1], true
	}
	switch d.Unit {
	case "ratio":
		return 0, 1, true
	case "requests", "tokens":
		return 0, MaxCount, true
	}
	return 0, 0, false
}

// InRange reports whether v is a value of role d: within its range, and
// finite. A role without a range takes any value.
func (d RoleDef) InRange(v float64) bool {
	lo, hi, ok := d.Range()
	return !ok || v >= lo && v <= hi // NaN fails both
}

// withinRange returns fams with each sample of a ranged gauge role that
// lies outside the role's range (a negative count, a usage past 1, an
// infinite or absurd size), and each negative sample of a counter or
// histogram role (which would read as a reset, and its return as an
// increase of all it had counted), set to NaN, counted by family in st: every
// collapse over engines and processes then leaves it out, or withdraws
// its sum, as it does a NaN the server printed. NaN itself is left for
// the collapses to count. fams is not changed (the vLLM profile's
// canonical page shares its samples with the served page, which keeps
// the server's values): a family with such a sample is copied.
func withinRange(fams []exposition.Family, roles *Roles, st *CanonicalStats) []exposition.Family {
	out := fams
	copied := false
	for fi := range fams {
		d, ok := roles.ByFamily(fams[fi].Name)
		if !ok {
			continue
		}
		_, _, ranged := d.Range()
		counts := d.Type == RoleTypeCounter || d.Type == RoleTypeHistogram
		if !ranged && !counts {
			continue
		}
		var samples []exposition.Sample
		for si, s := range fams[fi].Samples {
			if math.IsNaN(s.Value) || d.InRange(s.Value) && !(counts && s.Value < 0) {
				continue
			}
			if samples == nil {
				samples = slices.Clone(fams[fi].Samples)
			}
			samples[si].Value = math.NaN()
			if st.OutOfRange == nil {
				st.OutOfRange = map[string]int{}
			}
			st.OutOfRange[fams[fi].Name]++
		}
		if samples == nil {
			continue
		}
		if !copied {
			out, copied = slices.Clone(fams), true
		}
		out[fi].Samples = samples
	}
	return out
}
