package demo

import (
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// ServeHTTP serves the current page in text format 0.0.4 at any path,
// gzip-compressed when the request accepts it. GET and HEAD only.
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	page := u.Page()
	h := w.Header()
	h.Set("Content-Type", exposition.ContentTypeText)
	h.Add("Vary", "Accept-Encoding")
	if !acceptsGzip(r.Header.Values("Accept-Encoding")) {
		h.Set("Content-Length", strconv.Itoa(len(page)))
		if r.Method != http.MethodHead {
			_, _ = w.Write(page)
		}
		return
	}
	h.Set("Content-Encoding", "gzip")
	if r.Method == http.MethodHead {
		return
	}
	zw := gzip.NewWriter(w)
	_, _ = zw.Write(page)
	_ = zw.Close()
}

// acceptsGzip reports whether Accept-Encoding values list gzip (or *) with
// a non-zero quality.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "x-gzip" && coding != "*" {
				continue
			}
			q := 1.0
			for p := range strings.SplitSeq(params, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
						q = f
					}
				}
			}
			if q > 0 {
				return true
			}
		}
	}
	return false
}
