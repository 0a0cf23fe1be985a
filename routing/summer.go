package routing

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// Sums keeps the sums of counter and histogram families per model_name
// (and per le for buckets) from one scrape to the next, with one rule for
// every view that prints them (the compatibility page, the GenAI view):
// never down when an engine restarts or drops off the page, nothing for a
// histogram whose children (engines, ranks, processes) print different
// bounds, or one without +Inf (Totals.Unsummed counts them). Sum
// advances them once per scrape and returns the scrape's Totals, from
// which any view names and prints its samples when it is read. Not safe
// for concurrent use; its zero value is ready.
type Sums struct {
	layouts map[string]*sumLayout // by input family name
}

// Totals are one scrape's sums, by role. They never change once made, so
// views built from them on any goroutine, at any time, agree.
type Totals struct {
	byRole map[mapping.Role]Total
}

// Total is one family's sums in one scrape.
type Total struct {
	// Type is the summed family's type (counter or histogram), Family its
	// name on the page.
	Type   model.MetricType
	Family string
	layout *sumLayout
	values []float64 // per layout output
	// born is the layout's start times by model as this scrape left them.
	born map[string]float64
}

// Restarts are the restarts the upstream announced in one scrape, as
// window.History judges them (ObserveStats): a _created time or the
// process start time that moved past the previous scrape, jitter ignored.
type Restarts struct {
	// All: the process start time says every counter restarted.
	All bool
	// Series are the counter series (canonical labels, with __name__)
	// whose _created time says they restarted.
	Series []labels.Labels
	// StartOf, when not nil, makes the sums keep their created times (see
	// Total.Created): it returns when the input series of labels l began
	// counting, in Unix seconds (its _created time, else the upstream's
	// process start time), 0 when the page does not say. Now is the
	// scrape's time, in Unix seconds.
	StartOf func(l labels.Labels) float64
	Now     float64
}

// announced returns whether the input of labels l restarted by the
// announcement, nil when nothing was announced.
func (r Restarts) announced() func(l labels.Labels) bool {
	switch {
	case r.All:
		return func(labels.Labels) bool { return true }
	case len(r.Series) == 0:
		return nil
	}
	set := make(map[uint64][]labels.Labels, len(r.Series))
	for _, l := range r.Series {
		set[l.Hash()] = append(set[l.Hash()], l)
	}
	return func(l labels.Labels) bool {
		return slices.ContainsFunc(set[l.Hash()], func(m labels.Labels) bool { return labels.Equal(l, m) })
	}
}

// Sum advances the sums of the families of want that family finds (nil:
// none on the page) by this scrape, whose announced restarts are r, and
// returns the scrape's totals (with their created times when r.StartOf is
// set). Calls must come once per scrape, in scrape order: each carries the
// last one's totals.
func (s *Sums) Sum(family func(mapping.Role) *exposition.Family, want []mapping.Role, r Restarts) Totals {
	announced := r.announced()
	var t Totals // its map made for the first family found: none for a page without legacy twins
	for _, role := range want {
		f := family(role)
		if f == nil || len(f.Samples) == 0 {
			continue
		}
		l := s.layouts[f.Name]
		if l == nil || !l.matches(f) {
			old := l
			l = newSumLayout(f)
			l.carry(old)
			if s.layouts == nil {
				s.layouts = map[string]*sumLayout{}
			}
			if len(s.layouts) >= maxSumLayouts {
				clear(s.layouts) // a profile's families after a reload
			}
			s.layouts[f.Name] = l
		}
		values := l.apply(f, announced)
		if r.StartOf != nil {
			l.judgeBirths(f, r)
		}
		if t.byRole == nil {
			t.byRole = make(map[mapping.Role]Total, len(want))
		}
		t.byRole[role] = Total{Type: f.Type, Family: f.Name, layout: l, values: values, born: l.born}
	}
	return t
}

// Why a model's histogram is not summed (Totals.Unsummed).
const (
	// UnsummedNoInf: a child (engine, rank, process) printed no +Inf
	// bucket, so the sum would have no total count, as for the derived
	// quantiles (window.Series.WithoutInf).
	UnsummedNoInf = iota
	// UnsummedBounds: the children print different bucket bounds.
	UnsummedBounds
	NumUnsummed
)

