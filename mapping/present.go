package mapping

import (
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// PresentStats counts what Present removed.
type PresentStats struct {
	// Dropped counts series removed on purpose: by the drop list, by
	// relabel drop/keep rules, or left without a metric name by relabelling.
	Dropped int
	// Collisions counts what was removed because it would have been served
	// twice: a series that relabelling made identical to an earlier one or
	// moved into a family of another type, a whole family whose name
	// (after the name style) an earlier family already had, and the series
	// of a family named as a histogram's or summary's samples that could
	// not join it (see exposition.FoldShadowed).
	Collisions int
}

// StyleName spells a metric name in the Mapper's name style.
func (m *Mapper) StyleName(name string) string {
	if m.style == NameStyleUnderscore {
		return strings.ReplaceAll(name, ":", "_")
	}
	return name
}

// Present prepares normalised families, with the legacy families
// Normalize kept (Report.Kept), for output: it drops the families the
// configuration lists, adds legacy aliases when enabled (for legacy names
// the input does not hold), applies metric_relabel_configs per series,
// spells names in the name style, and returns the families sorted by name.
// The input is not modified.
func (m *Mapper) Present(in []exposition.Family) ([]exposition.Family, PresentStats) {
	var st PresentStats
	work := make([]exposition.Family, 0, len(in)+len(m.aliases))
	for i := range in {
		f := &in[i]
		if m.drop[f.Name] || m.drop[f.BaseName()] {
			st.Dropped += len(f.Samples)
			continue
		}
		work = append(work, *f)
	}
	if len(m.aliases) > 0 {
		index := make(map[string]int, len(in))
		for i := range in {
			if _, dup := index[in[i].Name]; !dup {
				index[in[i].Name] = i
			}
		}
		for _, a := range m.aliases {
			src, ok := index[a.current]
			if !ok || m.drop[a.legacy] {
				continue
			}
			if _, upstreamHasIt := index[a.legacy]; upstreamHasIt {
				continue // never a second family of that name
			}
			af := in[src].Rename(a.legacy)
			af.Help = "Alias of " + a.current + " emitted by vllm-normalizer for legacy consumers. " + in[src].Help
			work = append(work, af)
		}
	}
	if len(m.relabel) > 0 {
		work = m.applyRelabel(work, &st)
	}

	// work is Present's own: the output is compacted into it.
	out := work[:0]
	ni := m.getNameIndexes()
	defer m.putNameIndexes(ni)
	seen := ni.seen
	for _, f := range work {
		name := m.StyleName(f.Name)
		if seen[name] {
			st.Collisions++
			continue
		}
		seen[name] = true
		if name != f.Name {
			f = m.styled(f)
		}
		out = append(out, f)
	}
	// Generic, not sort.SliceStable: its reflection-based swaps of
	// 88-byte families were nearly all of Present's time.
	slices.SortStableFunc(out, func(a, b exposition.Family) int { return strings.Compare(a.Name, b.Name) })
	// Aliases, relabelling and the name style can name a family as the
	// samples of a histogram ("vllm_x_count" beside "vllm:x" once styled).
	out, clashes := exposition.FoldShadowed(out)
	st.Collisions += clashes
	return out, st
}

// PresentMemo keeps how Present arranged a page when every family it
// returned is one of its input's as it was (no alias, relabelling, name
// style or fold made a new one): which input family is at each place. It
// is the caller's (one per stream of pages); the zero value is empty.
type PresentMemo struct {
	m     *Mapper // the Mapper that filled it; nil: empty
	order []int   // nil: the last page's arrangement is not kept
	st    PresentStats
}

// PresentShape is Present, filling memo (when not nil). With same, in
// must be a page of the shape memo was last filled from (the same
// families, types, help and series in the same order, only the values
// changed): Present drops, orders and folds by names and types only, so
// the arrangement memo holds is taken, if this Mapper filled it and it
// was kept. Sorting the families was half of Present's CPU on the demo's
// one-engine page (BenchmarkScrapeCycle's profile).
func (m *Mapper) PresentShape(in []exposition.Family, memo *PresentMemo, same bool) ([]exposition.Family, PresentStats) {
	if memo != nil && same && memo.m == m && memo.order != nil {
		out := make([]exposition.Family, len(memo.order))
		for k, i := range memo.order {
			out[k] = in[i]
		}
		return out, memo.st
	}
	out, st := m.Present(in)
	if memo != nil {
		*memo = PresentMemo{m: m, order: arrangement(in, out), st: st}
	}
	return out, st
}

// arrangement returns, for each family of out, the index of the family of
// in it is, unchanged (its samples the same slice); nil when one is not.
func arrangement(in, out []exposition.Family) []int {
	first := make(map[string]int, len(in))
	for i := range in {
		if _, dup := first[in[i].Name]; !dup {
			first[in[i].Name] = i
		}
	}
	order := make([]int, len(out))
	for k := range out {
		i, ok := first[out[k].Name]
		if !ok || !sameFamily(&in[i], &out[k]) {
			return nil
		}
		order[k] = i
	}
	return order
}

// sameFamily says whether a and b are one family: the same metadata and
// the same slices of samples and start times.
func sameFamily(a, b *exposition.Family) bool {
	return a.Name == b.Name && a.Type == b.Type && a.Help == b.Help && a.Unit == b.Unit &&
		sameSlice(a.Samples, b.Samples) && sameSlice(a.Created, b.Created)
}

func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// styled returns a copy of f with family and sample names in the name style.
func (m *Mapper) styled(f exposition.Family) exposition.Family {
	out := f
	out.Name = m.StyleName(f.Name)
	out.Samples = make([]exposition.Sample, len(f.Samples))
	var b labels.Builder
	for i, s := range f.Samples {
		b.Reset(s.Labels)
		b.Set(model.MetricNameLabel, m.StyleName(s.Labels.Get(model.MetricNameLabel)))
		s.Labels = b.Labels()
		out.Samples[i] = s
	}
	return out
}

// famAcc collects the series of one output family during relabelling.
type famAcc struct {
	fam    exposition.Family
	own    bool // metadata comes from the upstream family of this name
	series map[uint64][]int
}

// applyRelabel runs metric_relabel_configs on every series. A series whose
// __name__ changes moves to the family of its new name: the family name is
// the new sample name minus the suffix the old sample had in its family
// (_bucket, _sum, _count, ...), with the old family's type, help and unit.
// When the suffix is gone the series becomes an untyped family of its own.
func (m *Mapper) applyRelabel(in []exposition.Family, st *PresentStats) []exposition.Family {
	var accs []*famAcc
	byName := map[string]*famAcc{}
	get := func(name string, from *exposition.Family, typ model.MetricType, own bool) (*famAcc, bool) {
		if a, ok := byName[name]; ok {
			if a.fam.Type != typ {
				return nil, false
			}
			if own && !a.own {
				a.fam.Help, a.fam.Unit, a.own = from.Help, from.Unit, true
			}
			return a, true
		}
		a := &famAcc{
			fam:    exposition.Family{Name: name, Type: typ, Help: from.Help, Unit: from.Unit},
			own:    own,
			series: map[uint64][]int{},
		}
		accs = append(accs, a)
		byName[name] = a
		return a, true
	}

	var b labels.Builder
	for i := range in {
		f := &in[i]
		if len(f.Samples) == 0 {
			// A family printed without series keeps its header.
			if _, ok := get(f.Name, f, f.Type, true); !ok {
				st.Collisions++
			}
			continue
		}
		for _, s := range f.Samples {
			b.Reset(s.Labels)
			if !relabel.ProcessBuilder(&b, m.relabel...) {
				st.Dropped++
				continue
			}
			newName := b.Get(model.MetricNameLabel)
			if newName == "" {
				st.Dropped++
				continue
			}
			oldName := s.Labels.Get(model.MetricNameLabel)
			famName, typ, own := f.Name, f.Type, true
			if newName != oldName {
				own = false
				suffix, _ := exposition.SampleSuffix(f.Name, f.Type, oldName)
				if base, ok := strings.CutSuffix(newName, suffix); ok && base != "" {
					famName = base
				} else {
					famName, typ = newName, model.MetricTypeUnknown
				}
			}
			a, ok := get(famName, f, typ, own)
			if !ok {
				st.Collisions++
				continue
			}
			l := b.Labels()
			h := l.Hash()
			dup := false
			for _, j := range a.series[h] {
				if labels.Equal(a.fam.Samples[j].Labels, l) {
					dup = true
					break
				}
			}
			if dup {
				st.Collisions++
				continue
			}
			a.series[h] = append(a.series[h], len(a.fam.Samples))
			s.Labels = l
			a.fam.Samples = append(a.fam.Samples, s)
		}
	}
	out := make([]exposition.Family, 0, len(accs))
	for _, a := range accs {
		out = append(out, a.fam)
	}
	return out
}
