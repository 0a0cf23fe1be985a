package exposition

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

// ParseOptions bound what one parse may produce.
type ParseOptions struct {
	// SampleLimit fails the parse when the page holds more samples, as
	// Prometheus's sample_limit fails a scrape. 0 means no limit.
	SampleLimit int
	// LabelLimits fail the parse with a *LabelLimitError when one sample
	// breaks them; the zero value sets no limit.
	LabelLimits LabelLimits
	// SymbolTable may be shared across parses of the same upstream to
	// intern label strings; nil allocates a fresh one.
	SymbolTable *labels.SymbolTable
	// Scratch may be shared across parses of the same upstream (never by
	// two at once) so that each reuses the last one's working memory; nil
	// allocates it afresh.
	Scratch *ParseScratch
}

// ParseScratch is working memory that Parse reuses when given it again.
type ParseScratch struct {
	// seen maps the hash of each kept series' labels to its position
	// (family<<32 | sample); more holds further positions in the rare case
	// of two different label sets with one hash.
	seen map[uint64]uint64
	more map[uint64][]uint64
	// families holds, by name, what recent parses found of each family:
	// its name and HELP text, so that a page naming them as the last one
	// did allocates neither again, and its number of samples, so that this
	// parse allocates each family's samples once.
	families map[string]*familyMemo
	// bounds maps le and quantile values already found to be numbers to
	// the spelling Prometheus's parsers give them (see boundLabel): a page
	// repeats the same few bounds in every histogram and summary, and from
	// one scrape to the next.
	bounds map[string]string
	// memo maps the bytes of each series (`name{label="value",...}` as
	// printed) met on recent pages to what parsing them gave, so that a
	// series printed as on the last page, as nearly every series is, costs
	// a map lookup instead of textparse's label decoding, the label-name
	// checks and the hash. Series not met for a while are forgotten (see
	// forgetOldSeries); memoType is the content type they were parsed as.
	memo     map[string]*seriesMemo
	memoType string
	// order holds the remembered series in the order the last page
	// printed them, spare the storage of the order before. Pages print
	// their series in the same order from one scrape to the next, so a
	// series is first compared with the one at its place on the last
	// page (its bytes, in order in memory) before the memo is looked up
	// (a hash of its bytes and a probe scattered in memory): the lookups
	// were about a tenth of a parse's CPU (BenchmarkScrapeCycle's profile).
	order, spare []*seriesMemo
	memoBytes    int    // the keys' bytes
	gen          uint64 // counts parses, to tell which series the last one met
	// textType is the last content type textparse.New read as text format
	// 0.0.4 (textTypeKnown: there was one; "" is a content type too).
	textType      string
	textTypeKnown bool
	// index (family name -> position in the parse's families) and typed
	// (the families a TYPE line named) live only during one parse; kept
	// here so that their storage is reused (BenchmarkScrapeCycle: 9 KB of
	// a one-engine scrape's allocations).
	index map[string]int
	typed map[string]bool
	// samples is how many samples the last parse kept.
	samples int
	// noDuplicates: the last parse ended with no series held twice.
	noDuplicates bool
	// limits are the label limits of the last parse; limitsEpoch counts
	// their changes (from 1), see seriesMemo.passed.
	limits      LabelLimits
	limitsEpoch uint32
	// shape is the last text page parsed in full, for a page that differs
	// from it only in its values (shape.go); spans, keys and vals are
	// working memory for it.
	shape *pageShape
	// shapes counts the shapes recorded, to name them; shapeOf is the
	// one the last parse's families were read as or recorded as (Shape)
	shapes, shapeOf uint64
	spans           []int32
	keys            []string
	vals            []float64
}

// familyMemo is what a parse found of one family.
type familyMemo struct {
	name, help string
	samples    int
	gen        uint64 // the last parse that met it
}

// seriesMemo is what parsing one series' bytes gave: its labels as
// textparse decodes them, its name, its hash and whether checkLabels
// accepts it. The same bytes decode to the same labels under the same TYPE
// line only: textparse normalises le (histograms) and quantile (summaries)
// by the type in effect, so mtype is part of what the memo must match.
type seriesMemo struct {
	mtype model.MetricType // the type of the last TYPE line before the series
	lset  labels.Labels
	name  string
	hash  uint64
	valid bool
	gen   uint64 // the last parse that met it
	key   string // its bytes, the memo's key ("" when not in the memo)
	pos   int32  // its place in the order of the last parse that met it
	// passed is the scratch's limitsEpoch when the labels were last found
	// within the label limits (0: never), so that the check runs again
	// only when the limits change, not for every series at every scrape
	// (about 4 % of a parse, BenchmarkScrapeCycle's profile).
	passed uint32
}

