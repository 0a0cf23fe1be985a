package routing

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/derive"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// View builds the routing view: one series per model_name for each gauge a
// router compares, whatever the data-parallel layout (engine label) or the
// number of API-server processes (pid label) behind the port. Routers take
// the first or the last series of a family (llm-d's endpoint picker,
// AIBrix, kthena), so more than one would silently lose the others.
//
// It reads the canonical page (roles under their canonical names, see
// mapping.Profile.Canonical), so it is the same for every server, and
// prints the view in those names: vLLM V1's. upstream is the vLLM engine
// mapping detected for the page (v0, v1, or empty for other servers).
func View(canon, derived []exposition.Family, roles *mapping.Roles, upstream string, style func(string) string) []exposition.Family {
	return new(Viewer).View(canon, derived, roles, upstream, style)
}

// Viewer builds routing views as View does, keeping from one view to the
// next the sums over engines (Sums) and what depends only on the page's
// label sets, so that a scrape loop building one view per scrape redoes
// less. Its views are those of View. A Viewer is not safe
// for concurrent use; its zero value is ready.
type Viewer struct {
	sums Sums
	// nan counts the NaN samples met since TakeNaN last read it.
	nan int
	// unsummed counts the models' histograms left out of the sums since
	// TakeUnsummed last read it, by why (Unsummed*).
	unsummed [NumUnsummed]int
	// gauges are the last view's collapsed gauges (Gauges).
	gauges map[string]ModelGauges
	// names are the last build's named label sets, for the next build.
	names *names
}

// TakeNaN returns the number of NaN samples the views built since the last
// call left out or withdrew their model for, and starts counting anew.
func (v *Viewer) TakeNaN() int {
	n := v.nan
	v.nan = 0
	return n
}

// TakeUnsummed returns the models' histograms the scrapes collapsed since
// the last call left out of the compatibility page's sums, by why
// (Unsummed*), and starts counting anew.
func (v *Viewer) TakeUnsummed() [NumUnsummed]int {
	n := v.unsummed
	v.unsummed = [NumUnsummed]int{}
	return n
}

// View is the package's View, reusing what v remembers: the
// compatibility page of Views, without a server's own names.
func (v *Viewer) View(canon, derived []exposition.Family, roles *mapping.Roles, upstream string, style func(string) string) []exposition.Family {
	_, compat := v.Views(Input{Canon: canon, Derived: derived, HitRatio: derive.PrefixCacheHitRatio(derived), Roles: roles, Upstream: upstream, Style: style})
	return compat
}

// Input is what one scrape's routing views are built from.
type Input struct {
	Canon, Derived []exposition.Family // the canonical page; routing derived gauges
	// HitRatio is the derived prefix-cache hit ratio in its shortest
	// window, served under V0's hit-rate name (derive.PrefixCacheHitRatio
	// of Derived).
	HitRatio derive.Freshest
	Roles    *mapping.Roles
	// Upstream is the vLLM engine mapping detected (v0, v1, unknown), empty
	// for other servers; Server the profile's server (vllm, sglang, ...).
	Upstream, Server string
	// BlockSize is the KV block size in tokens the server prints (0: none),
	// for the cache information of servers other than vLLM.
	BlockSize int
	// Restarts are the restarts the page announced (window.History's
	// judgement): the summed counters and histograms restart with them.
	Restarts Restarts
	// Readers says which names routers read of Server (nil: none).
	Readers *Readers
	Style   func(string) string
	// Native returns the server's own family of that name as its role
	// reads it (model and engine labels renamed, ranks combined, parts
	// left out) with the server's own values, unscaled; nil when the page
	// does not print it (mapping.Profile.Native). A server's name the
	// Readers table lists is served from it, so that it keeps the value
	// the server printed; nil Native serves the role's value.
	Native func(name string) *exposition.Family
	// Page is the scrape's page as normalised, for the other families the
	// Readers table lists, which the compatibility page serves as printed.
	Page []exposition.Family
	// Label, when not nil, is applied by Build to every family of the
	// views, in one call, in place (the pod role): on the families Build
	// makes, whose samples are its own, and on copies of Derived's
	// samples, which the scrape shares with other readers.
	Label func([]exposition.Family) []exposition.Family
}

