package scenario

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Hist is a histogram whose observations arrive at fixed rates: Cum[i] is
// the observations per second at most Les[i] (the last bound is +Inf, so
// Cum[last] is the count per second), Sum the observed total per second.
type Hist struct {
	Les []float64
	Cum []float64
	Sum float64
}

// Mean is the mean observation.
func (h Hist) Mean() float64 { return h.Sum / h.Cum[len(h.Cum)-1] }

// Count is the observations per second.
func (h Hist) Count() float64 { return h.Cum[len(h.Cum)-1] }

// Engine is one vLLM engine core (data-parallel rank): gauges, and the
// per-second rates of its counters and histograms. A zero rate or an
// empty histogram leaves the family at 0 or out (see Pod).
type Engine struct {
	Running, WaitingCapacity, WaitingDeferred float64
	KVUsage                                   float64
	// Prompt tokens per second by source; vllm:prompt_tokens_total is
	// their sum, the prefix-cache hits are LocalCacheHit.
	LocalCompute, LocalCacheHit, ExternalKVTransfer float64
	GenerationTokens                                float64
	// Finished requests per second (finished_reason="stop"), and those
	// the client abandoned (finished_reason="abort", printed on pods with
	// admission control).
	Requests, Aborts float64
	PromptLen        Hist // vllm:request_prompt_tokens
	TTFT             Hist // vllm:time_to_first_token_seconds
	XferTime         Hist // vllm:nixl_xfer_time_seconds (decode side reads KV)
	XferBytes        Hist // vllm:nixl_bytes_transferred
	FailedXfer       float64
	FailedNtf        float64
	ExpiredKV        float64 // vllm:nixl_num_kv_expired_reqs (prefill side)
	// KV offload to CPU, bytes and seconds per second.
	OffloadLoadBytes, OffloadStoreBytes float64
	OffloadLoadTime, OffloadStoreTime   float64
}

// Waiting is vllm:num_requests_waiting: capacity plus deferred.
func (e Engine) Waiting() float64 { return e.WaitingCapacity + e.WaitingDeferred }

// PromptTokens is vllm:prompt_tokens_total's rate.
func (e Engine) PromptTokens() float64 {
	return e.LocalCompute + e.LocalCacheHit + e.ExternalKVTransfer
}

// Pod is one vLLM server: its engines and which optional families it
// prints.
type Pod struct {
	// File is the fixture's name without the time suffix.
	File  string
	Model string
	// Role is what the pod is deployed as (llm-d.ai/role); vLLM's page does
	// not say it.
	Role      string
	Blocks    int
	BlockSize int
	// TP is the tensor-parallel size: NIXL observations of every TP
	// worker are pooled in the engine's histograms (vLLM #41230), so each
	// XferTime/XferBytes observation is one rank's share of a transfer.
	TP      int
	NIXL    bool
	Offload bool
	Engines []Engine
	// Rejections are the requests refused at admission per second by
	// reason (the cap); nil on a pod without admission control. vLLM
	// counts them per model, without engine. QueuedReqsCap is
	// --max-num-queued-reqs where the pod runs with it (0 otherwise).
	Rejections    map[string]float64
	QueuedReqsCap float64
}

var (
	inf = math.Inf(1)
	// vLLM's default NIXL bounds (nixl/stats.py): transfer seconds, and
	// bytes 2**(10+i) for odd i from 1 to 23.
	xferTimeLes  = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 5, inf}
	xferBytesLes = func() []float64 {
		var out []float64
		for i := 1; i < 25; i += 2 {
			out = append(out, math.Pow(2, float64(10+i)))
		}
		return append(out, inf)
	}()
	promptLes = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, inf}
	ttftLes   = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, inf}
)

// cum spreads per-second observation counts over bounds: at[i] is how many
// observations per second fall in bucket i (at most les[i], above the
// previous bound).
func cum(les []float64, at map[int]float64) []float64 {
	out := make([]float64, len(les))
	run := 0.0
	for i := range les {
		run += at[i]
		out[i] = run
	}
	return out
}

// Transfers: each KV pull moves 96 MiB per TP rank (2 ranks), 4 pulls per
// second, so 8 observations per second: 6 of 0.0875 s and 2 of 0.2375 s,
// a mean of 0.125 s. Bandwidth per rank is then 96 MiB / 0.125 s.
const (
	decodeXfersPerSecond = 8.0
	xferBytesEach        = 96 << 20
	xferSecondsMean      = 0.125
)

