package collector

import (
	"context"
	"html"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/routing"
)

// twoEngines is the real V1 fixture with its engine "0" series repeated as
// engine "1", so that the model has two engines to collapse.
func twoEngines(t *testing.T) []exposition.Family {
	t.Helper()
	body, err := os.ReadFile("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	if err != nil {
		t.Fatal(err)
	}
	fams, _, err := exposition.Parse(body, exposition.ContentTypeText, exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range fams {
		f := &fams[i]
		var extra []exposition.Sample
		for _, s := range f.Samples {
			if s.Labels.Get("engine") == "0" {
				c := s
				b := labels.NewBuilder(s.Labels)
				b.Set("engine", "1")
				c.Labels = b.Labels()
				extra = append(extra, c)
			}
		}
		f.Samples = append(f.Samples, extra...)
	}
	return exposition.DropCreated(fams)
}

// scale multiplies every sample of sample name name on engine eng by k.
func scale(fams []exposition.Family, name, eng string, k float64) {
	for i := range fams {
		for j := range fams[i].Samples {
			s := &fams[i].Samples[j]
			if s.Name() == name && s.Labels.Get("engine") == eng {
				s.Value *= k
			}
		}
	}
}

func sampleSum(fams []exposition.Family, name, eng string) float64 {
	sum := 0.0
	for _, f := range fams {
		for _, s := range f.Samples {
			if s.Name() == name && s.Labels.Get("engine") == eng {
				sum += s.Value
			}
		}
	}
	return sum
}

func clone(fams []exposition.Family) []exposition.Family {
	out := make([]exposition.Family, len(fams))
	for i, f := range fams {
		out[i] = f
		out[i].Samples = append([]exposition.Sample(nil), f.Samples...)
	}
	return out
}

// The model's totals grow by each series' own increase: when one engine
// restarts (its counters fall), the others' increases still count and the
// restarted engine counts from zero.
func TestDiagnosisInputResetPerSeries(t *testing.T) {
	ident := func(s string) string { return s }
	roles := testMapper(t, mapping.Options{}).Catalogue().Roles()
	var in diagnosisInput
	p1 := twoEngines(t)
	obs := in.observations(p1, viewGauges(p1, roles, ident), roles, "vllm", "")
	if len(obs) != 1 || obs[0].Model != "TinyLlama" {
		t.Fatalf("observations %+v", obs)
	}
	// First sight: nothing has grown yet.
	if obs[0].Finished != 0 || obs[0].GenerationTokens != 0 {
		t.Fatalf("first observation: finished %v, generation %v, want 0", obs[0].Finished, obs[0].GenerationTokens)
	}
	if want := sampleSum(p1, "vllm:num_requests_running", "0") * 2; obs[0].Running != want {
		t.Errorf("running %v, want both engines' %v", obs[0].Running, want)
	}

	// Second page: engine 0 doubled its counters, engine 1 restarted at a
	// quarter of its old values.
	p2 := clone(p1)
	for _, n := range []string{"vllm:generation_tokens_total", "vllm:request_success_total", "vllm:time_to_first_token_seconds_bucket",
		"vllm:time_to_first_token_seconds_sum", "vllm:inter_token_latency_seconds_sum"} {
		scale(p2, n, "0", 2)
		scale(p2, n, "1", 0.25)
	}
	obs = in.observations(p2, viewGauges(p2, roles, ident), roles, "vllm", "")
	for _, c := range []struct {
		name string
		got  float64
	}{
		{"vllm:generation_tokens_total", obs[0].GenerationTokens},
		{"vllm:request_success_total", obs[0].Finished},
		// the latency histograms' sums: their exact means' numerators
		{"vllm:time_to_first_token_seconds_sum", obs[0].TTFTSum},
		{"vllm:inter_token_latency_seconds_sum", obs[0].ITLSum},
	} {
		// engine 0: 2v - v; engine 1: restarted, counts 0.25v from zero.
		v := sampleSum(p1, c.name, "0")
		if want := v + 0.25*v; math.Abs(c.got-want) > 1e-9*want {
			t.Errorf("%s total %v, want %v", c.name, c.got, want)
		}
	}
	h := obs[0].TTFT
	if len(h.Bounds) < 2 || !math.IsInf(h.Bounds[len(h.Bounds)-1], 1) {
		t.Fatalf("TTFT bounds %v", h.Bounds)
	}
	inf := 0.0
	for _, f := range p1 {
		for _, s := range f.Samples {
			if s.Name() == "vllm:time_to_first_token_seconds_bucket" && s.Labels.Get("engine") == "0" && s.Labels.Get("le") == "+Inf" {
				inf = s.Value
			}
		}
	}
	if got, want := h.Counts[len(h.Counts)-1], inf*1.25; math.Abs(got-want) > 1e-9*want {
		t.Errorf("TTFT +Inf total %v, want %v", got, want)
	}
	// Absent families are NaN, never 0.
	p3 := clone(p2)
	for i := range p3 {
		if p3[i].Name == "vllm:num_preemptions" || p3[i].Name == "vllm:num_preemptions_total" {
			p3[i].Samples = nil
		}
	}
	obs = in.observations(p3, viewGauges(p3, roles, ident), roles, "vllm", "")
	if !math.IsNaN(obs[0].Preemptions) {
		t.Errorf("preemptions without the family: %v, want NaN", obs[0].Preemptions)
	}
	for i := range p3 {
		if p3[i].Name == "vllm:inter_token_latency_seconds" {
			p3[i].Samples = nil
		}
	}
	obs = in.observations(p3, viewGauges(p3, roles, ident), roles, "vllm", "")
	if !math.IsNaN(obs[0].ITLSum) || math.IsNaN(obs[0].TTFTSum) {
		t.Errorf("without the ITL histogram: ITL sum %v (want NaN), TTFT sum %v (want known)", obs[0].ITLSum, obs[0].TTFTSum)
	}
}

// Each engine's finished requests (request_success_total by its engine
// label, every finished reason) reach the rank finding reset-corrected per
// engine, as the model's total is: engine 0 doubled its counts, engine 1
// restarted at a quarter of its old ones. Fails on the code before: the
// engines carried their running and waiting only.
func TestDiagnosisInputEngineFinished(t *testing.T) {
	ident := func(s string) string { return s }
	roles := testMapper(t, mapping.Options{}).Catalogue().Roles()
	var in diagnosisInput
	p1 := twoEngines(t)
	in.observations(p1, viewGauges(p1, roles, ident), roles, "vllm", "")
	p2 := clone(p1)
	scale(p2, "vllm:request_success_total", "0", 2)
	scale(p2, "vllm:request_success_total", "1", 0.25)
	obs := in.observations(p2, viewGauges(p2, roles, ident), roles, "vllm", "")
	v := sampleSum(p1, "vllm:request_success_total", "0")
	want := map[string]float64{"0": v, "1": 0.25 * v}
	if len(obs) != 1 || len(obs[0].Engines) != 2 {
		t.Fatalf("observations %+v", obs)
	}
	for _, e := range obs[0].Engines {
		if !e.Counted || math.Abs(e.Finished-want[e.Engine]) > 1e-9*v {
			t.Errorf("engine %s: finished %v (counted %v), want %v", e.Engine, e.Finished, e.Counted, want[e.Engine])
		}
	}
	// a page without the counter leaves the engines uncounted
	for i := range p2 {
		if p2[i].Name == "vllm:request_success" || p2[i].Name == "vllm:request_success_total" {
			p2[i].Samples = nil
		}
	}
	for _, e := range in.observations(p2, viewGauges(p2, roles, ident), roles, "vllm", "")[0].Engines {
		if e.Counted {
			t.Errorf("engine %s counted without request_success_total", e.Engine)
		}
	}
}

// viewGauges is the routing view's collapsed gauges of page, as the
// collector hands them to the diagnosis.
func viewGauges(page []exposition.Family, roles *mapping.Roles, style func(string) string) map[string]routing.ModelGauges {
	v := new(routing.Viewer)
	v.View(page, nil, roles, "v1", style)
	return v.Gauges()
}

// addTo adds d to the samples of sample name name on engine eng whose
// finished_reason is reason.
func addTo(fams []exposition.Family, name, eng, reason string, d float64) {
	for i := range fams {
		for j := range fams[i].Samples {
			s := &fams[i].Samples[j]
			if s.Name() == name && s.Labels.Get("engine") == eng && s.Labels.Get("finished_reason") == reason {
				s.Value += d
			}
		}
	}
}

// The aborted requests are the finished ones with finished_reason="abort",
// summed over engines like the rest; a page whose finished requests carry
// no reason leaves them unknown (NaN), not 0.
func TestDiagnosisInputAborted(t *testing.T) {
	ident := func(s string) string { return s }
	roles := testMapper(t, mapping.Options{}).Catalogue().Roles()
	var in diagnosisInput
	p1 := twoEngines(t)
	obs := in.observations(p1, viewGauges(p1, roles, ident), roles, "vllm", "")
	if len(obs) != 1 || obs[0].Aborted != 0 {
		t.Fatalf("first observation %+v, want aborted 0", obs)
	}
	// Engine 0: 7 more aborted and 13 more stopped; engine 1: 3 more aborted.
	p2 := clone(p1)
	addTo(p2, "vllm:request_success_total", "0", "abort", 7)
	addTo(p2, "vllm:request_success_total", "0", "stop", 13)
	addTo(p2, "vllm:request_success_total", "1", "abort", 3)
	obs = in.observations(p2, viewGauges(p2, roles, ident), roles, "vllm", "")
	if obs[0].Aborted != 10 || obs[0].Finished != 23 {
		t.Errorf("aborted %v of %v finished, want 10 of 23", obs[0].Aborted, obs[0].Finished)
	}
	// The same page with the reason label dropped from the finished requests.
	p3 := clone(p2)
	for i := range p3 {
		for j := range p3[i].Samples {
			s := &p3[i].Samples[j]
			if s.Name() == "vllm:request_success_total" {
				s.Labels = labels.NewBuilder(s.Labels).Del("finished_reason").Labels()
			}
		}
	}
	var fresh diagnosisInput
	obs = fresh.observations(p3, viewGauges(p3, roles, ident), roles, "vllm", "")
	if !math.IsNaN(obs[0].Aborted) {
		t.Errorf("aborted %v on a page without finished_reason, want NaN", obs[0].Aborted)
	}
}

// A TTFT histogram child printed without +Inf has no total count: summed
// by bound into the model's, its buckets would outgrow the model's +Inf
// for good, and every window of the diagnosis over that scrape would
// read requests slower than they were. While engine 1 lacks +Inf the
// model's TTFT is not given; once it is back the totals are a histogram
// again, grown by both engines' increases since the last whole page (fails
// on the code before: the model's TTFT was given, and its buckets fell as
// the bound grew after).
func TestDiagnosisInputWithoutInf(t *testing.T) {
	ident := func(s string) string { return s }
	roles := testMapper(t, mapping.Options{}).Catalogue().Roles()
	const ttft = "vllm:time_to_first_token_seconds_bucket"
	var in diagnosisInput
	p1 := twoEngines(t)
	if sampleSum(p1, ttft, "0") == 0 {
		t.Fatal("the fixture's TTFT histogram is empty")
	}
	in.observations(p1, viewGauges(p1, roles, ident), roles, "vllm", "")

	p2 := clone(p1)
	scale(p2, ttft, "0", 2)
	scale(p2, ttft, "1", 2)
	for i := range p2 {
		p2[i].Samples = slices.DeleteFunc(p2[i].Samples, func(s exposition.Sample) bool {
			return s.Name() == ttft && s.Labels.Get("engine") == "1" && s.Labels.Get("le") == "+Inf"
		})
	}
	obs := in.observations(p2, viewGauges(p2, roles, ident), roles, "vllm", "")
	if h := obs[0].TTFT; len(h.Bounds) != 0 {
		t.Errorf("engine 1 without +Inf: the model's TTFT is given: %+v", h)
	}
	if w := obs[0].Withheld; !slices.Equal(w, []string{diagnosis.InputTTFT}) {
		t.Errorf("engine 1 without +Inf: withheld %q, want only the TTFT", w)
	}

	p3 := clone(p1)
	scale(p3, ttft, "0", 3)
	scale(p3, ttft, "1", 3)
	obs = in.observations(p3, viewGauges(p3, roles, ident), roles, "vllm", "")
	h := obs[0].TTFT
	if len(h.Bounds) < 2 || !math.IsInf(h.Bounds[len(h.Bounds)-1], 1) {
		t.Fatalf("+Inf back: TTFT bounds %v", h.Bounds)
	}
	for i := 1; i < len(h.Counts); i++ {
		if h.Counts[i] < h.Counts[i-1] {
			t.Fatalf("+Inf back: the model's TTFT falls from %v at le=%v to %v at le=%v", h.Counts[i-1], h.Bounds[i-1], h.Counts[i], h.Bounds[i])
		}
	}
	// p1 -> p3 on both engines: each bucket's growth since the last whole
	// page, none lost and none counted twice.
	infOf := func(fams []exposition.Family) float64 {
		v := 0.0
		for _, f := range fams {
			for _, s := range f.Samples {
				if s.Name() == ttft && s.Labels.Get("le") == "+Inf" {
					v += s.Value
				}
			}
		}
		return v
	}
	if got, want := h.Counts[len(h.Counts)-1], infOf(p3)-infOf(p1); math.Abs(got-want) > 1e-9*want {
		t.Errorf("+Inf back: TTFT +Inf total %v, want both engines' growth since %v", got, want)
	}
}

// A page whose only engine prints its TTFT, ITL and KV-transfer time
// histograms without +Inf, through the whole pipeline: the diagnosis says
// they are withheld and why, on the API and the page, not that the server
// does not print them (fails on main: "This server does not print
// vllm:time_to_first_token_seconds: no diagnosis.").
func TestDiagnosisWithheldWithoutInf(t *testing.T) {
	names := []string{"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:nixl_xfer_time_seconds"}
	up := serveWithoutInf(t, names...)
	d, err := diagnosis.New(diagnosis.Options{Window: 10 * time.Second, Baseline: 40 * time.Second, MinChange: 0.25, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCollector(t, up.URL, newFakeClock(), func(cfg *Config) { cfg.Diagnosis = d })
	c.ScrapeOnce(context.Background())
	rep := d.Report()
	if len(rep.Models) != 1 {
		t.Fatalf("%d models", len(rep.Models))
	}
	r := rep.Models[0].Readiness
	if r.State != diagnosis.ReadyNoInputs || len(r.Missing) != 0 || !slices.Equal(r.Withheld, names) {
		t.Errorf("readiness %+v, want no_inputs with the TTFT, ITL and KV-transfer time withheld, none missing", r)
	}
	for _, s := range append([]string{r.Message}, r.Topology...) {
		if strings.Contains(s, "does not print vllm:time_to_first_token_seconds") || strings.Contains(s, "does not print vllm:nixl_xfer_time_seconds") {
			t.Errorf("%q: the server prints it", s)
		}
	}
	if !strings.HasPrefix(r.Message, "This server prints vllm:time_to_first_token_seconds, withheld as a histogram child (an engine or rank) is printed without its +Inf bucket") {
		t.Errorf("message %q: want the TTFT withheld, and why", r.Message)
	}
	if !slices.ContainsFunc(r.Topology, func(s string) bool {
		return strings.Contains(s, "prints vllm:nixl_xfer_time_seconds, withheld as") && strings.HasSuffix(s, "no P/D finding.")
	}) {
		t.Errorf("topology notes %q: want the KV-transfer time withheld", r.Topology)
	}
	dom := html.UnescapeString(get(t, d.PageHandler(), "/diagnosis", nil).Body.String())
	if !strings.Contains(dom, `id="withheld">Not judged, withheld as a histogram child (an engine or rank) is printed without its +Inf bucket`) {
		t.Errorf("the page does not say why the inputs are withheld:\n%s", dom)
	}
}

// serveWithoutInf serves fixture 13 (one engine) with the +Inf bucket of
// each histogram named left out, failing when one has none.
func serveWithoutInf(t *testing.T, names ...string) *httptest.Server {
	t.Helper()
	body, err := os.ReadFile("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	if err != nil {
		t.Fatal(err)
	}
	var page strings.Builder
	dropped := 0
	for line := range strings.Lines(string(body)) {
		if slices.ContainsFunc(names, func(n string) bool {
			return strings.HasPrefix(line, n+"_bucket{") && strings.Contains(line, `le="+Inf"`)
		}) {
			dropped++
			continue
		}
		page.WriteString(line)
	}
	if dropped != len(names) {
		t.Fatalf("%d +Inf lines dropped, want %d", dropped, len(names))
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, page.String())
	}))
	t.Cleanup(up.Close)
	return up
}