// Views builds the two router-facing pages of one scrape: Collapse, then
// Build, counting Build's NaN samples as Collapse's.
func (v *Viewer) Views(in Input) (epp, compat []exposition.Family) {
	c := v.Collapse(in)
	epp, compat, nan := c.Build()
	v.nan += nan
	return epp, compat
}

// Collapsed is what one scrape keeps for its routing views: the input,
// the gauges collapsed per model (which the diagnosis reads every scrape,
// see Gauges) and the scrape's sums (which carry state from scrape to
// scrape). Build makes the pages from it when a reader first asks, on any
// goroutine: it changes nothing Collapse made.
type Collapsed struct {
	in                   Input
	byName               map[string]*exposition.Family
	running, waiting, kv []exposition.Sample // per model_name, unnamed; nil without the role
	sums                 Totals
	// legacy are the sums of legacy names the server printed beside their
	// current twins (vLLM 0.9.2-0.11), from their own series: by role.
	legacy Totals
	// names is the Viewer's memo of named label sets, shared by the
	// builds of its scrapes (nil: none).
	names *names
}

// Collapse does the part of one scrape's routing views that must happen
// every scrape, in scrape order: the gauges collapsed per model (Gauges;
// NaN samples counted, see TakeNaN) and the summed counters and histograms
// advanced (Sums). Everything else is left to Build.
func (v *Viewer) Collapse(in Input) *Collapsed {
	if v.names == nil {
		v.names = new(names)
	}
	c := &Collapsed{in: in, byName: make(map[string]*exposition.Family, len(in.Canon)), names: v.names}
	for i := range in.Canon {
		c.byName[in.Canon[i].Name] = &in.Canon[i]
	}
	role := c.role
	v.gauges = map[string]ModelGauges{}
	if f := role(mapping.RoleRequestsRunning); f != nil {
		c.running = v.keep(gaugeRunning, v.sumByModel(f))
	}
	if f := role(mapping.RoleRequestsWaiting); f != nil {
		c.waiting = v.keep(gaugeWaiting, v.sumByModel(f))
	}
	if f := role(mapping.RoleKVCacheUsage); f != nil {
		c.kv = v.keep(gaugeKVUsage, v.kvByModel(f, blocksPerEngine(role(mapping.RoleCacheConfig))))
	}
	c.sums = v.sums.Sum(role, summedRoles, in.Restarts)
	for i, n := range c.sums.Unsummed() {
		v.unsummed[i] += n
	}
	if in.Native != nil {
		c.legacy = v.sums.Sum(func(r mapping.Role) *exposition.Family {
			return legacyTwin(role(r), in.Roles.Legacy(r), in.native)
		}, summedRoles, in.Restarts)
	}
	return c
}

// legacyTwin returns the server's own family of the first legacy name of a
// role that it printed with the role's type (f's), nil without one.
func legacyTwin(f *exposition.Family, legacy []string, native func(string) *exposition.Family) *exposition.Family {
	if f == nil {
		return nil
	}
	for _, n := range legacy {
		if own := native(n); own != nil && own.Type == f.Type {
			return own
		}
	}
	return nil
}

// role returns the canonical page's family of role r, nil without one.
func (c *Collapsed) role(r mapping.Role) *exposition.Family {
	return c.byName[c.in.Roles.Family(r)]
}

// Totals are the scrape's sums, for other views that print summed
// families (the GenAI view): their totals move exactly as the
// compatibility page's.
func (c *Collapsed) Totals() Totals { return c.sums }

