package collector

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/scripts/topologypages/scenario"
)

// The topology findings of the diagnosis, through the whole pipeline (the
// constructed pages over HTTP, parse, normalise, the diagnosis input, the
// diagnosis) on a fake clock: the truth is what each page was built with.

// blendHist is the cumulative histogram of a's rates over ta seconds and
// b's over tb after them, as counts (to be printed at scenario time 1):
// each bucket a constant plus a growing term, so that rounding never makes
// a cumulative count fall (which would read as a restart).
func blendHist(a, b scenario.Hist, ta, tb float64) scenario.Hist {
	n := max(len(a.Cum), len(b.Cum))
	if n == 0 {
		return a
	}
	at := func(h scenario.Hist, i int) float64 {
		if h.Cum == nil {
			return 0
		}
		return h.Cum[i]
	}
	out := scenario.Hist{Les: a.Les, Cum: make([]float64, n), Sum: a.Sum*ta + b.Sum*tb}
	if out.Les == nil {
		out.Les = b.Les
	}
	for i := range n {
		out.Cum[i] = at(a, i)*ta + at(b, i)*tb
	}
	return out
}

// blend is the engine whose counters, printed at scenario time 1, grew at
// a's rates for ta seconds and at b's for tb after them, with b's gauges.
func blend(a, b scenario.Engine, ta, tb float64) scenario.Engine {
	mix := func(x, y float64) float64 { return x*ta + y*tb }
	out := b
	out.LocalCompute, out.LocalCacheHit = mix(a.LocalCompute, b.LocalCompute), mix(a.LocalCacheHit, b.LocalCacheHit)
	out.ExternalKVTransfer, out.GenerationTokens = mix(a.ExternalKVTransfer, b.ExternalKVTransfer), mix(a.GenerationTokens, b.GenerationTokens)
	out.Requests, out.FailedXfer, out.FailedNtf = mix(a.Requests, b.Requests), mix(a.FailedXfer, b.FailedXfer), mix(a.FailedNtf, b.FailedNtf)
	out.ExpiredKV = mix(a.ExpiredKV, b.ExpiredKV)
	out.OffloadLoadBytes, out.OffloadStoreBytes = mix(a.OffloadLoadBytes, b.OffloadLoadBytes), mix(a.OffloadStoreBytes, b.OffloadStoreBytes)
	out.OffloadLoadTime, out.OffloadStoreTime = mix(a.OffloadLoadTime, b.OffloadLoadTime), mix(a.OffloadStoreTime, b.OffloadStoreTime)
	out.PromptLen, out.TTFT = blendHist(a.PromptLen, b.PromptLen, ta, tb), blendHist(a.TTFT, b.TTFT, ta, tb)
	out.XferTime, out.XferBytes = blendHist(a.XferTime, b.XferTime, ta, tb), blendHist(a.XferBytes, b.XferBytes, ta, tb)
	return out
}