// forgetOldSeries drops the memo of series the last parse did not meet
// once they outnumber those it met (live): an upstream whose label values
// keep changing costs at most twice its page's series in memory.
func (sc *ParseScratch) forgetOldSeries(live int) {
	if len(sc.memo) <= 2*live+256 {
		return
	}
	for k, m := range sc.memo {
		if m.gen != sc.gen {
			delete(sc.memo, k)
			sc.memoBytes -= len(k)
		}
	}
}

// The memo's bounds: its keys copy the series' bytes, so a page of huge
// or countless series would otherwise double its own size in memory.
// Series beyond them are parsed in full every time, as without a memo.
// Real pages are far below: 64 data-parallel vLLM engines print ~30 000
// series in ~2 MB.
var (
	memoMaxSeries = 1 << 16
	memoMaxBytes  = 4 << 20
)

// maxBounds bounds ParseScratch.bounds: an upstream printing ever new
// bounds costs a ParseFloat per sample again, never unbounded memory.
const maxBounds = 4096

// ParseStats counts what a successful parse passed over on purpose.
type ParseStats struct {
	Samples int
	// OpenMetrics says the page was read as OpenMetrics (its Content-Type
	// said so), not as text format 0.0.4.
	OpenMetrics bool
	// DuplicateSeries are samples whose name and labels repeat an earlier
	// sample of the same page; the first one is kept, as Prometheus keeps
	// the first and rejects the rest.
	DuplicateSeries int
	// InvalidNames are samples whose metric or label names are valid only
	// under UTF-8 naming. Text format 0.0.4 consumers (the llm-d endpoint
	// picker parses with legacy validation) would reject the whole page
	// because of one of them, so they are dropped.
	InvalidNames int
	// InvalidBounds are histogram samples whose le label, or summary
	// samples whose quantile label, is not a number. Prometheus stores them
	// as plain labels, but the expfmt parser that routers use rejects a
	// whole page for one of them, so they are dropped.
	InvalidBounds int
	// Collisions are samples of a family named as the samples of a
	// histogram or summary on the page ("x_count" beside histogram "x")
	// that could not join it (see FoldShadowed).
	Collisions int
}

// ErrSampleLimit is wrapped by Parse when the page exceeds ParseOptions.SampleLimit.
var ErrSampleLimit = errors.New("sample limit exceeded")

// TypeConflictError reports a family declared twice with different types:
// no output could describe it faithfully, so the page is rejected.
type TypeConflictError struct {
	Family      string
	First, Then model.MetricType
}

func (e *TypeConflictError) Error() string {
	return fmt.Sprintf("family %q is declared as %s and again as %s; an exposition page must give each family one TYPE", e.Family, e.First, e.Then)
}