// Build makes the two router-facing pages, and says how many NaN samples
// they left out. epp holds only what endpoint pickers read: the running,
// waiting, KV-usage, cache and LoRA gauges under vLLM's current names, the
// legacy KV name, and the names the Readers table lists for the server.
// compat holds epp and everything the other routers and autoscalers read
// (legacy gauges, summed counters and histograms, routing derived gauges).
// Its families are new, their samples new but for the routing derived
// gauges', which compat shares with the Input.
func (c *Collapsed) Build() (epp, compat []exposition.Family, nan int) {
	in, roles, style, role := c.in, c.in.Roles, c.in.Style, c.role
	names := c.names
	names.start()
	defer names.end()
	var out []exposition.Family
	add := func(name, help string, samples []exposition.Sample) {
		if len(samples) == 0 {
			return
		}
		name = style(name)
		for i := range samples {
			samples[i].Labels = names.withName(samples[i].Labels, name)
		}
		out = append(out, exposition.Family{Name: name, Type: model.MetricTypeGauge, Help: help, Samples: samples})
	}
	natives := in.Readers.For(in.Server)
	if in.Server == mapping.ServerVLLM {
		natives = Natives{} // vLLM's own names are the current ones
	}
	running, waiting, kv := c.running, c.waiting, c.kv
	// The server's own families are collapsed when first read, by a
	// Viewer of the build's own: the scrape's is not touched here.
	var v Viewer
	blocks := blocksPerEngine(role(mapping.RoleCacheConfig))
	if f := role(mapping.RoleRequestsRunning); f != nil {
		add(f.Name, "Requests in the running batch, summed over data-parallel engines and API-server processes.", slices.Clone(running))
	}
	if f := role(mapping.RoleRequestsWaiting); f != nil {
		add(f.Name, "Requests waiting to be scheduled, summed over data-parallel engines and API-server processes.", slices.Clone(waiting))
	}
	if f := role(mapping.RoleKVCacheUsage); f != nil {
		add(f.Name, "KV-cache usage, 0..1: per engine the highest value over API-server processes (idle processes report 0), then the mean over engines weighted by each engine's num_gpu_blocks (plain mean when unknown).", slices.Clone(kv))
		for _, legacy := range roles.Legacy(mapping.RoleKVCacheUsage) {
			if own := in.native(legacy); own != nil {
				// Printed beside its current twin (vLLM 0.9.2-0.11): its own value.
				add(legacy, "Legacy name of "+f.Name+" as the server printed it, collapsed by the same rule, for routers that still read it (GIE up to 1.2, AIBrix, production-stack).", v.kvByModel(own, blocks))
				continue
			}
			add(legacy, "Legacy name of "+f.Name+", same value, for routers that still read it (GIE up to 1.2, AIBrix, production-stack).", slices.Clone(kv))
		}
	}
	if f := role(mapping.RoleCacheConfig); f != nil {
		add(f.Name, "vLLM cache configuration (value 1): labels of the lowest engine, engine and pid labels dropped, num_gpu_blocks, num_cpu_blocks and kv_cache_size_tokens summed over engines together (all the lowest engine prints as counts), or none where an engine does not print one as a count.", cacheConfig(f))
	} else if in.Server != mapping.ServerVLLM {
		out = append(out, nativeCacheInfo(roles, role(mapping.RoleKVCacheCapacity), in.BlockSize, natives, style)...)
	}
	if f := role(mapping.RoleLoRAInfo); f != nil && len(f.Samples) > 0 {
		newest := slices.MaxFunc(f.Samples, func(a, b exposition.Sample) int { return cmp.Compare(a.Value, b.Value) })
		add(f.Name, "LoRA adapters (value: Unix time of the update): only the newest series, the one routers must read.", []exposition.Sample{{Labels: newest.Labels, Value: newest.Value}})
	}
	for _, n := range []struct {
		names    []string
		what     string
		samples  []exposition.Sample
		collapse func(*exposition.Family) []exposition.Sample
	}{
		{natives.Running, roles.Family(mapping.RoleRequestsRunning), running, v.sumByModel},
		{natives.Waiting, roles.Family(mapping.RoleRequestsWaiting), waiting, v.sumByModel},
		{natives.KVUsage, roles.Family(mapping.RoleKVCacheUsage), kv, func(f *exposition.Family) []exposition.Sample { return v.kvByModel(f, blocks) }},
	} {
		for _, name := range n.names {
			// Printed by the server: its own value, collapsed by the
			// role's rule. Not printed: the role's value under the name
			// a router reads (another release's name, never a changed
			// number the server printed).
			if f := in.native(name); f != nil {
				add(name, "The server's own "+name+" as it printed it, collapsed as "+style(n.what)+" is (one series per model_name), for routers that read it by engine label.", n.collapse(f))
				continue
			}
			add(name, "The server's own name for "+style(n.what)+", same value, for routers that read it by engine label.", slices.Clone(n.samples))
		}
	}
	epp = withoutNaN(out, &nan)
	// The rest is checked on its own: epp's NaN samples are counted once.
	consumers := withoutNaN(consumerFamilies(c.byName, roles, kv, c.sums, c.legacy, in.HitRatio, in.Upstream, style, names), &nan)
	derived := withoutNaN(slices.Clone(in.Derived), &nan)
	printed := withoutNaN(asPrinted(in.Page, natives.Families, style, names), &nan)
	nan += v.nan // the server's own families' NaN samples
	compat = slices.Concat(epp, consumers, derived, printed)
	if in.Label != nil {
		for i := len(epp) + len(consumers); i < len(epp)+len(consumers)+len(derived); i++ {
			compat[i].Samples = slices.Clone(compat[i].Samples) // shared with the scrape
		}
		// compat's first families share their samples with epp's.
		compat = in.Label(compat)
	}
	return compat[:len(epp):len(epp)], compat, nan
}

