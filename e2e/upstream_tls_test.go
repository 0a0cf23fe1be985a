package e2e

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// TestUpstreamTLS: a vLLM served over TLS with a bearer token is scraped
// with --vllm.http-config.file (its CA and the token); without the file
// the same upstream fails the scrape with reason network, and with the
// wrong token with reason http_status.
func TestUpstreamTLS(t *testing.T) {
	page := v1Page(10, 20)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		static(page).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	good := filepath.Join(dir, "http.yml")
	writeFile(t, good, "tls_config:\n  ca_file: ca.pem\nauthorization:\n  credentials_file: token\n")
	writeFile(t, filepath.Join(dir, "token"), "s3cret\n")
	wrong := filepath.Join(dir, "wrong.yml")
	writeFile(t, wrong, "tls_config:\n  ca_file: ca.pem\nauthorization:\n  credentials: nope\n")
	uri := srv.URL + "/metrics"

	for _, c := range []struct {
		name   string
		args   []string
		up     float64
		reason string
	}{
		{"http config", []string{"--vllm.http-config.file=" + good}, 1, ""},
		{"no http config", nil, 0, "network"},
		{"wrong token", []string{"--vllm.http-config.file=" + wrong}, 0, "http_status"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := testbin.Start(t, sidecarArgs(uri, fastInterval, fastTimeout, c.args...)...)
			var s series
			waitFor(t, settle, "a first scrape", func() bool {
				s, _ = metrics(t, p)
				return s["vllm_up"] == 1 || (c.reason != "" && s.failures(c.reason) > 0)
			})
			if s["vllm_up"] != c.up {
				t.Fatalf("vllm_up %v, want %v\n%s", s["vllm_up"], c.up, p.Logs())
			}
			if c.up == 1 && len(s.upstreamSeries()) == 0 {
				t.Errorf("scraped over TLS but the page has no upstream series")
			}
			if c.reason != "" && s.failures(c.reason) == 0 {
				t.Errorf("no failure counted under reason %s", c.reason)
			}
		})
	}
}
