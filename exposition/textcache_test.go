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