// native is in.Native, nil when there is none.
func (in *Input) native(name string) *exposition.Family {
	if in.Native == nil {
		return nil
	}
	return in.Native(name)
}

// asPrinted returns the page's families of the given names as the server
// printed them (names in the view's style): what a consumer reading them
// from the server itself would read.
func asPrinted(page []exposition.Family, names []string, style func(string) string, named *names) []exposition.Family {
	var out []exposition.Family
	for _, name := range names {
		i := slices.IndexFunc(page, func(f exposition.Family) bool { return f.Name == name })
		if i < 0 || len(page[i].Samples) == 0 {
			continue
		}
		f := page[i]
		f.Name = style(f.Name)
		f.Samples = slices.Clone(f.Samples)
		for j := range f.Samples {
			f.Samples[j].Labels = named.withName(f.Samples[j].Labels, style(f.Samples[j].Name()))
		}
		out = append(out, f)
	}
	return out
}

// nativeCacheInfo builds, for a server other than vLLM, the cache
// information routers read as block size and block count: vLLM's
// cache_config_info{block_size,num_gpu_blocks} and the server's own forms
// the Readers table lists, from the KV capacity in tokens (summed over
// engines) and the block size the server prints. Nothing without a block
// size, or with more than one model (the families have no model label).
func nativeCacheInfo(roles *mapping.Roles, capacity *exposition.Family, blockSize int, n Natives, style func(string) string) []exposition.Family {
	if capacity == nil || blockSize <= 0 {
		return nil
	}
	tokens, model0 := 0.0, ""
	for i, s := range capacity.Samples {
		if m := s.Labels.Get(mapping.LabelModel); i == 0 {
			model0 = m
		} else if m != model0 {
			return nil
		}
		tokens += s.Value
	}
	if tokens <= 0 || math.IsNaN(tokens) || math.IsInf(tokens, 0) {
		return nil
	}
	bs, nb := strconv.Itoa(blockSize), strconv.FormatFloat(math.Floor(tokens/float64(blockSize)), 'f', 0, 64)
	help := "KV cache as blocks (value 1): block_size the server's block size in tokens, num_gpu_blocks its KV capacity summed over engines, in blocks."
	info := func(name, bsLabel, nbLabel, help string) exposition.Family {
		name = style(name)
		return exposition.Family{Name: name, Type: model.MetricTypeGauge, Help: help, Samples: []exposition.Sample{{
			Labels: labels.FromStrings(model.MetricNameLabel, name, bsLabel, bs, nbLabel, nb), Value: 1}}}
	}
	out := []exposition.Family{info(roles.Family(mapping.RoleCacheConfig), "block_size", "num_gpu_blocks", help)}
	for _, ci := range n.CacheInfo {
		out = append(out, info(ci.Family, ci.BlockSizeLabel, ci.NumBlocksLabel, "The server's cache information (value 1) as routers read it by engine label: the block size and the KV capacity in blocks, summed over engines."))
	}
	gauge := func(name, help string, v float64) exposition.Family {
		name = style(name)
		return exposition.Family{Name: name, Type: model.MetricTypeGauge, Help: help, Samples: []exposition.Sample{{
			Labels: labels.FromStrings(model.MetricNameLabel, name), Value: v}}}
	}
	for _, g := range n.CacheGauges {
		nbv, _ := strconv.ParseFloat(nb, 64)
		out = append(out,
			gauge(g[0], "KV block size in tokens, as the server prints it.", float64(blockSize)),
			gauge(g[1], "KV capacity in blocks, summed over engines.", nbv))
	}
	return out
}

