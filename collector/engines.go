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
// ranks as endpoints. Pages no router asks for cost nothing.
type engineViews struct {
	canon    []exposition.Family // the canonical page, all engines
	derived  []exposition.Family // the full page's derived gauges, per model_name and engine
	own      []exposition.Family // the routing view's own series (vllm_up, age)
	roles    *mapping.Roles
	upstream string
	style    func(string) string
	role     string

	listOnce sync.Once
	list     []string // engine label values on the page, sorted (engines)

	mu    sync.Mutex
	pages map[string]*serve.Page
}

// newEngineViews keeps what the views are built from; nil canon gives no
// engine.
func newEngineViews(canon, derived, own []exposition.Family, roles *mapping.Roles, upstream string, style func(string) string, role string) *engineViews {
	return &engineViews{canon: canon, derived: derived, own: own, roles: roles, upstream: upstream, style: style, role: role, pages: map[string]*serve.Page{}}
}

// engines lists the engines of the page, on first use: only a request for
// an engine's view needs them.
func (v *engineViews) engines() []string {
	v.listOnce.Do(func() {
		for _, f := range v.canon {
			for _, s := range f.Samples {
				if e := s.Labels.Get(mapping.LabelEngine); e != "" && !slices.Contains(v.list, e) {
					v.list = append(v.list, e)
				}
			}
		}
		slices.SortFunc(v.list, compareEngineLabels)
	})
	return v.list
}

// page returns engine e's routing view, false when the page has no such
// engine.
func (v *engineViews) page(e string) (*serve.Page, bool) {
	if !slices.Contains(v.engines(), e) {
		return nil, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if p, ok := v.pages[e]; ok {
		return p, true
	}
	canon := onlyEngine(v.canon, e, false)
	derived := onlyEngine(v.derived, e, true)
	view := withRole(routing.View(canon, derived, v.roles, v.upstream, v.style), v.role)
	var enc serve.Encoder
	p := enc.Prepare(merge(view, v.own), nil)
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
			if len(snap.engines.engines()) == 0 {
				_, _ = w.Write([]byte("the upstream's page has no engine label (one engine, or a server without data-parallel ranks): read the routing view itself\n"))
				return
			}
			_, _ = w.Write([]byte("no engine " + strconvQuote(e) + " on the upstream's page; its engines are " + strings.Join(snap.engines.engines(), ", ") + "\n"))
			return
		}
		serve.Write(w, r, p)
	})
}

func strconvQuote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