// Parse reads one exposition page with Prometheus's own parser (text format
// 0.0.4 or OpenMetrics 1.0, chosen by contentType; an empty or unknown
// content type is read as text format). Samples are grouped into families
// by their TYPE/HELP headers the way Prometheus assigns series to metadata:
// a sample belongs to the family of its own name, else to the family whose
// name it extends by a suffix that the family's type allows (_bucket, _sum,
// _count of a histogram, and so on), else to a new untyped family.
//
// Families whose header appears more than once are merged. Families with
// HELP/TYPE but no samples are kept (with no samples), as vLLM V0 prints
// them. The result is in order of first appearance.
func Parse(body []byte, contentType string, opts ParseOptions) ([]Family, ParseStats, error) {
	var stats ParseStats
	if opts.Scratch != nil {
		opts.Scratch.shapeOf = 0 // until this parse reads or records a shape
	}
	// Prometheus's lexer stops quietly at a NUL byte, which would turn a
	// binary body into an empty but successful page.
	if i := bytes.IndexByte(body, 0); i >= 0 {
		return nil, stats, fmt.Errorf("parse error: NUL byte at offset %d: the body is not a text exposition", i)
	}
	if !utf8.Valid(body) {
		return nil, stats, errors.New("parse error: the body is not valid UTF-8, as every exposition format requires")
	}
	sc := opts.Scratch
	if sc == nil {
		sc = &ParseScratch{}
	}
	// A shape is recorded for text pages only.
	if sh := sc.shape; sh != nil && sh.contentType == contentType && sh.sampleLimit == opts.SampleLimit && sh.limits == opts.LabelLimits {
		fams, vals, ok := sh.reparse(body, sc.vals)
		sc.vals = vals
		if ok {
			sc.shapeOf = sc.shapes
			return fams, sh.stats, nil
		}
	}
	st := opts.SymbolTable
	if st == nil {
		st = labels.NewSymbolTable()
	}
	var p textparse.Parser
	if sc.textTypeKnown && contentType == sc.textType {
		// What textparse.New chose for this content type last time, without
		// parsing the header again (mime.ParseMediaType, ~12 µs a scrape).
		p = textparse.NewPromParser(body, st, false)
	} else {
		var err error
		p, err = textparse.New(body, contentType, st, textparse.ParserOptions{
			FallbackContentType:     "text/plain",
			OpenMetricsSkipSTSeries: true,
		})
		if p == nil {
			return nil, stats, fmt.Errorf("cannot parse content type %q: %w", contentType, err)
		}
		if _, text := p.(*textparse.PromParser); text {
			sc.textType, sc.textTypeKnown = contentType, true
		}
	}
	_, stats.OpenMetrics = p.(*textparse.OpenMetricsParser)
	// record: this page's shape is kept (shape.go), and while it is, each
	// sample's Value is its slot (the value is in vals) until the end.
	// Nothing in between reads a value.
	_, text := p.(*textparse.PromParser)
	record := text && len(body) > 0 && body[len(body)-1] == '\n' && len(body) <= memoMaxBytes
	spans, keys, vals := sc.spans[:0], sc.keys[:0], sc.vals[:0]

	if sc.seen == nil {
		sc.seen = make(map[uint64]uint64, bytes.Count(body, []byte{'\n'}))
	}
	clear(sc.seen)
	clear(sc.more)
	if sc.memo == nil || sc.memoType != contentType {
		sc.memo = make(map[string]*seriesMemo, len(sc.families))
		sc.memoType, sc.memoBytes, sc.order = contentType, 0, nil
	}
	// order is this page's remembered series in the order it printed
	// them; next is where in the last page's the series read now is
	// expected.
	order, next := sc.spare[:0], 0
	// While every series is the one the last page printed at its place,
	// and that page held no series twice, none is held twice so far: the
	// check for duplicates starts at the first that differs (seeKept).
	skipDuplicates := sc.noDuplicates
	sc.noDuplicates = false
	sc.gen++
	memoLive := 0
	if sc.limitsEpoch == 0 || opts.LabelLimits != sc.limits {
		sc.limits = opts.LabelLimits
		sc.limitsEpoch++
	}
	if sc.index == nil {
		sc.index, sc.typed = make(map[string]int, len(sc.families)), map[string]bool{}
	}
	clear(sc.index)
	clear(sc.typed)
	index, typed := sc.index, sc.typed // family name -> position in fams; families a TYPE line named
	var (
		fams = make([]Family, 0, len(sc.families))
		// samples is where the families recent parses found get their
		// samples: one array for the page instead of one per family
		// (about 5 % of a parse's CPU was their allocations,
		// BenchmarkScrapeCycle's profile).
		samples = make([]Sample, 0, sc.samples)
		lset    labels.Labels
		// curType is the type of the last TYPE line read, as textparse
		// keeps it: it decides how le and quantile values are decoded.
		curType model.MetricType
		// The family of the previous sample: samples of one family are
		// nearly always printed together.
		lastName string
		lastFam  = -1
	)
	family := func(name string) *Family {
		if i, ok := index[name]; ok {
			return &fams[i]
		}
		index[name] = len(fams)
		f := Family{Name: name, Type: model.MetricTypeUnknown}
		if m := sc.families[name]; m != nil && m.samples > 0 {
			if m.samples <= cap(samples)-len(samples) {
				// Capped: a family growing past it moves to its own array.
				n := len(samples)
				samples = samples[:n+m.samples]
				f.Samples = samples[n:n:len(samples)]
			} else {
				f.Samples = make([]Sample, 0, m.samples)
			}
		}
		fams = append(fams, f)
		return &fams[len(fams)-1]
	}
	// familyOf is family for a name read from a HELP, TYPE or UNIT line,
	// allocating its string only for a family recent pages did not have.
	familyOf := func(b []byte) *Family {
		if i, ok := index[string(b)]; ok {
			return &fams[i]
		}
		if m := sc.families[string(b)]; m != nil {
			return family(m.name)
		}
		return family(string(b))
	}
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, stats, fmt.Errorf("parse error: %w", err)
		}
		switch entry {
		case textparse.EntryHelp:
			name, help := p.Help()
			f := familyOf(name)
			if f.Help == "" {
				if m := sc.families[f.Name]; m != nil && m.help == string(help) {
					f.Help = m.help
				} else {
					f.Help = string(help)
				}
			}
		case textparse.EntryType:
			name, t := p.Type()
			f := familyOf(name)
			if typed[f.Name] && f.Type != t {
				return nil, stats, &TypeConflictError{Family: f.Name, First: f.Type, Then: t}
			}
			typed[f.Name] = true
			f.Type = t
			curType = t
		case textparse.EntryUnit:
			name, unit := p.Unit()
			familyOf(name).Unit = string(unit)
		case textparse.EntrySeries:
			raw, ts, v := p.Series()
			// The series the last page printed here, else the memo's.
			var m *seriesMemo
			inPlace := next < len(sc.order) && sc.order[next].key == string(raw)
			if inPlace {
				m = sc.order[next]
			} else if m = sc.memo[string(raw)]; m != nil {
				next = int(m.pos)
			}
			next++
			if m == nil || m.mtype != curType {
				inPlace = false // new labels: they may repeat another series'
				p.Labels(&lset)
				old := m
				m = &seriesMemo{mtype: curType, lset: lset, name: lset.Get(model.MetricNameLabel), hash: lset.Hash(), valid: checkLabels(lset)}
				switch {
				case old != nil:
					m.key = old.key
					sc.memo[m.key] = m // same key: its bytes are counted
				case len(sc.memo) < memoMaxSeries && sc.memoBytes+len(raw) <= memoMaxBytes:
					m.key = string(raw)
					sc.memo[m.key] = m
					sc.memoBytes += len(raw)
				}
			}
			if m.key != "" {
				m.pos = int32(len(order))
				order = append(order, m)
			}
			if m.gen != sc.gen {
				m.gen = sc.gen
				memoLive++
			}
			if record {
				if start, from, to, ok := valueSpan(body, raw, v); ok {
					key := m.key // the shape shares the memo's copy of the series' bytes
					if key == "" {
						key = string(raw)
					}
					spans, keys, vals = append(spans, int32(start), int32(from), int32(to)), append(keys, key), append(vals, v)
				} else {
					record = false
					slotsToValues(fams, vals)
				}
			}
			lset = m.lset
			if !m.valid {
				stats.InvalidNames++
				continue
			}
			if m.passed != sc.limitsEpoch {
				if err := opts.LabelLimits.check(lset); err != nil {
					return nil, stats, err
				}
				m.passed = sc.limitsEpoch
			}
			stats.Samples++
			if opts.SampleLimit > 0 && stats.Samples > opts.SampleLimit {
				return nil, stats, fmt.Errorf("%w: the page holds more than %d samples; raise the sample limit if this upstream is meant to be that large", ErrSampleLimit, opts.SampleLimit)
			}
			name := m.name
			fi, ok := lastFam, lastFam >= 0 && name == lastName
			if !ok {
				fi, ok = index[name]
			}
			if !ok {
				fi = -1
				for cut := len(name) - 1; cut > 0 && fi < 0; cut-- {
					if name[cut] != '_' {
						continue
					}
					if j, ok := index[name[:cut]]; ok {
						if _, ok := SampleSuffix(fams[j].Name, fams[j].Type, name); ok {
							fi = j
						}
					}
				}
				if fi < 0 {
					family(name)
					fi = index[name]
				}
			}
			lastName, lastFam = name, fi
			f := &fams[fi]
			if skipDuplicates && !inPlace {
				skipDuplicates = false
				sc.seeKept(fams)
			}
			if !skipDuplicates && sc.duplicate(fams, lset, m.hash, uint64(fi)<<32|uint64(len(f.Samples))) {
				stats.DuplicateSeries++
				continue
			}
			s := Sample{Labels: lset, Value: v}
			if record {
				s.Value = float64(len(vals) - 1)
			}
			if ts != nil {
				s.TimestampMs, s.HasTimestamp = *ts, true
			}
			f.Samples = append(f.Samples, s)
		case textparse.EntryHistogram:
			// Native histograms come only in protobuf or OpenMetrics 2.0,
			// which the sidecar never asks for.
			return nil, stats, errors.New("parse error: native histogram in a text page; the sidecar reads classic histograms only")
		}
	}
	sc.spans, sc.keys, sc.vals = spans, keys, vals
	sc.forgetOldSeries(memoLive)
	sc.noDuplicates = stats.DuplicateSeries == 0
	clear(sc.order) // what forgetOldSeries dropped must not stay reachable
	sc.order, sc.spare = order, sc.order
	if sc.families == nil {
		sc.families = make(map[string]*familyMemo, len(fams))
	}
	fams, stats.Collisions = FoldShadowed(fams)
	kept := fams[:0]
	for i := range fams {
		f := &fams[i]
		// Only valid names are remembered: a remembered one is not checked
		// again.
		m := sc.families[f.Name]
		if m == nil && !model.LegacyValidation.IsValidMetricName(f.Name) {
			// Only a HELP or TYPE line can name such a family (its samples
			// were dropped above), and it would print a header that the
			// routers' parser rejects the whole page for.
			continue
		}
		invalid, dup := sc.checkBounds(f)
		stats.InvalidBounds += invalid
		stats.DuplicateSeries += dup
		if m != nil {
			m.help, m.samples, m.gen = f.Help, len(f.Samples), sc.gen
		} else {
			sc.families[f.Name] = &familyMemo{name: f.Name, help: f.Help, samples: len(f.Samples), gen: sc.gen}
		}
		canonicalForText(f)
		kept = append(kept, *f)
	}
	clear(fams[len(kept):])
	sc.samples = 0
	for i := range kept {
		sc.samples += len(kept[i].Samples)
	}
	if len(sc.families) > 2*len(kept)+64 {
		for k, m := range sc.families {
			if m.gen != sc.gen {
				delete(sc.families, k)
			}
		}
	}
	if record {
		sc.shapes++
		sc.shapeOf = sc.shapes
		sc.recordShape(body, contentType, opts, kept, stats, spans, keys, vals)
		sc.spans = nil // 12 bytes a series, until the next full parse: rarely needed
	} else {
		sc.shape = nil
		clear(keys) // the memo may forget them
	}
	return kept, stats, nil
}

