package collector

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/fos-study/vllm-normalizer/derive"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/internal/pagetest"
	"github.com/fos-study/vllm-normalizer/mapping"
	routingpkg "github.com/fos-study/vllm-normalizer/routing"
	"github.com/fos-study/vllm-normalizer/window"
)

// FuzzPipeline runs a page through everything a scrape does after the
// fetch (parse, DropCreated, Normalize, History.Observe/Derive, Present,
// status families, routing view, merge, encode) and checks that both the
// full page and the routing view parse again with expfmt's legacy
// validation, with one header per family and no series twice. The same
// page is observed twice, 10 s apart, and then a second variant with every
// value halved, so rates, resets and quantiles are computed too.
func FuzzPipeline(f *testing.F) {
	pagetest.AddFixtureSeeds(f)
	colon := testMapper(f, mapping.Options{})
	underscore := testMapper(f, mapping.Options{NameStyle: mapping.NameStyleUnderscore, LegacyAliases: true})
	roles := colon.Catalogue().Roles()
	profiles, err := mapping.LoadProfiles(roles)
	if err != nil {
		f.Fatal(err)
	}
	deriver := derive.New(roles)

	f.Fuzz(func(t *testing.T, body []byte, altStyle bool) {
		fams, _, err := exposition.Parse(body, "text/plain", exposition.ParseOptions{SampleLimit: 5000})
		if err != nil {
			return
		}
		fams = exposition.DropCreated(fams)
		mapper := colon
		if altStyle {
			mapper = underscore
		}
		h := window.New([]time.Duration{time.Minute, 5 * time.Minute}, time.Second, deriver.Inputs())
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		var page, routing []exposition.Family
		for i, scale := range []float64{1, 1, 0.5} {
			in := fams
			if scale != 1 {
				in = scaled(fams, scale)
			}
			norm, report := mapper.Normalize(in)
			var canon []exposition.Family
			if p := profiles.Detect(norm); p != nil {
				canon = p.Canonical(norm, roles)
			}
			at := now.Add(time.Duration(i) * 10 * time.Second)
			h.Observe(at, canon)
			derived := deriver.Derive(h, at, []string{"model_name", "engine"})
			page, _ = mapper.Present(slices.Concat(norm, report.Kept))
			page = append(page, derived...)
			page = append(page, mapping.StatusFamilies(report)...)
			routing = routingpkg.View(canon, deriver.Derive(h, at, []string{"model_name"}), roles, report.Upstream.Engine, mapper.StyleName)
		}
		for name, out := range map[string][]exposition.Family{"page": page, "routing view": routing} {
			text := exposition.AppendText(nil, merge(out))
			checkFuzzedPage(t, name, body, text)
		}
	})
}

// scaled returns a copy of fams with every value multiplied by k.
func scaled(fams []exposition.Family, k float64) []exposition.Family {
	out := make([]exposition.Family, len(fams))
	for i, f := range fams {
		out[i] = f
		out[i].Samples = make([]exposition.Sample, len(f.Samples))
		for j, s := range f.Samples {
			s.Value *= k
			out[i].Samples[j] = s
		}
	}
	return out
}

func checkFuzzedPage(t *testing.T, what string, input, text []byte) {
	t.Helper()
	tp := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := tp.TextToMetricFamilies(bytes.NewReader(text)); err != nil {
		t.Fatalf("%s: expfmt rejects it: %v\ninput:\n%q\noutput:\n%s", what, err, input, text)
	}
	p, err := textparse.New(text, "text/plain", labels.NewSymbolTable(), textparse.ParserOptions{})
	if p == nil {
		t.Fatal(err)
	}
	series := map[string]bool{}
	headers := map[string]bool{}
	var l labels.Labels
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("%s: textparse rejects it: %v\ninput:\n%q\noutput:\n%s", what, err, input, text)
		}
		switch e {
		case textparse.EntryType:
			name, _ := p.Type()
			if headers[string(name)] {
				t.Fatalf("%s: family %s has two TYPE lines\ninput:\n%q\noutput:\n%s", what, name, input, text)
			}
			headers[string(name)] = true
		case textparse.EntrySeries:
			p.Labels(&l)
			k := l.String()
			if series[k] {
				t.Fatalf("%s: series %s appears twice\ninput:\n%q\noutput:\n%s", what, k, input, text)
			}
			series[k] = true
		}
	}
}
