// Command newengines builds the constructed test pages of the servers for
// which no real /metrics dump is published: ATOM (AMD's inference server),
// TokenSpeed, and SGLang 0.5.22 on a hybrid-attention model (sliding-window
// and Mamba layers beside full attention).
//
//	go run ./scripts/newengines            # rewrite the committed fixtures
//
// Every family name, type and label set comes from the server's source, at
// the commit named in the page's table below (testdata/fixtures/README.md
// gives the provenance of each name); the values are chosen, one consistent
// moment of a small server each. The HELP texts are the sources' own where
// the source has one (ATOM, TokenSpeed) and this project's otherwise.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

const (
	atomOut       = "testdata/fixtures/35-atom-constructed-from-source.prom"
	tokenspeedOut = "testdata/fixtures/36-tokenspeed-constructed-from-source.prom"
	hybridIn      = "testdata/fixtures/26-dynamo-worker+sglang-2026-01-complete-dynamo-docs-metrics-examples-sglang.prom"
	hybridOut     = "testdata/fixtures/37-sglang-hybrid-constructed-from-26.prom"
)

func main() {
	pages, err := build(".")
	if err != nil {
		log.Fatal(err)
	}
	for path, page := range pages {
		if err := os.WriteFile(path, page, 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("wrote %s (%d bytes)\n", path, len(page))
	}
}

// build returns each constructed page by its path under root.
func build(root string) (map[string][]byte, error) {
	base, err := os.ReadFile(filepath.Join(root, hybridIn))
	if err != nil {
		return nil, err
	}
	hybrid, err := hybridPage(base)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", hybridIn, err)
	}
	out := map[string][]byte{
		filepath.Join(root, atomOut):       atomPage(),
		filepath.Join(root, tokenspeedOut): tokenspeedPage(),
		filepath.Join(root, hybridOut):     hybrid,
	}
	for path, page := range out {
		if err := parses(page); err != nil {
			return nil, fmt.Errorf("%s does not parse: %w", path, err)
		}
	}
	return out, nil
}

// ATOM's standalone OpenAI server (ROCm/ATOM @ ffdf3bb5,
// atom/entrypoints/openai/metrics.py): no labels, counters printed by
// prometheus_client with _total on the HELP and TYPE lines. 3,200 of 8,000
// KV blocks allocated, so the usage ratio is 0.4.
const (
	atomBlocks     = 8000
	atomUsedBlocks = 3200
)

func atomPage() []byte {
	var b bytes.Buffer
	gauge := func(name, help string, v float64) { scalar(&b, name, "gauge", help, "", v) }
	counter := func(name, help string, v float64) { scalar(&b, name+"_total", "counter", help, "", v) }
	gauge("atom:metrics_snapshot_available", "Whether a runtime metrics snapshot has been collected successfully.", 1)
	counter("atom:metrics_refresh_errors", "Number of failed runtime metrics refreshes.", 0)
	gauge("atom:metrics_last_refresh_timestamp_seconds", "Unix timestamp of the last successful runtime metrics refresh.", 1.7647668e+09)
	gauge("atom:requests_running", "Number of requests currently running across data-parallel ranks.", 6)
	gauge("atom:requests_waiting", "Number of requests waiting across data-parallel ranks.", 4)
	gauge("atom:requests_parked_kv_load", "Number of requests parked for an external KV load.", 0)
	gauge("atom:requests_partial_prefill", "Number of requests currently in chunked prefill.", 1)
	gauge("atom:kv_cache_blocks_used", "Number of allocated KV-cache blocks.", atomUsedBlocks)
	gauge("atom:kv_cache_blocks_free", "Number of free KV-cache blocks.", atomBlocks-atomUsedBlocks)
	gauge("atom:kv_cache_blocks_total", "Total number of KV-cache blocks.", atomBlocks)
	gauge("atom:kv_cache_blocks_indexed", "Number of KV-cache blocks reachable by prefix hash.", 2500)
	gauge("atom:kv_cache_usage_ratio", "Fraction of KV-cache blocks currently allocated.", float64(atomUsedBlocks)/atomBlocks)
	counter("atom:requests_finished", "Number of requests completed by the scheduler.", 120)
	counter("atom:prompt_tokens", "Number of prompt tokens in completed requests.", 96000)
	counter("atom:generation_tokens", "Number of generated tokens in completed requests.", 24000)
	counter("atom:preemptions", "Number of scheduler preemptions.", 2)
	counter("atom:prefix_cache_requests", "Number of prefill requests observed by prefix-cache accounting.", 118)
	counter("atom:prefix_cache_cached_tokens", "Number of prompt tokens served from the admitted prefix cache.", 38400)
	counter("atom:prefix_cache_compressed_tokens", "Number of tokens matched by the compressed-prefix index.", 40000)
	counter("atom:prefix_cache_full_tokens", "Number of prompt tokens considered by prefix-cache accounting.", 96000)
	counter("atom:prefix_cache_wanted_tokens", "Number of reusable tokens wanted after checkpoint gates.", 40000)
	gauge("atom:prefix_cache_hit_ratio", "Admitted prefix-cache token hit ratio.", 0.4)
	// The block size and count as labels (llm-d-router's built-in atom
	// engine config reads them, TestBuiltinAtomEngine at 8e93c2dc).
	scalar(&b, "atom:cache_config_info", "gauge", "KV cache configuration (value 1): block size in tokens and the number of GPU blocks.",
		`{block_size="16",num_gpu_blocks="`+strconv.Itoa(atomBlocks)+`"}`, 1)
	return b.Bytes()
}

