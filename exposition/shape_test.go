package exposition

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/internal/pagetest"
)

// withValues returns page with the value of its series line i (counting
// series lines only) replaced by f(i, value): the fixtures print each
// series as "series value", no timestamp.
func withValues(page string, f func(i int, v string) string) string {
	lines := strings.SplitAfter(page, "\n")
	i := 0
	for k, l := range lines {
		if l == "" || l[0] == '#' || l == "\n" {
			continue
		}
		body := strings.TrimSuffix(l, "\n")
		cut := strings.LastIndexByte(body, ' ')
		lines[k] = body[:cut+1] + f(i, body[cut+1:]) + l[len(body):]
		i++
	}
	return strings.Join(lines, "")
}

// A page that is the last one with only its values changed is read from
// the last one's shape (shape.go), and gives exactly what a fresh parse
// gives, errors included: values respelt, special and invalid, and pages
// that only nearly keep the shape (whitespace, a timestamp, a brace, a
// missing newline), each checked to take the path it should.
func TestParseShapeMatchesFreshParse(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", "13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(base)
	first := func(f func(v string) string) func(int, string) string {
		return func(i int, v string) string {
			if i == 0 {
				return f(v)
			}
			return v
		}
	}
	series := 0
	withValues(page, func(int, string) string { series++; return "" })
	last := func(f func(v string) string) func(int, string) string {
		return func(i int, v string) string {
			if i == series-1 {
				return f(v)
			}
			return v
		}
	}
	pages := []struct {
		name string
		body string
		fast bool // read from the last page's shape
	}{
		{"fixture", page, false},
		{"same again", page, true},
		{"every value moved", withValues(page, func(i int, v string) string { return v + "1" }), true},
		{"special values", withValues(page, func(i int, v string) string {
			return [...]string{"NaN", "+Inf", "-Inf", "-0", "1e-300", "0x1P-2", "nan", "Inf", "12345678901234567890.5", ".5"}[i%10]
		}), false}, // 0x1P-2 is refused, so the whole page is parsed in full
		{"special values but one", withValues(page, func(i int, v string) string {
			return [...]string{"NaN", "+Inf", "-Inf", "-0", "1e-300", "0X1", "nan", "Inf", "12345678901234567890.5", ".5"}[i%10]
		}), false},
		{"special values, valid", withValues(page, func(i int, v string) string {
			return [...]string{"NaN", "+Inf", "-Inf", "-0", "1e-300", "infinity", "nan", "Inf", "12345678901234567890.5", ".5"}[i%10]
		}), true}, // the last two pages failed: the fixture's shape is kept
		{"special values, valid, again", withValues(page, func(i int, v string) string {
			return [...]string{"-Inf", "NaN", "+Inf", "1", "1e300", "INF", "NAN", "-inf", "5.", "7"}[i%10]
		}), true},
		{"back to the fixture", page, true},
		{"a separator", withValues(page, first(func(v string) string { return "1_0" })), false},
		{"a bad value last", withValues(page, last(func(v string) string { return "x" })), false},
		{"fixture after errors", page, true},
		{"an empty value", withValues(page, first(func(v string) string { return "" })), false},
		{"two spaces", withValues(page, first(func(v string) string { return " " + v })), false},
		{"a tab", withValues(page, first(func(v string) string { return v + "\t" })), false},
		{"a timestamp", withValues(page, first(func(v string) string { return v + " 1700000000000" })), false},
		{"the timestamp moved", withValues(page, first(func(v string) string { return v + " 1700000001000" })), false},
		{"the timestamp kept, the value moved", withValues(page, first(func(v string) string { return "9 1700000001000" })), true},
		{"a brace after the value", withValues(page, first(func(v string) string { return v + "{" })), false},
		{"a brace for a value", withValues(page, first(func(v string) string { return "{}" })), false},
		{"fixture once more", page, false},
		{"no newline at the end", strings.TrimSuffix(page, "\n"), false},
		{"the end moved", strings.TrimSuffix(page, "\n") + "1", false},
		{"a line more", page + "x 1\n", false},
		{"a line less", page[:strings.LastIndex(page[:len(page)-1], "\n")+1], false},
		{"a value that was a name", "a 1\nb{x=\"1\"}2\n", false},
		{"it, moved", "a 2\nb{x=\"1\"}3\n", true},
		{"a name then a sign", "a+1\n", false}, // textparse reads a, +1
		{"a name lengthened", "a1\n", false},   // a parse error, not a = 1
		{"histogram le respelt by TYPE", "# TYPE x histogram\nx_bucket{le=\"1\"} 1\nx_bucket{le=\"+Inf\"} 2\nx_count 2\nx_sum 3\n", false},
		{"it, moved", "# TYPE x histogram\nx_bucket{le=\"1\"} 2\nx_bucket{le=\"+Inf\"} 3\nx_count 3\nx_sum 4\n", true},
		{"invalid and duplicate series", "x{a=\"1\"} 1\nx{a=\"1\"} 2\n{\"a.b\"} 3\ny 4\n", false},
		{"them, moved", "x{a=\"1\"} 5\nx{a=\"1\"} 6\n{\"a.b\"} 7\ny 8\n", true},
	}
	sc := &ParseScratch{}
	for _, p := range pages {
		gen := sc.gen
		got, gs, gerr := Parse([]byte(p.body), ContentTypeText, ParseOptions{Scratch: sc})
		want, ws, werr := Parse([]byte(p.body), ContentTypeText, ParseOptions{})
		if fast := sc.gen == gen; fast != p.fast {
			t.Errorf("%s: read from the last page's shape %v, want %v", p.name, fast, p.fast)
		}
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("%s: error %v, a fresh parse gives %v", p.name, gerr, werr)
		}
		if gerr == nil {
			sameParse(t, p.name, got, want, gs, ws)
		}
	}
	// Families read from a shape are the caller's to change, as a fresh
	// parse's are.
	a, _, _ := Parse([]byte("x 1\ny 2\n"), ContentTypeText, ParseOptions{Scratch: sc})
	a[0].Samples[0].Value, a[0].Name = 5, "z"
	b, _, _ := Parse([]byte("x 1\ny 2\n"), ContentTypeText, ParseOptions{Scratch: sc})
	if b[0].Name != "x" || b[0].Samples[0].Value != 1 {
		t.Fatalf("a change to one parse's families reached the next: %s %v", b[0].Name, b[0].Samples[0].Value)
	}
}

