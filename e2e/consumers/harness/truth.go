package harness

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Sample is one line of a text-format page.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples reads every sample line of a text-format page. It is a reader of
// its own, independent of the sidecar's and of the consumers' parsers; it
// understands what vLLM prints (quoted label values with \\, \" and \n
// escapes, optional timestamps) and fails on anything else.
func Samples(page []byte) ([]Sample, error) {
	var out []Sample
	for n, line := range strings.Split(string(page), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseLine(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, "=\"")
			if eq <= 0 {
				return s, fmt.Errorf("bad label")
			}
			name := strings.TrimSpace(rest[:eq])
			rest = rest[eq+2:]
			var v strings.Builder
			j := 0
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						v.WriteByte('\n')
					default:
						v.WriteByte(rest[j])
					}
					continue
				}
				v.WriteByte(rest[j])
			}
			if j == len(rest) {
				return s, fmt.Errorf("unterminated label value")
			}
			s.Labels[name] = v.String()
			rest = rest[j+1:]
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 || len(fields) > 2 {
		return s, fmt.Errorf("want a value and at most a timestamp")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, err
	}
	s.Value = v
	return s, nil
}

// Truth is what a router should read for one model on one page: the whole
// server's load, computed here from the raw page by the rules docs/routing.md
// documents (running and waiting summed over engines and API-server
// processes; KV usage per engine the highest value over processes, then
// the mean over engines weighted by num_gpu_blocks; GPU blocks summed over
// engines; the newest LoRA series).
type Truth struct {
	Model            string
	Running, Waiting float64
	HasRunning       bool
	HasWaiting       bool
	KV               float64
	HasKV            bool
	CPUCache         float64 // V0's vllm:cpu_cache_usage_perc, highest value over processes
	HasCPUCache      bool
	BlockSize        int
	NumGPUBlocks     int
	HasCacheInfo     bool
	// LoRA: the newest vllm:lora_requests_info series.
	LoRARunning, LoRAWaiting []string
	MaxLoRA                  int
	HasLoRA                  bool
	// Prefix-cache counters summed over engines (the current names, or the
	// legacy ones on a page without them).
	PrefixHits, PrefixQueries float64
	HasPrefix                 bool
	Engines                   int
}

