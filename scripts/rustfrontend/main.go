package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

// Defaults, relative to the module root (go run from there).
const (
	defaultIn  = "testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom"
	defaultOut = "testdata/fixtures/30-vllm-v1-rust-frontend-openmetrics-constructed-from-13.om"
)

func main() {
	in := flag.String("in", defaultIn, "Python-frontend text page to rewrite")
	out := flag.String("out", defaultOut, "where to write the OpenMetrics page")
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

// Families the Rust frontend does not print, by exact name or prefix.
var (
	dropNames = map[string]bool{
		"vllm:cache_config_info":              true,
		"vllm:engine_sleep_state":             true,
		"vllm:iteration_tokens_total":         true,
		"vllm:mm_cache_queries_total":         true,
		"vllm:mm_cache_hits_total":            true,
		"vllm:corrupted_requests_total":       true,
		"vllm:prompt_tokens_recomputed_total": true,
		"http_request_size_bytes":             true,
		"http_response_size_bytes":            true,
	}
	dropPrefixes = []string{"python_", "process_", "vllm:nixl_", "vllm:hf3fs_", "vllm:mooncake_", "vllm:kv_offload_"}

	// Histograms whose bounds the Python frontend stops at max_model_len.
	tokenHistograms = map[string]bool{
		"vllm:request_prompt_tokens":              true,
		"vllm:request_generation_tokens":          true,
		"vllm:request_max_num_generation_tokens":  true,
		"vllm:request_params_max_tokens":          true,
		"vllm:request_prefill_kv_computed_tokens": true,
	}
)

// rustTokenBound is the bound the Rust frontend's token histograms end with.
const rustTokenBound = 131072

// family is one HELP/TYPE block of the base page with its sample lines.
type family struct {
	name, typ, help string
	samples         []string
}

func dropped(f family) bool {
	if dropNames[f.name] || strings.HasSuffix(f.name, "_created") {
		return true
	}
	for _, p := range dropPrefixes {
		if strings.HasPrefix(f.name, p) {
			return true
		}
	}
	return false
}

// split reads a text-format page laid out as Python's prometheus_client
// writes it: HELP, TYPE, then the family's samples.
func split(src []byte) ([]family, error) {
	var fams []family
	for n, line := range strings.Split(strings.TrimSuffix(string(src), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(strings.TrimPrefix(line, "# HELP "), " ")
			fams = append(fams, family{name: name, help: help})
		case strings.HasPrefix(line, "# TYPE "):
			name, typ, _ := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " ")
			if len(fams) == 0 || fams[len(fams)-1].name != name {
				return nil, fmt.Errorf("line %d: TYPE of %s does not follow its HELP line; the rewrite needs Python's HELP, TYPE, samples layout", n+1, name)
			}
			fams[len(fams)-1].typ = typ
		case line == "" || strings.HasPrefix(line, "#"):
			return nil, fmt.Errorf("line %d: %q is neither HELP, TYPE nor a sample; the rewrite reads text-format pages only", n+1, line)
		default:
			if len(fams) == 0 {
				return nil, fmt.Errorf("line %d: sample before any HELP line", n+1)
			}
			fams[len(fams)-1].samples = append(fams[len(fams)-1].samples, line)
		}
	}
	return fams, nil
}

var (
	leRE      = regexp.MustCompile(`le="([^"]*)"`)
	maxLoraRE = regexp.MustCompile(`,?max_lora="[^"]*"`)
)

// series key of a histogram sample line: its name suffix removed and le
// dropped, so that the sum, count and buckets of one series group together.
func seriesKey(line string) string {
	lbls := ""
	if i := strings.IndexByte(line, '{'); i >= 0 {
		lbls = line[i : strings.LastIndexByte(line, '}')+1]
	}
	k := strings.ReplaceAll(leRE.ReplaceAllString(lbls, ""), ",,", ",")
	k = strings.NewReplacer("{,", "{", ",}", "}").Replace(k)
	if k == "{}" {
		return ""
	}
	return k
}

// histogram reorders one histogram's lines to sum, count, buckets per series
// and, for token histograms, adds the 131072 bucket before +Inf.
func histogram(f family) ([]string, error) {
	type series struct {
		sum, count string
		buckets    []string
	}
	var order []string
	by := map[string]*series{}
	for _, l := range f.samples {
		k := seriesKey(l)
		s := by[k]
		if s == nil {
			s = &series{}
			by[k] = s
			order = append(order, k)
		}
		switch {
		case strings.HasPrefix(l, f.name+"_bucket"):
			s.buckets = append(s.buckets, l)
		case strings.HasPrefix(l, f.name+"_sum"):
			s.sum = l
		case strings.HasPrefix(l, f.name+"_count"):
			s.count = l
		default:
			return nil, fmt.Errorf("%s: sample %q is not a bucket, sum or count", f.name, l)
		}
	}
	var out []string
	for _, k := range order {
		s := by[k]
		if s.sum == "" || s.count == "" || len(s.buckets) == 0 {
			return nil, fmt.Errorf("%s%s: incomplete histogram", f.name, k)
		}
		buckets := s.buckets
		if tokenHistograms[f.name] {
			var err error
			if buckets, err = addTokenBound(f.name, buckets); err != nil {
				return nil, err
			}
		}
		out = append(out, s.sum, s.count)
		out = append(out, buckets...)
	}
	return out, nil
}

func addTokenBound(name string, buckets []string) ([]string, error) {
	last := len(buckets) - 1
	inf := buckets[last]
	if m := leRE.FindStringSubmatch(inf); m == nil || m[1] != "+Inf" {
		return nil, fmt.Errorf("%s: last bucket %q is not le=\"+Inf\"", name, inf)
	}
	if last > 0 {
		m := leRE.FindStringSubmatch(buckets[last-1])
		top, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: bound %q: %w", name, m[1], err)
		}
		if top >= rustTokenBound {
			return buckets, nil // max_model_len beyond 131072: nothing to add
		}
	}
	extra := leRE.ReplaceAllString(inf, fmt.Sprintf(`le="%d.0"`, rustTokenBound))
	return append(append(buckets[:last:last], extra), inf), nil
}

// build rewrites a Python-frontend page into the Rust frontend's layout.
func build(src []byte) ([]byte, error) {
	fams, err := split(src)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for _, f := range fams {
		if dropped(f) {
			continue
		}
		name := f.name
		lines := f.samples
		switch f.typ {
		case "counter":
			name = strings.TrimSuffix(name, "_total")
		case "histogram":
			if lines, err = histogram(f); err != nil {
				return nil, err
			}
		case "gauge":
		default:
			return nil, fmt.Errorf("%s: type %q is not rewritten; only counters, gauges and histograms are known", f.name, f.typ)
		}
		if f.name == "vllm:lora_requests_info" {
			for i, l := range lines {
				lines[i] = strings.Replace(maxLoraRE.ReplaceAllString(l, ""), "{,", "{", 1)
			}
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, strings.TrimSuffix(f.help, "."), name, f.typ)
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	b.WriteString("# EOF\n")
	if err := checkOpenMetrics(b.Bytes()); err != nil {
		return nil, fmt.Errorf("the rewritten page is not valid OpenMetrics: %w", err)
	}
	return b.Bytes(), nil
}

// checkOpenMetrics parses the page to the end with Prometheus's OpenMetrics
// parser, which fails on a missing # EOF among other things.
func checkOpenMetrics(page []byte) error {
	p := textparse.NewOpenMetricsParser(page, labels.NewSymbolTable())
	for {
		_, err := p.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