// UnsummedReasons name the Unsummed* reasons, for a metric's label.
var UnsummedReasons = [NumUnsummed]string{UnsummedNoInf: "no_inf", UnsummedBounds: "bucket_bounds"}

// Unsummed counts the models whose histograms this scrape left out of the
// sums, one a family, by why (Unsummed*).
func (t Totals) Unsummed() (n [NumUnsummed]int) {
	for _, tot := range t.byRole {
		for i, k := range tot.layout.unsummed {
			n[i] += k
		}
	}
	return n
}

// Of returns role r's totals, false when the scrape summed none.
func (t Totals) Of(r mapping.Role) (Total, bool) {
	tot, ok := t.byRole[r]
	return tot, ok && len(tot.values) > 0
}

// Samples returns the totals as new samples named after name (with the
// _bucket, _sum, _count or _total suffix), one per model_name (and le),
// models in order, a histogram's buckets by bound, then _sum and _count.
func (t Total) Samples(name string) []exposition.Sample {
	if len(t.values) == 0 {
		return nil
	}
	lsets := t.layout.labelsFor(name)
	out := make([]exposition.Sample, len(t.values))
	for i, v := range t.values {
		out[i] = exposition.Sample{Labels: lsets[i], Value: v}
	}
	return out
}

// Created returns when each model's sums began counting, one per model
// with a known time, in the order of Samples: the child labels
// (model_name) Samples gives that model's samples, without __name__ and le.
func (t Total) Created() []exposition.Created {
	if len(t.values) == 0 || len(t.born) == 0 {
		return nil
	}
	var out []exposition.Created
	for j, k := range t.layout.out {
		if j > 0 && t.layout.out[j-1].model == k.model {
			continue
		}
		at, ok := t.born[k.model]
		if !ok || math.IsNaN(at) {
			continue
		}
		l := labels.EmptyLabels()
		if k.model != "" {
			l = labels.FromStrings(mapping.LabelModel, k.model)
		}
		out = append(out, exposition.Created{Labels: l, Time: at})
	}
	return out
}

// maxSumLayouts bounds the layouts Sums keeps (the summed table's
// families, ~15).
const maxSumLayouts = 256

// sumLayout is what Sums computes from a family's label sets: for each
// input sample the output sample its value adds to (-1: none), and the
// output samples' keys.
//
// Which input sample adds to which output sample, and the output keys,
// depend only on the input label sets, which are the same from one scrape
// to the next: Sums keeps one layout per family and, while the family's
// label sets are those of the last scrape, only adds the values.
//
// A sum over engines must not go down when one engine restarts or drops
// off the page for a scrape: a reader taking its rate would read a reset
// of the whole sum and count the other engines' totals again. So each
// input keeps what it counted before it last restarted, and an input gone
// from the page keeps adding its last total (see carry): every output is
// monotonic, like the counters it sums, and a summed histogram's buckets
// stay cumulative. On a page where nothing restarts and nothing goes,
// each output is exactly the plain sum.
//
// One restart rule, the history's (window.History), judged per child (a
// counter series, or one histogram's buckets, _sum and _count together):
//   - a restart the page announces (a _created time or the process start
//     time moved past the last scrape: Restarts) is a restart, whatever
//     the values did, so a fast restart that counted past the old value
//     before the next scrape is not read as a small increase;
//   - a child with a value lower than its last holds its last values for
//     that scrape; still lower at the next scrape, it restarted (its
//     values then count from zero, the held ones still count); back at or
//     above them, it was a one-scrape dip, never counted twice.
type sumLayout struct {
	family string
	typ    model.MetricType
	in     []labels.Labels
	to     []int32
	out    []sumKey
	// Per input: its last value (held through a dip), and what it
	// counted before it last restarted; its child. Only Sum touches them.
	last, before []float64
	child        []int32
	// Per child: whether it was lower than its last values at the last
	// scrape (held: a dip, or a restart the next scrape confirms).
	dipped []bool
	// Inputs gone from the page that still add their total to an output.
	gone []goneInput
	// unsummed counts the models whose histogram is not summed, by why.
	unsummed [NumUnsummed]int
	// born is when each model's sums began counting, in Unix seconds (NaN:
	// unknown), judged at the first scrape that summed the model
	// (judgeBirths) and kept while the model has sums: they never go down,
	// so an upstream restart folded into them starts no new life. Replaced
	// whole, never changed, once a Totals holds it.
	born map[string]float64

	// The output label sets by the name printed, made on first use by a
	// reader (any goroutine): a layout lasts while the page's label sets
	// do, so each name's are made once, not once a scrape.
	mu    sync.Mutex
	named map[string][]labels.Labels
}