// ComputeTruth computes the Truth for the page's model (the model_name of
// its first vllm:num_requests_running series; pages printed by one vLLM
// server serve one model).
func ComputeTruth(page []byte) (Truth, error) {
	samples, err := Samples(page)
	if err != nil {
		return Truth{}, err
	}
	var tr Truth
	for _, s := range samples {
		if s.Name == "vllm:num_requests_running" {
			tr.Model = s.Labels["model_name"]
			break
		}
	}
	mine := func(s Sample) bool { return s.Labels["model_name"] == tr.Model }
	engines := map[string]bool{}
	blocks := map[string]int{}
	kvName := "vllm:kv_cache_usage_perc"
	if !hasName(samples, kvName) {
		kvName = "vllm:gpu_cache_usage_perc" // a V0 server
	}
	hitsName, queriesName := "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"
	if !hasName(samples, hitsName) {
		hitsName, queriesName = "vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total"
	}
	loraNewest := math.Inf(-1)
	kvPerEngine := map[string]float64{}
	for _, s := range samples {
		switch {
		case s.Name == "vllm:num_requests_running" && mine(s):
			tr.Running += s.Value
			tr.HasRunning = true
			engines[s.Labels["engine"]] = true
		case s.Name == "vllm:num_requests_waiting" && mine(s):
			tr.Waiting += s.Value
			tr.HasWaiting = true
		case s.Name == kvName && mine(s):
			e := s.Labels["engine"]
			if v, ok := kvPerEngine[e]; !ok || s.Value > v {
				kvPerEngine[e] = s.Value
			}
		case s.Name == "vllm:cpu_cache_usage_perc" && mine(s):
			if !tr.HasCPUCache || s.Value > tr.CPUCache {
				tr.CPUCache = s.Value
			}
			tr.HasCPUCache = true
		case s.Name == "vllm:cache_config_info":
			e := s.Labels["engine"]
			if _, seen := blocks[e]; seen {
				continue // one engine printed by several processes counts once
			}
			n, err1 := strconv.Atoi(s.Labels["num_gpu_blocks"])
			bs, err2 := strconv.Atoi(s.Labels["block_size"])
			if err1 == nil && err2 == nil {
				blocks[e] = n
				tr.NumGPUBlocks += n
				tr.BlockSize = bs
				tr.HasCacheInfo = true
			}
		case s.Name == "vllm:lora_requests_info":
			if s.Value > loraNewest {
				loraNewest = s.Value
				tr.LoRARunning = splitList(s.Labels["running_lora_adapters"])
				tr.LoRAWaiting = splitList(s.Labels["waiting_lora_adapters"])
				tr.MaxLoRA, _ = strconv.Atoi(s.Labels["max_lora"])
				tr.HasLoRA = true
			}
		case s.Name == hitsName && mine(s):
			tr.PrefixHits += s.Value
			tr.HasPrefix = true
		case s.Name == queriesName && mine(s):
			tr.PrefixQueries += s.Value
			tr.HasPrefix = true
		}
	}
	tr.Engines = len(engines)
	if len(kvPerEngine) > 0 {
		tr.HasKV = true
		keys := make([]string, 0, len(kvPerEngine))
		for e := range kvPerEngine {
			keys = append(keys, e)
		}
		sort.Strings(keys)
		weighted, weights, plain, all := 0.0, 0.0, 0.0, true
		for _, e := range keys {
			plain += kvPerEngine[e]
			if w, ok := blocks[e]; ok && w > 0 {
				weighted += kvPerEngine[e] * float64(w)
				weights += float64(w)
			} else {
				all = false
			}
		}
		if all {
			tr.KV = weighted / weights
		} else {
			tr.KV = plain / float64(len(keys))
		}
	}
	return tr, nil
}

func hasName(samples []Sample, name string) bool {
	for _, s := range samples {
		if s.Name == name {
			return true
		}
	}
	return false
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// AtLeastAsRight reports whether got is at least as close to want as raw
// is (a tolerance of 1e-9 for float rounding).
func AtLeastAsRight(got, raw, want float64) bool {
	return math.Abs(got-want) <= math.Abs(raw-want)+1e-9
}

// Equal reports whether got equals want up to float rounding.
func Equal(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

// AddToCounter returns page with delta added to every sample of the
// counter name whose labels include engine=engine: a later page of the
// same server, for tests of windowed rates.
func AddToCounter(page []byte, name, engine string, delta float64) ([]byte, error) {
	lines := strings.Split(string(page), "\n")
	changed := 0
	for i, line := range lines {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, `engine="`+engine+`"`) {
			continue
		}
		sp := strings.LastIndex(line, " ")
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", line, err)
		}
		lines[i] = line[:sp+1] + strconv.FormatFloat(v+delta, 'g', -1, 64)
		changed++
	}
	if changed == 0 {
		return nil, fmt.Errorf("no sample of %s on engine %s", name, engine)
	}
	return []byte(strings.Join(lines, "\n")), nil
}

// Native names a router reads of a server other than vLLM, and how the
// server labels its ranks: what ComputeNativeTruth reads.
type Native struct {
	Running, Waiting, KV string
	// EngineLabel holds a data-parallel rank ("" for none); every other
	// label but the model's is a process or tensor-parallel rank that
	// repeats its engine's numbers.
	EngineLabel string
	// The block size and count: gauges, or labels of an info family.
	BlockSizeGauge, NumBlocksGauge            string
	CacheInfo, BlockSizeLabel, NumBlocksLabel string
}

