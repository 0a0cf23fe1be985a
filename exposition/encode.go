package exposition

import (
	"math"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// Content types of the two formats the sidecar serves.
const (
	ContentTypeText        = "text/plain; version=0.0.4; charset=utf-8"
	ContentTypeOpenMetrics = "application/openmetrics-text; version=1.0.0; charset=utf-8"
)

// textType is the TYPE word text format 0.0.4 knows for t.
func textType(t model.MetricType) string {
	switch t {
	case model.MetricTypeCounter, model.MetricTypeGauge, model.MetricTypeHistogram, model.MetricTypeSummary:
		return string(t)
	case model.MetricTypeInfo, model.MetricTypeStateset:
		return "gauge"
	default:
		return "untyped"
	}
}

// AppendText appends fams to b in text format 0.0.4: one HELP and one TYPE
// line per family, then its samples in order. Families are written in the
// order given; callers sort them.
func AppendText(b []byte, fams []Family) []byte {
	b, _ = AppendTextUntil(b, fams, TextPos{}, math.MaxInt)
	return b
}

// TextPos is a place in a page's text: before sample Sample of family
// Family, after the family's HELP and TYPE lines if Written. The zero
// TextPos is the page's start.
type TextPos struct {
	Family, Sample int
	Written        bool // the family's HELP and TYPE lines are written
	line           int  // samples written before this one (TextCache's index)
}

// Done reports whether p is past the last family of fams.
func (p TextPos) Done(fams []Family) bool { return p.Family >= len(fams) }

// AppendTextUntil appends the text of fams from p, line by line, until b
// is at least limit bytes long or the page ends, and returns where it
// stopped: a page is encoded in pieces of about limit bytes however large
// its families, the same bytes AppendText writes.
func AppendTextUntil(b []byte, fams []Family, p TextPos, limit int) ([]byte, TextPos) {
	for ; p.Family < len(fams); p.Family, p.Sample, p.Written = p.Family+1, 0, false {
		f := &fams[p.Family]
		if !p.Written {
			if len(b) >= limit {
				return b, p
			}
			b = appendHead(b, f)
			p.Written = true
		}
		for ; p.Sample < len(f.Samples); p.Sample++ {
			if len(b) >= limit {
				return b, p
			}
			b = appendSample(b, &f.Samples[p.Sample], false)
			p.line++
		}
	}
	return b, p
}

// appendHead writes f's HELP and TYPE lines.
func appendHead(b []byte, f *Family) []byte {
	b = append(b, "# HELP "...)
	b = append(b, f.Name...)
	b = append(b, ' ')
	b = appendEscaped(b, f.Help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, f.Name...)
	b = append(b, ' ')
	b = append(b, textType(f.Type)...)
	return append(b, '\n')
}

// AppendOpenMetrics appends fams to b in OpenMetrics 1.0 text, ending with
// "# EOF". A counter whose samples do not end in _total, which OpenMetrics
// cannot express, is written as unknown rather than renamed, and so is one
// whose name without _total is another family's (Go's
// go_memstats_alloc_bytes_total beside the gauge go_memstats_alloc_bytes):
// a page's family names must be unique. A counter's or
// histogram's Created times follow their child's last sample as _created
// lines, where OpenMetrics parsers (Prometheus's among them) look for them.
func AppendOpenMetrics(b []byte, fams []Family) []byte {
	var scratch []labels.Label
	var names map[string]struct{} // every family's name, made at the first counter
	for i := range fams {
		f := &fams[i]
		name, typ := f.Name, "unknown"
		switch f.Type {
		case model.MetricTypeCounter:
			if names == nil {
				names = make(map[string]struct{}, len(fams))
				for j := range fams {
					names[fams[j].Name] = struct{}{}
				}
			}
			if base, ok := strings.CutSuffix(f.Name, "_total"); ok && allNamed(f, f.Name) && !has(names, base) {
				name, typ = base, "counter"
			}
		case model.MetricTypeGauge, model.MetricTypeInfo, model.MetricTypeStateset:
			typ = "gauge"
		case model.MetricTypeHistogram, model.MetricTypeSummary:
			typ = string(f.Type)
		}
		b = append(b, "# TYPE "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = append(b, typ...)
		if f.Help != "" {
			b = append(b, "\n# HELP "...)
			b = append(b, name...)
			b = append(b, ' ')
			b = appendEscaped(b, f.Help, true)
		}
		if f.Unit != "" && strings.HasSuffix(name, "_"+f.Unit) {
			b = append(b, "\n# UNIT "...)
			b = append(b, name...)
			b = append(b, ' ')
			b = append(b, f.Unit...)
		}
		b = append(b, '\n')
		if len(f.Created) == 0 || typ != "counter" && typ != "histogram" {
			for j := range f.Samples {
				b = appendSample(b, &f.Samples[j], true)
			}
			continue
		}
		next := 0 // f.Created before next are written
		for j := range f.Samples {
			s := &f.Samples[j]
			b = appendSample(b, s, true)
			scratch = childLabels(scratch[:0], s.Labels)
			if j+1 < len(f.Samples) && sameChild(scratch, f.Samples[j+1].Labels) {
				continue
			}
			// The child's last sample: its _created line, if known.
			for k := next; k < len(f.Created); k++ {
				if sameChild(scratch, f.Created[k].Labels) {
					b = appendCreated(b, name, f.Created[k])
					next = k + 1
					break
				}
			}
		}
	}
	return append(b, "# EOF\n"...)
}

// childLabels appends l's labels but __name__ and le (its child's) to dst.
func childLabels(dst []labels.Label, l labels.Labels) []labels.Label {
	l.Range(func(lb labels.Label) {
		if lb.Name != model.MetricNameLabel && lb.Name != model.BucketLabel {
			dst = append(dst, lb)
		}
	})
	return dst
}

// sameChild reports whether l's labels but __name__ and le are exactly
// child (sorted), without allocating.
func sameChild(child []labels.Label, l labels.Labels) bool {
	i, eq := 0, true
	l.Range(func(lb labels.Label) {
		if !eq || lb.Name == model.MetricNameLabel || lb.Name == model.BucketLabel {
			return
		}
		eq = i < len(child) && lb == child[i]
		i++
	})
	return eq && i == len(child)
}

// appendCreated writes the _created line of family name's child c.
func appendCreated(b []byte, name string, c Created) []byte {
	b = append(b, name...)
	b = append(b, "_created"...)
	b = appendLabels(b, c.Labels)
	b = append(b, ' ')
	b = AppendFloat(b, c.Time)
	return append(b, '\n')
}

func has(set map[string]struct{}, k string) bool {
	_, ok := set[k]
	return ok
}

func allNamed(f *Family, name string) bool {
	for i := range f.Samples {
		if f.Samples[i].Name() != name {
			return false
		}
	}
	return true
}

func appendSample(b []byte, s *Sample, openMetrics bool) []byte {
	return appendValue(appendSeries(b, s), s, openMetrics)
}

// appendSeries writes what a sample's line holds before its value: its
// name, its labels and a space.
func appendSeries(b []byte, s *Sample) []byte {
	b = append(b, s.Labels.Get(model.MetricNameLabel)...)
	b = appendLabels(b, s.Labels)
	return append(b, ' ')
}

// appendValue ends a sample's line: its value and timestamp.
func appendValue(b []byte, s *Sample, openMetrics bool) []byte {
	b = AppendFloat(b, s.Value)
	if s.HasTimestamp {
		b = append(b, ' ')
		if openMetrics {
			b = AppendFloat(b, float64(s.TimestampMs)/1000)
		} else {
			b = strconv.AppendInt(b, s.TimestampMs, 10)
		}
	}
	return append(b, '\n')
}

// appendLabels writes l's labels but __name__ in braces, nothing when
// there are none.
func appendLabels(b []byte, l labels.Labels) []byte {
	first := true
	l.Range(func(l labels.Label) {
		if l.Name == model.MetricNameLabel {
			return
		}
		if first {
			b = append(b, '{')
			first = false
		} else {
			b = append(b, ',')
		}
		b = append(b, l.Name...)
		b = append(b, `="`...)
		b = appendEscaped(b, l.Value, true)
		b = append(b, '"')
	})
	if !first {
		b = append(b, '}')
	}
	return b
}

// AppendFloat writes v as the exposition formats spell values.
func AppendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case v == math.Trunc(v) && v > -1e6 && v < 1e6 && (v != 0 || !math.Signbit(v)):
		// Small integers, most values on a page (bucket counts, gauges):
		// 'g' prints them without exponent, exactly as AppendInt does.
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// appendEscaped escapes backslash and newline (HELP text), and the double
// quote too where the text sits inside quotes (label values, OpenMetrics
// HELP). Nothing a value holds can end its quotes or its line.
func appendEscaped(b []byte, s string, quote bool) []byte {
	// Most strings need no escape: copy the clean prefix in one append.
	i := 0
	for ; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '\n' || c == '"' && quote {
			break
		}
	}
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}