// sumKey is one output sample: a model's counter, or one suffix (and le)
// of a model's histogram.
type sumKey struct{ model, suffix, le string }

// goneInput is an input that left the page: it adds total to output to.
// Back on the page (same labels), however long after, it goes on from
// where it was, as Prometheus reads a series that comes back: a lower
// value is a restart, a higher one counted on. Only the maxGone youngest
// are remembered by their labels; an older one's total stays in the
// output for good, as the counts it made.
type goneInput struct {
	in     labels.Labels // "" once it is folded into the output for good
	to     int32
	last   float64
	before float64
	age    int // scrapes since it went
}

// maxGone is how many gone inputs a layout remembers by their labels,
// which bounds its memory when label values churn (a pid per restart).
const maxGone = 64

// maxNames bounds the names a layout keeps label sets for (the canonical
// name, legacy names, the GenAI name, under one name style).
const maxNames = 8

func (l *sumLayout) matches(f *exposition.Family) bool {
	if f.Name != l.family || f.Type != l.typ || len(f.Samples) != len(l.in) {
		return false
	}
	for i := range f.Samples {
		if !labels.Equal(f.Samples[i].Labels, l.in[i]) {
			return false
		}
	}
	return true
}

// labelsFor returns the output label sets named after name.
func (l *sumLayout) labelsFor(name string) []labels.Labels {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls, ok := l.named[name]; ok {
		return ls
	}
	ls := make([]labels.Labels, len(l.out))
	for i, k := range l.out {
		sample := name + k.suffix
		if k.suffix == "_total" {
			// An OpenMetrics counter family is named without _total.
			sample = strings.TrimSuffix(name, "_total") + "_total"
		}
		kv := []string{model.MetricNameLabel, sample}
		if k.le != "" {
			kv = append(kv, model.BucketLabel, k.le)
		}
		if k.model != "" {
			kv = append(kv, mapping.LabelModel, k.model)
		}
		ls[i] = labels.FromStrings(kv...)
	}
	if l.named == nil || len(l.named) >= maxNames {
		l.named = map[string][]labels.Labels{}
	}
	l.named[name] = ls
	return ls
}

// apply sums f's values as laid out: each output value is 0 plus its
// inputs' values in page order, as a map of sums filled in page order
// would have it. announced says which inputs' restarts the page announced
// (nil: none).
func (l *sumLayout) apply(f *exposition.Family, announced func(labels.Labels) bool) []float64 {
	if len(l.out) == 0 {
		return nil
	}
	// Each child's fate this scrape: restarted, held (dipped), or on.
	lower := make([]bool, len(l.dipped))
	restarted := make([]bool, len(l.dipped))
	for i, s := range f.Samples {
		if l.to[i] < 0 || math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			continue
		}
		c := l.child[i]
		if s.Value < l.last[i] {
			lower[c] = true
		}
		if announced != nil && !restarted[c] && announced(s.Labels) {
			restarted[c] = true
		}
	}
	for c := range l.dipped {
		restarted[c] = restarted[c] || lower[c] && l.dipped[c]
		l.dipped[c] = lower[c] && !restarted[c]
	}
	out := make([]float64, len(l.out))
	for i, s := range f.Samples {
		j := l.to[i]
		if j < 0 {
			continue
		}
		v := s.Value
		if math.IsNaN(v) || math.IsInf(v, 0) {
			// This scrape's sum is what a plain sum is; the input goes on
			// from its last finite value (window.Increases records no
			// such value either), or one +Inf would stay in the sum for
			// good.
			out[j] += v
			continue
		}
		switch c := l.child[i]; {
		case restarted[c]:
			l.before[i] += l.last[i] // its count so far still counts
			l.last[i] = v
		case l.dipped[c]:
			// Held: a dip, or a restart the next scrape confirms.
		default:
			l.last[i] = v
		}
		out[j] += l.before[i] + l.last[i]
	}
	for k := range l.gone {
		g := &l.gone[k]
		out[g.to] += g.before + g.last
		g.age++
	}
	return out
}