// withoutNaN leaves out, and counts in nan, any NaN sample still in the
// view (a gauge passed through as printed): a router is never served NaN,
// and a family left without samples is left out.
func withoutNaN(fams []exposition.Family, nan *int) []exposition.Family {
	out := fams[:0]
	for _, f := range fams {
		if slices.ContainsFunc(f.Samples, func(s exposition.Sample) bool { return math.IsNaN(s.Value) }) {
			kept := make([]exposition.Sample, 0, len(f.Samples))
			for _, s := range f.Samples {
				if math.IsNaN(s.Value) {
					*nan++
					continue
				}
				kept = append(kept, s)
			}
			if len(kept) == 0 {
				continue
			}
			f.Samples = kept
		}
		out = append(out, f)
	}
	return out
}

// withName returns l named name. Labels with empty values stay, as the
// upstream printed them (labels.Builder would drop them): AIBrix reads the
// LoRA series' empty adapter lists as "".
func withName(l labels.Labels, name string) labels.Labels {
	return rebuild(l, func(n string) bool { return n != model.MetricNameLabel }, model.MetricNameLabel, name)
}

// rebuild returns the labels of l that keep accepts, plus the name/value
// pairs of set, empty values included.
func rebuild(l labels.Labels, keep func(name string) bool, set ...string) labels.Labels {
	var b labels.ScratchBuilder
	l.Range(func(x labels.Label) {
		if keep(x.Name) && !slices.Contains(everyOther(set), x.Name) {
			b.Add(x.Name, x.Value)
		}
	})
	for i := 0; i+1 < len(set); i += 2 {
		b.Add(set[i], set[i+1])
	}
	b.Sort()
	return b.Labels()
}

// everyOther returns the names of name/value pairs.
func everyOther(kv []string) []string {
	out := make([]string, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		out = append(out, kv[i])
	}
	return out
}

type modelKey struct{ model, engine string }

// sumByModel sums a gauge's samples per model_name. A model with a NaN
// sample has no sum (a router is never served NaN, and a sum without the
// engine would read as less load than there is); the NaN is counted.
func (v *Viewer) sumByModel(f *exposition.Family) []exposition.Sample {
	sums := map[string]float64{}
	var order []string
	nan := map[string]bool{}
	for _, s := range f.Samples {
		m := s.Labels.Get(mapping.LabelModel)
		if math.IsNaN(s.Value) {
			v.nan++
			nan[m] = true
			continue
		}
		if _, ok := sums[m]; !ok {
			order = append(order, m)
		}
		sums[m] += s.Value
	}
	if len(nan) > 0 {
		order = slices.DeleteFunc(order, func(m string) bool { return nan[m] })
	}
	return modelSamples(order, sums)
}

