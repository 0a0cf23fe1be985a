package main

import (
	"fmt"
	"math"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
)

// pprofGuard serves Go's profiles under /debug/pprof/ with two rules that
// net/http/pprof lacks: a timed profile (CPU, trace, or any ?seconds= delta
// profile) must be shorter than --web.write-timeout, the bound every
// response of the listener has, and only one runs at a time (the CPU
// profile and the trace are process-wide), a second being answered 429
// at once rather than waiting or failing half-way.
type pprofGuard struct {
	bound time.Duration // --web.write-timeout
	mu    sync.Mutex
	until time.Time // when the running timed profile ends; zero when none runs
}

// pprofDefaults are the durations net/http/pprof takes without ?seconds=.
var pprofDefaults = map[string]float64{"profile": 30, "trace": 1}

func (g *pprofGuard) register(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", g.timed(pprof.Index))
	// No /debug/pprof/cmdline: the command line may hold the password of
	// --vllm.scrape-uri.
	mux.HandleFunc("/debug/pprof/cmdline", http.NotFound)
	mux.HandleFunc("/debug/pprof/profile", g.timed(pprof.Profile))
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", g.timed(pprof.Trace))
}

// timed wraps a pprof handler: requests that take no time pass, timed ones
// are checked against the bound and against a profile already running.
func (g *pprofGuard) timed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/")
		secs, timed := pprofDefaults[name]
		if s := r.FormValue("seconds"); s != "" {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || !(v > 0) || math.IsInf(v, 0) {
				http.Error(w, fmt.Sprintf("seconds=%q is not a positive number of seconds; ask for e.g. ?seconds=%d", s, pprofLinkSeconds(g.bound)), http.StatusBadRequest)
				return
			}
			secs, timed = v, true
		}
		if !timed {
			h(w, r)
			return
		}
		d := time.Duration(secs * float64(time.Second))
		if d >= g.bound {
			http.Error(w, fmt.Sprintf("a %s profile of %s is refused: profiles must be shorter than --web.write-timeout=%s, which bounds every response; ask for ?seconds=%d or raise --web.write-timeout", orDefault(name, "delta"), d, g.bound, pprofLinkSeconds(g.bound)), http.StatusBadRequest)
			return
		}
		now := time.Now()
		g.mu.Lock()
		if now.Before(g.until) {
			left := g.until.Sub(now)
			g.mu.Unlock()
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(left.Seconds()))))
			http.Error(w, fmt.Sprintf("another profile is running for %s more; one timed profile at a time, retry after it", left.Round(time.Second)), http.StatusTooManyRequests)
			return
		}
		g.until = now.Add(d)
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.until = time.Time{}
			g.mu.Unlock()
		}()
		h(w, r)
	}
}

// pprofLinkSeconds is the CPU profile length the landing page links to:
// half the bound, at least 1 s and at most 30 s (Go's default).
func pprofLinkSeconds(bound time.Duration) int {
	return max(1, min(30, int(bound.Seconds()/2)))
}

// pprofLinks are the landing page's links to the profiles, shown only when
// they are served: heap and goroutines at once, a CPU profile within the
// bound. No external site.
func pprofLinks(bound time.Duration) []web.LandingLinks {
	s := pprofLinkSeconds(bound)
	return []web.LandingLinks{
		{Address: "/debug/pprof/", Text: "Profiling", Description: "the Go runtime's profiles, behind the same TLS and auth; timed ones shorter than --web.write-timeout, one at a time"},
		{Address: "/debug/pprof/heap", Text: "Heap profile", Description: "memory in use, pprof format"},
		{Address: fmt.Sprintf("/debug/pprof/profile?seconds=%d", s), Text: fmt.Sprintf("CPU profile (%d s)", s), Description: "pprof format; read with go tool pprof"},
	}
}
