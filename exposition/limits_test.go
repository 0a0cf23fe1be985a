package exposition

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/fos-study/vllm-normalizer/internal/pagetest"
)

// pageExtremes walks a page with Prometheus's parser alone and returns the
// most labels on one sample (__name__ included) and the longest label name
// and value, each with a sample that has it.
func pageExtremes(t *testing.T, body []byte) (labelsN, nameLen, valueLen int) {
	t.Helper()
	p, err := textparse.New(body, "text/plain", labels.NewSymbolTable(), textparse.ParserOptions{})
	if p == nil {
		t.Fatal(err)
	}
	var l labels.Labels
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if e != textparse.EntrySeries {
			continue
		}
		p.Labels(&l)
		labelsN = max(labelsN, l.Len())
		l.Range(func(lb labels.Label) {
			nameLen = max(nameLen, len(lb.Name))
			valueLen = max(valueLen, len(lb.Value))
		})
	}
}

// TestLabelLimits sets each limit to what a real page needs, which must
// pass, and one below, which must fail the page naming that limit and the
// length found, as Prometheus's scrape loop fails such a scrape.
func TestLabelLimits(t *testing.T) {
	for _, file := range pagetest.FixturePaths(t) {
		if strings.Contains(file, "nan-ind") {
			continue
		}
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		n, nl, vl := pageExtremes(t, body)
		t.Run(filepath.Base(file), func(t *testing.T) {
			for _, c := range []struct {
				limit string
				need  int
				set   func(*LabelLimits, int)
			}{
				{LimitLabels, n, func(l *LabelLimits, v int) { l.Labels = v }},
				{LimitNameLength, nl, func(l *LabelLimits, v int) { l.NameLength = v }},
				{LimitValueLength, vl, func(l *LabelLimits, v int) { l.ValueLength = v }},
			} {
				var lim LabelLimits
				c.set(&lim, c.need)
				if _, _, err := Parse(body, "", ParseOptions{LabelLimits: lim}); err != nil {
					t.Errorf("%s=%d (what the page needs): %v", c.limit, c.need, err)
				}
				if c.need == 1 {
					continue // a limit of 0 is no limit
				}
				c.set(&lim, c.need-1)
				_, _, err := Parse(body, "", ParseOptions{LabelLimits: lim})
				var le *LabelLimitError
				if !errors.As(err, &le) {
					t.Fatalf("%s=%d: want a LabelLimitError, got %v", c.limit, c.need-1, err)
				}
				if le.Limit != c.limit || le.Got != c.need || le.Max != c.need-1 {
					t.Errorf("%s=%d: got %+v", c.limit, c.need-1, le)
				}
				if !strings.HasPrefix(err.Error(), c.limit+" exceeded (metric: ") {
					t.Errorf("error not worded as Prometheus words it: %v", err)
				}
			}
		})
	}
}

// TestLabelLimitsCountName checks Prometheus's counting: __name__ is one of
// the labels, and the metric name is a label value.
func TestLabelLimitsCountName(t *testing.T) {
	body := []byte("a_metric_name{x=\"1\",y=\"2\"} 1\n")
	cases := []struct {
		lim  LabelLimits
		want string // "" = accepted
	}{
		{LabelLimits{Labels: 3}, ""},
		{LabelLimits{Labels: 2}, LimitLabels},
		{LabelLimits{NameLength: 8}, ""}, // "__name__" is 8 bytes
		{LabelLimits{NameLength: 7}, LimitNameLength},
		{LabelLimits{ValueLength: 13}, ""}, // "a_metric_name"
		{LabelLimits{ValueLength: 12}, LimitValueLength},
		{LabelLimits{Labels: 2, ValueLength: 1}, LimitLabels}, // the count is judged first
	}
	// Once with a fresh scratch per parse, once with one scratch for all:
	// a series the memo saw within other limits is checked again.
	shared := &ParseScratch{}
	for _, sc := range []*ParseScratch{nil, shared} {
		for _, c := range cases {
			_, _, err := Parse(body, "", ParseOptions{LabelLimits: c.lim, Scratch: sc})
			var le *LabelLimitError
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%+v (shared scratch %v): %v", c.lim, sc != nil, err)
			case c.want != "" && (!errors.As(err, &le) || le.Limit != c.want):
				t.Errorf("%+v (shared scratch %v): want %s, got %v", c.lim, sc != nil, c.want, err)
			}
		}
	}
}
