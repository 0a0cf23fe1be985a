package routing

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/derive"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// Families the routing view serves because a router or autoscaler reads
// them, beyond the gauges the current llm-d endpoint picker compares
// (View). They are kept apart, in one table, so that they stay easy to
// see, to test and to move onto roles:
//
//   - legacy names that routers still read: vllm:gpu_cache_usage_perc (GIE
//     up to 1.2, AIBrix least-gpu-cache and its autoscaler samples,
//     production-stack), vllm:gpu_prefix_cache_hit_rate and the
//     vllm:gpu_prefix_cache_*_total counters (production-stack),
//     vllm:time_per_output_token_seconds (AIBrix TPOT) and
//     vllm:cpu_cache_usage_perc (AIBrix least-kv-cache needs it beside
//     vllm:kv_cache_usage_perc);
//   - current histograms and counters that routers reading this view
//     through the proxy or the routing listener read per scrape: the
//     inter-token latency and TTFT histograms (kthena, AIBrix) and the
//     prefix-cache counters (AIBrix).
//
// Everything is one series per model_name: counters and histograms summed
// over engines and API-server processes (per le for buckets), which is
// what a consumer summing them itself (AIBrix) computes, except that the
// sums do not go down when an engine restarts or drops off the page
// (sumHistogramOrCounter).
//
// No metric name is spelled here: the current families are read by role,
// and the legacy names are the catalogue's renames into a role's family
// (Roles.Legacy), which is exactly the name older vLLM printed; the
// derived hit ratio is named by its spec (derive).
const famDerivedHitRatio = derive.DerivedPrefixCacheHitRatio

// summed says, for the counter inputs (mapping.Counter) whose families
// the routing view serves summed per model, who reads them: served under
// the canonical name and, when legacy is set, under each of its legacy
// names too. They are served in the counter table's order
// (mapping.CounterRoles); a counter input without an entry is not served.
var summed = map[mapping.Role]struct {
	legacy       bool
	help         string // what it is; the rule is added
	reader       string // who reads it, and who its legacy name
	legacyReader string
}{
	mapping.RoleTTFT:               {false, "Time to first token", "kthena, AIBrix", ""},
	mapping.RoleInterTokenLatency:  {true, "Inter-token latency", "kthena, AIBrix", "AIBrix TPOT"},
	mapping.RolePrefixCacheHits:    {true, "Prefix-cache hits in tokens", "AIBrix", "production-stack"},
	mapping.RolePrefixCacheQueries: {true, "Prefix-cache queries in tokens", "AIBrix", "production-stack"},
	// The rest of what AIBrix's gateway fetches (least-latency, throughput,
	// PD routing), so that its metric-port can point at the routing view.
	mapping.RoleExternalPrefixCacheHits:    {false, "External prefix-cache hits in tokens", "AIBrix", ""},
	mapping.RoleExternalPrefixCacheQueries: {false, "External prefix-cache queries in tokens", "AIBrix", ""},
	mapping.RoleQueueTime:                  {false, "Queue time per request", "AIBrix least-latency, kthena", ""},
	mapping.RolePrefillTime:                {false, "Prefill time per request", "AIBrix least-latency, kthena", ""},
	mapping.RoleDecodeTime:                 {false, "Decode time per request", "AIBrix least-latency, kthena", ""},
	mapping.RoleE2ELatency:                 {false, "End-to-end latency per request", "AIBrix, kthena", ""},
	mapping.RoleTimePerOutputToken:         {false, "Mean time per output token of each request", "AIBrix, kthena", ""},
	mapping.RolePromptTokens:               {false, "Prompt tokens", "AIBrix throughput", ""},
	mapping.RoleGenerationTokens:           {false, "Generated tokens", "AIBrix throughput", ""},
	mapping.RoleRequestPromptTokens:        {false, "Prompt length per request", "AIBrix", ""},
	mapping.RoleRequestGenerationTokens:    {false, "Generated tokens per request", "AIBrix", ""},
}