// slotsToValues sets the Value of every sample of fams, its slot while
// the page's shape was being recorded, to the slot's value.
func slotsToValues(fams []Family, vals []float64) {
	for i := range fams {
		for j := range fams[i].Samples {
			s := &fams[i].Samples[j]
			s.Value = vals[int(s.Value)]
		}
	}
}

// checkBounds removes the samples of a histogram whose le label, or of a
// summary whose quantile label, is empty or does not read as a number under
// the rules of the text format (Go float syntax without 'p' exponents or
// '_' separators), and returns how many it removed (invalid). Where the
// family's TYPE line makes Prometheus's parsers respell the bound (see
// boundLabel), it respells it too: a sample printed under another family's
// TYPE line was parsed as printed (le="2" where the histogram has
// le="2.0"), and would read as a second copy of a series once served under
// its own family's header. Such copies are removed and counted (dup).
func (sc *ParseScratch) checkBounds(f *Family) (invalid, dup int) {
	var key string
	switch f.Type {
	case model.MetricTypeHistogram, model.MetricTypeGaugeHistogram:
		key = model.BucketLabel
	case model.MetricTypeSummary:
		key = model.QuantileLabel
	default:
		return 0, 0
	}
	respell := key == boundLabel(f.Type)
	if sc.bounds == nil {
		sc.bounds = make(map[string]string)
	}
	respelled := false
	// Samples are kept in place up to the first one dropped.
	n := 0
	for i := range f.Samples {
		v := f.Samples[i].Labels.Get(key)
		if v == "" && !f.Samples[i].Labels.Has(key) {
			if n != i {
				f.Samples[n] = f.Samples[i]
			}
			n++
			continue
		}
		canon, ok := sc.bounds[v]
		if !ok {
			if canon, ok = canonicalBound(v); !ok {
				continue
			}
			if len(sc.bounds) >= maxBounds {
				clear(sc.bounds)
			}
			k := strings.Clone(v)
			if canon == v {
				canon = k
			}
			sc.bounds[k] = canon
		}
		if respell && canon != v {
			f.Samples[i].Labels = withLabel(f.Samples[i].Labels, key, canon)
			respelled = true
		}
		if n != i {
			f.Samples[n] = f.Samples[i]
		}
		n++
	}
	invalid = len(f.Samples) - n
	clear(f.Samples[n:])
	f.Samples = f.Samples[:n]
	if respelled {
		f.Samples, dup = dedupe(f.Samples)
	}
	return invalid, dup
}