// carry takes over from old, the layout of the last scrape: inputs of the
// same labels go on from their values, restarts and held dips there; inputs that
// left the page, or left it earlier and are not back, keep adding their
// totals (goneInput), to the output of the same key. What adds to an
// output this layout no longer has (a model gone) is dropped with it.
func (l *sumLayout) carry(old *sumLayout) {
	l.last, l.before = make([]float64, len(l.in)), make([]float64, len(l.in))
	if old == nil {
		return
	}
	for _, k := range l.out {
		if at, ok := old.born[k.model]; ok {
			if l.born == nil {
				l.born = map[string]float64{}
			}
			l.born[k.model] = at
		}
	}
	outs := make(map[sumKey]int32, len(l.out))
	for j, o := range l.out {
		outs[o] = int32(j)
	}
	ins := make(map[string]int, len(l.in))
	for i, in := range l.in {
		if l.to[i] >= 0 {
			ins[in.String()] = i
		}
	}
	// The inputs that gone before, then the last scrape's: an input back on
	// the page takes its state (the last scrape's wins).
	type state struct {
		in           labels.Labels
		out          sumKey
		last, before float64
		age          int
		dipped       bool // its child held its values at the last scrape
	}
	var prev []state
	for _, g := range old.gone {
		prev = append(prev, state{g.in, old.out[g.to], g.last, g.before, g.age, false})
	}
	for i, in := range old.in {
		if j := old.to[i]; j >= 0 {
			prev = append(prev, state{in, old.out[j], old.last[i], old.before[i], 0, old.dipped[old.child[i]]})
		}
	}
	// The youngest maxGone gone inputs keep their labels: the age of the
	// maxGone-th youngest is the oldest remembered.
	var ages []int
	for _, p := range prev {
		if _, back := ins[p.in.String()]; !back && !p.in.IsEmpty() {
			ages = append(ages, p.age)
		}
	}
	oldest := math.MaxInt
	if len(ages) > maxGone {
		slices.Sort(ages)
		oldest = ages[maxGone-1]
	}
	kept := 0
	forGood := map[int32]int{} // output -> its entry of totals kept for good
	for _, p := range prev {
		if i, ok := ins[p.in.String()]; ok && !p.in.IsEmpty() {
			l.last[i], l.before[i] = p.last, p.before
			l.dipped[l.child[i]] = l.dipped[l.child[i]] || p.dipped
			continue
		}
		j, ok := outs[p.out]
		if !ok || p.last+p.before == 0 {
			continue
		}
		if !p.in.IsEmpty() && p.age <= oldest && kept < maxGone {
			l.gone = append(l.gone, goneInput{in: p.in, to: j, last: p.last, before: p.before, age: p.age})
			kept++
			continue
		}
		// For good: no input takes it back, and one entry per output
		// holds all such totals.
		if k, ok := forGood[j]; ok {
			l.gone[k].before += p.before + p.last
			continue
		}
		forGood[j] = len(l.gone)
		l.gone = append(l.gone, goneInput{in: labels.EmptyLabels(), to: j, before: p.before + p.last})
	}
}

// judgeBirths dates the sums of the models this scrape sums for the first
// time: the earliest start of the inputs that had counted something, for
// every count the sums hold came after it; the scrape's time when none
// had; unknown (NaN) when one of them does not say when it started, or
// says a time after the scrape.
func (l *sumLayout) judgeBirths(f *exposition.Family, r Restarts) {
	var born map[string]float64
	for i, s := range f.Samples {
		j := l.to[i]
		if j < 0 {
			continue
		}
		m := l.out[j].model
		if _, ok := l.born[m]; ok {
			continue
		}
		if born == nil {
			born = make(map[string]float64, len(l.born)+1)
			maps.Copy(born, l.born)
		}
		at, seen := born[m]
		if !seen {
			at = r.Now
		}
		if !math.IsNaN(at) && l.before[i]+l.last[i] > 0 {
			if start := r.StartOf(s.Labels); start > 0 && start <= r.Now {
				at = min(at, start)
			} else {
				at = math.NaN()
			}
		}
		born[m] = at
	}
	if born != nil {
		l.born = born
	}
}