// consumerFamilies returns the table's families for the canonical page
// (byName; role finds a role's family), the collapsed KV usage already
// computed (kv), the routing derived gauges, and the vLLM engine the page
// comes from (mapping's v0, v1 or unknown; empty for other servers).
func (v *Viewer) consumerFamilies(byName map[string]*exposition.Family, roles *mapping.Roles, kv []exposition.Sample, derived []exposition.Family, upstream string, style func(string) string, native func(string) *exposition.Family) []exposition.Family {
	role := func(r mapping.Role) *exposition.Family { return byName[roles.Family(r)] }
	var out []exposition.Family
	gauge := func(name, help string, samples []exposition.Sample) {
		if len(samples) == 0 {
			return
		}
		name = style(name)
		for i := range samples {
			samples[i].Labels = withName(samples[i].Labels, name)
		}
		out = append(out, exposition.Family{Name: name, Type: model.MetricTypeGauge, Help: help, Samples: samples})
	}

	kvName := roles.Family(mapping.RoleKVCacheUsage)

	cpuName := roles.Family(mapping.RoleCPUCacheUsage)
	switch f := role(mapping.RoleCPUCacheUsage); {
	case f != nil:
		// A V0 server's own CPU swap-space usage, one series per model.
		gauge(cpuName, "CPU (swap) KV-cache usage of this V0 server, 0..1: the highest value over its series per model_name.", maxByModel(f))
	case role(mapping.RoleKVOffloadCPUUsage) != nil && len(role(mapping.RoleKVOffloadCPUUsage).Samples) > 0:
		// A V1 server that offloads KV to CPU: its offload tier's CPU
		// cache usage is the CPU KV-cache usage a router asks for.
		gauge(cpuName, "CPU KV-cache usage of this V1 server's KV offload tier, 0..1: "+roles.Family(mapping.RoleKVOffloadCPUUsage)+", the highest value over engines per model_name; served because some routers (AIBrix least-kv-cache) need it beside "+kvName+".", maxByModel(role(mapping.RoleKVOffloadCPUUsage)))
	case upstream == mapping.EngineV1 && len(kv) > 0 && offloads(role):
		// It offloads KV to CPU but prints no usage of that cache: 0 would
		// be a wrong number, so nothing is served (docs/routing.md).
	case upstream == mapping.EngineV1 && len(kv) > 0:
		zeros := slices.Clone(kv)
		for i := range zeros {
			zeros[i].Value = 0
		}
		gauge(cpuName, "0: this vLLM V1 server shows no CPU KV cache (V0's swap space was removed, and the page has no KV-offload family); served because some routers (AIBrix least-kv-cache) need it beside "+kvName+".", zeros)
	}

	rateName := roles.Family(mapping.RolePrefixCacheHitRateGauge)
	if f := role(mapping.RolePrefixCacheHitRateGauge); f != nil {
		// A V0 server prints the gauge itself (-1 when it has no data):
		// serve what it says.
		gauge(rateName, "Prefix-cache hit rate as this V0 server prints it (-1: no data), one series per model_name.", firstByModel(f))
	} else if samples, window := withNoData(derived, style(famDerivedHitRatio), role(mapping.RolePrefixCacheQueries)); len(samples) > 0 {
		gauge(rateName, fmt.Sprintf("Prefix-cache hit rate, 0..1: increase(%s[%s]) / increase(%s[%s]) over all engines of the model (%s of the shortest window); -1 when no query was counted in the window, as V0, whose contract this name carries, printed it.",
			roles.Family(mapping.RolePrefixCacheHits), window, roles.Family(mapping.RolePrefixCacheQueries), window, style(famDerivedHitRatio)), samples)
	}

	for _, r := range mapping.CounterRoles() {
		s, ok := summed[r]
		f := role(r)
		if !ok || f == nil || len(f.Samples) == 0 {
			continue
		}
		rule := " summed over data-parallel engines and API-server processes"
		if f.Type == model.MetricTypeHistogram {
			rule += " per model_name and le"
		}
		names := []string{f.Name}
		if s.legacy {
			names = append(names, roles.Legacy(r)...)
		}
		for i, n := range names {
			help := s.help + "," + rule + ". Read by " + s.reader + "."
			if i > 0 {
				help = "Legacy name of " + f.Name + " (same values," + rule + "), for routers that still read it (" + s.legacyReader + ")."
			}
			name := style(n)
			src := f
			if i > 0 {
				// A legacy name the server printed is summed from its own
				// series (beside its current twin, vLLM 0.9.2-0.11, they
				// may differ).
				if own := native(n); own != nil && own.Type == f.Type {
					src = own
				}
			}
			if src != f {
				help = "Legacy name of " + f.Name + " as the server printed it (" + strings.TrimPrefix(rule, " ") + "), for routers that still read it (" + s.legacyReader + ")."
			}
			if samples := v.sumHistogramOrCounter(src, name); len(samples) > 0 {
				out = append(out, exposition.Family{Name: name, Type: f.Type, Help: help, Samples: samples})
			}
		}
	}
	return out
}