// shiftedUpstream serves before's page until shift after the test began,
// then after's (engine by engine), its counters continuing where they were.
func shiftedUpstream(t *testing.T, before, after scenario.Pod, shift time.Duration, clock *fakeClock) *httptest.Server {
	t.Helper()
	t0 := clock.Now()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		el := clock.Now().Sub(t0)
		page := scenario.Page(before, scenario.Times[0]+el.Seconds())
		if el > shift {
			pod := before
			pod.Engines = make([]scenario.Engine, len(before.Engines))
			for i := range before.Engines {
				pod.Engines[i] = blend(before.Engines[i], after.Engines[i], scenario.Times[0]+shift.Seconds(), (el - shift).Seconds())
			}
			page = scenario.Page(pod, 1)
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(s.Close)
	return s
}

type topoPoll struct {
	at    time.Duration
	ready bool
	named []string
}

const (
	topoWindow   = 10 * time.Second
	topoBaseline = 40 * time.Second
	topoShift    = 80 * time.Second
	topoEnd      = 110 * time.Second
)

// runTopology scrapes once a second from 0 to topoEnd and returns what
// the diagnosis named at each poll, and the diagnoser.
func runTopology(t *testing.T, before, after scenario.Pod, role string) ([]topoPoll, *diagnosis.Diagnoser) {
	t.Helper()
	clock := newFakeClock()
	up := shiftedUpstream(t, before, after, topoShift, clock)
	d, err := diagnosis.New(diagnosis.Options{Window: topoWindow, Baseline: topoBaseline, MinChange: 0.25, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCollector(t, up.URL, clock, func(cfg *Config) { cfg.Diagnosis, cfg.Role = d, role })
	var polls []topoPoll
	for at := time.Duration(0); at <= topoEnd; at += time.Second {
		if at > 0 {
			clock.Advance(time.Second)
		}
		c.ScrapeOnce(context.Background())
		rep := d.Report()
		if len(rep.Models) != 1 {
			t.Fatalf("at %s: %d models", at, len(rep.Models))
		}
		p := topoPoll{at: at, ready: rep.Models[0].EnoughData}
		for _, f := range rep.Models[0].Causes {
			if f.Active {
				p.named = append(p.named, f.Name)
			}
		}
		polls = append(polls, p)
	}
	return polls, d
}

// firstNamed is when cause was first named after the shift, -1 never;
// held is the share of polls from first naming to the end that name it.
func firstNamed(polls []topoPoll, cause string) (first time.Duration, held float64) {
	first = -1
	n, k := 0, 0
	for _, p := range polls {
		if p.at <= topoShift {
			continue
		}
		if first < 0 && slices.Contains(p.named, cause) {
			first = p.at - topoShift
		}
		if first >= 0 {
			n++
			if slices.Contains(p.named, cause) {
				k++
			}
		}
	}
	if n > 0 {
		held = float64(k) / float64(n)
	}
	return first, held
}

// neverNamed fails when any poll named one of causes (before the shift
// only, when before is set).
func neverNamed(t *testing.T, polls []topoPoll, before bool, causes ...string) {
	t.Helper()
	ready := 0
	for _, p := range polls {
		if before && p.at > topoShift {
			break
		}
		if p.ready {
			ready++
		}
		for _, c := range causes {
			if slices.Contains(p.named, c) {
				t.Errorf("at %s: %s named (%v)", p.at, c, p.named)
				return
			}
		}
	}
	if ready < 20 {
		t.Errorf("only %d ready polls: the test judged nothing", ready)
	}
}

var topoCauses = []string{diagnosis.CauseRankImbalance, diagnosis.CauseKVTransferSlow, diagnosis.CauseKVTransferFailures, diagnosis.CausePrefillSaturated}

// The constructed four-rank page with rank 2 queueing (fixture 34): the
// rank finding is named as soon as the windows are covered, and held; it
// says which rank queues and which idle, on the API and on the page.
func TestTopologyStarvedRank(t *testing.T) {
	pod := scenario.DataParallel
	polls, d := runTopology(t, pod, pod, "")
	first := time.Duration(-1)
	for _, p := range polls {
		if p.ready && first < 0 {
			first = p.at
		}
		if first >= 0 && p.at >= first+5*time.Second && !slices.Equal(p.named, []string{diagnosis.CauseRankImbalance}) {
			t.Fatalf("at %s (ready at %s): named %v, want only rank_imbalance", p.at, first, p.named)
		}
	}
	if first < 0 {
		t.Fatal("never ready")
	}
	mr := d.Report().Models[0]
	if len(mr.Topology) != 1 || mr.Topology[0].Sentence != "Rank 2 queues while ranks 0, 1, 3 are idle." || mr.Topology[0].Action == "" {
		t.Errorf("topology findings %+v", mr.Topology)
	}
	if !slices.ContainsFunc(mr.Readiness.Topology, func(s string) bool {
		return strings.Contains(s, "does not print vllm:nixl_xfer_time_seconds") && strings.HasSuffix(s, "no P/D finding.")
	}) {
		t.Errorf("readiness topology notes %q: want the missing KV-transfer families named", mr.Readiness.Topology)
	}
	rec := get(t, d.PageHandler(), "/diagnosis", nil)
	if body := rec.Body.String(); !strings.Contains(body, "Rank 2 queues while ranks 0, 1, 3 are idle.") || !strings.Contains(body, `data-finding="rank_imbalance" data-active="true"`) {
		t.Errorf("the page does not name the rank finding:\n%s", body)
	}
}

// The fixture 34 pod with every rank sent the same requests (each finishes
// 0.75 a second, vLLM V1's request_success_total per engine): rank 2 still
// queues 21 beside idle ones, on its own long-context sessions, not on the
// router's skew. The rank finding reads what each rank was sent and names
// nothing. Fails on the code before: rank_imbalance named from the first
// ready poll on the running and waiting gauges alone.
func TestTopologyRankOwnSessions(t *testing.T) {
	pod := scenario.DataParallel
	pod.Engines = slices.Clone(pod.Engines)
	for i := range pod.Engines {
		pod.Engines[i].Requests = 0.75
	}
	polls, _ := runTopology(t, pod, pod, "")
	neverNamed(t, polls, false, topoCauses...)
}

// Four ranks sharing the same load, busy or not, never make the finding;
// neither do two ranks both queueing with two idle ones... that is the
// finding: only ranks that idle beside a queueing one count.
func TestTopologyBalancedRanks(t *testing.T) {
	busy := scenario.DataParallel
	busy.Engines = slices.Clone(busy.Engines)
	for i := range busy.Engines {
		busy.Engines[i] = scenario.DataParallel.Engines[2] // all four queueing alike
	}
	polls, _ := runTopology(t, busy, busy, "")
	neverNamed(t, polls, false, topoCauses...)

	light := busy
	light.Engines = slices.Clone(busy.Engines)
	for i := range light.Engines {
		light.Engines[i].Running, light.Engines[i].WaitingCapacity = 3, 0 // all four with room
	}
	polls, _ = runTopology(t, light, light, "")
	neverNamed(t, polls, false, topoCauses...)
}

// The constructed prefill/decode pair, steady: no topology finding on
// either side. Shifted: each finding named within the recent window plus
// 15 s, and held.
func TestTopologyPrefillDecode(t *testing.T) {
	prefill, decode := scenario.PrefillDecode[0], scenario.PrefillDecode[1]
	t.Run("steady", func(t *testing.T) {
		polls, d := runTopology(t, decode, decode, "decode")
		neverNamed(t, polls, false, topoCauses...)
		for _, n := range d.Report().Models[0].Readiness.Topology {
			if strings.Contains(n, "P/D") {
				t.Errorf("the decode page prints the KV-transfer families, yet: %q", n)
			}
		}
		polls, _ = runTopology(t, prefill, prefill, "prefill")
		neverNamed(t, polls, false, topoCauses...)
	})
	slow := decode
	slow.Engines = slices.Clone(decode.Engines)
	les := decode.Engines[0].XferTime.Les
	slow.Engines[0].XferTime = scenario.Hist{Les: les, Cum: make([]float64, len(les)), Sum: 8 * 0.6}
	for i := 9; i < len(les); i++ {
		slow.Engines[0].XferTime.Cum[i] = 8 // every transfer now takes 0.5–0.75 s
	}
	failing := decode
	failing.Engines = slices.Clone(decode.Engines)
	failing.Engines[0].FailedXfer = 3
	saturated := prefill
	saturated.Engines = slices.Clone(prefill.Engines)
	saturated.Engines[0].WaitingCapacity = 60 // the same KV usage
	for _, c := range []struct {
		name          string
		before, after scenario.Pod
		role, cause   string
	}{
		{"slow", decode, slow, "decode", diagnosis.CauseKVTransferSlow},
		{"failing", decode, failing, "decode", diagnosis.CauseKVTransferFailures},
		{"saturated", prefill, saturated, "prefill", diagnosis.CausePrefillSaturated},
		// llm-d's encode-prefill pod prefills and does not decode.
		{"saturated encode-prefill", prefill, saturated, "encode-prefill", diagnosis.CausePrefillSaturated},
	} {
		t.Run(c.name, func(t *testing.T) {
			polls, d := runTopology(t, c.before, c.after, c.role)
			neverNamed(t, polls, true, topoCauses...)
			first, held := firstNamed(polls, c.cause)
			if first < 0 || first > topoWindow+15*time.Second {
				t.Fatalf("%s first named %s after the shift, want within %s", c.cause, first, topoWindow+15*time.Second)
			}
			if held < 0.95 {
				t.Errorf("%s held in %.0f %% of the polls after naming, want 95 %%", c.cause, 100*held)
			}
			for _, p := range polls[len(polls)-5:] {
				for _, n := range p.named {
					if n != c.cause && slices.Contains(topoCauses, n) {
						t.Errorf("at %s: also %s", p.at, n)
					}
				}
			}
			if a := d.Report().Models[0].Topology; len(a) == 0 || a[0].Cause != c.cause || a[0].Sentence == "" || a[0].Action == "" {
				t.Errorf("topology findings %+v", a)
			}
		})
	}
	// The role gates the findings: the saturated prefill page scraped as a
	// decode pod, or as one that serves both (llm-d's prefill-decode), names
	// no prefill finding.
	for _, role := range []string{"decode", "prefill-decode"} {
		polls, _ := runTopology(t, prefill, saturated, role)
		neverNamed(t, polls, false, diagnosis.CausePrefillSaturated)
	}
}
