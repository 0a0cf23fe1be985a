package scrape

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkFetch fetches fixture 13 (44 KB) over loopback from a server
// that holds the page and its gzip ready, so that the figures are the
// sidecar's side of a scrape: asking for identity (the default) against
// asking for gzip and inflating it (--vllm.enable-compression).
func BenchmarkFetch(b *testing.B) {
	page := realPage(&testing.T{})
	gz := gzipped(&testing.T{}, page)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		body := page
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			body = gz
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	for _, ask := range []bool{false, true} {
		b.Run("gzip="+strconv.FormatBool(ask), func(b *testing.B) {
			f, err := NewFetcher(&http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConns: 2}}, srv.URL+"/metrics", 32<<20)
			if err != nil {
				b.Fatal(err)
			}
			f.AskGzip(ask)
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := f.Fetch(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
