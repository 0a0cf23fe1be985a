package collector

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/derive"
)

// TestLegacyLabels: with LegacyLabels (--derive.legacy-labels) the page
// labels the quantile gauges quantile and the SLO targets le, as before
// the rename, and carries neither q nor target.
func TestLegacyLabels(t *testing.T) {
	clock := newFakeClock()
	up, err := demo.New(demo.Options{Now: clock.Now, Seed: 7, Engines: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(up)
	defer srv.Close()
	c := newTestCollector(t, srv.URL+"/metrics", clock, func(cfg *Config) { cfg.SLOs, cfg.LegacyLabels = demoSLOs, true })
	for range 70 {
		c.ScrapeOnce(context.Background())
		clock.Advance(time.Second)
	}
	clock.Advance(-time.Second)
	page := get(t, c.MetricsHandler(), "/metrics", nil).Body.String()
	var quantiles, targets int
	for line := range strings.SplitSeq(page, "\n") {
		switch {
		case strings.HasPrefix(line, derive.DerivedTTFTSeconds+"{"):
			if strings.Contains(line, `q="`) {
				t.Errorf("legacy labels, yet: %s", line)
			}
			if strings.Contains(line, `quantile="0.9"`) {
				quantiles++
			}
		case strings.HasPrefix(line, derive.DerivedSLOAttainmentRatio+"{"):
			if strings.Contains(line, `target="`) {
				t.Errorf("legacy labels, yet: %s", line)
			}
			if strings.Contains(line, `le="0.5"`) && strings.Contains(line, `slo="ttft"`) {
				targets++
			}
		}
	}
	if quantiles == 0 || targets == 0 {
		t.Errorf("%d TTFT series with quantile=\"0.9\", %d attainment series with slo=\"ttft\" and le=\"0.5\"; want some of each", quantiles, targets)
	}
}