// TokenSpeed (lightseekorg/tokenspeed @ f4d8ec6e,
// python/tokenspeed/runtime/metrics/collector.py): scheduler gauges
// labelled model_name, app_key and dp_rank (only attention-TP rank 0 of each
// data-parallel rank reports), request families model_name and app_key.
// 2 running, 5 waiting, KV pages 0.375 in use (the llm-d-router fixture's
// values). Four finished requests.
func tokenspeedPage() []byte {
	var b bytes.Buffer
	sched := `{model_name="Qwen/Qwen3-8B",app_key="",dp_rank="0"}`
	req := `{model_name="Qwen/Qwen3-8B",app_key=""}`
	scalar(&b, "tokenspeed:num_requests_running", "gauge", "Requests with scheduler-side generation state (decode path).", sched, 2)
	scalar(&b, "tokenspeed:num_requests_waiting", "gauge", "Requests waiting in the C++ scheduler queue.", sched, 5)
	scalar(&b, "tokenspeed:kv_cache_usage_perc", "gauge", "Fraction of device KV pages in use (0-1).", sched, 0.375)
	hist(&b, "tokenspeed:iteration_tokens_total", "Tokens scheduled in one scheduler forward step.", sched,
		[]float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192}, []float64{2048, 512, 2, 2, 2, 2})
	scalar(&b, "tokenspeed:spec_decode_num_accepted_tokens_total", "counter", "Accepted speculative draft tokens (excludes the bonus token sampled after verify).", sched, 0)
	scalar(&b, "tokenspeed:spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed across verify steps.", sched, 0)
	scalar(&b, "tokenspeed:spec_decode_num_drafts_total", "counter", "Number of speculative verify rounds (per request-slot).", sched, 0)
	scalar(&b, "tokenspeed:num_nan_aborted_requests_total", "counter", "Requests terminated by the NaN guard (NaN in logits or an out-of-vocab sampled token id).", sched, 0)
	scalar(&b, "tokenspeed:prompt_tokens_total", "counter", "Number of prefill tokens processed.", req, 4096)
	scalar(&b, "tokenspeed:generation_tokens_total", "counter", "Number of generation tokens processed.", req, 1024)
	scalar(&b, "tokenspeed:num_requests_total", "counter", "Number of requests processed.", req, 4)
	scalar(&b, "tokenspeed:request_success_total", "counter", "Requests that finished without an abort-style finish.", req, 4)
	scalar(&b, "tokenspeed:prefix_cache_hits_total", "counter", "Prompt tokens served from prefix cache. Hit ratio = prefix_cache_hits_total / prompt_tokens_total.", req, 1024)
	hist(&b, "tokenspeed:time_to_first_token_seconds", "Histogram of time to first token in seconds.", req,
		[]float64{0.1, 0.3, 0.5, 0.7, 0.9, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 120, 160}, []float64{0.08, 0.25, 0.25, 0.6})
	hist(&b, "tokenspeed:request_time_per_output_token_seconds", "Histogram of time per output token in seconds.", req,
		[]float64{0.002, 0.005, 0.010, 0.020, 0.030, 0.040, 0.050, 0.060, 0.070, 0.080, 0.090, 0.100, 0.150, 0.200, 0.300, 0.400, 0.600, 0.800, 1.000, 2.000}, []float64{0.025, 0.025, 0.03, 0.035})
	// One observation per token (observe_inter_token_latency adds the
	// tokens of a step to one bucket): 1,020 gaps of 20 ms.
	itl := make([]float64, 1020)
	for i := range itl {
		itl[i] = 0.02
	}
	hist(&b, "tokenspeed:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", req,
		[]float64{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.050, 0.075, 0.100, 0.150, 0.200, 0.300, 0.400, 0.500, 0.750, 1.000, 2.000}, itl)
	hist(&b, "tokenspeed:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", req,
		[]float64{0.1, 0.2, 0.4, 0.8, 1, 2, 5, 10, 20, 40, 60, 80, 100, 150, 200, 250, 300, 350, 500, 1000}, []float64{6.4, 6.4, 7.7, 9.0})
	return b.Bytes()
}

