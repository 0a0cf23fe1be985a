// Package productionstack runs vLLM production-stack's way of reading a
// /metrics page (Python's prometheus_client text parser, the last sample of
// each of six names, 0 when absent) against raw vLLM pages and against the
// sidecar scraping them. production-stack scrapes url + "/metrics" on the
// port it sends inference to, so behind the sidecar it reads the routing
// view (the sidecar's proxy answers GET /metrics with it); the full page is
// checked too.
package productionstack

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/e2e/consumers/harness"
)

// engineStats is what read_engine_stats.py prints.
type engineStats struct {
	Running     float64  `json:"num_running_requests"`
	Waiting     float64  `json:"num_queuing_requests"`
	HitRate     float64  `json:"gpu_prefix_cache_hit_rate"`
	Hits        float64  `json:"gpu_prefix_cache_hits_total"`
	Queries     float64  `json:"gpu_prefix_cache_queries_total"`
	GPUCache    float64  `json:"gpu_cache_usage_perc"`
	Seen        []string `json:"seen"`
	ParserError string   `json:"error"`
}

// python finds an interpreter with prometheus_client (Debian:
// python3-prometheus-client, installed by deploy/ci-deps.sh).
func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import prometheus_client.parser").Run() == nil {
			return path
		}
	}
	msg := "no python3 with prometheus_client: install the Debian package python3-prometheus-client (deploy/ci-deps.sh does)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func read(t *testing.T, py string, page []byte) engineStats {
	t.Helper()
	cmd := exec.Command(py, "read_engine_stats.py")
	cmd.Stdin = bytes.NewReader(page)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read_engine_stats.py: %v\n%s", err, out)
	}
	var st engineStats
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return st
}

// check applies the rule to one sidecar page: at least as right as raw
// for every value whose truth is known, equal to it on the routing view,
// and nothing invented where the raw page has no data.
func check(t *testing.T, where string, truth harness.Truth, hitRate float64, hasHitRate bool, raw, side engineStats, exact bool) {
	t.Helper()
	if side.ParserError != "" {
		t.Errorf("%s: prometheus_client rejects the sidecar's page: %s", where, side.ParserError)
		return
	}
	for _, c := range []struct {
		field           string
		has             bool
		want, raw, side float64
	}{
		{"num_running_requests", truth.HasRunning, truth.Running, raw.Running, side.Running},
		{"num_queuing_requests", truth.HasWaiting, truth.Waiting, raw.Waiting, side.Waiting},
		{"gpu_cache_usage_perc", truth.HasKV, truth.KV, raw.GPUCache, side.GPUCache},
		{"gpu_prefix_cache_hits_total", truth.HasPrefix, truth.PrefixHits, raw.Hits, side.Hits},
		{"gpu_prefix_cache_queries_total", truth.HasPrefix, truth.PrefixQueries, raw.Queries, side.Queries},
		{"gpu_prefix_cache_hit_rate", hasHitRate, hitRate, raw.HitRate, side.HitRate},
	} {
		if !c.has {
			// -1 is the hit-rate gauge's own "no data" (V0's meaning).
			noData := c.side == 0 || c.field == "gpu_prefix_cache_hit_rate" && c.side == -1
			if c.side != c.raw && !noData {
				t.Errorf("%s: %s = %v from the sidecar where the raw page has no data (raw %v)", where, c.field, c.side, c.raw)
			}
			continue
		}
		if !harness.AtLeastAsRight(c.side, c.raw, c.want) {
			t.Errorf("%s: %s = %v from the sidecar, %v from raw; truth %v: worse than raw", where, c.field, c.side, c.raw, c.want)
		}
		if exact && !harness.Equal(c.side, c.want) {
			t.Errorf("%s: %s = %v from the sidecar, want the collapsed truth %v (raw %v)", where, c.field, c.side, c.want, c.raw)
		}
	}
}

func TestNeverWorseThanRaw(t *testing.T) {
	py := python(t)
	harness.EachPage(t, func(t *testing.T, p harness.Page, truth harness.Truth, up *harness.Upstream, side *harness.Sidecar) {
		raw := read(t, py, p.Body)
		t.Logf("truth %+v\nraw %+v", truth, raw)
		// A single page has no window: the hit rate's truth is unknown
		// (a V0 server prints its own gauge, -1 when it has no data).
		// production-stack reads <inference URL>/metrics: the proxy's.
		for _, path := range []string{side.URL + "/metrics", side.ProxyURL + "/metrics"} {
			got := read(t, py, side.Get(t, path))
			t.Logf("%s %+v", path, got)
			check(t, "sidecar "+path, truth, 0, false, raw, got, p.DataParallel && path == side.ProxyURL+"/metrics")
		}
		if p.DataParallel && harness.Equal(raw.Running, truth.Running) {
			t.Errorf("raw already reads the summed running count %v; this page does not test data parallelism", raw.Running)
		}
	})
}

// TestPrefixHitRate: between two scrapes of a two-engine V1 server, the
// routing view's vllm:gpu_prefix_cache_hit_rate is the hit ratio of the
// tokens queried in between, over both engines; raw V1 has no such gauge.
func TestPrefixHitRate(t *testing.T) {
	py := python(t)
	first := harness.DemoPage(t, 2)
	second := first
	var err error
	// engine 0: 300 of 1000 queried tokens hit; engine 1: 100 of 200.
	for _, d := range []struct {
		name, engine string
		delta        float64
	}{
		{"vllm:prefix_cache_hits_total", "0", 300}, {"vllm:prefix_cache_queries_total", "0", 1000},
		{"vllm:prefix_cache_hits_total", "1", 100}, {"vllm:prefix_cache_queries_total", "1", 200},
	} {
		if second, err = harness.AddToCounter(second, d.name, d.engine, d.delta); err != nil {
			t.Fatal(err)
		}
	}
	const want = 400.0 / 1200.0
	truth, err := harness.ComputeTruth(second)
	if err != nil {
		t.Fatal(err)
	}
	up := harness.NewUpstream(t, first)
	side := harness.StartSidecar(t, up)
	// Let the first page fill a few of the window's points: two scrapes
	// closer than the window's resolution share one point.
	time.Sleep(3 * harness.Interval)
	up.Set(second)
	// Wait for a scrape of the second page with the hit rate computed.
	body := side.WaitFor(t, side.ProxyURL+"/metrics", func(b []byte) bool {
		samples, err := harness.Samples(b)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(samples, func(s harness.Sample) bool { return s.Name == "vllm:prefix_cache_queries_total" })
		j := slices.IndexFunc(samples, func(s harness.Sample) bool { return s.Name == "vllm:gpu_prefix_cache_hit_rate" })
		return i >= 0 && samples[i].Value == truth.PrefixQueries && j >= 0
	})
	raw := read(t, py, second)
	got := read(t, py, body)
	t.Logf("raw %+v\nrouting %+v", raw, got)
	check(t, "sidecar proxy /metrics", truth, want, true, raw, got, true)
	if !slices.Contains(got.Seen, "gpu_prefix_cache_hit_rate") {
		t.Errorf("the proxy's /metrics has no vllm:gpu_prefix_cache_hit_rate")
	}
}
