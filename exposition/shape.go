package exposition

import (
	"math"
	"strconv"

	"github.com/prometheus/prometheus/model/value"
)

// An upstream prints the same page from one scrape to the next but for its
// values: the same HELP and TYPE lines, the same series in the same order,
// each followed by a number. A text page whose bytes are the last parsed
// page's with only the numbers changed parses to the last page's families
// with only the values changed, so it is read as that: its bytes compared
// with the last page's, its numbers parsed as textparse parses them.
// textparse's lexing was about two thirds of a parse's CPU on the demo's
// one-engine page (BenchmarkScrapeCycle's profile); any other page is
// parsed in full.

// pageShape is the last page parsed in full, as text format, split around
// its series' values (its slots): what a page differing from it only in
// those values parses to.
type pageShape struct {
	// What the page was parsed with: a page parsed with anything else is
	// parsed in full.
	contentType string
	sampleLimit int
	limits      LabelLimits
	// text is the page's bytes but its series and their values: for each
	// slot k, text[at[2k-1]:at[2k]] is what comes before its series (from
	// the end of the value before: a newline, comments, HELP and TYPE
	// lines), keys[k] the series' bytes (the parse memo's copy, shared),
	// text[at[2k]:at[2k+1]] what comes between the series and its value;
	// the rest of text is what follows the last value. Sharing the
	// series' bytes with the memo keeps a shape to a tenth of its page.
	text string
	at   []int32
	keys []string
	// fams is what the page parsed to, every sample's value taken from
	// the slot slots holds at its place (the samples of fams in order).
	fams  []Family
	slots []int32
	stats ParseStats
	// The value tokens the last page read from this shape printed, end to
	// end (token k ends at tokEnd[k]), and what they parsed to: a token
	// printed as it was is not parsed again. Most of a page's values do
	// not move between two scrapes, and strconv.ParseFloat was most of a
	// page read from its shape but the comparison of its bytes.
	toks     []byte
	tokEnd   []int32
	tokVals  []float64
	spareTok []byte
	spareEnd []int32
}

// valueStop marks the bytes that end a value token in textparse's lexer
// (promlex.l: a value is [^{ \t\n]+), and valueBad the bytes that its
// parseFloat rejects before strconv.ParseFloat reads the value.
var valueStop, valueBad = func() (stop, bad [256]bool) {
	for _, c := range []byte("{ \t\n") {
		stop[c] = true
	}
	for _, c := range []byte("pP_") {
		bad[c] = true
	}
	return stop, bad
}()

// valueSpan returns where the series raw, which textparse read from body
// with the value v, starts in body and where its value lies: [from, to).
// ok is false
// when raw does not lie in body or the bytes found there do not read as v:
// the page's shape is then not recorded.
func valueSpan(body, raw []byte, v float64) (start, from, to int, ok bool) {
	// raw is a slice of body (textparse keeps the body it was given when
	// it ends with a newline): its offset is the capacity it lacks.
	start = cap(body) - cap(raw)
	if len(raw) == 0 || start < 0 || start+len(raw) > len(body) || &body[start] != &raw[0] {
		return 0, 0, 0, false
	}
	from = start + len(raw)
	for from < len(body) && (body[from] == ' ' || body[from] == '\t') {
		from++
	}
	// The byte before the value must end a token whatever follows it
	// (whitespace, or the closing brace of the labels): after a name, a
	// value beginning with a name's character would lengthen the name.
	if from == start+len(raw) && body[from-1] != '}' {
		return 0, 0, 0, false
	}
	to = from
	for to < len(body) && !valueStop[body[to]] {
		to++
	}
	x, good := parseValue(body[from:to])
	return start, from, to, good && math.Float64bits(x) == math.Float64bits(v)
}

// parseValue reads a value token as textparse does: Go's float syntax
// without 'p' exponents or '_' separators, NaN as Prometheus's one NaN.
func parseValue(b []byte) (float64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	for _, c := range b {
		if valueBad[c] {
			return 0, false
		}
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, false
	}
	if math.IsNaN(v) {
		v = math.Float64frombits(value.NormalNaN)
	}
	return v, true
}

// Shape names the page's shape (above) that the last Parse with this
// scratch returned its families from, or recorded them as; 0 when it did
// neither (an error, an OpenMetrics page, a page too large to remember).
// Two parses of the same Shape returned the same families (names, types,
// help, units, series with their labels and timestamps, in the same
// order) but for their samples' values: what depends only on those may be
// kept from one to the other.
func (sc *ParseScratch) Shape() uint64 { return sc.shapeOf }

