package exposition_test

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/exposition"
)

// benchPages are the pages the parse and encode benchmarks read: two real
// dumps and the demo's V1 page over 16 data-parallel engines (~620 KB).
func benchPages(b *testing.B) []struct {
	name string
	page []byte
} {
	b.Helper()
	read := func(path string) []byte {
		p, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	up, err := demo.New(demo.Options{Engines: 16, Seed: 1, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	return []struct {
		name string
		page []byte
	}{
		{"v1-fixture13", read("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")},
		{"v0-fixture02", read("../testdata/fixtures/02-vllm-0.4.3to0.5.0-datadog-vllm-fixture.prom")},
		{"v1-16engines", up.Page()},
	}
}

// BenchmarkParse is exposition.Parse with a symbol table and scratch kept
// across parses, as the collector keeps them per upstream.
func BenchmarkParse(b *testing.B) {
	for _, p := range benchPages(b) {
		b.Run(p.name, func(b *testing.B) {
			opts := exposition.ParseOptions{SymbolTable: labels.NewSymbolTable(), Scratch: &exposition.ParseScratch{}}
			b.SetBytes(int64(len(p.page)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := exposition.Parse(p.page, exposition.ContentTypeText, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFloor walks the same bytes with Prometheus's textparse alone:
// Next and Series for every entry, and Labels for every series unless the
// variant is no-labels. It is the floor Parse is measured against.
func BenchmarkFloor(b *testing.B) {
	for _, p := range benchPages(b) {
		for _, withLabels := range []bool{true, false} {
			name := p.name
			if !withLabels {
				name += "/no-labels"
			}
			b.Run(name, func(b *testing.B) {
				st := labels.NewSymbolTable()
				var l labels.Labels
				b.SetBytes(int64(len(p.page)))
				b.ReportAllocs()
				for b.Loop() {
					tp, err := textparse.New(p.page, exposition.ContentTypeText, st, textparse.ParserOptions{})
					if tp == nil {
						b.Fatal(err)
					}
					for {
						e, err := tp.Next()
						if errors.Is(err, io.EOF) {
							break
						}
						if err != nil {
							b.Fatal(err)
						}
						if e == textparse.EntrySeries {
							tp.Series()
							if withLabels {
								tp.Labels(&l)
							}
						}
					}
				}
			})
		}
	}
}

// BenchmarkAppendText encodes a parsed page as text format 0.0.4 into a
// buffer reused across iterations.
func BenchmarkAppendText(b *testing.B) {
	for _, p := range benchPages(b) {
		b.Run(p.name, func(b *testing.B) {
			fams, _, err := exposition.Parse(p.page, exposition.ContentTypeText, exposition.ParseOptions{})
			if err != nil {
				b.Fatal(err)
			}
			var buf []byte
			b.SetBytes(int64(len(p.page)))
			b.ReportAllocs()
			for b.Loop() {
				buf = exposition.AppendText(buf[:0], fams)
			}
		})
	}
}
