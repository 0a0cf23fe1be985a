package collector

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/derive"
)

// TestSumWithoutInfWithdrawn: a histogram without its +Inf bucket has no
// total count, so a sum over engines that takes in one (the model's
// quantiles and SLO shares on the compatibility page) would divide the
// others' and its finite buckets by the others' total alone. While engine
// 1's TTFT histogram lacks +Inf the model's TTFT gauges are withdrawn (and
// the histogram counted invalid each scrape), engine 0's own stay, and the
// model's come back once engine 1 prints +Inf again and its window holds
// two scrapes of the new layout. The page is the demo upstream's (vLLM V1,
// two data-parallel engines).
func TestSumWithoutInfWithdrawn(t *testing.T) {
	dropInf := regexp.MustCompile(`(?m)^vllm:time_to_first_token_seconds_bucket\{engine="1",le="\+Inf",[^}]*\} .*\n`)
	var cut bool
	c, clock, up, scrape, _ := sumsDemo(t, 0, func(cfg *Config) { cfg.SLOs = demoSLOs })
	step := func() {
		clock.Advance(time.Second)
		p := up.Page()
		if cut {
			q := dropInf.ReplaceAll(p, nil)
			if len(q) == len(p) {
				t.Fatal("the demo page has no +Inf bucket of engine 1's TTFT to drop")
			}
			p = q
		}
		scrape(p)
	}
	// ttft returns the TTFT quantile and SLO share series of the page at
	// path: model-wide (no engine label) or of the engine given.
	ttft := func(page []byte, engine string) []string {
		var out []string
		for series := range samplesOf(t, page) {
			if !strings.Contains(series, `"`+derive.DerivedTTFTSeconds+`"`) && !(strings.Contains(series, `"`+derive.DerivedSLOAttainmentRatio+`"`) && strings.Contains(series, `slo="ttft"`)) {
				continue
			}
			has := strings.Contains(series, `engine="`)
			if engine == "" && !has || engine != "" && strings.Contains(series, `engine="`+engine+`"`) {
				out = append(out, series)
			}
		}
		return out
	}
	pages := func() (full, compat []byte) {
		return get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes(), get(t, c.CompatHandler(), "/metrics", nil).Body.Bytes()
	}
	for range 30 {
		step()
	}
	full, compat := pages()
	whole, engine0 := len(ttft(compat, "")), len(ttft(full, "0"))
	if whole == 0 || engine0 == 0 {
		t.Fatalf("before the cut: %d model-wide and %d engine 0 TTFT gauges, want some of each", whole, engine0)
	}
	invalid := func(full []byte) float64 {
		return samplesOf(t, full)[`{__name__="vllm_normalizer_invalid_histograms_total"}`]
	}
	before := invalid(full)

	cut = true
	for i := range 30 {
		step()
		full, compat = pages()
		if got := ttft(compat, ""); len(got) > 0 {
			t.Fatalf("scrape %d without engine 1's +Inf: the model-wide TTFT gauges are served: %v", i+1, got)
		}
		if got := len(ttft(full, "0")); got != engine0 {
			t.Fatalf("scrape %d without engine 1's +Inf: engine 0 has %d TTFT gauges, want its %d", i+1, got, engine0)
		}
		if got := invalid(full) - before; got != float64(i+1) {
			t.Fatalf("scrape %d without engine 1's +Inf: %v invalid histograms counted since, want %d", i+1, got, i+1)
		}
	}

	cut = false
	for range 3 {
		step()
	}
	_, compat = pages()
	if got := len(ttft(compat, "")); got != whole {
		t.Errorf("engine 1's +Inf back: %d model-wide TTFT gauges, want %d again", got, whole)
	}
}