// maxByModel keeps the highest value of a gauge per model_name, NaN left
// out as PromQL's max leaves it out.
func maxByModel(f *exposition.Family) []exposition.Sample {
	best := map[string]float64{}
	var order []string
	for _, s := range f.Samples {
		if math.IsNaN(s.Value) {
			continue
		}
		m := s.Labels.Get("model_name")
		v, ok := best[m]
		if !ok {
			order = append(order, m)
		}
		if !ok || s.Value > v {
			best[m] = s.Value
		}
	}
	return modelSamples(order, best)
}

// firstByModel keeps the first series of a gauge per model_name.
func firstByModel(f *exposition.Family) []exposition.Sample {
	first := map[string]float64{}
	var order []string
	for _, s := range f.Samples {
		m := s.Labels.Get("model_name")
		if _, ok := first[m]; !ok {
			order = append(order, m)
			first[m] = s.Value
		}
	}
	return modelSamples(order, first)
}

// withNoData adds -1 (V0's "no data") for each model that counts prefix-cache
// queries (queries, the canonical family) but has no ratio in the window:
// no query was counted there yet.
func withNoData(derived []exposition.Family, name string, queries *exposition.Family) ([]exposition.Sample, string) {
	samples, window := shortestWindow(derived, name)
	if window == "" {
		window = "window" // no ratio yet in any window
	}
	if queries == nil {
		return samples, window
	}
	have := map[string]bool{}
	for _, s := range samples {
		have[s.Labels.Get(mapping.LabelModel)] = true
	}
	missing := map[string]float64{}
	var order []string
	for _, s := range queries.Samples {
		if m := s.Labels.Get(mapping.LabelModel); !have[m] {
			if _, ok := missing[m]; !ok {
				order = append(order, m)
			}
			missing[m] = -1
		}
	}
	if len(order) == 0 {
		return samples, window
	}
	out := append(slices.Clone(samples), modelSamples(order, missing)...)
	slices.SortFunc(out, func(a, b exposition.Sample) int { return labels.Compare(a.Labels, b.Labels) })
	return out, window
}

// shortestWindow returns the samples of the named derived gauge in its
// shortest window (the freshest reading), without the window label, and
// that window.
func shortestWindow(derived []exposition.Family, name string) ([]exposition.Sample, string) {
	i := slices.IndexFunc(derived, func(f exposition.Family) bool { return f.Name == name })
	if i < 0 {
		return nil, ""
	}
	var window string
	var shortest time.Duration = math.MaxInt64
	for _, s := range derived[i].Samples {
		w := s.Labels.Get("window")
		if d, err := model.ParseDuration(w); err == nil && time.Duration(d) < shortest {
			shortest, window = time.Duration(d), w
		}
	}
	var out []exposition.Sample
	for _, s := range derived[i].Samples {
		if s.Labels.Get("window") != window || math.IsNaN(s.Value) {
			continue
		}
		b := labels.NewBuilder(s.Labels)
		b.Del("window")
		out = append(out, exposition.Sample{Labels: b.Labels(), Value: s.Value})
	}
	return out, window
}

// sumHistogramOrCounter sums a counter's or a histogram's samples per
// model_name (and per le for buckets), and names them after the family
// name (keeping the _bucket, _sum, _count or _total suffix). A histogram
// whose engines do not print the same bucket bounds is not summed (the sum
// would not be a histogram): nothing is returned for it.
//
// Which input sample adds to which output sample, and the output label
// sets, depend only on the input label sets, which are the same from one
// scrape to the next: the Viewer remembers them per output name (a
// sumLayout) and, while the family's label sets are those of the last
// scrape, only adds the values. This was the routing view's largest cost
// (about 0.25 ms of a 1.9 ms cycle on one engine, BenchmarkScrapeCycle).
//
// A sum over engines must not go down when one engine restarts or drops
// off the page for a scrape: a reader taking its rate would read a reset
// of the whole sum and count the other engines' totals again. So each
// input keeps what it counted before it last restarted (a value lower
// than the last one is a restart, as Prometheus reads counters), and an
// input gone from the page keeps adding its last total (see carry):
// every output is monotonic, like the counters it sums. On a page where
// nothing restarts and nothing goes, each output is exactly the plain
// sum.
func (v *Viewer) sumHistogramOrCounter(f *exposition.Family, name string) []exposition.Sample {
	l := v.sums[name]
	if l == nil || !l.matches(f) {
		old := l
		l = newSumLayout(f, name)
		l.carry(old)
		if v.sums == nil {
			v.sums = map[string]*sumLayout{}
		}
		if len(v.sums) >= maxSumLayouts {
			clear(v.sums) // names of an old name style, after a reload
		}
		v.sums[name] = l
	}
	return l.apply(f)
}

