package routing

import (
	"slices"
	"testing"

	"github.com/fos-study/vllm-normalizer/mapping"
)

// TestSummedAreCounterInputs: the routing view serves summed only families
// of the counter inputs' table, so an entry for any other role would never
// be served.
func TestSummedAreCounterInputs(t *testing.T) {
	inputs := mapping.CounterRoles()
	for r := range summed {
		if !slices.Contains(inputs, r) {
			t.Errorf("summed lists role %s, which is no counter input (mapping.Counter): it is never served", r)
		}
	}
}