// The hybrid SGLang page: fixture 26 (a real SGLang 0.5.x page) with the
// values of its three pool-usage gauges set for a hybrid model (full
// attention 0.3, sliding window 0.25, Mamba states 0.9, so token_usage, the
// highest of the three, 0.9), and the families of SGLang 0.5.22 appended:
// kv_cache_usage_perc = max(full, sliding window), Mamba excluded (sglang
// #34714); full_token_usage; the raw pool gauges kv_used_tokens,
// kv_evictable_tokens and kv_available_tokens (#22726), adding up to
// max_total_num_tokens; and the per-request TPOT histogram
// request_time_per_output_token_seconds{is_streaming} (#40228, #40275).
var hybridSet = map[string]string{
	"sglang:token_usage":     "0.9",
	"sglang:swa_token_usage": "0.25",
	"sglang:mamba_usage":     "0.9",
}

const (
	sglangLabels  = `{engine_type="unified",model_name="Qwen/Qwen3-0.6B",moe_ep_rank="0",pp_rank="0",tp_rank="0"}`
	sglangTokens  = 92962 // max_total_num_tokens on fixture 26
	sglangUsed    = 27888
	sglangEvicted = 40000
)

func hybridPage(src []byte) ([]byte, error) {
	if len(src) == 0 || src[len(src)-1] != '\n' {
		return nil, errors.New("the base page must end with a newline so that families can be appended")
	}
	lines := strings.SplitAfter(string(src), "\n")
	set := 0
	for i, l := range lines {
		for name, v := range hybridSet {
			if strings.HasPrefix(l, name+sglangLabels+" ") {
				lines[i] = name + sglangLabels + " " + v + "\n"
				set++
			}
		}
	}
	if set != len(hybridSet) {
		return nil, fmt.Errorf("set %d of the %d pool-usage gauges; the base page must have each once with labels %s", set, len(hybridSet), sglangLabels)
	}
	var b bytes.Buffer
	b.WriteString(strings.Join(lines, ""))
	for _, name := range []string{"sglang:kv_cache_usage_perc", "sglang:full_token_usage", "sglang:kv_used_tokens", "sglang:request_time_per_output_token_seconds"} {
		if bytes.Contains(src, []byte("# TYPE "+name+" ")) {
			return nil, fmt.Errorf("the base page already has %s; nothing may be added twice", name)
		}
	}
	scalar(&b, "sglang:kv_cache_usage_perc", "gauge", "KV-cache usage, 0 to 1: the highest of the full-attention and sliding-window pools, Mamba states excluded.", sglangLabels, 0.3)
	scalar(&b, "sglang:full_token_usage", "gauge", "The token usage of the full-attention KV pool.", sglangLabels, 0.3)
	scalar(&b, "sglang:kv_used_tokens", "gauge", "KV tokens held by running requests.", sglangLabels, sglangUsed)
	scalar(&b, "sglang:kv_evictable_tokens", "gauge", "KV tokens held by the radix cache that can be evicted.", sglangLabels, sglangEvicted)
	scalar(&b, "sglang:kv_available_tokens", "gauge", "KV tokens free.", sglangLabels, sglangTokens-sglangUsed-sglangEvicted)
	bounds := []float64{0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5}
	hist(&b, "sglang:request_time_per_output_token_seconds", "Histogram of the mean time per output token of each request in seconds.",
		`{engine_type="unified",is_streaming="false",model_name="Qwen/Qwen3-0.6B"}`, bounds, []float64{0.012})
	hist(&b, "sglang:request_time_per_output_token_seconds", "", `{engine_type="unified",is_streaming="true",model_name="Qwen/Qwen3-0.6B"}`, bounds, []float64{0.011, 0.014})
	return b.Bytes(), nil
}

// scalar writes a one-series family; a family already begun (help "")
// gets only the series.
func scalar(b *bytes.Buffer, name, typ, help, lbls string, v float64) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n%s%s %s\n", name, help, name, typ, name, lbls, pyFloat(v))
}

// hist writes a histogram series of the observations; help "" continues the
// family written just before.
func hist(b *bytes.Buffer, name, help, lbls string, bounds, obs []float64) {
	if help != "" {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	}
	inner := strings.TrimSuffix(strings.TrimPrefix(lbls, "{"), "}")
	with := func(le string) string {
		if inner == "" {
			return `{le="` + le + `"}`
		}
		return "{" + inner + `,le="` + le + `"}`
	}
	sum := 0.0
	for _, o := range obs {
		sum += o
	}
	for _, bound := range bounds {
		n := 0
		for _, o := range obs {
			if o <= bound {
				n++
			}
		}
		fmt.Fprintf(b, "%s_bucket%s %s\n", name, with(pyFloat(bound)), pyFloat(float64(n)))
	}
	fmt.Fprintf(b, "%s_bucket%s %s\n", name, with("+Inf"), pyFloat(float64(len(obs))))
	fmt.Fprintf(b, "%s_count%s %s\n%s_sum%s %s\n", name, lbls, pyFloat(float64(len(obs))), name, lbls, pyFloat(sum))
}

// pyFloat writes a value as Python's prometheus_client does ("3.0", "0.125").
func pyFloat(v float64) string {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

func parses(page []byte) error {
	p := textparse.NewPromParser(page, labels.NewSymbolTable(), false)
	for {
		if _, err := p.Next(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}