// maxSumLayouts bounds the layouts a Viewer keeps (the summed table's
// canonical and legacy names, ~20, under one name style).
const maxSumLayouts = 256

// sumLayout is what sumHistogramOrCounter computes from a family's label
// sets: for each input sample the output sample its value adds to (-1:
// none), and the output samples' label sets.
type sumLayout struct {
	family string
	typ    model.MetricType
	in     []labels.Labels
	to     []int32
	out    []labels.Labels
	// Per input: its last value, and what it counted before it last
	// restarted.
	last, before []float64
	// Inputs gone from the page that still add their total to an output.
	gone []goneInput
}

// goneInput is an input that left the page: it adds total to output to.
// Back on the page (same labels), however long after, it goes on from
// where it was, as Prometheus reads a series that comes back: a lower
// value is a restart, a higher one counted on. Only the maxGone youngest
// are remembered by their labels; an older one's total stays in the
// output for good, as the counts it made.
type goneInput struct {
	in     labels.Labels // "" once it is folded into the output for good
	to     int32
	last   float64
	before float64
	age    int // scrapes since it went
}

// maxGone is how many gone inputs a layout remembers by their labels,
// which bounds its memory when label values churn (a pid per restart).
const maxGone = 64

func (l *sumLayout) matches(f *exposition.Family) bool {
	if f.Name != l.family || f.Type != l.typ || len(f.Samples) != len(l.in) {
		return false
	}
	for i := range f.Samples {
		if !labels.Equal(f.Samples[i].Labels, l.in[i]) {
			return false
		}
	}
	return true
}

// apply sums f's values as laid out: each output value is 0 plus its
// inputs' values in page order, as a map of sums filled in page order
// would have it.
func (l *sumLayout) apply(f *exposition.Family) []exposition.Sample {
	if len(l.out) == 0 {
		return nil
	}
	out := make([]exposition.Sample, len(l.out))
	for i := range out {
		out[i].Labels = l.out[i]
	}
	for i, s := range f.Samples {
		if j := l.to[i]; j >= 0 {
			v := s.Value
			if math.IsNaN(v) || math.IsInf(v, 0) {
				// This scrape's sum is what a plain sum is; the input
				// goes on from its last finite value (window.Increases
				// records no such value either), or one +Inf would stay
				// in the sum for good.
				out[j].Value += v
				continue
			}
			if v < l.last[i] {
				l.before[i] += l.last[i] // it restarted: its count so far still counts
			}
			l.last[i] = v
			out[j].Value += l.before[i] + v
		}
	}
	for k := range l.gone {
		g := &l.gone[k]
		out[g.to].Value += g.before + g.last
		g.age++
	}
	return out
}

// carry takes over from old, the layout of the last scrape: inputs of the
// same labels go on from their values and restarts there; inputs that
// left the page, or left it earlier and are not back, keep adding their
// totals (goneInput), to the output of the same labels. What adds to an
// output this layout no longer has (a model gone) is dropped with it.
func (l *sumLayout) carry(old *sumLayout) {
	l.last, l.before = make([]float64, len(l.in)), make([]float64, len(l.in))
	if old == nil {
		return
	}
	outs := make(map[string]int32, len(l.out))
	for j, o := range l.out {
		outs[o.String()] = int32(j)
	}
	ins := make(map[string]int, len(l.in))
	for i, in := range l.in {
		if l.to[i] >= 0 {
			ins[in.String()] = i
		}
	}
	// The inputs that gone before, then the last scrape's: an input back on
	// the page takes its state (the last scrape's wins).
	type state struct {
		in           labels.Labels
		out          labels.Labels
		last, before float64
		age          int
	}
	var prev []state
	for _, g := range old.gone {
		prev = append(prev, state{g.in, old.out[g.to], g.last, g.before, g.age})
	}
	for i, in := range old.in {
		if j := old.to[i]; j >= 0 {
			prev = append(prev, state{in, old.out[j], old.last[i], old.before[i], 0})
		}
	}
	// The youngest maxGone gone inputs keep their labels: the age of the
	// maxGone-th youngest is the oldest remembered.
	var ages []int
	for _, p := range prev {
		if _, back := ins[p.in.String()]; !back && !p.in.IsEmpty() {
			ages = append(ages, p.age)
		}
	}
	oldest := math.MaxInt
	if len(ages) > maxGone {
		slices.Sort(ages)
		oldest = ages[maxGone-1]
	}
	kept := 0
	forGood := map[int32]int{} // output -> its entry of totals kept for good
	for _, p := range prev {
		if i, ok := ins[p.in.String()]; ok && !p.in.IsEmpty() {
			l.last[i], l.before[i] = p.last, p.before
			continue
		}
		j, ok := outs[p.out.String()]
		if !ok || p.last+p.before == 0 {
			continue
		}
		if !p.in.IsEmpty() && p.age <= oldest && kept < maxGone {
			l.gone = append(l.gone, goneInput{in: p.in, to: j, last: p.last, before: p.before, age: p.age})
			kept++
			continue
		}
		// For good: no input takes it back, and one entry per output
		// holds all such totals.
		if k, ok := forGood[j]; ok {
			l.gone[k].before += p.before + p.last
			continue
		}
		forGood[j] = len(l.gone)
		l.gone = append(l.gone, goneInput{in: labels.EmptyLabels(), to: j, before: p.before + p.last})
	}
}

