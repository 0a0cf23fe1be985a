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
