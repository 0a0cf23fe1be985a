package derive

import (
	"slices"

	"github.com/fos-study/vllm-normalizer/mapping"
)

// DerivedPrefixCacheMissRatio is a gauge that exists only in tests: one
// entry of the specs' table, and nothing else, must be enough to serve it.
const DerivedPrefixCacheMissRatio = "vllm_derived_test_prefix_cache_miss_ratio"

var missRatioSpec = Spec{
	Name: DerivedPrefixCacheMissRatio, Unit: "ratio", Record: "ratio",
	Inputs:   []mapping.Role{mapping.RolePrefixCacheHits, mapping.RolePrefixCacheQueries},
	Help:     "Prefix cache miss ratio in tokens: 1 - increase({prefix_cache_hits}) / increase({prefix_cache_queries}).",
	PromQL:   "1 - increase({prefix_cache_hits}[w]) / increase({prefix_cache_queries}[w])",
	Decision: "none (a test)",
	window: func(c *windowCalc) {
		if v, ok := c.ratio(mapping.CounterPrefixCacheHits, mapping.CounterPrefixCacheQueries); ok {
			c.emit(1 - v)
		}
	},
}

// AddMissRatioSpec adds the test gauge's entry to the table until restore
// is called.
func AddMissRatioSpec() (restore func()) {
	old := specs
	specs = append(slices.Clip(specs), missRatioSpec)
	return func() { specs = old }
}