// FuzzParseShape: after any text page, a page with the same lines but the
// values of its series replaced (by the comma-separated values, in turn)
// parses as a fresh parse does, errors included, whether or not it is
// read from the first page's shape; and when the scratch says both were
// read as one Shape, the two parses' families differ in values only.
func FuzzParseShape(f *testing.F) {
	pagetest.AddFixtureSeeds(f)
	f.Add([]byte("a+1\nb{x=\"1\"}2\n# TYPE h histogram\nh_bucket{le=\"1\"} 1 1000\nh_bucket{le=\"+Inf\"}\t2\n"), false)
	f.Add([]byte("x 1\ny 2 \n{\"a.b\"} 3\nx 4\n"), true)
	f.Fuzz(func(t *testing.T, body []byte, values bool) {
		sc := &ParseScratch{}
		first, _, err := Parse(body, ContentTypeText, ParseOptions{Scratch: sc})
		if err != nil {
			if sc.Shape() != 0 {
				t.Fatalf("a page that failed to parse has shape %d", sc.Shape())
			}
			return
		}
		firstShape := sc.Shape()
		// The second argument is the fixtures' content-type flag; the
		// values come from the page's own bytes, mutated by the fuzzer.
		parts := strings.Fields(string(body))
		next := withValues(string(body), func(i int, v string) string {
			if !values || len(parts) == 0 {
				return v + "1"
			}
			return parts[(i*7)%len(parts)]
		})
		got, gs, gerr := Parse([]byte(next), ContentTypeText, ParseOptions{Scratch: sc})
		want, ws, werr := Parse([]byte(next), ContentTypeText, ParseOptions{})
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("error %v, a fresh parse gives %v\nfirst page:\n%q\nsecond:\n%q", gerr, werr, body, next)
		}
		if gerr == nil {
			sameParse(t, "second page", got, want, gs, ws)
		}
		switch shape := sc.Shape(); {
		case gerr != nil && shape != 0:
			t.Fatalf("a page that failed to parse has shape %d", shape)
		case shape != 0 && shape == firstShape:
			if msg := valuesOnly(first, got); msg != "" {
				t.Fatalf("both pages read as shape %d, but %s\nfirst page:\n%q\nsecond:\n%q", shape, msg, body, next)
			}
		}
		// A third page, every other value the second's and the rest the
		// first's: read from the shape, the values the second page printed
		// are taken from it, the others parsed.
		var firstValues []string
		withValues(string(body), func(_ int, v string) string { firstValues = append(firstValues, v); return v })
		third := withValues(next, func(i int, v string) string {
			if i%2 == 0 || i >= len(firstValues) {
				return v
			}
			return firstValues[i]
		})
		got, gs, gerr = Parse([]byte(third), ContentTypeText, ParseOptions{Scratch: sc})
		want, ws, werr = Parse([]byte(third), ContentTypeText, ParseOptions{})
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("error %v, a fresh parse gives %v\nthird page:\n%q", gerr, werr, third)
		}
		if gerr == nil {
			sameParse(t, "third page", got, want, gs, ws)
		}
	})
}

