package routing

import "github.com/fos-study/vllm-normalizer/exposition"

// Summer sums counters and histograms per model_name with the routing
// view's rules (sumHistogramOrCounter): per le for buckets, never down when
// an engine restarts or drops off the page, nothing for a histogram whose
// engines print different bounds. Other views that print summed families
// (the GenAI view) use it so that their totals move exactly as the routing
// view's do. Not safe for concurrent use; its zero value is ready.
type Summer struct{ v Viewer }

// Sum returns f's samples summed per model_name, named after name (with
// the _bucket, _sum, _count or _total suffix). Calls for one name must come
// once per scrape, in scrape order: each call carries the last one's totals.
func (s *Summer) Sum(f *exposition.Family, name string) []exposition.Sample {
	return s.v.sumHistogramOrCounter(f, name)
}
