package harness

import (
	"fmt"
	"strings"
)

// AIBrixRead reads a page as AIBrix's pod-metrics fetcher does
// (vllm-project/aibrix at e3e10f9e: pkg/metrics/engine_fetcher.go's
// parseModelMetricsFromFamily, pkg/metrics/utils.go), for the names it
// fetches of one engine: only series labelled model_name count, and for
// model; a gauge is its last such series, a counter the sum of them, a
// histogram the sums of its _sum, _count and each bucket. The module proxy
// does not serve AIBrix, so this is its rule as read, not its code.
// The result is keyed "name" for gauges and counters and
// "name_sum", "name_count", "name_bucket{le}" for histograms; a name the
// page lacks is left out.
func AIBrixRead(page []byte, model string, names []string) (map[string]float64, error) {
	samples, err := Samples(page)
	if err != nil {
		return nil, err
	}
	types := map[string]string{}
	for _, line := range strings.Split(string(page), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
		}
	}
	out := map[string]float64{}
	for _, name := range names {
		typ := types[name]
		for _, s := range samples {
			if s.Labels["model_name"] != model {
				continue
			}
			switch {
			case typ == "gauge" && s.Name == name:
				out[name] = s.Value // the last series wins
			case typ == "counter" && (s.Name == name || s.Name == name+"_total"):
				out[name] += s.Value
			case typ == "histogram" && (s.Name == name+"_sum" || s.Name == name+"_count"):
				out[s.Name] += s.Value
			case typ == "histogram" && s.Name == name+"_bucket":
				out[fmt.Sprintf("%s{%s}", s.Name, s.Labels["le"])] += s.Value
			}
		}
	}
	return out, nil
}