func modelSamples(order []string, v map[string]float64) []exposition.Sample {
	slices.Sort(order)
	out := make([]exposition.Sample, 0, len(order))
	for _, m := range order {
		l := labels.EmptyLabels()
		if m != "" {
			l = labels.FromStrings(mapping.LabelModel, m)
		}
		out = append(out, exposition.Sample{Labels: l, Value: v[m]})
	}
	return out
}

// kvByModel collapses KV usage per model_name: the highest value over an
// engine's processes, NaN ones left out (as PromQL's max), then the mean
// over engines; a model with an engine of NaN only has no value.
func (v *Viewer) kvByModel(f *exposition.Family, blocks map[string]float64) []exposition.Sample {
	perEngine := map[modelKey]float64{}
	var keys []modelKey
	nan := map[modelKey]bool{}
	for _, s := range f.Samples {
		k := modelKey{s.Labels.Get(mapping.LabelModel), s.Labels.Get(mapping.LabelEngine)}
		if math.IsNaN(s.Value) {
			v.nan++
			nan[k] = true
			continue
		}
		highest, ok := perEngine[k]
		if !ok {
			keys = append(keys, k)
		}
		if !ok || s.Value > highest {
			perEngine[k] = s.Value
		}
	}
	// Summed in a fixed order (model, then engine as a number), so that
	// the result does not change in its last bits with map iteration order.
	slices.SortFunc(keys, func(a, b modelKey) int {
		return cmp.Or(cmp.Compare(a.model, b.model), mapping.CompareEngines(a.engine, b.engine))
	})
	weighted, weights, plain, n := map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
	allWeighted := map[string]bool{}
	var order []string
	for _, k := range keys {
		usage := perEngine[k]
		if _, ok := n[k.model]; !ok {
			order = append(order, k.model)
			allWeighted[k.model] = true
		}
		n[k.model]++
		plain[k.model] += usage
		if w, ok := blocks[k.engine]; ok && w > 0 {
			weighted[k.model] += usage * w
			weights[k.model] += w
		} else {
			allWeighted[k.model] = false
		}
	}
	for k := range nan {
		if _, ok := perEngine[k]; !ok {
			order = slices.DeleteFunc(order, func(m string) bool { return m == k.model })
		}
	}
	// Engines that agree give their value itself: the weighted mean of
	// equal values is that value, but not always in floating point (0.4
	// weighted by 3 and 5 blocks gives 0.39999999999999997).
	agreed := map[string]bool{}
	first := map[string]float64{}
	for _, k := range keys {
		v := perEngine[k]
		if f, ok := first[k.model]; !ok {
			first[k.model], agreed[k.model] = v, true
		} else if v != f {
			agreed[k.model] = false
		}
	}
	res := map[string]float64{}
	for _, m := range order {
		if agreed[m] {
			res[m] = first[m]
			continue
		}
		if allWeighted[m] {
			res[m] = weighted[m] / weights[m]
		} else {
			res[m] = plain[m] / n[m]
		}
	}
	return modelSamples(order, res)
}

// count reads a label value as a count of blocks or tokens: an integer
// from 0 to mapping.MaxCount, so that a sum over engines cannot overflow.
func count(s string) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v >= 0 && v <= mapping.MaxCount
}

// blocksPerEngine reads num_gpu_blocks of each engine's cache_config_info.
// An engine printed more than once (once per API-server process) counts
// once, with its first sample.
func blocksPerEngine(f *exposition.Family) map[string]float64 {
	out := map[string]float64{}
	if f == nil {
		return out
	}
	for _, s := range f.Samples {
		e := s.Labels.Get(mapping.LabelEngine)
		if _, ok := out[e]; ok {
			continue
		}
		if v, err := strconv.ParseFloat(s.Labels.Get("num_gpu_blocks"), 64); err == nil {
			out[e] = v
		}
	}
	return out
}

