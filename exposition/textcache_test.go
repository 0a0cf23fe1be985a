package exposition

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/internal/pagetest"
)

// TestTextCacheMatchesAppendText: one TextCache encodes every fixture in
// turn, each followed by the same page with moved values, with a family
// dropped, with one series' labels changed, with a HELP and a TYPE
// changed and with a series added, in pieces of random sizes; every
// encoding is byte for byte AppendText's, and a page whose label sets are
// the last one's adds nothing to the cache (its lines were copies).
func TestTextCacheMatchesAppendText(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var c TextCache
	encode := func(name string, fams []Family) {
		t.Helper()
		limit := []int{1, 100, 4096, 32 << 10, 1 << 30}[rng.IntN(5)]
		var got, piece []byte
		for at := (TextPos{}); !at.Done(fams); {
			piece, at = c.AppendTextUntil(piece[:0], fams, at, limit)
			got = append(got, piece...)
		}
		if want := AppendText(nil, fams); !bytes.Equal(got, want) {
			t.Fatalf("%s (limit %d): the cached text is not AppendText's:\n%s\nwant\n%s", name, limit, got, want)
		}
	}
	reused := 0
	for _, file := range pagetest.FixturePaths(t) {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fams, _, err := Parse(body, "text/plain; version=0.0.4", ParseOptions{})
		if err != nil || len(fams) < 2 {
			continue // the fixtures meant to be refused
		}
		name := filepath.Base(file)
		encode(name, fams)

		moved := cloneFamilies(fams)
		for i := range moved {
			for j := range moved[i].Samples {
				moved[i].Samples[j].Value = rng.NormFloat64() * 1e3
			}
		}
		kept := len(c.arena)
		encode(name+", values moved", moved)
		if len(c.arena) != kept {
			t.Errorf("%s: the same label sets again grew the cache from %d to %d bytes", name, kept, len(c.arena))
		} else {
			reused++
		}

		dropped := slicesDelete(cloneFamilies(fams), rng.IntN(len(fams)))
		encode(name+", a family dropped", dropped)

		relabelled := cloneFamilies(fams)
		if f := &relabelled[len(relabelled)/2]; len(f.Samples) > 0 {
			b := labels.NewBuilder(f.Samples[0].Labels)
			b.Set("zz_changed", `a "quoted"\value`)
			f.Samples[0].Labels = b.Labels()
		}
		encode(name+", a series relabelled", relabelled)

		retyped := cloneFamilies(fams)
		retyped[0].Help += " and more\nhelp"
		retyped[1].Type = model.MetricTypeUnknown
		f := &retyped[len(retyped)-1]
		f.Samples = append(f.Samples, Sample{Labels: labels.FromStrings(model.MetricNameLabel, f.Name, "added", "1"), Value: 2, TimestampMs: 5, HasTimestamp: true})
		encode(name+", help, type and a series changed", retyped)
	}
	if reused == 0 {
		t.Fatal("no fixture was encoded")
	}
}

func cloneFamilies(fams []Family) []Family {
	out := make([]Family, len(fams))
	for i, f := range fams {
		f.Samples = append([]Sample(nil), f.Samples...)
		out[i] = f
	}
	return out
}

func slicesDelete(fams []Family, i int) []Family {
	return append(fams[:i:i], fams[i+1:]...)
}

// TestTextCacheSame: after a page is encoded whole, in pieces of random
// sizes, Same holds for the same families again (copied, not the same
// slices) and for nothing whose text differs: a value, a timestamp, a
// label, a HELP, a TYPE moved, a sample or a family dropped or added;
// nor before any page, nor after a page begun but not finished.
func TestTextCacheSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	encode := func(c *TextCache, fams []Family, limit int) {
		var piece []byte
		for at := (TextPos{}); !at.Done(fams); {
			piece, at = c.AppendTextUntil(piece[:0], fams, at, limit)
		}
	}
	pages := 0
	for _, file := range pagetest.FixturePaths(t) {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fams, _, err := Parse(body, "text/plain; version=0.0.4", ParseOptions{})
		if err != nil || len(fams) < 2 || len(fams[0].Samples) == 0 {
			continue
		}
		name := filepath.Base(file)
		var c TextCache
		if c.Same(fams) {
			t.Fatalf("%s: an empty cache is the same as the page", name)
		}
		encode(&c, fams, []int{1, 100, 4096, 1 << 30}[rng.IntN(4)])
		if !c.Same(cloneFamilies(fams)) {
			t.Fatalf("%s: the page encoded again is not the same", name)
		}
		last := len(fams) - 1
		variants := map[string]func([]Family){
			"a value moved":     func(f []Family) { f[last].Samples[len(f[last].Samples)-1].Value++ },
			"a timestamp added": func(f []Family) { f[0].Samples[0].HasTimestamp, f[0].Samples[0].TimestampMs = true, 1 },
			"a label changed": func(f []Family) {
				f[0].Samples[0].Labels = labels.NewBuilder(f[0].Samples[0].Labels).Set("zz", "1").Labels()
			},
			"a HELP changed":      func(f []Family) { f[1].Help += "." },
			"a TYPE changed":      func(f []Family) { f[1].Type = model.MetricTypeUnknown },
			"a sample dropped":    func(f []Family) { f[last].Samples = f[last].Samples[:len(f[last].Samples)-1] },
			"a sample added":      func(f []Family) { f[0].Samples = append(f[0].Samples, f[0].Samples[0]) },
			"the last family cut": func(f []Family) { f[last].Samples = nil },
		}
		for what, change := range variants {
			v := cloneFamilies(fams)
			if what == "a timestamp added" && v[0].Samples[0].HasTimestamp {
				v[0].Samples[0].TimestampMs++
			}
			change(v)
			if bytes.Equal(AppendText(nil, v), AppendText(nil, fams)) {
				continue // the change writes the same text (an empty family's HELP, say)
			}
			if c.Same(v) {
				t.Errorf("%s, %s: the same as the page encoded", name, what)
			}
		}
		if c.Same(fams[:last]) || c.Same(append(cloneFamilies(fams), fams[0])) {
			t.Errorf("%s: a family fewer or more is the same", name)
		}
		if c.AppendTextUntil(nil, fams, TextPos{}, 1); c.Same(fams) {
			t.Errorf("%s: the same after a page begun and not finished", name)
		}
		pages++
	}
	if pages == 0 {
		t.Fatal("no fixture was encoded")
	}
}
