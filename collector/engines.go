package collector

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

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
	in   routing.Input       // the scrape's routing input, all engines
	own  []exposition.Family // the routing view's own series (vllm_up, age)
	role string

	// Made on first use (list): only a request for an engine's view needs
	// them. Linear in the page's samples.
	listOnce sync.Once
	engines  []string            // engine label values on the page, sorted
	known    map[string]struct{} // engines, for lookups
	// notFound ends the 404 body of an unknown engine: built once per
	// scrape, bounded whatever the page prints.
	notFound string

	mu    sync.Mutex
	pages map[string]*serve.Page
}

// newEngineViews keeps what the views are built from: in's canonical page,
// none without one.
func newEngineViews(in routing.Input, own []exposition.Family, role string) *engineViews {
	return &engineViews{in: in, own: own, role: role, pages: map[string]*serve.Page{}}
}

// list makes the engine list, its lookup set and the 404 body, once.
func (v *engineViews) list() *engineViews {
	v.listOnce.Do(func() {
		v.known = map[string]struct{}{}
		for _, f := range v.in.Canon {
			for _, s := range f.Samples {
				if e := s.Labels.Get(mapping.LabelEngine); e != "" {
					v.known[e] = struct{}{}
				}
			}
		}
		v.engines = slices.Collect(maps.Keys(v.known))
		slices.SortFunc(v.engines, compareEngineLabels)
		v.notFound = "the upstream's page has no engine label (one engine, or a server without data-parallel ranks): read the routing view itself\n"
		if len(v.engines) > 0 {
			v.notFound = "its engines are " + boundedList(v.engines, "engines") + "\n"
		}
	})
	return v
}

// An error body names at most errorListItems values of a list, each cut at
// errorItemBytes: a page of thousands of engines with long names, or a
// long request, must not make every error megabytes.
const (
	errorListItems = 5
	errorItemBytes = 64
)

// boundedList names the first few items, each cut short, and how many
// there are ("0, 1, 2, 3, 4, … (9000 engines)"; what is plural, made
// singular for one item).
func boundedList(items []string, what string) string {
	shown := make([]string, 0, min(len(items), errorListItems))
	for _, it := range items[:min(len(items), errorListItems)] {
		shown = append(shown, boundedQuote(it))
	}
	list := strings.Join(shown, ", ")
	if len(items) > errorListItems {
		list += ", …"
	}
	if len(items) == 1 {
		what = strings.TrimSuffix(what, "s") // one engine, one state
	}
	return fmt.Sprintf("%s (%d %s)", list, len(items), what)
}

// boundedQuote quotes s, cut at errorItemBytes (on a rune boundary) with
// "…" when longer.
func boundedQuote(s string) string {
	if len(s) <= errorItemBytes {
		return strconv.Quote(s)
	}
	cut := errorItemBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

// noEngineViews is what a snapshot without a scrape serves: no engine.
func noEngineViews(role string) *engineViews { return newEngineViews(routing.Input{}, nil, role) }

// page returns engine e's routing view, false when the page has no such
// engine.
func (v *engineViews) page(e string) (*serve.Page, bool) {
	if _, ok := v.list().known[e]; !ok {
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
			if list := snap.engines.list(); len(list.engines) == 0 {
				_, _ = io.WriteString(w, list.notFound)
				return
			}
			_, _ = io.WriteString(w, "no engine "+boundedQuote(e)+" on the upstream's page; "+snap.engines.list().notFound)
			return
		}
		serve.Write(w, r, p)
	})
}
