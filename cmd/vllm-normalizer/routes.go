package main

import (
	"net/http"
	"strings"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/fos-study/vllm-normalizer/collector"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// Fixed paths on the main mux (same TLS and auth as the pages).
const (
	diagnosisPagePath = "/diagnosis"
	diagnosisAPIPath  = "/api/v1/diagnosis"
	// genaiPath is the OpenTelemetry GenAI view's path.
	genaiPath = "/metrics/genai"
	pprofPath = "/debug/pprof/"
)

// route is one endpoint of the main listener. flags.routes is the one
// table of them: newMux serves it, the landing page links it and check
// keeps the path flags off its fixed paths.
type route struct {
	// pattern is an http.ServeMux pattern; one ending in / holds its
	// subtree.
	pattern string
	// flag names the flag that sets pattern; "" for a fixed path, which
	// --web.telemetry-path and --web.routing-path may not take.
	flag string
	// handler builds the endpoint from what run wires; nil reserves the
	// path without serving it (pprof without --web.enable-pprof).
	handler func(servedBy) http.Handler
	// links are the route's links on the landing page.
	links []web.LandingLinks
}

// servedBy is what the routes' handlers serve from.
type servedBy struct {
	coll   *collector.Collector
	diag   *diagnosis.Diagnoser
	reload func() error
}

// routes is the main listener's route table, in the landing page's order.
func (f *flags) routes() []route {
	link := func(address, text, description string) []web.LandingLinks {
		return []web.LandingLinks{{Address: address, Text: text, Description: description}}
	}
	ok := func(servedBy) http.Handler { return http.HandlerFunc(okHandler) }
	rs := []route{
		{pattern: f.telemetryPath, flag: "--web.telemetry-path",
			handler: func(s servedBy) http.Handler { return s.coll.MetricsHandler() },
			links:   link(f.telemetryPath, "Metrics", "the server's metrics under current names, derived gauges, statuses, sidecar health")},
		{pattern: f.routingPath, flag: "--web.routing-path",
			handler: func(s servedBy) http.Handler { return s.coll.RoutingHandler() },
			links:   link(f.routingPath, "Routing view", "one series per model for routers")},
		{pattern: genaiPath,
			handler: func(s servedBy) http.Handler { return s.coll.GenAIHandler() },
			links:   link(genaiPath, "GenAI view", "OpenTelemetry gen_ai.server.* histograms per model, for panels beside a gateway's")},
		// One data-parallel engine's routing view, for routers that
		// address ranks as endpoints.
		{pattern: strings.TrimSuffix(f.routingPath, "/") + "/engines/{engine}", flag: "--web.routing-path",
			handler: func(s servedBy) http.Handler { return s.coll.EngineRoutingHandler() }},
		{pattern: diagnosisPagePath,
			handler: func(s servedBy) http.Handler { return s.diag.PageHandler() },
			links:   link(diagnosisPagePath, "Diagnosis", "the five-step triage against the pod's own past, with charts")},
		{pattern: diagnosisAPIPath,
			handler: func(s servedBy) http.Handler { return s.diag.APIHandler() },
			links:   link(diagnosisAPIPath, "Diagnosis API", "the same as JSON")},
		{pattern: "/-/healthy", handler: ok},
		{pattern: "/-/ready", handler: ok},
		{pattern: "/-/reload", handler: func(s servedBy) http.Handler { return reloadHandler(f.enableLife, s.reload) }},
		{pattern: pprofPath},
	}
	if f.enablePprof {
		pprof := &rs[len(rs)-1]
		pprof.handler = func(servedBy) http.Handler {
			mux := http.NewServeMux()
			(&pprofGuard{bound: f.writeTimeout}).register(mux)
			return mux
		}
		pprof.links = pprofLinks(f.writeTimeout)
	}
	return rs
}

// reserved names the fixed route that path would take, "" when none.
func (f *flags) reserved(path string) string {
	for _, r := range f.routes() {
		if r.flag == "" && (path == r.pattern || strings.HasSuffix(r.pattern, "/") && strings.HasPrefix(path, r.pattern)) {
			return r.pattern
		}
	}
	return ""
}

// newMux serves the route table, and the landing page at "/" unless a page
// is served there.
func newMux(f *flags, coll *collector.Collector, diag *diagnosis.Diagnoser, reload func() error, upstream string) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	var links []web.LandingLinks
	for _, r := range f.routes() {
		if r.handler == nil {
			continue
		}
		mux.Handle(r.pattern, r.handler(servedBy{coll: coll, diag: diag, reload: reload}))
		links = append(links, r.links...)
	}
	if f.telemetryPath == "/" || f.routingPath == "/" {
		return mux, nil
	}
	landing, err := web.NewLandingPage(web.LandingConfig{
		Name:        "vllm-normalizer",
		Description: "Stable, router-ready metrics for " + mapping.ServerList(),
		Version:     versionText(),
		Links:       links,
		// The toolkit's own profiling box links to an external upload
		// site and to a 60 s profile; pprofLinks replaces it.
		Profiling: "false",
		ExtraHTML: f.listenersText(upstream),
	})
	if err != nil {
		return nil, err
	}
	mux.Handle("/", landing)
	return mux, nil
}

// reloadHandler is POST /-/reload, forbidden unless --web.enable-lifecycle.
func reloadHandler(enabled bool, reload func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !enabled {
			http.Error(w, "Lifecycle API is not enabled; start with --web.enable-lifecycle.", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			w.Header().Set("Allow", "POST, PUT")
			http.Error(w, "use POST to reload the configuration", http.StatusMethodNotAllowed)
			return
		}
		if err := reload(); err != nil {
			http.Error(w, "reload failed, previous configuration kept: "+err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("configuration reloaded\n"))
	}
}

func okHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("OK\n"))
}
