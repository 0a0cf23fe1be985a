package mapping

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// NameStyle is how metric names are spelled on output.
type NameStyle string

// Name styles.
const (
	// NameStyleColon keeps vLLM's names ("vllm:kv_cache_usage_perc").
	NameStyleColon NameStyle = "colon"
	// NameStyleUnderscore turns every ":" in metric names into "_"
	// ("vllm_kv_cache_usage_perc"), as vLLM's Ray exporter spells them.
	NameStyleUnderscore NameStyle = "underscore"
)

// Options configure a Mapper.
type Options struct {
	// LegacyAliases re-emits legacy names (catalogue entries marked alias)
	// from their current families in Present. Off by default: aliases
	// double-count dashboards that sum over vllm:.*.
	LegacyAliases bool
	// NameStyle defaults to NameStyleColon when empty.
	NameStyle NameStyle
	// Config is the user's configuration; nil means none.
	Config *Config
	// Profiles are the server profiles pages are read with; nil means the
	// built-in ones (LoadProfiles).
	Profiles *Profiles
}

// Statuses of a catalogue metric in one scrape.
const (
	StatusPresent    = "present"    // a current name that is served
	StatusRenamed    = "renamed"    // a legacy name this upstream prints; served as printed and under its replacement
	StatusSuperseded = "superseded" // a legacy name this upstream does not print; its replacement carries the data
	StatusLegacy     = "legacy"     // removed upstream without successor, but this upstream still exposes it
	StatusRemoved    = "removed"    // removed upstream without successor, and not exposed here
	StatusAbsent     = "absent"     // a current name this upstream does not expose
	// A current name that this V1 release prints only after its first
	// request (catalogue after_first_request), on a page where no request
	// has finished yet.
	StatusUntilFirstRequest = "until_first_request"
)

// Engines as reported in UpstreamInfo.
const (
	EngineV0      = "v0"
	EngineV1      = "v1"
	EngineUnknown = "unknown"
)

// Report describes what Normalize found in one scrape.
type Report struct {
	// Statuses has one entry per catalogue metric, sorted by Metric.
	Statuses []Status
	// LegacyInUse are the legacy family names (renamed or removed
	// upstream) that this upstream still exposes, sorted.
	LegacyInUse []string
	// Kept are the families the upstream printed under a legacy name that
	// Normalize renamed (or left out as the twin of a current family),
	// exactly as printed. They are not in Normalize's output, so that
	// derivations only ever see current names; the page serves them
	// (Present) beside their current names, because a consumer reading
	// the name the upstream printed must not lose it behind the sidecar.
	Kept []exposition.Family
	// Disagreements are current family names whose legacy twin, exposed
	// on the same page, had other values or series; the current family's
	// own values were served. Sorted.
	Disagreements []string
	Upstream      UpstreamInfo
}

// Status of one catalogue metric.
type Status struct {
	Metric, Status, Replacement string
	// Source is the server's own family a mapped name is served from.
	Source string
}

// UpstreamInfo is what the page says about the server that printed it.
type UpstreamInfo struct {
	// Server is the profile's server (vllm, sglang, ...) or unknown; set
	// by SetServer, empty until then (rendered as unknown).
	Server string
	// Engine is v0, v1 or unknown (no evidence, or evidence for both), for
	// vLLM only: empty for other servers.
	Engine string
	// Frontend is python or rust for vLLM, empty for other servers.
	Frontend string
	// Role is the pod role (prefill, decode, both) the deployment gave;
	// empty leaves the role label out.
	Role string
	// Labels holds the evidence: "evidence" always, and "version_hint"
	// when the families on the page bound the vLLM release.
	Labels map[string]string
}