func newSumLayout(f *exposition.Family, name string) *sumLayout {
	type key struct{ model, suffix, le string }
	l := &sumLayout{family: f.Name, typ: f.Type, in: make([]labels.Labels, len(f.Samples)), to: make([]int32, len(f.Samples))}
	index := map[key]int32{}
	var keys []key
	bounds := map[string]map[string]bool{} // model -> engine+pid -> le set, as a string
	leSets := map[string]map[string]string{}
	for i, s := range f.Samples {
		l.in[i] = s.Labels
		l.to[i] = -1
		suffix, ok := exposition.SampleSuffix(f.Name, f.Type, s.Name())
		if !ok {
			continue
		}
		k := key{s.Labels.Get("model_name"), suffix, s.Labels.Get("le")}
		j, seen := index[k]
		if !seen {
			j = int32(len(keys))
			index[k] = j
			keys = append(keys, k)
		}
		l.to[i] = j
		if suffix == "_bucket" {
			src := s.Labels.Get("engine") + "/" + s.Labels.Get("pid")
			if leSets[k.model] == nil {
				leSets[k.model] = map[string]string{}
			}
			leSets[k.model][src] += k.le + ","
		}
	}
	for m, perSource := range leSets {
		bounds[m] = map[string]bool{}
		for _, set := range perSource {
			bounds[m][set] = true
		}
	}
	order := func(suffix string) int {
		switch suffix {
		case "_bucket":
			return 0
		case "_sum":
			return 1
		case "_count":
			return 2
		}
		return 3
	}
	sorted := make([]int32, len(keys))
	for i := range sorted {
		sorted[i] = int32(i)
	}
	slices.SortStableFunc(sorted, func(i, j int32) int {
		a, b := keys[i], keys[j]
		return cmp.Or(cmp.Compare(a.model, b.model), cmp.Compare(order(a.suffix), order(b.suffix)), compareLe(a.le, b.le))
	})
	outOf := make([]int32, len(keys))
	for i := range outOf {
		outOf[i] = -1
	}
	for _, ki := range sorted {
		k := keys[ki]
		if len(bounds[k.model]) > 1 {
			continue // engines with different bucket bounds
		}
		sample := name + k.suffix
		if k.suffix == "_total" {
			// An OpenMetrics counter family is named without _total.
			sample = strings.TrimSuffix(name, "_total") + "_total"
		}
		kv := []string{model.MetricNameLabel, sample}
		if k.le != "" {
			kv = append(kv, "le", k.le)
		}
		if k.model != "" {
			kv = append(kv, "model_name", k.model)
		}
		outOf[ki] = int32(len(l.out))
		l.out = append(l.out, labels.FromStrings(kv...))
	}
	for i, j := range l.to {
		if j >= 0 {
			l.to[i] = outOf[j]
		}
	}
	return l
}

// compareLe orders bucket bounds as numbers (+Inf last).
func compareLe(a, b string) int {
	fa, erra := strconv.ParseFloat(a, 64)
	fb, errb := strconv.ParseFloat(b, 64)
	if erra != nil || errb != nil {
		return strings.Compare(a, b)
	}
	return cmp.Compare(fa, fb)
}

// offloads reports whether the page counts KV offload traffic (bytes
// stored to or loaded from the CPU tier): a V1 server with a CPU KV cache.
func offloads(role func(mapping.Role) *exposition.Family) bool {
	for _, r := range []mapping.Role{mapping.RoleKVOffloadStoreBytes, mapping.RoleKVOffloadLoadBytes} {
		if f := role(r); f != nil && len(f.Samples) > 0 {
			return true
		}
	}
	return false
}