// TestParseShapeKeptValues: a page read from its shape takes a value whose
// bytes the last page printed from that page rather than parsing it again,
// and still gives exactly what a fresh parse gives, whichever values moved,
// were respelt (the same number in other bytes) or came back.
func TestParseShapeKeptValues(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", "13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(base)
	respelt := map[string]string{"0": "0.0", "1": "1e0", "NaN": "nan", "+Inf": "inf"}
	pages := []struct {
		name string
		body string
	}{
		{"fixture", page},
		{"same again", page},     // nothing kept yet: every value parsed
		{"same once more", page}, // every value kept
		{"a third moved", withValues(page, func(i int, v string) string {
			if i%3 == 0 {
				return v + "5"
			}
			return v
		})},
		{"every value respelt", withValues(page, func(i int, v string) string {
			if r, ok := respelt[v]; ok {
				return r
			}
			return v + "0" // an integer times ten, a fraction with a trailing zero
		})},
		{"back to the fixture", page},
		{"special values", withValues(page, func(i int, v string) string {
			return [...]string{"NaN", "+Inf", "-Inf", "-0", "1e-300", "infinity", "nan", "Inf", v, ".5"}[i%10]
		})},
		{"special values shifted", withValues(page, func(i int, v string) string {
			return [...]string{"NaN", "+Inf", "-Inf", "-0", "1e-300", "infinity", "nan", "Inf", v, ".5"}[(i+1)%10]
		})},
		{"a bad value where a kept one was", withValues(page, func(i int, v string) string {
			if i == 7 {
				return "0x1p-2"
			}
			return v
		})},
		{"the fixture after a full parse", page},
		{"and again", page},
	}
	sc := &ParseScratch{}
	for _, p := range pages {
		got, gs, gerr := Parse([]byte(p.body), ContentTypeText, ParseOptions{Scratch: sc})
		want, ws, werr := Parse([]byte(p.body), ContentTypeText, ParseOptions{})
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("%s: error %v, a fresh parse gives %v", p.name, gerr, werr)
		}
		if gerr == nil {
			sameParse(t, p.name, got, want, gs, ws)
		}
	}
	if sh := sc.shape; sh == nil || len(sh.tokEnd) != len(sh.keys) || len(sh.keys) == 0 {
		t.Fatal("the last page read from its shape kept no values")
	}
}

// valuesOnly says how a and b differ in anything but their samples'
// values ("" when they do not).
func valuesOnly(a, b []Family) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d families against %d", len(a), len(b))
	}
	for i := range a {
		fa, fb := a[i], b[i]
		if fa.Name != fb.Name || fa.Type != fb.Type || fa.Help != fb.Help || fa.Unit != fb.Unit ||
			len(fa.Samples) != len(fb.Samples) || !reflect.DeepEqual(fa.Created, fb.Created) {
			return fmt.Sprintf("family %d is %s %s, then %s %s", i, fa.Name, fa.Type, fb.Name, fb.Type)
		}
		for j := range fa.Samples {
			sa, sb := fa.Samples[j], fb.Samples[j]
			if !labels.Equal(sa.Labels, sb.Labels) || sa.TimestampMs != sb.TimestampMs || sa.HasTimestamp != sb.HasTimestamp {
				return fmt.Sprintf("sample %d of %s is %s, then %s", j, fa.Name, sa.Labels, sb.Labels)
			}
		}
	}
	return ""
}

// TestParseShapeNamed: a scratch names the shape its last parse read or
// recorded (ParseScratch.Shape): the same name while pages change only
// their values, a new one for a page with another line, none for a page
// that failed or was read as OpenMetrics, and a page's values read anew
// each time.
func TestParseShapeNamed(t *testing.T) {
	sc := &ParseScratch{}
	parse := func(page, contentType string) ([]Family, uint64) {
		t.Helper()
		fams, _, err := Parse([]byte(page), contentType, ParseOptions{Scratch: sc})
		if err != nil && contentType == ContentTypeText && !strings.Contains(page, "{") {
			t.Fatal(err)
		}
		return fams, sc.Shape()
	}
	_, first := parse("# TYPE x counter\nx_total 1\ny{a=\"b\"} 2\n", ContentTypeText)
	fams, again := parse("# TYPE x counter\nx_total 3\ny{a=\"b\"} 4e0\n", ContentTypeText)
	if first == 0 || again != first {
		t.Fatalf("a page with only its values changed has shape %d after %d, want the same, not 0", again, first)
	}
	if v := fams[1].Samples[0].Value; v != 4 {
		t.Fatalf("y reads %v from the shape, want 4", v)
	}
	if _, other := parse("# TYPE x counter\nx_total 3\ny{a=\"c\"} 4\n", ContentTypeText); other == 0 || other == first {
		t.Fatalf("a page with another label value has shape %d, want a new one (the first was %d)", other, first)
	}
	if _, none := parse("x{ 1\n", ContentTypeText); none != 0 {
		t.Fatalf("a page that failed to parse has shape %d, want 0", none)
	}
	if _, none := parse("# TYPE x counter\nx_total 1\n# EOF\n", "application/openmetrics-text; version=1.0.0"); none != 0 {
		t.Fatalf("an OpenMetrics page has shape %d, want 0", none)
	}
}
