package mapping

import (
	"math"
	"strconv"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// kvKey is one engine of one model; a page whose KV family has no model
// label (vLLM's cache_config_info) gives an empty model.
type kvKey struct{ model, engine string }

// kvFamilies returns the canonical kv_cache_capacity and kv_cache_free
// families that the profile's kv section finds on the page, in tokens,
// one sample per (model_name, engine): the highest over processes and
// ranks, which repeat one engine's pool.
func (p *Profile) kvFamilies(fams []exposition.Family, roles *Roles, st *CanonicalStats) []exposition.Family {
	if len(p.KV.Capacity) == 0 && len(p.KV.Free) == 0 {
		return nil
	}
	var out []exposition.Family
	for _, r := range []struct {
		role Role
		srcs []KVSource
	}{{RoleKVCacheCapacity, p.KV.Capacity}, {RoleKVCacheFree, p.KV.Free}} {
		name := roles.Family(r.role)
		if name == "" {
			continue
		}
		for i := range r.srcs {
			if smps, ok := p.kvSamples(&r.srcs[i], fams, name, st); ok {
				if len(smps) > 0 {
					out = append(out, exposition.Family{Name: name, Type: model.MetricTypeGauge, Samples: smps})
				}
				break
			}
		}
	}
	return out
}

// kvSamples reads one source; ok is false when the page does not have it,
// so that the next source is tried.
func (p *Profile) kvSamples(k *KVSource, fams []exposition.Family, name string, st *CanonicalStats) ([]exposition.Sample, bool) {
	f := p.nativeFamily(k.Family, fams)
	if f == nil || len(f.Samples) == 0 || f.Type != model.MetricTypeGauge && f.Type != model.MetricTypeUnknown {
		return nil, false
	}
	var plus map[string]float64
	if k.PlusFamily != "" {
		pf := p.nativeFamily(k.PlusFamily, fams)
		if pf == nil {
			return nil, false
		}
		plus = make(map[string]float64, len(pf.Samples))
		for _, s := range pf.Samples {
			plus[withoutName(s.Labels)] = s.Value
		}
	}
	var size map[string]float64
	if k.BlockSizeFamily != "" {
		sf := p.nativeFamily(k.BlockSizeFamily, fams)
		if sf == nil {
			return nil, false
		}
		size = make(map[string]float64, len(sf.Samples))
		for _, s := range sf.Samples {
			size[withoutName(s.Labels)] = s.Value
		}
	}
	vals := map[kvKey]float64{}
	disagree := map[kvKey]bool{}
	var order []kvKey
	for _, s := range f.Samples {
		var v float64
		var ok bool
		if k.info() {
			var odd bool
			v, ok, odd = infoTokens(k, s.Labels)
			if odd {
				disagree[p.kvKeyOf(s.Labels)] = true
			}
		} else {
			v, ok = s.Value, true
			if size != nil {
				bs, found := size[withoutName(s.Labels)]
				v, ok = v*bs, found
			}
			if plus != nil {
				more, found := plus[withoutName(s.Labels)]
				v, ok = v+more, ok && found
			}
		}
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			continue
		}
		key := p.kvKeyOf(s.Labels)
		if cur, seen := vals[key]; !seen {
			order = append(order, key)
			vals[key] = v
		} else if v > cur {
			vals[key] = v
		}
	}
	st.KVCapacityDisagreements += len(disagree)
	out := make([]exposition.Sample, 0, len(order))
	var b labels.ScratchBuilder
	for _, key := range order {
		b.Reset()
		b.Add(model.MetricNameLabel, name)
		if key.engine != "" {
			b.Add(LabelEngine, key.engine)
		}
		if key.model != "" {
			b.Add(LabelModel, key.model)
		}
		b.Sort()
		out = append(out, exposition.Sample{Labels: b.Labels(), Value: vals[key]})
	}
	return out, true
}

// nativeFamily returns the family of fams named family under the first of
// the profile's prefixes the page uses, the last of that name as a map of
// the page by name would. The page is scanned for the few names the KV
// sources read rather than indexed by a map built every scrape (two a
// scrape, 3 KB each on the demo's page: BenchmarkScrapeCycle).
func (p *Profile) nativeFamily(family string, fams []exposition.Family) *exposition.Family {
	for _, pre := range p.Detect.Prefixes {
		for i := len(fams) - 1; i >= 0; i-- {
			if n := fams[i].Name; len(n) == len(pre)+len(family) && n[:len(pre)] == pre && n[len(pre):] == family {
				return &fams[i]
			}
		}
	}
	return nil
}

func (p *Profile) kvKeyOf(l labels.Labels) kvKey {
	var k kvKey
	if p.Labels.Model != "" {
		k.model = l.Get(p.Labels.Model)
	}
	if p.Labels.Engine != "" {
		k.engine = l.Get(p.Labels.Engine)
	}
	return k
}

// infoTokens reads an info sample's KV size: the tokens label where it
// holds a count, else blocks × block size. odd says both were printed and
// differ.
func infoTokens(k *KVSource, l labels.Labels) (tokens float64, ok, odd bool) {
	product, pok := 0.0, false
	if k.BlocksLabel != "" {
		n, nok := countLabel(l, k.BlocksLabel)
		bs, bok := countLabel(l, k.BlockSizeLabel)
		product, pok = n*bs, nok && bok
	}
	if k.TokensLabel != "" {
		if t, tok := countLabel(l, k.TokensLabel); tok {
			return t, true, pok && t != product
		}
	}
	return product, pok, false
}

// countLabel is a label whose value is a whole, non-negative number
// ("None" before vLLM has sized its cache is not).
func countLabel(l labels.Labels, name string) (float64, bool) {
	v, err := strconv.ParseFloat(l.Get(name), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || v != math.Trunc(v) {
		return 0, false
	}
	return v, true
}

func withoutName(l labels.Labels) string {
	b := labels.NewBuilder(l)
	b.Del(model.MetricNameLabel)
	return b.Labels().String()
}

// KVBlockSize returns the KV block (page) size in tokens that the page
// prints for the profile's KV capacity (kv.capacity's block_size_family or
// block_size_label, the first source the page has), for routers that read
// a block size and a block count; ok is false when the page prints none.
func (p *Profile) KVBlockSize(fams []exposition.Family) (int, bool) {
	for _, k := range p.KV.Capacity {
		switch {
		case k.BlockSizeFamily != "":
			if f := p.nativeFamily(k.BlockSizeFamily, fams); f != nil && len(f.Samples) > 0 {
				if v := f.Samples[0].Value; v > 0 && v == math.Trunc(v) && v < 1<<31 {
					return int(v), true
				}
			}
		case k.BlockSizeLabel != "":
			if f := p.nativeFamily(k.Family, fams); f != nil && len(f.Samples) > 0 {
				if v, ok := countLabel(f.Samples[0].Labels, k.BlockSizeLabel); ok && v > 0 && v < 1<<31 {
					return int(v), true
				}
			}
		}
	}
	return 0, false
}
