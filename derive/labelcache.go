package derive

import (
	"sync"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/window"
)

// labelCache keeps the label sets of derived samples from one derivation
// to the next. A derived sample's labels depend only on its family, its
// group's label values, its window and its extra labels (quantile, SLO,
// finished_reason), which are the same at every scrape; building them
// anew (a builder, a sort and an allocation per sample) was about a fifth
// of a derivation's CPU on a single-engine page (BenchmarkScrapeCycle).
// Label sets are immutable, so samples of successive scrapes may share
// them.
type labelCache struct {
	mu    sync.Mutex // held for a whole derivation
	m     map[labelKey]*cachedLabels
	round uint64
	// emitted counts the label sets the current derivation asked for.
	emitted int
	// samples is how many samples each family of a grouping had in the
	// last derivation, so that the next one allocates its slice once
	// instead of growing it (BenchmarkScrapeCycle: about 8 KB of a
	// one-engine scrape's allocations). Samples are published, so their
	// slices cannot be reused themselves.
	samples map[familyOfGrouping]int
	// plans are the groupings of the last derivations, by their group-by
	// labels: the history holds the same series from one scrape to the
	// next, and grouping them anew (a key built and looked up per series
	// and grouping) was a fifth of a derivation's CPU
	// (BenchmarkScrapeCycle's profile).
	plans map[string]*groupingPlan
}

// groupingPlan is how one grouping assigned the history's series, in
// order, to groups. Its groups' accumulators are reset for every window,
// so derivations, which hold the cache's lock, share them.
type groupingPlan struct {
	series  []*window.Series
	index   map[string]int // group key -> position in groups
	groupOf []int          // series position -> group
	groups  []*group
	used    uint64 // the last round that used it
}

// familyOfGrouping is a derived family in the output of one grouping
// (its group-by labels joined).
type familyOfGrouping struct{ by, name string }

type labelKey struct {
	name, group, window, extra string
}

type cachedLabels struct {
	lbls labels.Labels
	used uint64 // the last round that asked for it
}

// keepRounds is how many derivations a label set nobody asks for is kept
// once the cache holds many more than a derivation uses: callers that
// alternate between groupings each keep theirs.
const keepRounds = 8

// begin locks the cache for one derivation.
func (c *labelCache) begin() {
	c.mu.Lock()
	if c.m == nil {
		c.m, c.samples, c.plans = map[labelKey]*cachedLabels{}, map[familyOfGrouping]int{}, map[string]*groupingPlan{}
	}
	c.round++
	c.emitted = 0
}

// get returns the label set of k, built by build when not cached.
func (c *labelCache) get(k labelKey, build func() labels.Labels) labels.Labels {
	c.emitted++
	e := c.m[k]
	if e == nil {
		e = &cachedLabels{lbls: build()}
		c.m[k] = e
	}
	e.used = c.round
	return e.lbls
}

// end unlocks the cache. When it holds many more label sets than this
// derivation used (models or engines went away), those nobody asked for
// in the last keepRounds derivations are dropped, so that it never grows
// beyond what a few derivations need.
func (c *labelCache) end() {
	for k, p := range c.plans {
		if c.round-p.used >= keepRounds {
			delete(c.plans, k) // a grouping no caller asks for any more
		}
	}
	if len(c.m) > 2*c.emitted+256 {
		for k, e := range c.m {
			if c.round-e.used >= keepRounds {
				delete(c.m, k)
			}
		}
	}
	c.mu.Unlock()
}
