package otlp

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// forgetAfter is how long a series off the page keeps its start time: a
// series back after a failed scrape (which withdraws every upstream
// series) keeps counting from its old start, and series that churn away
// are forgotten, bounding the state.
const forgetAfter = 10 * time.Minute

// Reasons a series is left out of a push (DroppedSeries).
const (
	// DropInvalidHistogram: a histogram series whose buckets are not
	// cumulative, lack +Inf and a count, or hold NaN or negative counts;
	// OTLP cannot carry it.
	DropInvalidHistogram = "invalid_histogram"
)

// Converter turns the families of one page into OTLP metrics, keeping the
// start time of each cumulative series from one conversion to the next.
// Not safe for concurrent use: the pusher converts one page at a time.
type Converter struct {
	// series holds the cumulative series by family name and the hash of
	// their labels (without __name__ and le).
	series map[string]map[uint64]*cumulative
	// Dropped counts the series left out, by reason, since the Converter
	// was made.
	Dropped map[string]int
}

// cumulative is what is kept of one counter, histogram or summary series.
type cumulative struct {
	start time.Time
	// restarted is when the pusher last moved start at a restart, the
	// zero time when never: a start time the page gives wins unless it
	// is older than that.
	restarted time.Time
	count     float64 // the counter's value, or the histogram's count
	seen      time.Time
}

// NewConverter returns a Converter that has seen no series.
func NewConverter() *Converter {
	return &Converter{series: map[string]map[uint64]*cumulative{}, Dropped: map[string]int{}}
}

// Page is what one push sends.
type Page struct {
	Families []exposition.Family
	// At is when the page was published: the time of every point.
	At time.Time
	// RestartedAt returns when the series of labels l (with __name__; a
	// histogram's or summary's _count series) of family was last found
	// restarted by what the upstream's page announced (a _created time,
	// the process start time), the zero time when never. Nil: only counts
	// that go down tell a restart.
	RestartedAt func(family string, l labels.Labels) time.Time
}

// restartedAt is p.RestartedAt, the zero time without one.
func (p *Page) restartedAt(family string, l labels.Labels) time.Time {
	if p.RestartedAt == nil || l.IsEmpty() {
		return time.Time{}
	}
	return p.RestartedAt(family, l)
}

// Convert returns the OTLP metrics of a page, in the page's order.
func (c *Converter) Convert(p Page) []*metricpb.Metric {
	out := make([]*metricpb.Metric, 0, len(p.Families))
	for i := range p.Families {
		f := &p.Families[i]
		switch f.Type {
		case model.MetricTypeCounter:
			out = append(out, c.counter(f, &p))
		case model.MetricTypeHistogram:
			if m, ok := c.histogram(f, &p); ok {
				out = append(out, m)
			}
		case model.MetricTypeSummary:
			out = append(out, c.summary(f, &p))
		default:
			// Gauges, untyped, info, stateset, gauge histograms: each
			// sample name a gauge, as Prometheus stores them.
			out = append(out, gauges(f, p.At)...)
		}
	}
	c.forget(p.At)
	return out
}

// start returns the start time of the cumulative series of family fam
// with label hash h, whose count is now count: the page's own start time
// for it (created, the zero time when none) unless a restart came after
// that; else when the pusher first saw it, moved to just after the
// previous conversion that saw it when its count went down or the
// upstream announced a restart (at restarted) since.
func (c *Converter) start(fam string, h uint64, count float64, at, restarted, created time.Time) time.Time {
	byHash := c.series[fam]
	if byHash == nil {
		byHash = map[uint64]*cumulative{}
		c.series[fam] = byHash
	}
	s := byHash[h]
	switch {
	case s == nil:
		s = &cumulative{start: at}
		byHash[h] = s
	case count < s.count || restarted.After(s.seen):
		// Restarted since it was last seen: the new count began after
		// that (a restart announced while the count went on, too: it
		// counted past its old value within one push). A millisecond on,
		// so that the start is after the last point of the old run as
		// receivers store it.
		s.start = s.seen.Add(time.Millisecond)
		if s.start.After(at) {
			s.start = at
		}
		s.restarted = s.start
	}
	s.count, s.seen = count, at
	// A start time in the future (a skewed clock) would make the point
	// invalid; one before a restart the pusher saw is stale.
	if !created.IsZero() && !created.After(at) && !created.Before(s.restarted) {
		return created
	}
	return s.start
}

// createdTimes returns the start times f gives its children by the hash of
// their labels without __name__ and exclude (as group hashes them), nil
// when it gives none.
func createdTimes(f *exposition.Family, exclude string) map[uint64]time.Time {
	if len(f.Created) == 0 {
		return nil
	}
	names := []string{model.MetricNameLabel}
	if exclude != "" {
		names = append(names, exclude)
	}
	out := make(map[uint64]time.Time, len(f.Created))
	for _, cr := range f.Created {
		if cr.Time <= 0 || math.IsNaN(cr.Time) || math.IsInf(cr.Time, 0) {
			continue
		}
		h, _ := cr.Labels.HashWithoutLabels(nil, names...)
		sec, frac := math.Modf(cr.Time)
		out[h] = time.Unix(int64(sec), int64(frac*1e9))
	}
	return out
}