// boundLabel is the label whose numeric value Prometheus's text and
// OpenMetrics parsers respell as labels.FormatOpenMetricsFloat does
// (le="2" reads as le="2.0") in the samples printed under a TYPE line of
// type t, or "" where they keep every value as printed.
func boundLabel(t model.MetricType) string {
	switch t {
	case model.MetricTypeHistogram:
		return model.BucketLabel
	case model.MetricTypeSummary:
		return model.QuantileLabel
	}
	return ""
}

// canonicalBound returns the spelling Prometheus's parsers give the bound
// v, and whether v is a bound at all: a number in Go float syntax without
// 'p' exponents or '_' separators, which the text format does not allow.
func canonicalBound(v string) (string, bool) {
	if strings.ContainsAny(v, "pP_") {
		return "", false
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return "", false
	}
	return labels.FormatOpenMetricsFloat(x), true
}

// respellBound returns l with the value of its label key spelled as
// canonicalBound spells it, or l itself when there is nothing to respell.
func respellBound(l labels.Labels, key string) labels.Labels {
	if key == "" || !l.Has(key) {
		return l
	}
	v := l.Get(key)
	canon, ok := canonicalBound(v)
	if !ok || canon == v {
		return l
	}
	return withLabel(l, key, canon)
}

// withLabel returns a copy of l with label key set to v.
func withLabel(l labels.Labels, key, v string) labels.Labels {
	return labels.NewBuilder(l).Set(key, v).Labels()
}