// capacityLabels are cache_config_info's labels that give one engine's KV
// capacity: summed over engines they are the server's, and they must be
// summed together, or a router reads the pod's blocks beside one engine's
// tokens.
var capacityLabels = []string{"num_gpu_blocks", "num_cpu_blocks", "kv_cache_size_tokens"}

// cacheConfig keeps the labels of the lowest engine's cache_config_info,
// without the engine label, and sums its capacity labels (capacityLabels)
// over engines, each engine once however many processes print it: all of
// those the lowest engine prints as a count together, or, where some
// engine does not print one of them as a count, none (the lowest engine's
// configuration as printed). A label printed as no number ("None") stays
// as printed.
func cacheConfig(f *exposition.Family) []exposition.Sample {
	if len(f.Samples) == 0 {
		return nil
	}
	lowest := slices.MinFunc(f.Samples, func(a, b exposition.Sample) int {
		return mapping.CompareEngines(a.Labels.Get(mapping.LabelEngine), b.Labels.Get(mapping.LabelEngine))
	})
	// One series for the whole server: which engine or API-server process
	// printed it says nothing about the configuration.
	keep := func(n string) bool { return n != mapping.LabelEngine && n != "pid" }
	var set []string
	perEngine := make(map[string]labels.Labels, len(f.Samples))
	for _, s := range f.Samples {
		if e := s.Labels.Get(mapping.LabelEngine); perEngine[e].IsEmpty() {
			perEngine[e] = s.Labels
		}
	}
	if len(perEngine) > 1 {
		summable := true
		for _, key := range capacityLabels {
			if _, ok := count(lowest.Labels.Get(key)); !ok {
				continue // absent, or no number ("None"): kept as printed
			}
			var total int64
			for _, l := range perEngine {
				v, ok := count(l.Get(key))
				total += v
				summable = summable && ok && total <= mapping.MaxCount
			}
			set = append(set, key, strconv.FormatInt(total, 10))
		}
		if !summable {
			set = nil
		}
	}
	return []exposition.Sample{{Labels: rebuild(lowest.Labels, keep, set...), Value: lowest.Value}}
}

// Asleep reports whether every engine on the canonical page reports a sleep
// state other than awake (vLLM's sleep mode: weights offloaded or
// discarded), and the states they report. A sleeping engine reports zero
// running and waiting requests, so a least-loaded router would send it
// work; the routing view refuses instead. A page without sleep states, or
// with one engine awake, is not asleep.
func Asleep(canon []exposition.Family, roles *mapping.Roles) (bool, []string) {
	name := roles.Family(mapping.RoleSleepState)
	var f *exposition.Family
	for i := range canon {
		if canon[i].Name == name {
			f = &canon[i]
			break
		}
	}
	if f == nil || len(f.Samples) == 0 {
		return false, nil
	}
	type engineState struct {
		awake  bool   // the awake series is 1
		asleep string // a sleeping state whose series is 1
	}
	engines := map[modelKey]*engineState{}
	for _, s := range f.Samples {
		k := modelKey{s.Labels.Get(mapping.LabelModel), s.Labels.Get(mapping.LabelEngine)}
		e := engines[k]
		if e == nil {
			e = &engineState{}
			engines[k] = e
		}
		if s.Value != 1 {
			continue
		}
		if st := s.Labels.Get(mapping.LabelSleepState); st == mapping.SleepStateAwake {
			e.awake = true
		} else if e.asleep == "" {
			e.asleep = st
		}
	}
	var states []string
	for _, e := range engines {
		if e.awake || e.asleep == "" {
			return false, nil
		}
		if !slices.Contains(states, e.asleep) {
			states = append(states, e.asleep)
		}
	}
	slices.Sort(states)
	return true, states
}
