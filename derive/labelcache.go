package derive

import (
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
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
	// orders are each family's samples of a grouping in the last
	// derivation: how many (so that the next one allocates its slice once
	// instead of growing it, BenchmarkScrapeCycle: about 8 KB of a
	// one-engine scrape's allocations; samples are published, so their
	// slices cannot be reused themselves) and the order sorting put them in.
	orders map[familyOfGrouping]*familyOrder
	// sorted is the scratch a family's samples are copied to to be put in
	// their sorted order.
	sorted []exposition.Sample
	// ordersKept and ordersSorted count the families put in their last
	// order and those sorted, for the tests.
	ordersKept, ordersSorted int
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

// familyOrder is how a derived family's samples, in the order the
// derivation emitted them, were sorted by label set: the sample at
// emitted position perm[j] went to position j. The derivations emit the
// same label sets in the same order at every scrape while the history
// holds the same series and windows (only a value that cannot be computed
// drops one), and then the sort's order is the same: sorting them anew
// was 15 % of a derivation's CPU on one engine at 100 ms, 11.5 µs a
// scrape, putting them in the kept order 3 µs (BenchmarkScrapeCycle's
// profile, 20,000 cycles).
type familyOrder struct {
	emitted []labels.Labels
	perm    []int32
	used    uint64 // the last round that asked for it
}

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
		c.m, c.orders, c.plans = map[labelKey]*cachedLabels{}, map[familyOfGrouping]*familyOrder{}, map[string]*groupingPlan{}
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
	for k, o := range c.orders {
		if c.round-o.used >= keepRounds {
			delete(c.orders, k) // a family no derivation emits any more
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

// sortSamples sorts a derived family's samples by label set, as
// slices.SortFunc with labels.Compare would: when they are the label sets
// the family emitted last time, in the same order, by last time's
// permutation, otherwise by sorting their positions, which makes the same
// comparisons as sorting the samples and so the same order.
func (c *labelCache) sortSamples(f familyOfGrouping, smps []exposition.Sample) {
	o := c.orders[f]
	if o == nil {
		o = &familyOrder{}
		c.orders[f] = o
	}
	o.used = c.round
	same := len(o.emitted) == len(smps)
	for i := 0; same && i < len(smps); i++ {
		// Label sets come from the cache, so equal ones share their
		// storage and compare at a pointer's cost.
		same = labels.Equal(o.emitted[i], smps[i].Labels)
	}
	if same {
		c.ordersKept++
	} else {
		c.ordersSorted++
		o.emitted, o.perm = o.emitted[:0], o.perm[:0]
		for i := range smps {
			o.emitted = append(o.emitted, smps[i].Labels)
			o.perm = append(o.perm, int32(i))
		}
		slices.SortFunc(o.perm, func(a, b int32) int { return labels.Compare(smps[a].Labels, smps[b].Labels) })
	}
	c.sorted = append(c.sorted[:0], smps...)
	for j, i := range o.perm {
		smps[j] = c.sorted[i]
	}
	clear(c.sorted) // holds no label sets or values past the derivation
}
