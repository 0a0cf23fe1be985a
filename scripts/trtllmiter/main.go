package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

const (
	defaultIn  = "testdata/fixtures/25-dynamo-worker+trtllm-2026-01-complete-dynamo-docs-metrics-examples-trtllm.prom"
	defaultOut = "testdata/fixtures/31-trtllm-iteration-stats-constructed-from-25.prom"
	// The base page's own label set, so the added series join its model.
	seriesLabels = `{engine_type="trtllm",model_name="Qwen/Qwen3-0.6B"}`
)

// Blocks in the KV pool and in use; the utilization gauge is their ratio, as
// TensorRT-LLM computes it (usedNumBlocks / maxNumBlocks).
const (
	maxBlocks  = 4096
	usedBlocks = 512
)

type added struct {
	name, typ, help string
	value           float64
}

var iteration = []added{
	{"trtllm_num_requests_running", "gauge", "Requests active in the engine (iteration statistics).", 3},
	{"trtllm_num_requests_waiting", "gauge", "Requests queued in the engine (iteration statistics).", 2},
	{"trtllm_kv_cache_utilization", "gauge", "Used over total KV cache blocks, 0 to 1.", usedBlocks / float64(maxBlocks)},
	{"trtllm_kv_cache_max_blocks", "gauge", "KV cache blocks in the pool.", maxBlocks},
	{"trtllm_kv_cache_used_blocks", "gauge", "KV cache blocks in use.", usedBlocks},
	{"trtllm_kv_cache_free_blocks", "gauge", "KV cache blocks free.", maxBlocks - usedBlocks},
	{"trtllm_kv_cache_tokens_per_block", "gauge", "Tokens held by one KV cache block.", 32},
	{"trtllm_kv_cache_hit_rate", "gauge", "KV cache block hit rate of the latest iteration.", 0.25},
	{"trtllm_kv_cache_reused_blocks_total", "counter", "KV cache blocks reused from the cache.", 40},
	{"trtllm_kv_cache_missed_blocks_total", "counter", "KV cache blocks not found in the cache.", 120},
}

func main() {
	in := flag.String("in", defaultIn, "real TensorRT-LLM page to extend")
	out := flag.String("out", defaultOut, "where to write the page")
	flag.Parse()
	src, err := os.ReadFile(*in)
	if err != nil {
		log.Fatal(err)
	}
	page, err := build(src)
	if err != nil {
		log.Fatalf("%s: %v", *in, err)
	}
	if err := os.WriteFile(*out, page, 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("wrote %s (%d bytes)\n", *out, len(page))
}

func build(src []byte) ([]byte, error) {
	if len(src) == 0 || src[len(src)-1] != '\n' {
		return nil, errors.New("the base page must end with a newline so that families can be appended")
	}
	if !bytes.Contains(src, []byte(seriesLabels)) {
		return nil, fmt.Errorf("the base page has no series labelled %s; the added series would not join its model", seriesLabels)
	}
	var b bytes.Buffer
	b.Write(src)
	for _, a := range iteration {
		if bytes.Contains(src, []byte("# TYPE "+a.name+" ")) {
			return nil, fmt.Errorf("the base page already has %s; nothing may be added twice", a.name)
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n%s%s %s\n", a.name, a.help, a.name, a.typ, a.name, seriesLabels, pyFloat(a.value))
	}
	p := textparse.NewPromParser(b.Bytes(), labels.NewSymbolTable(), false)
	for {
		if _, err := p.Next(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("the extended page does not parse: %w", err)
		}
	}
	return b.Bytes(), nil
}

// pyFloat writes a value as Python's prometheus_client does ("3.0", "0.125").
func pyFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if v == float64(int64(v)) {
		s += ".0"
	}
	return s
}