// dedupe removes, in place, the samples whose labels repeat an earlier
// sample's, and returns the rest and how many it removed.
func dedupe(samples []Sample) ([]Sample, int) {
	seen := make(seriesSet, len(samples))
	out := samples[:0]
	for _, s := range samples {
		if seen.add(s.Labels) {
			out = append(out, s)
		}
	}
	n := len(samples) - len(out)
	clear(samples[len(out):])
	return out, n
}

// duplicate reports whether lset, whose hash is h, repeats a series
// already kept in fams, and otherwise records it at position pos
// (family<<32 | sample).
// seeKept records the series kept so far in seen, for duplicate to
// find, once a parse stops skipping the check (see Parse).
func (sc *ParseScratch) seeKept(fams []Family) {
	for fi := range fams {
		for si, smp := range fams[fi].Samples {
			sc.duplicate(fams, smp.Labels, smp.Labels.Hash(), uint64(fi)<<32|uint64(si))
		}
	}
}

func (sc *ParseScratch) duplicate(fams []Family, lset labels.Labels, h uint64, pos uint64) bool {
	first, ok := sc.seen[h]
	if !ok {
		sc.seen[h] = pos
		return false
	}
	at := func(k uint64) labels.Labels { return fams[k>>32].Samples[k&0xffffffff].Labels }
	if labels.Equal(at(first), lset) {
		return true
	}
	for _, k := range sc.more[h] {
		if labels.Equal(at(k), lset) {
			return true
		}
	}
	if sc.more == nil {
		sc.more = map[uint64][]uint64{}
	}
	sc.more[h] = append(sc.more[h], pos)
	return false
}

// canonicalForText names families the way text format 0.0.4 does, so that
// an OpenMetrics upstream comes out as a text-format one would: the family
// of counter samples "x_total" is "x_total", and an info family "x" with
// samples "x_info" becomes the gauge family "x_info".
func canonicalForText(f *Family) {
	switch f.Type {
	case model.MetricTypeCounter:
		if !strings.HasSuffix(f.Name, "_total") && len(f.Samples) > 0 && allNamed(f, f.Name+"_total") {
			f.Name += "_total"
		}
	case model.MetricTypeInfo:
		if len(f.Samples) > 0 && allNamed(f, f.Name+"_info") {
			f.Name += "_info"
			f.Type = model.MetricTypeGauge
		}
	}
}