// PrefillDecode is the prefill/decode pair: prompts are computed on the
// prefill pod (which generates one token each and is done), then the
// decode pod pulls their KV over NIXL and generates. The prefill pool is
// saturated (a queue, KV usage flat and low); decode waits on remote KV
// (deferred) and some pulls fail.
var PrefillDecode = []Pod{
	{
		File: "32-vllm-pd-prefill-constructed", Model: "meta-llama/Llama-3.1-8B-Instruct", Role: "prefill",
		Blocks: 50000, BlockSize: 16, TP: 2, NIXL: true, Offload: true,
		Engines: []Engine{{
			Running: 6, WaitingCapacity: 18, WaitingDeferred: 0, KVUsage: 0.08,
			// 4 requests/s of mean 2000 prompt tokens, a quarter cached.
			LocalCompute: 6000, LocalCacheHit: 2000, GenerationTokens: 4, Requests: 4,
			PromptLen: Hist{Les: promptLes, Cum: cum(promptLes, map[int]float64{9: 2, 10: 2}), Sum: 8000},
			TTFT:      Hist{Les: ttftLes, Cum: cum(ttftLes, map[int]float64{6: 1, 7: 2, 8: 1}), Sum: 7.5},
			ExpiredKV: 0.05,
			// Offload: stores every computed prompt's KV, loads the cached ones back.
			OffloadStoreBytes: 600e6, OffloadStoreTime: 0.25, OffloadLoadBytes: 200e6, OffloadLoadTime: 0.05,
		}},
	},
	{
		File: "33-vllm-pd-decode-constructed", Model: "meta-llama/Llama-3.1-8B-Instruct", Role: "decode",
		Blocks: 60000, BlockSize: 16, TP: 2, NIXL: true,
		Engines: []Engine{{
			Running: 96, WaitingCapacity: 2, WaitingDeferred: 6, KVUsage: 0.71,
			// The prompts' KV arrives over NIXL; one token per request is
			// computed locally.
			LocalCompute: 4, ExternalKVTransfer: 7996, GenerationTokens: 1200, Requests: 4,
			PromptLen: Hist{Les: promptLes, Cum: cum(promptLes, map[int]float64{9: 2, 10: 2}), Sum: 8000},
			TTFT:      Hist{Les: ttftLes, Cum: cum(ttftLes, map[int]float64{7: 2, 8: 2}), Sum: 8},
			XferTime: Hist{Les: xferTimeLes, Cum: cum(xferTimeLes, map[int]float64{5: 6, 7: 2}),
				Sum: decodeXfersPerSecond * xferSecondsMean},
			XferBytes: Hist{Les: xferBytesLes, Cum: cum(xferBytesLes, map[int]float64{8: decodeXfersPerSecond}),
				Sum: decodeXfersPerSecond * xferBytesEach},
			FailedXfer: 0.5, FailedNtf: 0.1,
		}},
	},
}

// DataParallel is one vLLM pod with four data-parallel engines: engine 2
// queues (a long-context tenant pinned to it) while the others idle.
var DataParallel = Pod{
	File: "34-vllm-dp4-starved-rank-constructed", Model: "Qwen/Qwen3-30B-A3B", Role: "both",
	Blocks: 40000, BlockSize: 16, TP: 1,
	Engines: []Engine{
		{Running: 1, KVUsage: 0.04, LocalCompute: 150, LocalCacheHit: 50, GenerationTokens: 40, Requests: 0.5,
			PromptLen: Hist{Les: promptLes, Cum: cum(promptLes, map[int]float64{8: 0.5}), Sum: 200}},
		{Running: 1, KVUsage: 0.05, LocalCompute: 150, LocalCacheHit: 50, GenerationTokens: 40, Requests: 0.5,
			PromptLen: Hist{Les: promptLes, Cum: cum(promptLes, map[int]float64{8: 0.5}), Sum: 200}},
		{Running: 32, WaitingCapacity: 21, KVUsage: 0.97, LocalCompute: 12000, LocalCacheHit: 4000, GenerationTokens: 300, Requests: 2,
			PromptLen: Hist{Les: promptLes, Cum: cum(promptLes, map[int]float64{11: 2}), Sum: 16000}},
		{Running: 0, KVUsage: 0, GenerationTokens: 0},
	},
}