// Mapper applies the catalogue and the user's configuration. It is
// immutable after New and safe for concurrent use.
type Mapper struct {
	cat      *Catalogue
	profiles *Profiles
	style    NameStyle
	aliases  []alias
	relabel  []*relabel.Config
	drop     map[string]bool
	// rules by the exposed family name they match.
	rules map[string]*rule
	// nameIndexes holds *nameIndexes for Normalize and Present to reuse:
	// built anew for every page, Normalize's two maps were a third of its
	// allocations and most of its map-building CPU (BenchmarkScrapeCycle's
	// profile). A pool, as a Mapper may normalise pages concurrently.
	nameIndexes sync.Pool
}

// nameIndexes are Normalize's positions by family name, of its input
// (index) and of its output (served), and Present's names already
// presented (seen).
type nameIndexes struct {
	index, served map[string]int
	seen          map[string]bool
}

// getNameIndexes returns empty name indexes, from the pool when it has
// some; putNameIndexes empties them and gives them back.
func (m *Mapper) getNameIndexes() *nameIndexes {
	if ni, ok := m.nameIndexes.Get().(*nameIndexes); ok {
		return ni
	}
	return &nameIndexes{index: map[string]int{}, served: map[string]int{}, seen: map[string]bool{}}
}

func (m *Mapper) putNameIndexes(ni *nameIndexes) {
	clear(ni.index)
	clear(ni.served)
	clear(ni.seen)
	m.nameIndexes.Put(ni)
}

// rule renames one exposed family.
type rule struct {
	// to is the target family name for a plain rename.
	to string
	// splitLabel and split: the target family per value of splitLabel,
	// which is dropped from the series.
	splitLabel string
	split      map[string]string
	// legacy is the legacy name reported in LegacyInUse.
	legacy string
	// current is the current family reported in Disagreements, per target.
	current map[string]string
	// compare is false for _created companions, which hold creation times
	// that legitimately differ between the two names.
	compare bool
	// note is added to a plain rename's HELP; built once, not per scrape.
	note string
}

type alias struct{ current, legacy string }

// Catalogue returns the catalogue the Mapper applies.
func (m *Mapper) Catalogue() *Catalogue { return m.cat }

// Profiles returns the server profiles of this configuration: they are
// swapped with it on reload, so one scrape reads one consistent set.
func (m *Mapper) Profiles() *Profiles { return m.profiles }

var errNilCatalogue = errors.New("mapping: New needs a catalogue; call LoadCatalogue")

// New builds a Mapper. It fails on an unknown name style, or when the
// configuration's extra renames contradict the catalogue.
func New(cat *Catalogue, opts Options) (*Mapper, error) {
	if cat == nil {
		return nil, errNilCatalogue
	}
	m := &Mapper{cat: cat, style: opts.NameStyle, rules: map[string]*rule{}, drop: map[string]bool{}}
	switch m.style {
	case "":
		m.style = NameStyleColon
	case NameStyleColon, NameStyleUnderscore:
	default:
		return nil, fmt.Errorf("name style %q is unknown; use %q or %q", opts.NameStyle, NameStyleColon, NameStyleUnderscore)
	}
	m.profiles = opts.Profiles
	if m.profiles == nil {
		ps, err := LoadProfiles(cat.Roles())
		if err != nil {
			return nil, fmt.Errorf("the built-in server profiles are invalid: %w", err)
		}
		m.profiles = ps
	} else if m.profiles.roles != cat.Roles() {
		return nil, errors.New("mapping: the profiles were loaded with the roles of another catalogue; load them with this catalogue's Roles()")
	}

	for i := range cat.Metrics {
		md := &cat.Metrics[i]
		if !md.IsRenamed() {
			continue
		}
		targets := map[string]string{} // split value ("" for a plain rename) -> final target
		if md.Replacement != "" {
			to, err := cat.resolve(md.Name)
			if err != nil {
				return nil, err
			}
			targets[""] = to
		} else {
			for v, to := range md.Split.Into {
				final, err := cat.resolve(to)
				if err != nil {
					return nil, err
				}
				targets[v] = final
			}
		}
		for _, variant := range nameVariants(md.Name, md.MetricType()) {
			r := &rule{legacy: md.Name, compare: !variant.companion, current: map[string]string{}}
			for v, to := range targets {
				tv := variantOf(to, md.MetricType(), variant)
				r.current[tv] = to
				if md.Split != nil {
					if r.split == nil {
						r.split = map[string]string{}
					}
					r.splitLabel = md.Split.Label
					r.split[v] = tv
				} else {
					r.to = tv
				}
			}
			r.note = renamedNote(variant.name)
			m.rules[variant.name] = r
		}
		if md.Alias && opts.LegacyAliases {
			to, _ := cat.resolve(md.Name)
			m.aliases = append(m.aliases, alias{current: to, legacy: md.Name})
		}
	}

	if c := opts.Config; c != nil {
		for i, er := range c.ExtraRenames {
			if r, ok := m.rules[er.From]; ok {
				return nil, fmt.Errorf("extra_renames[%d]: %q is already renamed by the catalogue (to %s); remove the entry", i, er.From, ruleTargets(r))
			}
			to, err := cat.resolve(er.To)
			if err != nil {
				return nil, err
			}
			m.rules[er.From] = &rule{to: to, legacy: er.From, compare: true, current: map[string]string{to: to}, note: renamedNote(er.From)}
		}
		for _, d := range c.Drop {
			m.drop[d] = true
		}
		m.relabel = c.MetricRelabelConfigs
	}
	return m, nil
}