// checkLabels reports whether every name in l is valid under the legacy
// (pre-UTF-8) naming rules (colons allowed in metric names only) and no
// label name repeats: Prometheus rejects such a sample, and the routers'
// parser the whole page. Empty label values are kept as printed: vLLM's
// lora_requests_info carries running_lora_adapters="" and routers read it.
func checkLabels(l labels.Labels) bool {
	valid := true
	prev := ""
	l.Range(func(lb labels.Label) {
		if valid {
			valid = lb.Name != prev && legacyName(lb.Name, false) && (lb.Name != model.MetricNameLabel || legacyName(lb.Value, true))
			prev = lb.Name
		}
	})
	return valid
}

// legacyName reports whether s matches [a-zA-Z_][a-zA-Z0-9_]*, with ':'
// also allowed anywhere when colon is set: the legacy label name and, with
// colon, metric name rules of model.LegacyValidation, without its
// per-call overhead.
func legacyName(s string, colon bool) bool {
	if s == "" {
		return false
	}
	ok := uint8(nameFirst)
	if colon {
		ok |= nameColon
	}
	if nameChars[s[0]]&ok == 0 {
		return false
	}
	ok |= nameLater
	for i := 1; i < len(s); i++ {
		if nameChars[s[i]]&ok == 0 {
			return false
		}
	}
	return true
}

// Classes of the bytes legacy names may hold, as bits of nameChars.
const (
	nameFirst = 1 << iota // a letter or '_': allowed anywhere
	nameLater             // a digit: allowed after the first byte
	nameColon             // ':': allowed anywhere in metric names
)

var nameChars = func() (t [256]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = nameFirst
		t[c-'a'+'A'] = nameFirst
	}
	t['_'] = nameFirst
	for c := '0'; c <= '9'; c++ {
		t[c] = nameLater
	}
	t[':'] = nameColon
	return t
}()

// DropCreated removes the "_created" gauge families that Python's
// prometheus_client prints beside every counter and histogram (V1 vLLM does
// since it never disables them). They hold process start times, not
// measurements; resets are detected from decreasing values instead, as
// Prometheus does for text-format targets. A family is dropped only when the
// counter or histogram it belongs to is on the same page, so an upstream
// metric that merely ends in "_created" is kept.
func DropCreated(fams []Family) []Family { return DropAt(fams, CreatedDropped(fams)) }

// CreatedDropped returns the indexes of the families of fams that
// DropCreated drops, ascending; nil when none. It depends on the families'
// names and types only, so a page of the same shape (ParseStats.Shape)
// drops the same indexes.
func CreatedDropped(fams []Family) []int {
	// Most pages hold no such family (a text page files _created samples
	// under their counter's family): then nothing is indexed.
	if !slices.ContainsFunc(fams, func(f Family) bool {
		return f.Type != model.MetricTypeCounter && strings.HasSuffix(f.Name, "_created")
	}) {
		return nil
	}
	// owned: the bases of the _created families, whether a counter,
	// histogram or summary of theirs is on the page. Indexed by the few
	// bases rather than every family name (6 KB and a fifth of the
	// function's time a scrape on the demo page, BenchmarkScrapeCycle).
	owned := map[string]bool{}
	for i := range fams {
		if base, ok := strings.CutSuffix(fams[i].Name, "_created"); ok && fams[i].Type != model.MetricTypeCounter {
			owned[base] = false
		}
	}
	own := func(base string) {
		if _, ok := owned[base]; ok {
			owned[base] = true
		}
	}
	for i := range fams {
		switch f := &fams[i]; f.Type {
		case model.MetricTypeCounter:
			own(f.Name)
			if base, ok := strings.CutSuffix(f.Name, "_total"); ok {
				own(base)
			}
		case model.MetricTypeHistogram, model.MetricTypeSummary:
			own(f.Name)
		}
	}
	var drop []int
	for i := range fams {
		if base, ok := strings.CutSuffix(fams[i].Name, "_created"); ok && fams[i].Type != model.MetricTypeCounter && owned[base] {
			drop = append(drop, i)
		}
	}
	return drop
}

// DropAt returns fams without the families at the indexes drop
// (ascending), compacted in place.
func DropAt(fams []Family, drop []int) []Family {
	if len(drop) == 0 {
		return fams
	}
	out := fams[:drop[0]]
	for k, i := range drop {
		end := len(fams)
		if k+1 < len(drop) {
			end = drop[k+1]
		}
		out = append(out, fams[i+1:end]...)
	}
	return out
}