func newSumLayout(f *exposition.Family) *sumLayout {
	l := &sumLayout{family: f.Name, typ: f.Type, in: make([]labels.Labels, len(f.Samples)), to: make([]int32, len(f.Samples)),
		child: make([]int32, len(f.Samples))}
	children := map[string]int32{} // labels but __name__ and le -> child
	var b labels.Builder
	index := map[sumKey]int32{}
	var keys []sumKey
	leSets := map[string]map[string]string{} // model -> child -> its le set, as a string
	for i, s := range f.Samples {
		l.in[i] = s.Labels
		l.to[i] = -1
		suffix, ok := exposition.SampleSuffix(f.Name, f.Type, s.Name())
		if !ok {
			continue
		}
		k := sumKey{s.Labels.Get(mapping.LabelModel), suffix, s.Labels.Get(model.BucketLabel)}
		j, seen := index[k]
		if !seen {
			j = int32(len(keys))
			index[k] = j
			keys = append(keys, k)
		}
		l.to[i] = j
		b.Reset(s.Labels)
		b.Del(model.MetricNameLabel, model.BucketLabel)
		ck := b.Labels().String()
		c, ok := children[ck]
		if !ok {
			c = int32(len(children))
			children[ck] = c
		}
		l.child[i] = c
		if suffix == "_bucket" {
			// By child, not by engine: ranks may be told apart by other
			// labels (SGLang's tp_rank), and each must print the same bounds.
			if leSets[k.model] == nil {
				leSets[k.model] = map[string]string{}
			}
			leSets[k.model][ck] += k.le + ","
		}
	}
	withdrawn := map[string]bool{} // models whose histogram is not summed
	for m, perSource := range leSets {
		sets := map[string]bool{}
		noInf := false
		for _, set := range perSource {
			sets[set] = true
			noInf = noInf || lacksInf(set)
		}
		switch {
		case noInf:
			l.unsummed[UnsummedNoInf]++
		case len(sets) > 1:
			l.unsummed[UnsummedBounds]++
		default:
			continue
		}
		withdrawn[m] = true
	}
	order := func(suffix string) int {
		switch suffix {
		case "_bucket":
			return 0
		case "_sum":
			return 1
		case "_count":
			return 2
		}
		return 3
	}
	sorted := make([]int32, len(keys))
	for i := range sorted {
		sorted[i] = int32(i)
	}
	slices.SortStableFunc(sorted, func(i, j int32) int {
		a, b := keys[i], keys[j]
		return cmp.Or(cmp.Compare(a.model, b.model), cmp.Compare(order(a.suffix), order(b.suffix)), compareLe(a.le, b.le))
	})
	outOf := make([]int32, len(keys))
	for i := range outOf {
		outOf[i] = -1
	}
	for _, ki := range sorted {
		k := keys[ki]
		if withdrawn[k.model] {
			continue
		}
		outOf[ki] = int32(len(l.out))
		l.out = append(l.out, k)
	}
	for i, j := range l.to {
		if j >= 0 {
			l.to[i] = outOf[j]
		}
	}
	l.dipped = make([]bool, len(children))
	return l
}

// lacksInf reports whether a child's le set (each bound followed by a
// comma) has no +Inf: no total count, so no sum that holds the child.
func lacksInf(set string) bool {
	for le := range strings.SplitSeq(set, ",") {
		if f, err := strconv.ParseFloat(le, 64); err == nil && math.IsInf(f, 1) {
			return false
		}
	}
	return true
}

// compareLe orders bucket bounds as numbers (+Inf last).
func compareLe(a, b string) int {
	fa, erra := strconv.ParseFloat(a, 64)
	fb, errb := strconv.ParseFloat(b, 64)
	if erra != nil || errb != nil {
		return strings.Compare(a, b)
	}
	return cmp.Compare(fa, fb)
}