func ruleTargets(r *rule) string {
	if r.split == nil {
		return r.to
	}
	var ts []string
	for _, t := range r.split {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return strings.Join(ts, ", ")
}

// nameVariant is one way a catalogue family can appear on a page.
type nameVariant struct {
	name      string
	companion bool   // the _created gauge that Python's client adds
	trim      string // suffix removed from the catalogue name
	add       string // suffix added after trimming
}

// nameVariants lists the family names under which the catalogue family
// name can appear: as printed by text format, as an OpenMetrics counter
// family (without _total), and the _created companion gauge.
func nameVariants(name string, t model.MetricType) []nameVariant {
	vs := []nameVariant{{name: name}}
	switch t {
	case model.MetricTypeCounter:
		base := strings.TrimSuffix(name, "_total")
		vs = append(vs,
			nameVariant{name: base, trim: "_total"},
			nameVariant{name: base + "_created", companion: true, trim: "_total", add: "_created"})
	case model.MetricTypeHistogram:
		vs = append(vs, nameVariant{name: name + "_created", companion: true, add: "_created"})
	}
	return vs
}

func variantOf(name string, t model.MetricType, v nameVariant) string {
	return strings.TrimSuffix(name, v.trim) + v.add
}

// Normalize maps legacy family names to current ones; a legacy twin of a
// family the upstream also prints under the current name is left out. The
// output keeps colon names, upstream order and no aliases or relabelling.
// Families that need no change are passed through as they are; renamed
// ones get new samples, so the input is never modified. Every legacy
// family Normalize renamed or left out is in Report.Kept as printed.
func (m *Mapper) Normalize(in []exposition.Family) ([]exposition.Family, Report) {
	return m.NormalizeShape(in, nil, false)
}

// ShapeMemo keeps what Normalize found of a page that depends only on its
// families' names, types, help and series, not on their values: the
// catalogue's statuses, the legacy names in use and what the upstream is.
// It is the caller's (one per stream of pages); the zero value is empty.
type ShapeMemo struct {
	// ReadOnly says the caller never changes a Report's Statuses or
	// LegacyInUse in place: for a page of the memo's shape they are then
	// the memo's own, not copies (9 KB a scrape on the demo's page, a
	// third of NormalizeShape's CPU). Kept when the memo is filled again.
	ReadOnly bool
	m        *Mapper // the Mapper that filled it; nil: empty
	statuses []Status
	legacy   []string
	upstream UpstreamInfo
}

// NormalizeShape is Normalize, filling memo (when not nil) with what
// depends on the page's shape only. With same, in must be a page of the
// shape memo was last filled from (the same families, types, help, units
// and series in the same order, only the values changed: as
// exposition.ParseScratch.Shape tells): what memo holds is taken instead
// of being found again, if this Mapper filled it. Finding the statuses and
// the upstream was half of Normalize's CPU on the demo's one-engine page
// (the sidecar binary's profile), and a page keeps its shape from one
// scrape to the next.
func (m *Mapper) NormalizeShape(in []exposition.Family, memo *ShapeMemo, same bool) ([]exposition.Family, Report) {
	ni := m.getNameIndexes()
	defer m.putNameIndexes(ni)
	index, served := ni.index, ni.served
	for i := range in {
		if _, dup := index[in[i].Name]; !dup {
			index[in[i].Name] = i
		}
	}
	out := make([]exposition.Family, 0, len(in)+2)
	add := func(f exposition.Family) {
		if _, dup := served[f.Name]; dup {
			return // the first family of a name wins; Parse merges, so this is defensive
		}
		served[f.Name] = len(out)
		out = append(out, f)
	}
	twin := func(name string) *exposition.Family {
		if i, ok := index[name]; ok {
			return &in[i]
		}
		if i, ok := served[name]; ok {
			return &out[i]
		}
		return nil
	}
	var legacyInUse, disagree []string
	var kept []exposition.Family
	// Series that only the legacy twin of a served current family has,
	// renamed, by the current family's name: added to it below.
	var onlyLegacy map[string][]exposition.Sample
	keepOnlyLegacy := func(to string, renamed []exposition.Sample, cur *exposition.Family) {
		if extra := missingChildren(renamed, cur); len(extra) > 0 {
			if onlyLegacy == nil {
				onlyLegacy = map[string][]exposition.Sample{}
			}
			onlyLegacy[to] = append(onlyLegacy[to], extra...)
		}
	}

	for i := range in {
		f := &in[i]
		r, ok := m.rules[f.Name]
		if !ok {
			add(*f)
			continue
		}
		legacyInUse = append(legacyInUse, r.legacy)
		kept = append(kept, *f)
		if r.split == nil {
			if cur := twin(r.to); cur != nil {
				if r.compare {
					if differs(f.Samples, cur, func(l labels.Labels) labels.Labels { return renamedLabels(f, l, r.to, "") }) {
						disagree = append(disagree, r.current[r.to])
					}
					keepOnlyLegacy(r.to, f.Rename(r.to).Samples, cur)
				}
				continue
			}
			nf := f.Rename(r.to)
			nf.Help = withNote(f.Help, r.note)
			add(nf)
			continue
		}

		// A split rename: each value of the split label has its own target.
		groups := map[string][]exposition.Sample{}
		for _, s := range f.Samples {
			to, ok := r.split[s.Labels.Get(r.splitLabel)]
			if !ok {
				continue
			}
			groups[to] = append(groups[to], exposition.Sample{
				Labels: renamedLabels(f, s.Labels, to, r.splitLabel), Value: s.Value,
				TimestampMs: s.TimestampMs, HasTimestamp: s.HasTimestamp,
			})
		}
		values := make([]string, 0, len(r.split))
		for v := range r.split {
			values = append(values, v)
		}
		sort.Strings(values)
		for _, v := range values {
			to := r.split[v]
			samples, seen := groups[to]
			if !seen && len(f.Samples) > 0 {
				continue // nothing observed for this value
			}
			if cur := twin(to); cur != nil {
				if r.compare {
					if differs(samples, cur, func(l labels.Labels) labels.Labels { return l }) {
						disagree = append(disagree, r.current[to])
					}
					keepOnlyLegacy(to, samples, cur)
				}
				continue
			}
			add(exposition.Family{
				Name: to, Type: f.Type, Unit: f.Unit, Samples: samples,
				Help: withNote(f.Help, fmt.Sprintf("(renamed from %s{%s=%q} by vllm-normalizer)", f.Name, r.splitLabel, v)),
			})
		}
		// Series with a value the catalogue does not know are not guessed
		// at: they stay under the legacy name only, in the kept family.
	}

	for to, extra := range onlyLegacy {
		i := served[to]
		f := out[i]
		f.Samples = append(slices.Clip(f.Samples), extra...)
		out[i] = f
	}

	rep := Report{
		Disagreements: sortedUnique(disagree),
		Kept:          kept,
	}
	shared := false // rep.Statuses is the memo's: copied before a change
	if memo != nil && same && memo.m == m {
		if memo.ReadOnly {
			// Clipped: an append copies.
			rep.Statuses, rep.LegacyInUse, shared = slices.Clip(memo.statuses), slices.Clip(memo.legacy), true
		} else {
			rep.Statuses, rep.LegacyInUse = slices.Clone(memo.statuses), slices.Clone(memo.legacy)
		}
		rep.Upstream = memo.upstream
		rep.Upstream.Labels = maps.Clone(memo.upstream.Labels)
	} else {
		rep.LegacyInUse = sortedUnique(legacyInUse)
		m.statuses(&rep, in, index, served)
		if memo != nil {
			*memo = ShapeMemo{ReadOnly: memo.ReadOnly, m: m, statuses: slices.Clone(rep.Statuses), legacy: slices.Clone(rep.LegacyInUse), upstream: rep.Upstream}
			memo.upstream.Labels = maps.Clone(rep.Upstream.Labels)
		}
	}
	if rep.Upstream.Engine == EngineV1 && !m.requestFinished(out) {
		for k, i := range m.cat.byNameOrder {
			if rep.Statuses[k].Status == StatusAbsent && m.cat.Metrics[i].AfterFirstRequest != "" {
				if shared {
					rep.Statuses, shared = slices.Clone(rep.Statuses), false
				}
				rep.Statuses[k].Status = StatusUntilFirstRequest
			}
		}
	}
	return out, rep
}

// statuses sets rep's catalogue statuses, the legacy names it adds to
// LegacyInUse and the upstream, from the names of Normalize's input (in,
// index) and output (served): what depends on the page's shape only.
func (m *Mapper) statuses(rep *Report, in []exposition.Family, index, served map[string]int) {
	// In name order: the catalogue's metrics sorted once, when it was
	// loaded (byNameOrder), rather than the statuses at every scrape.
	rep.Statuses = make([]Status, 0, len(m.cat.Metrics))
	for _, i := range m.cat.byNameOrder {
		md := &m.cat.Metrics[i]
		st := Status{Metric: md.Name}
		switch {
		case md.IsRenamed():
			// renamed only when this upstream prints the legacy name: a
			// V1 server must not look as if it relied on V0 names.
			st.Status = StatusSuperseded
			if exposed(index, md) {
				st.Status = StatusRenamed
			}
			st.Replacement = m.cat.replacements[i]
		case md.IsRemoved():
			st.Status = StatusRemoved
			if exposed(index, md) {
				st.Status = StatusLegacy
				rep.LegacyInUse = append(rep.LegacyInUse, md.Name)
			}
		default:
			st.Status = StatusAbsent
			if exposed(served, md) {
				st.Status = StatusPresent
			}
		}
		rep.Statuses = append(rep.Statuses, st)
	}
	rep.LegacyInUse = sortedUnique(rep.LegacyInUse)
	rep.Upstream = m.detectUpstream(in, index)
}

// requestFinished reports whether the page counts a finished request: a
// V1 server that does not, and lacks a family printed only after the first
// request, is fresh rather than missing it.
func (m *Mapper) requestFinished(fams []exposition.Family) bool {
	name := m.cat.Roles().Family(RoleRequestsFinished)
	base, _ := strings.CutSuffix(name, "_total") // not Name+"_total": an allocation a family
	for i := range fams {
		if fams[i].Name != name && (fams[i].Name != base || base == name) {
			continue
		}
		for _, s := range fams[i].Samples {
			if s.Value > 0 {
				return true
			}
		}
	}
	return false
}

// exposed reports whether a family of md's name is in set, in text-format
// or OpenMetrics spelling.
func exposed(set map[string]int, md *Metric) bool {
	if _, ok := set[md.Name]; ok {
		return true
	}
	if md.Type == "counter" {
		_, ok := set[strings.TrimSuffix(md.Name, "_total")]
		return ok
	}
	return false
}

// renamedLabels returns l with the sample name moved from family f to
// family to (keeping suffixes such as _bucket), without label drop.
func renamedLabels(f *exposition.Family, l labels.Labels, to, drop string) labels.Labels {
	suffix, _ := exposition.SampleSuffix(f.Name, f.Type, l.Get(model.MetricNameLabel))
	b := labels.NewBuilder(l)
	b.Set(model.MetricNameLabel, to+suffix)
	if drop != "" {
		b.Del(drop)
	}
	return b.Labels()
}

// differs reports whether any legacy sample, once renamed, is missing from
// cur or has another value there. A current family declared without samples
// (vLLM's KV-offload families beside their legacy transfer_type twins)
// disagrees with nothing: the twin's series are served under its name.
func differs(legacy []exposition.Sample, cur *exposition.Family, rename func(labels.Labels) labels.Labels) bool {
	if len(cur.Samples) == 0 {
		return false
	}
	byHash := make(map[uint64][]int, len(cur.Samples))
	for i := range cur.Samples {
		h := cur.Samples[i].Labels.Hash()
		byHash[h] = append(byHash[h], i)
	}
	for _, s := range legacy {
		l := rename(s.Labels)
		found := false
		for _, j := range byHash[l.Hash()] {
			c := &cur.Samples[j]
			if labels.Equal(c.Labels, l) {
				found = true
				if !sameValue(c.Value, s.Value) {
					return true
				}
				break
			}
		}
		if !found {
			return true
		}
	}
	return false
}

// missingChildren returns the samples of legacy (already renamed) whose
// child is not in cur at all: the series of a gauge or counter, or the whole
// set of buckets, sum and count of a histogram (summary) child. A child cur
// has is never completed from the legacy twin, so one histogram never mixes
// two bucket layouts.
func missingChildren(legacy []exposition.Sample, cur *exposition.Family) []exposition.Sample {
	have := make(map[string]bool, len(cur.Samples))
	for i := range cur.Samples {
		have[childKey(cur.Samples[i].Labels)] = true
	}
	var out []exposition.Sample
	for _, s := range legacy {
		if !have[childKey(s.Labels)] {
			out = append(out, s)
		}
	}
	return out
}

// childKey identifies the child a sample belongs to: its labels without
// __name__, le and quantile.
func childKey(l labels.Labels) string {
	var b strings.Builder
	l.Range(func(lb labels.Label) {
		switch lb.Name {
		case model.MetricNameLabel, model.BucketLabel, model.QuantileLabel:
			return
		}
		b.WriteString(lb.Name)
		b.WriteByte(0xff)
		b.WriteString(lb.Value)
		b.WriteByte(0xff)
	})
	return b.String()
}

func sameValue(a, b float64) bool {
	return a == b || (math.IsNaN(a) && math.IsNaN(b))
}

// renamedNote is the HELP note of a family renamed from the family from.
func renamedNote(from string) string {
	return fmt.Sprintf("(renamed from %s by vllm-normalizer)", from)
}

func withNote(help, note string) string {
	if help == "" {
		return note
	}
	return help + " " + note
}

func sortedUnique(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	sort.Strings(s)
	out := s[:1]
	for _, v := range s[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}
