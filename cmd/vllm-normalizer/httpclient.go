package main

import (
	"fmt"
	"net/http"

	"github.com/prometheus/common/config"

	"github.com/fos-study/vllm-normalizer/internal/setting"
	"github.com/fos-study/vllm-normalizer/scrape"
)

// upstreamClient is the HTTP client of the scrape: nil (the collector's own,
// plain client) without --vllm.http-config.file, else one built by
// prometheus/common from the file's HTTPClientConfig (TLS, CA, client
// certificates, bearer token, basic auth, proxy). The fetcher's request
// headers, timeout and body cap apply either way.
func upstreamClient(path, scrapeURI string) (*http.Client, error) {
	if path == "" {
		return nil, nil
	}
	cfg, _, err := config.LoadHTTPConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("--vllm.http-config.file %s: %w; the file holds one Prometheus http_config (tls_config, authorization, basic_auth, proxy_url, ...)", path, err)
	}
	u, err := setting.ScrapeURL("collector.Config.ScrapeURI", scrapeURI) // the collector's rule, named by its flag
	if err != nil {
		return nil, flagged(err)
	}
	if u.User != nil && cfg.BasicAuth != nil {
		return nil, fmt.Errorf("--vllm.http-config.file %s sets basic_auth and --vllm.scrape-uri carries a user too; give the credentials in one place", path)
	}
	if u.Scheme != "https" && cfg.TLSConfig != (config.TLSConfig{}) {
		return nil, fmt.Errorf("--vllm.http-config.file %s sets tls_config but --vllm.scrape-uri is %s://: TLS would never be used; scrape https://%s%s or remove tls_config", path, u.Scheme, u.Host, u.Path)
	}
	// Built here, not at the first scrape, so that a CA or certificate
	// that cannot be read fails the start and --config.check.
	c, err := config.NewClientFromConfig(*cfg, "vllm_upstream", config.WithUserAgent("vllm-normalizer"))
	if err != nil {
		return nil, fmt.Errorf("--vllm.http-config.file %s: %w", path, err)
	}
	if cfg.FollowRedirects {
		// As without the file: redirects on the same host only.
		c.CheckRedirect = scrape.SameHostRedirects
	}
	return c, nil
}
