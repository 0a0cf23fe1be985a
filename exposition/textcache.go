package exposition

import (
	"math"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// TextCache keeps, from one encoding of a page to the next, the text of
// what does not move between scrapes: each family's HELP and TYPE lines
// and each sample's name and labels, by their place on the page. A view
// built from the same label sets every scrape is then written as copies
// of those bytes and its values: labels.Equal on label sets the builders
// share from scrape to scrape is one pointer comparison, where writing
// them was two thirds of encoding a view. Anything not as last time is
// encoded afresh, so the text is always AppendText's. Not safe for
// concurrent use.
type TextCache struct {
	heads []cachedHead // by family index
	lines []cachedLine // by sample index on the page
	arena []byte       // the kept bytes, addressed by heads and lines
	// whole: heads and lines are those of one page encoded from its
	// start to its end, values included (see Same).
	whole bool
}

type cachedHead struct {
	name, help string
	typ        model.MetricType
	span
}

type cachedLine struct {
	labels labels.Labels
	span
	// The value and timestamp last written after the labels, which with
	// them fix the line's bytes.
	value        uint64 // math.Float64bits
	timestampMs  int64
	hasTimestamp bool
}

type span struct{ off, n int }

func (c *TextCache) bytes(s span) []byte { return c.arena[s.off : s.off+s.n : s.off+s.n] }

// keep adds b[from:] to the arena and returns where it is.
func (c *TextCache) keep(b []byte, from int) span {
	s := span{len(c.arena), len(b) - from}
	c.arena = append(c.arena, b[from:]...)
	return s
}

// AppendTextUntil is AppendTextUntil (the same bytes) taking from c what
// the last encoding through c wrote at the same place.
func (c *TextCache) AppendTextUntil(b []byte, fams []Family, p TextPos, limit int) ([]byte, TextPos) {
	if p == (TextPos{}) {
		c.whole = false
	}
	for ; p.Family < len(fams); p.Family, p.Sample, p.Written = p.Family+1, 0, false {
		f := &fams[p.Family]
		if !p.Written {
			if len(b) >= limit {
				return b, p
			}
			b = c.appendHead(b, p.Family, f)
			p.Written = true
		}
		for ; p.Sample < len(f.Samples); p.Sample++ {
			if len(b) >= limit {
				return b, p
			}
			b = c.appendSample(b, p.line, &f.Samples[p.Sample])
			p.line++
		}
	}
	c.done(len(fams), p.line)
	return b, p
}

func (c *TextCache) appendHead(b []byte, i int, f *Family) []byte {
	if i < len(c.heads) {
		if h := &c.heads[i]; h.name == f.Name && h.help == f.Help && h.typ == f.Type {
			return append(b, c.bytes(h.span)...)
		}
	} else {
		c.heads = append(c.heads, make([]cachedHead, i+1-len(c.heads))...)
	}
	from := len(b)
	b = appendHead(b, f)
	c.heads[i] = cachedHead{name: f.Name, help: f.Help, typ: f.Type, span: c.keep(b, from)}
	return b
}

func (c *TextCache) appendSample(b []byte, i int, s *Sample) []byte {
	if i < len(c.lines) {
		if l := &c.lines[i]; labels.Equal(l.labels, s.Labels) {
			b = append(b, c.bytes(l.span)...)
			l.value, l.timestampMs, l.hasTimestamp = math.Float64bits(s.Value), s.TimestampMs, s.HasTimestamp
			return appendValue(b, s, false)
		}
	} else {
		c.lines = append(c.lines, make([]cachedLine, i+1-len(c.lines))...)
	}
	from := len(b)
	b = appendSeries(b, s)
	c.lines[i] = cachedLine{labels: s.Labels, span: c.keep(b, from),
		value: math.Float64bits(s.Value), timestampMs: s.TimestampMs, hasTimestamp: s.HasTimestamp}
	return appendValue(b, s, false)
}

// Same reports whether fams' text is byte for byte the text c last
// encoded whole: the same HELP and TYPE lines, label sets, values (to the
// bit, which fixes how they are written) and timestamps, in the same
// places. It writes nothing and changes nothing; a page compared equal
// needs no encoding, and anything its encoding made from the last one's
// text (its compressed bytes) is its own.
func (c *TextCache) Same(fams []Family) bool {
	if !c.whole || len(fams) != len(c.heads) {
		return false
	}
	line := 0
	for i := range fams {
		f, h := &fams[i], &c.heads[i]
		if len(f.Samples) > len(c.lines)-line || h.name != f.Name || h.help != f.Help || h.typ != f.Type {
			return false
		}
		for j := range f.Samples {
			s, l := &f.Samples[j], &c.lines[line]
			// The values first: they are what moves between scrapes.
			if l.value != math.Float64bits(s.Value) || l.hasTimestamp != s.HasTimestamp ||
				s.HasTimestamp && l.timestampMs != s.TimestampMs || !labels.Equal(l.labels, s.Labels) {
				return false
			}
			line++
		}
	}
	return line == len(c.lines)
}

// done forgets what a page of fams families and lines samples did not
// use, and compacts the arena once most of it is bytes nothing addresses
// (the lines that changed since it was last compacted).
func (c *TextCache) done(fams, lines int) {
	c.whole = true
	clear(c.heads[min(fams, len(c.heads)):])
	c.heads = c.heads[:min(fams, len(c.heads))]
	clear(c.lines[min(lines, len(c.lines)):])
	c.lines = c.lines[:min(lines, len(c.lines))]
	live := 0
	for i := range c.heads {
		live += c.heads[i].n
	}
	for i := range c.lines {
		live += c.lines[i].n
	}
	// Kept at about its size: grown by appending, the arena's capacity
	// is up to twice what it holds, and the lines that changed since the
	// last compaction hold bytes nothing addresses.
	if cap(c.arena) <= live+live/4+4<<10 {
		return
	}
	arena := make([]byte, 0, live+live/16)
	for i := range c.heads {
		h := &c.heads[i]
		h.off, arena = len(arena), append(arena, c.bytes(h.span)...)
	}
	for i := range c.lines {
		l := &c.lines[i]
		l.off, arena = len(arena), append(arena, c.bytes(l.span)...)
	}
	c.arena = arena
}