// ComputeNativeTruth computes the Truth for a page of another server, by
// docs/routing.md's rules: per engine the highest value over its other ranks,
// then running and waiting summed over engines, KV usage the mean over
// engines; blocks summed over engines.
func ComputeNativeTruth(page []byte, n Native) (Truth, error) {
	samples, err := Samples(page)
	if err != nil {
		return Truth{}, err
	}
	var tr Truth
	perEngine := func(name string) (map[string]float64, bool) {
		out := map[string]float64{}
		for _, s := range samples {
			if s.Name != name || (tr.Model != "" && s.Labels["model_name"] != tr.Model) {
				continue
			}
			if tr.Model == "" {
				tr.Model = s.Labels["model_name"]
			}
			e := s.Labels[n.EngineLabel]
			if v, ok := out[e]; !ok || s.Value > v {
				out[e] = s.Value
			}
		}
		return out, len(out) > 0
	}
	sum := func(m map[string]float64) float64 {
		t := 0.0
		for _, v := range m {
			t += v
		}
		return t
	}
	if m, ok := perEngine(n.Running); ok && n.Running != "" {
		tr.Running, tr.HasRunning, tr.Engines = sum(m), true, len(m)
	}
	if m, ok := perEngine(n.Waiting); ok && n.Waiting != "" {
		tr.Waiting, tr.HasWaiting = sum(m), true
	}
	if m, ok := perEngine(n.KV); ok && n.KV != "" {
		tr.KV, tr.HasKV = sum(m)/float64(len(m)), true
	}
	blocks := map[string]int{}
	for _, s := range samples {
		switch {
		case n.CacheInfo != "" && s.Name == n.CacheInfo:
			bs, err1 := strconv.Atoi(s.Labels[n.BlockSizeLabel])
			nb, err2 := strconv.Atoi(s.Labels[n.NumBlocksLabel])
			if _, seen := blocks[s.Labels[n.EngineLabel]]; err1 == nil && err2 == nil && !seen {
				blocks[s.Labels[n.EngineLabel]] = nb
				tr.BlockSize, tr.NumGPUBlocks, tr.HasCacheInfo = bs, tr.NumGPUBlocks+nb, true
			}
		case n.BlockSizeGauge != "" && s.Name == n.BlockSizeGauge:
			tr.BlockSize = int(s.Value)
		case n.NumBlocksGauge != "" && s.Name == n.NumBlocksGauge:
			if _, seen := blocks[s.Labels[n.EngineLabel]]; !seen {
				blocks[s.Labels[n.EngineLabel]] = int(s.Value)
				tr.NumGPUBlocks += int(s.Value)
			}
		}
	}
	if n.BlockSizeGauge != "" && tr.BlockSize > 0 && len(blocks) > 0 {
		tr.HasCacheInfo = true
	}
	return tr, nil
}

// TwoRanks returns an SGLang page with a second data-parallel rank: every
// sample of the named gauges is printed again with dp_rank="1" and its
// value scaled by factor (rank 0 keeps dp_rank="0").
func TwoRanks(page []byte, factor float64, names ...string) []byte {
	var out strings.Builder
	for _, line := range strings.SplitAfter(string(page), "\n") {
		name := line
		if i := strings.IndexAny(line, "{ "); i > 0 {
			name = line[:i]
		}
		keep := false
		for _, n := range names {
			keep = keep || name == n
		}
		if !keep || !strings.Contains(line, "{") {
			out.WriteString(line)
			continue
		}
		sp := strings.LastIndex(strings.TrimRight(line, "\n"), " ")
		v, err := strconv.ParseFloat(strings.TrimSpace(line[sp+1:]), 64)
		if err != nil {
			out.WriteString(line)
			continue
		}
		head := strings.Replace(line[:sp], "{", `{dp_rank="0",`, 1)
		out.WriteString(head + " " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
		out.WriteString(strings.Replace(line[:sp], "{", `{dp_rank="1",`, 1) + " " + strconv.FormatFloat(v*factor, 'g', -1, 64) + "\n")
	}
	return []byte(out.String())
}