// Admission are two vLLM pods (v0.29 on) refusing requests at admission,
// one for each cap, with the reason vLLM gives it.
//
//   - 38 runs --max-num-queued-reqs=64 at its batch size: running stays at
//     64, nothing waits (the emptiest-looking queue of a fleet), and two
//     thirds of the attempts are refused: 10 per second against the 5
//     that start (TTFT observations). One request in five of those that
//     finish was abandoned by its client.
//   - 39 runs --max-num-queued-tokens: 24 running and 40 waiting, their
//     prompts holding the token cap; 2 refused per second against 6
//     started, a quarter; no aborts.
var Admission = []Pod{
	{
		File: "38-vllm-admission-queued-reqs-constructed", Model: "Qwen/Qwen3-8B", Role: "both",
		Blocks: 30000, BlockSize: 16, TP: 1, QueuedReqsCap: 64,
		Rejections: map[string]float64{"max_num_queued_reqs": 10},
		Engines: []Engine{{
			Running: 64, KVUsage: 0.62, LocalCompute: 3000, LocalCacheHit: 1000, GenerationTokens: 1500,
			Requests: 4, Aborts: 1,
			PromptLen: Hist{Les: promptLes, Cum: cum(promptLes, map[int]float64{8: 4, 9: 1}), Sum: 4000},
			TTFT:      Hist{Les: ttftLes, Cum: cum(ttftLes, map[int]float64{5: 2, 6: 3}), Sum: 3.5},
		}},
	},
	{
		File: "39-vllm-admission-queued-tokens-constructed", Model: "Qwen/Qwen3-8B", Role: "both",
		Blocks: 30000, BlockSize: 16, TP: 1,
		Rejections: map[string]float64{"max_num_queued_reqs": 0, "max_num_queued_tokens": 2},
		Engines: []Engine{{
			Running: 24, WaitingCapacity: 40, KVUsage: 0.9, LocalCompute: 24000, GenerationTokens: 600,
			Requests:  6,
			PromptLen: Hist{Les: promptLes, Cum: cum(promptLes, map[int]float64{11: 6}), Sum: 24000},
			TTFT:      Hist{Les: ttftLes, Cum: cum(ttftLes, map[int]float64{8: 6}), Sum: 24},
		}},
	},
}

// Times are the seconds since start of the committed pages: two scrapes
// 15 s apart.
var Times = []float64{600, 615}

// FileName is the fixture file of pod p at t seconds.
func FileName(p Pod, t float64) string {
	return fmt.Sprintf("%s-t%d.prom", p.File, int(t))
}

func f(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0" // as Python's client prints floats
	}
	return s
}