// forget drops the series not seen for forgetAfter.
func (c *Converter) forget(at time.Time) {
	for fam, byHash := range c.series {
		for h, s := range byHash {
			if at.Sub(s.seen) > forgetAfter {
				delete(byHash, h)
			}
		}
		if len(byHash) == 0 {
			delete(c.series, fam)
		}
	}
}

// attrs returns the labels of l but __name__ and the given ones as
// attributes, in the labels' order (sorted by name, as OTel sets are).
func attrs(l labels.Labels, without string) []*commonpb.KeyValue {
	kvs := make([]*commonpb.KeyValue, 0, l.Len())
	l.Range(func(lb labels.Label) {
		if lb.Name == model.MetricNameLabel || lb.Name == without {
			return
		}
		kvs = append(kvs, stringKV(lb.Name, lb.Value))
	})
	return kvs
}

func stringKV(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// nanos is t as OTLP's nanoseconds since the epoch.
func nanos(t time.Time) uint64 { return uint64(t.UnixNano()) }

const cumulativeTemporality = metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE

// counter is a monotonic cumulative sum named without the _total the
// exposition adds (receivers that write Prometheus names add it back).
func (c *Converter) counter(f *exposition.Family, p *Page) *metricpb.Metric {
	sum := &metricpb.Sum{AggregationTemporality: cumulativeTemporality, IsMonotonic: true}
	created := createdTimes(f, "")
	for _, s := range f.Samples {
		if suffix, _ := exposition.SampleSuffix(f.Name, f.Type, s.Name()); suffix == "_created" {
			continue
		}
		h, _ := s.Labels.HashWithoutLabels(nil, model.MetricNameLabel)
		sum.DataPoints = append(sum.DataPoints, &metricpb.NumberDataPoint{
			Attributes:        attrs(s.Labels, ""),
			StartTimeUnixNano: nanos(c.start(f.Name, h, s.Value, p.At, p.restartedAt(f.Name, s.Labels), created[h])),
			TimeUnixNano:      nanos(p.At),
			Value:             &metricpb.NumberDataPoint_AsDouble{AsDouble: s.Value},
		})
	}
	return &metricpb.Metric{Name: f.BaseName(), Description: f.Help, Unit: f.Unit, Data: &metricpb.Metric_Sum{Sum: sum}}
}

// histSeries gathers the samples of one histogram series.
type histSeries struct {
	labels        labels.Labels // of the first sample
	countLabels   labels.Labels // of the _count sample
	hash          uint64
	les           []bucket
	sum, count    float64
	hasSum, hasCt bool
}

type bucket struct{ le, cum float64 }

// group returns the series of f by their labels without __name__ and
// exclude, in the order they first appear, calling add for each sample
// with its series and suffix.
func group(f *exposition.Family, exclude string, add func(s *histSeries, suffix string, smp *exposition.Sample)) []*histSeries {
	var order []*histSeries
	idx := map[uint64]*histSeries{}
	for i := range f.Samples {
		smp := &f.Samples[i]
		suffix, ok := exposition.SampleSuffix(f.Name, f.Type, smp.Name())
		if !ok || suffix == "_created" {
			continue
		}
		h, _ := smp.Labels.HashWithoutLabels(nil, model.MetricNameLabel, exclude)
		s := idx[h]
		if s == nil {
			s = &histSeries{labels: smp.Labels, hash: h}
			idx[h] = s
			order = append(order, s)
		}
		add(s, suffix, smp)
	}
	return order
}

// histogram is an explicit-bucket cumulative histogram: the finite le
// bounds, each bucket's own count (the page's are cumulative), and the
// count and sum. A series OTLP cannot carry is left out and counted.
func (c *Converter) histogram(f *exposition.Family, p *Page) (*metricpb.Metric, bool) {
	series := group(f, model.BucketLabel, func(s *histSeries, suffix string, smp *exposition.Sample) {
		switch suffix {
		case "_bucket":
			le, err := strconv.ParseFloat(smp.Labels.Get(model.BucketLabel), 64)
			if err == nil {
				s.les = append(s.les, bucket{le, smp.Value})
			}
		case "_sum":
			s.sum, s.hasSum = smp.Value, true
		case "_count":
			s.count, s.hasCt, s.countLabels = smp.Value, true, smp.Labels
		}
	})
	hist := &metricpb.Histogram{AggregationTemporality: cumulativeTemporality}
	created := createdTimes(f, model.BucketLabel)
	for _, s := range series {
		dp, ok := histPoint(s)
		if !ok {
			c.Dropped[DropInvalidHistogram]++
			continue
		}
		dp.Attributes = attrs(s.labels, model.BucketLabel)
		dp.StartTimeUnixNano = nanos(c.start(f.Name, s.hash, float64(dp.Count), p.At, p.restartedAt(f.Name, s.countLabels), created[s.hash]))
		dp.TimeUnixNano = nanos(p.At)
		hist.DataPoints = append(hist.DataPoints, dp)
	}
	if len(hist.DataPoints) == 0 && len(series) > 0 {
		return nil, false
	}
	return &metricpb.Metric{Name: f.Name, Description: f.Help, Unit: f.Unit, Data: &metricpb.Metric_Histogram{Histogram: hist}}, true
}

// histPoint returns the OTLP point of one series, and whether it is a
// histogram at all. Counts are rounded to whole observations (OTLP counts
// are integers; a real histogram's are).
func histPoint(s *histSeries) (*metricpb.HistogramDataPoint, bool) {
	dp := &metricpb.HistogramDataPoint{}
	slices.SortFunc(s.les, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	bounds := make([]float64, 0, len(s.les))
	counts := make([]uint64, 0, len(s.les)+1)
	var below float64 // the cumulative count of the buckets so far
	var inf, hasInf = 0.0, false
	for _, b := range s.les {
		cum := math.Round(b.cum)
		if math.IsNaN(b.le) || math.IsNaN(cum) || cum < below {
			return dp, false
		}
		if math.IsInf(b.le, 1) {
			inf, hasInf = cum, true
			break
		}
		bounds = append(bounds, b.le)
		counts = append(counts, uint64(cum-below))
		below = cum
	}
	total := inf
	if s.hasCt {
		total = math.Round(s.count)
	} else if !hasInf {
		return dp, false
	}
	if math.IsNaN(total) || math.IsInf(total, 0) || total < below {
		return dp, false
	}
	counts = append(counts, uint64(total-below))
	dp.ExplicitBounds, dp.BucketCounts, dp.Count = bounds, counts, uint64(total)
	// Always set, 0 without a _sum, as the SDK's exporter sent it.
	sum := 0.0
	if s.hasSum {
		sum = s.sum
	}
	dp.Sum = &sum
	return dp, true
}

// summary is an OTLP summary: the quantiles, count and sum.
func (c *Converter) summary(f *exposition.Family, p *Page) *metricpb.Metric {
	series := group(f, model.QuantileLabel, func(s *histSeries, suffix string, smp *exposition.Sample) {
		switch suffix {
		case "":
			q, err := strconv.ParseFloat(smp.Labels.Get(model.QuantileLabel), 64)
			if err == nil {
				s.les = append(s.les, bucket{q, smp.Value})
			}
		case "_sum":
			s.sum, s.hasSum = smp.Value, true
		case "_count":
			s.count, s.hasCt, s.countLabels = smp.Value, true, smp.Labels
		}
	})
	sum := &metricpb.Summary{}
	created := createdTimes(f, model.QuantileLabel)
	for _, s := range series {
		dp := &metricpb.SummaryDataPoint{
			Attributes:        attrs(s.labels, model.QuantileLabel),
			StartTimeUnixNano: nanos(c.start(f.Name, s.hash, s.count, p.At, p.restartedAt(f.Name, s.countLabels), created[s.hash])),
			TimeUnixNano:      nanos(p.At),
			Count:             uint64(max(0, math.Round(s.count))),
			Sum:               s.sum,
		}
		for _, q := range s.les {
			dp.QuantileValues = append(dp.QuantileValues, &metricpb.SummaryDataPoint_ValueAtQuantile{Quantile: q.le, Value: q.cum})
		}
		sum.DataPoints = append(sum.DataPoints, dp)
	}
	return &metricpb.Metric{Name: f.Name, Description: f.Help, Unit: f.Unit, Data: &metricpb.Metric_Summary{Summary: sum}}
}

// gauges returns one gauge per sample name of f, in the order the names
// first appear.
func gauges(f *exposition.Family, at time.Time) []*metricpb.Metric {
	var out []*metricpb.Metric
	idx := map[string]*metricpb.Gauge{}
	for i := range f.Samples {
		s := &f.Samples[i]
		name := s.Name()
		g, ok := idx[name]
		if !ok {
			g = &metricpb.Gauge{}
			idx[name] = g
			out = append(out, &metricpb.Metric{Name: name, Description: f.Help, Unit: f.Unit, Data: &metricpb.Metric_Gauge{Gauge: g}})
		}
		g.DataPoints = append(g.DataPoints, &metricpb.NumberDataPoint{
			Attributes: attrs(s.Labels, ""), TimeUnixNano: nanos(at), Value: &metricpb.NumberDataPoint_AsDouble{AsDouble: s.Value},
		})
	}
	return out
}