// recordShape keeps the shape of body, parsed in full to fams with stats;
// spans are its slots (where each series starts, where its value starts
// and ends, in order), keys their series' bytes, and every sample's Value
// in fams is still its slot, which this sets to the value read from the
// slot (vals). It takes keys.
func (sc *ParseScratch) recordShape(body []byte, contentType string, opts ParseOptions, fams []Family, stats ParseStats, spans []int32, keys []string, vals []float64) {
	sh := sc.shape
	if sh == nil {
		sh = &pageShape{}
	}
	sh.contentType, sh.sampleLimit, sh.limits, sh.stats = contentType, opts.SampleLimit, opts.LabelLimits, stats
	sh.tokEnd = sh.tokEnd[:0] // the next page read from this shape parses every value
	text := make([]byte, 0, len(body)/8)
	sh.at = sh.at[:0]
	prev := 0
	for k := 0; k < len(spans); k += 3 {
		start, from := int(spans[k]), int(spans[k+1])
		text = append(text, body[prev:start]...)
		sh.at = append(sh.at, int32(len(text)))
		text = append(text, body[start+len(keys[k/3]):from]...)
		sh.at = append(sh.at, int32(len(text)))
		prev = int(spans[k+2])
	}
	sh.text = string(append(text, body[prev:]...))
	clear(sh.keys) // the last shape's: they may be the memo's no longer
	sh.keys, sc.keys = keys, sh.keys[:0]
	n := 0
	for i := range fams {
		n += len(fams[i].Samples)
	}
	sh.fams = append(sh.fams[:0], fams...)
	samples := make([]Sample, n)
	sh.slots = sh.slots[:0]
	n = 0
	for i := range fams {
		for j := range fams[i].Samples {
			s := &fams[i].Samples[j]
			slot := int32(s.Value)
			s.Value = vals[slot]
			sh.slots = append(sh.slots, slot)
		}
		m := len(fams[i].Samples)
		sh.fams[i].Samples = samples[n : n+m : n+m]
		copy(sh.fams[i].Samples, fams[i].Samples)
		n += m
	}
	sc.shape = sh
}

// reparse returns what body parses to when it is the shape's page with
// only its values changed (ok); otherwise body must be parsed in full.
// vals is working memory for the values, returned for reuse.
func (sh *pageShape) reparse(body []byte, vals []float64) (fams []Family, _ []float64, ok bool) {
	vals = vals[:0]
	pos, prev := 0, 0
	// The tokens kept are this shape's last page's only when it had as many.
	memo := len(sh.tokEnd) == len(sh.keys)
	toks, tokEnd := sh.spareTok[:0], sh.spareEnd[:0]
	tokFrom := int32(0)
	// next returns whether body continues at pos with s, and moves past it.
	next := func(s string) bool {
		if len(body)-pos < len(s) || string(body[pos:pos+len(s)]) != s {
			return false
		}
		pos += len(s)
		return true
	}
	for k, key := range sh.keys {
		if !next(sh.text[prev:sh.at[2*k]]) || !next(key) || !next(sh.text[sh.at[2*k]:sh.at[2*k+1]]) {
			return nil, vals, false
		}
		prev = int(sh.at[2*k+1])
		from := pos
		for pos < len(body) && !valueStop[body[pos]] {
			pos++
		}
		tok := body[from:pos]
		var v float64
		if memo && string(tok) == string(sh.toks[tokFrom:sh.tokEnd[k]]) {
			v = sh.tokVals[k] // parseValue reads the same bytes to the same bits
		} else {
			var good bool
			if v, good = parseValue(tok); !good {
				return nil, vals, false // textparse's error, if it is one, comes from the full parse
			}
		}
		if memo {
			tokFrom = sh.tokEnd[k]
		}
		vals = append(vals, v)
		toks = append(toks, tok...)
		tokEnd = append(tokEnd, int32(len(toks)))
	}
	if string(body[pos:]) != sh.text[prev:] {
		return nil, vals, false
	}
	sh.spareTok, sh.spareEnd = sh.toks, sh.tokEnd
	sh.toks, sh.tokEnd = toks, tokEnd
	sh.tokVals = append(sh.tokVals[:0], vals...)
	samples := make([]Sample, len(sh.slots))
	fams = make([]Family, len(sh.fams))
	n := 0
	for i := range sh.fams {
		fams[i] = sh.fams[i]
		m := len(sh.fams[i].Samples)
		fams[i].Samples = samples[n : n+m : n+m]
		copy(fams[i].Samples, sh.fams[i].Samples)
		n += m
	}
	for i, slot := range sh.slots {
		samples[i].Value = vals[slot]
	}
	return fams, vals, true
}