// Page is pod p's /metrics after t seconds, as vLLM V1 (Python frontend,
// 2026) prints the families the scenario has, without _created series.
func Page(p Pod, t float64) string {
	var b strings.Builder
	lbl := func(e int, extra string) string {
		s := fmt.Sprintf(`engine="%d",model_name=%q`, e, p.Model)
		if extra != "" {
			s += "," + extra
		}
		return "{" + s + "}"
	}
	head := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	gauge := func(name, help string, v func(Engine) float64) {
		head(name, "gauge", help)
		for i, e := range p.Engines {
			fmt.Fprintf(&b, "%s%s %s\n", name, lbl(i, ""), f(v(e)))
		}
	}
	counter := func(name, help string, rate func(Engine) float64) {
		head(name, "counter", help)
		for i, e := range p.Engines {
			fmt.Fprintf(&b, "%s%s %s\n", name, lbl(i, ""), f(rate(e)*t))
		}
	}
	hist := func(name, help string, h func(Engine) Hist, les []float64) {
		head(name, "histogram", help)
		for i, e := range p.Engines {
			hh := h(e)
			for j, le := range les {
				c := 0.0
				if hh.Cum != nil {
					c = hh.Cum[j]
				}
				fmt.Fprintf(&b, "%s_bucket%s %s\n", name, lbl(i, `le="`+f(le)+`"`), f(c*t))
			}
			cnt := 0.0
			if hh.Cum != nil {
				cnt = hh.Count()
			}
			fmt.Fprintf(&b, "%s_count%s %s\n", name, lbl(i, ""), f(cnt*t))
			fmt.Fprintf(&b, "%s_sum%s %s\n", name, lbl(i, ""), f(hh.Sum*t))
		}
	}
	if p.NIXL {
		hist("vllm:nixl_xfer_time_seconds", "Histogram of transfer duration for NIXL KV Cache transfers.", func(e Engine) Hist { return e.XferTime }, xferTimeLes)
		hist("vllm:nixl_bytes_transferred", "Histogram of bytes transferred per NIXL KV Cache transfers.", func(e Engine) Hist { return e.XferBytes }, xferBytesLes)
		counter("vllm:nixl_num_failed_transfers_total", "Number of failed NIXL KV Cache transfers.", func(e Engine) float64 { return e.FailedXfer })
		counter("vllm:nixl_num_failed_notifications_total", "Number of failed NIXL KV Cache notifications.", func(e Engine) float64 { return e.FailedNtf })
		counter("vllm:nixl_num_kv_expired_reqs_total", "Number of requests that had their KV expire. NOTE: This metric is tracked on the P instance.", func(e Engine) float64 { return e.ExpiredKV })
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", func(e Engine) float64 { return e.Running })
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", Engine.Waiting)
	head("vllm:num_requests_waiting_by_reason", "gauge", "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.")
	for i, e := range p.Engines {
		fmt.Fprintf(&b, "vllm:num_requests_waiting_by_reason%s %s\n", lbl(i, `reason="capacity"`), f(e.WaitingCapacity))
		fmt.Fprintf(&b, "vllm:num_requests_waiting_by_reason%s %s\n", lbl(i, `reason="deferred"`), f(e.WaitingDeferred))
	}
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", func(e Engine) float64 { return e.KVUsage })
	counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", Engine.PromptTokens)
	counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", func(e Engine) float64 { return e.LocalCacheHit })
	counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", Engine.PromptTokens)
	head("vllm:prompt_tokens_by_source_total", "counter", "Number of prompt tokens by source.")
	for i, e := range p.Engines {
		fmt.Fprintf(&b, "vllm:prompt_tokens_by_source_total%s %s\n", lbl(i, `source="local_compute"`), f(e.LocalCompute*t))
		fmt.Fprintf(&b, "vllm:prompt_tokens_by_source_total%s %s\n", lbl(i, `source="local_cache_hit"`), f(e.LocalCacheHit*t))
		fmt.Fprintf(&b, "vllm:prompt_tokens_by_source_total%s %s\n", lbl(i, `source="external_kv_transfer"`), f(e.ExternalKVTransfer*t))
	}
	counter("vllm:generation_tokens_total", "Number of generation tokens processed.", func(e Engine) float64 { return e.GenerationTokens })
	head("vllm:request_success_total", "counter", "Count of successfully processed requests.")
	for i, e := range p.Engines {
		fmt.Fprintf(&b, "vllm:request_success_total%s %s\n", lbl(i, `finished_reason="stop"`), f(e.Requests*t))
		if p.Rejections != nil {
			fmt.Fprintf(&b, "vllm:request_success_total%s %s\n", lbl(i, `finished_reason="abort"`), f(e.Aborts*t))
		}
	}
	if p.Rejections != nil {
		head("vllm:admission_rejections_total", "counter", "Number of admission attempts rejected.")
		for _, reason := range slices.Sorted(maps.Keys(p.Rejections)) {
			fmt.Fprintf(&b, "vllm:admission_rejections_total{model_name=%q,reason=%q} %s\n", p.Model, reason, f(p.Rejections[reason]*t))
		}
	}
	hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", func(e Engine) Hist { return e.PromptLen }, promptLes)
	hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", func(e Engine) Hist { return e.TTFT }, ttftLes)
	if p.Offload {
		counter("vllm:kv_offload_load_bytes_total", "Bytes loaded from the KV offload tier into GPU memory.", func(e Engine) float64 { return e.OffloadLoadBytes })
		counter("vllm:kv_offload_load_time_total", "Seconds spent loading from the KV offload tier.", func(e Engine) float64 { return e.OffloadLoadTime })
		counter("vllm:kv_offload_store_bytes_total", "Bytes stored from GPU memory into the KV offload tier.", func(e Engine) float64 { return e.OffloadStoreBytes })
		counter("vllm:kv_offload_store_time_total", "Seconds spent storing into the KV offload tier.", func(e Engine) float64 { return e.OffloadStoreTime })
	}
	head("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
	for i := range p.Engines {
		fmt.Fprintf(&b, "vllm:cache_config_info{block_size=\"%d\",enable_prefix_caching=\"True\",engine=\"%d\",num_gpu_blocks=\"%d\"} 1.0\n", p.BlockSize, i, p.Blocks)
	}
	return b.String()
}
