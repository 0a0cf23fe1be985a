package pagetest

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Redirects are an upstream that answers with redirects, and the other
// host one of them points at.
type Redirects struct {
	// Up serves page at /metrics/; /metrics redirects there (as vLLM
	// versions that mount /metrics/ do), /elsewhere to Other's
	// /metrics?x=1 (302) and any other path to itself with an x appended
	// (302): a loop.
	Up *httptest.Server
	// Other serves page at any path and records that it was contacted.
	Other *httptest.Server
	hit   atomic.Bool
}

// OtherHit reports whether Other was contacted.
func (r *Redirects) OtherHit() bool { return r.hit.Load() }

// ServeRedirects starts Redirects serving page, closed when t ends; code
// is the status /metrics redirects with (a 3xx).
func ServeRedirects(t testing.TB, page []byte, code int) *Redirects {
	t.Helper()
	r := &Redirects{}
	r.Other = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.hit.Store(true)
		_, _ = w.Write(page)
	}))
	t.Cleanup(r.Other.Close)
	r.Up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/metrics":
			http.Redirect(w, req, "/metrics/", code)
		case "/metrics/":
			_, _ = w.Write(page)
		case "/elsewhere":
			http.Redirect(w, req, r.Other.URL+"/metrics?x=1", http.StatusFound)
		default:
			http.Redirect(w, req, req.URL.Path+"x", http.StatusFound)
		}
	}))
	t.Cleanup(r.Up.Close)
	return r
}
