package collector

import (
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/routing"
	"github.com/fos-study/vllm-normalizer/serve"
)

// engineViews builds, on first request, the routing view of one engine
// (data-parallel rank) of the snapshot's scrape, for routers that address
// ranks as endpoints: what /metrics/routing holds for the whole server (the
// endpoint pickers' gauges, the server's own names, the cache information),
// for that engine alone. Pages no router asks for cost nothing.
type engineViews struct {
	in      routing.Input       // the scrape's routing input, all engines
	own     []exposition.Family // the routing view's own series (vllm_up, age)
	role    string
	engines []string // engine label values on the page, sorted

	mu    sync.Mutex
	pages map[string]*serve.Page
}

// newEngineViews lists the engines of in's canonical page; none without one.
func newEngineViews(in routing.Input, own []exposition.Family, role string) *engineViews {
	var engines []string
	for _, f := range in.Canon {
		for _, s := range f.Samples {
			if e := s.Labels.Get(mapping.LabelEngine); e != "" && !slices.Contains(engines, e) {
				engines = append(engines, e)
			}
		}
	}
	slices.SortFunc(engines, compareEngineLabels)
	return &engineViews{in: in, own: own, role: role, engines: engines, pages: map[string]*serve.Page{}}
}

// noEngineViews is what a snapshot without a scrape serves: no engine.
func noEngineViews(role string) *engineViews { return newEngineViews(routing.Input{}, nil, role) }

// page returns engine e's routing view, false when the page has no such
// engine.
func (v *engineViews) page(e string) (*serve.Page, bool) {
	if !slices.Contains(v.engines, e) {
		return nil, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if p, ok := v.pages[e]; ok {
		return p, true
	}
	in := v.in
	in.Canon, in.Derived, in.Page = onlyEngine(v.in.Canon, e, false), nil, nil
	if native := v.in.Native; native != nil {
		in.Native = func(name string) *exposition.Family {
			f := native(name)
			if f == nil {
				return nil
			}
			one := onlyEngine([]exposition.Family{*f}, e, false)
			if len(one) == 0 {
				return nil
			}
			return &one[0]
		}
	}
	// A Viewer of its own: the scrape's Viewer keeps the whole server's sums.
	epp, _ := new(routing.Viewer).Views(in)
	var enc serve.Encoder
	p := enc.Prepare(merge(withRole(epp, v.role), v.own), nil)
	v.pages[e] = p
	return p, true
}

// onlyEngine returns new families holding the samples of engine e; drop
// removes the engine label, as a derived gauge of one engine is the
// engine's routing value.
func onlyEngine(fams []exposition.Family, e string, drop bool) []exposition.Family {
	out := make([]exposition.Family, 0, len(fams))
	var b labels.Builder
	for _, f := range fams {
		g := f
		g.Samples = nil
		for _, s := range f.Samples {
			if s.Labels.Get(mapping.LabelEngine) != e {
				continue
			}
			if drop {
				b.Reset(s.Labels)
				b.Del(mapping.LabelEngine)
				s.Labels = b.Labels()
			}
			g.Samples = append(g.Samples, s)
		}
		if len(g.Samples) > 0 {
			out = append(out, g)
		}
	}
	return out
}

func compareEngineLabels(a, b string) int {
	if len(a) != len(b) && strings.Trim(a, "0123456789") == "" && strings.Trim(b, "0123456789") == "" {
		return len(a) - len(b) // numbers: "2" before "10"
	}
	return strings.Compare(a, b)
}

// EngineRoutingHandler serves the routing view of the engine named by the
// request's {engine} path value: what the routing view is for the whole
// server, for that data-parallel rank alone. 404 names the engines there
// are; 503 as for the routing view.
func (c *Collector) EngineRoutingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.refuseRouting(w) {
			return
		}
		snap := c.snap.Load()
		e := r.PathValue("engine")
		p, ok := snap.engines.page(e)
		if !ok {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			if len(snap.engines.engines) == 0 {
				_, _ = w.Write([]byte("the upstream's page has no engine label (one engine, or a server without data-parallel ranks): read the routing view itself\n"))
				return
			}
			_, _ = w.Write([]byte("no engine " + strconvQuote(e) + " on the upstream's page; its engines are " + strings.Join(snap.engines.engines, ", ") + "\n"))
			return
		}
		serve.Write(w, r, p)
	})
}

func strconvQuote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
