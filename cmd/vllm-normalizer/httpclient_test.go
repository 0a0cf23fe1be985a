package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/pagetest"
	"github.com/fos-study/vllm-normalizer/scrape"
)

const tlsPage = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 1\n"

// tlsUpstream is a vLLM started with --ssl-certfile behind a bearer token
// (and, for the basic-auth case, a user): it answers 401 without them.
func tlsUpstream(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, basic := r.BasicAuth()
		if r.Header.Get("Authorization") != "Bearer s3cret" && !(basic && user == "vllm" && pass == "pw") {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Header.Get("Accept-Encoding") != "identity" {
			http.Error(w, "the sidecar asks for identity encoding by default", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(tlsPage))
	}))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, ca
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "http.yml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func fetchWith(t *testing.T, c *http.Client, uri string) ([]byte, error) {
	t.Helper()
	f, err := scrape.NewFetcher(c, uri, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body, _, err := f.Fetch(ctx)
	return body, err
}

// TestUpstreamClientTLS: with --vllm.http-config.file the scrape trusts the
// given CA and sends the bearer token or basic auth; without the CA or the
// token it fails under the reason an operator would look for.
func TestUpstreamClientTLS(t *testing.T) {
	srv, ca := tlsUpstream(t)
	uri := srv.URL + "/metrics"
	for _, c := range []struct {
		name, config string
		reason       string // "" = the page is read
	}{
		{"ca and bearer token", "tls_config:\n  ca_file: " + ca + "\nauthorization:\n  credentials: s3cret\n", ""},
		{"ca and basic auth", "tls_config:\n  ca_file: " + ca + "\nbasic_auth:\n  username: vllm\n  password: pw\n", ""},
		{"ca, wrong token", "tls_config:\n  ca_file: " + ca + "\nauthorization:\n  credentials: nope\n", scrape.ReasonHTTPStatus},
		{"token, no ca", "authorization:\n  credentials: s3cret\n", scrape.ReasonNetwork},
	} {
		t.Run(c.name, func(t *testing.T) {
			client, err := upstreamClient(writeConfig(t, c.config), uri)
			if err != nil {
				t.Fatal(err)
			}
			body, err := fetchWith(t, client, uri)
			if c.reason == "" {
				if err != nil || string(body) != tlsPage {
					t.Fatalf("fetch: %v, body %q", err, body)
				}
				return
			}
			var se *scrape.Error
			if !errors.As(err, &se) || se.Reason != c.reason {
				t.Fatalf("fetch error %v, want reason %s", err, c.reason)
			}
		})
	}
	// Without the file the client is the collector's default one, which
	// does not trust the upstream's certificate.
	if c, err := upstreamClient("", uri); c != nil || err != nil {
		t.Fatalf("no file: client %v, err %v; want nil, nil", c, err)
	}
}

// TestUpstreamClientRejects: a file that cannot work fails at start (and
// --config.check) naming the flag, the rule and the fix.
func TestUpstreamClientRejects(t *testing.T) {
	_, ca := tlsUpstream(t)
	for _, c := range []struct {
		name, config, uri string
		want              []string
	}{
		{"unknown key", "tls_conf:\n  ca_file: x\n", "https://127.0.0.1:1/metrics", []string{"--vllm.http-config.file", "tls_conf", "http_config"}},
		{"missing ca", "tls_config:\n  ca_file: /nonexistent/ca.pem\n", "https://127.0.0.1:1/metrics", []string{"--vllm.http-config.file", "/nonexistent/ca.pem"}},
		{"tls on http", "tls_config:\n  ca_file: " + ca + "\n", "http://127.0.0.1:1/metrics", []string{"tls_config", "http://", "https://127.0.0.1:1/metrics"}},
		{"two credentials", "basic_auth:\n  username: a\n  password: b\n", "https://u:p@127.0.0.1:1/metrics", []string{"basic_auth", "one place"}},
		{"two auth kinds", "basic_auth:\n  username: a\nauthorization:\n  credentials: x\n", "https://127.0.0.1:1/metrics", []string{"--vllm.http-config.file", "basic_auth"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := upstreamClient(writeConfig(t, c.config), c.uri)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "u:p@") {
				t.Errorf("error shows the URI's password: %v", err)
			}
		})
	}
}

// selfSigned writes a self-signed certificate and key for 127.0.0.1 to dir
// and returns their paths and the certificate.
func selfSigned(t *testing.T, dir, name string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

// TestUpstreamClientCertificate: a vLLM that requires a client certificate
// (--ssl-cert-reqs 2 with --ssl-ca-certs) is read with cert_file and
// key_file, and refuses the scrape without them.
func TestUpstreamClientCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, clientCert := selfSigned(t, dir, "sidecar")
	pool := x509.NewCertPool()
	pool.AddCert(clientCert)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(tlsPage)) }))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(dir, "server-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	uri := srv.URL + "/metrics"
	with, err := upstreamClient(writeConfig(t, "tls_config:\n  ca_file: "+ca+"\n  cert_file: "+certFile+"\n  key_file: "+keyFile+"\n"), uri)
	if err != nil {
		t.Fatal(err)
	}
	if body, err := fetchWith(t, with, uri); err != nil || string(body) != tlsPage {
		t.Fatalf("with the client certificate: %v, body %q", err, body)
	}
	without, err := upstreamClient(writeConfig(t, "tls_config:\n  ca_file: "+ca+"\n"), uri)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fetchWith(t, without, uri); err == nil {
		t.Fatal("the upstream that requires a client certificate was read without one")
	}
}

// TestUpstreamClientProxy: proxy_url sends the scrape through the given
// proxy; without it no proxy is used, not even one from the environment.
func TestUpstreamClientProxy(t *testing.T) {
	var via atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Host != "vllm.invalid:8000" {
			http.Error(w, "unexpected target "+r.URL.String(), http.StatusBadGateway)
			return
		}
		via.Add(1)
		_, _ = w.Write([]byte(tlsPage))
	}))
	t.Cleanup(proxy.Close)
	const uri = "http://vllm.invalid:8000/metrics"
	c, err := upstreamClient(writeConfig(t, "proxy_url: "+proxy.URL+"\n"), uri)
	if err != nil {
		t.Fatal(err)
	}
	if body, err := fetchWith(t, c, uri); err != nil || string(body) != tlsPage || via.Load() != 1 {
		t.Fatalf("through the proxy: %v, body %q, proxied %d", err, body, via.Load())
	}
	t.Setenv("HTTP_PROXY", proxy.URL)
	c, err = upstreamClient(writeConfig(t, "follow_redirects: true\n"), uri)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fetchWith(t, c, uri); err == nil || via.Load() != 1 {
		t.Errorf("without proxy_url the scrape went through HTTP_PROXY (err %v, proxied %d)", err, via.Load())
	}
}

// TestWebConfigCheck: a --web.config.file the listeners cannot use fails
// --config.check (and the start) naming the flag, the file and the fix;
// a usable one passes.
func TestWebConfigCheck(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir, "web")
	for _, c := range []struct {
		name, config string
		want         []string
	}{
		{"no key", "tls_server_config:\n  cert_file: " + certFile + "\n", []string{"--web.config.file", "missing one of key or key_file", "fix the file"}},
		{"plain password", "basic_auth_users:\n  admin: s3cret\n", []string{"--web.config.file", "bcrypt", "htpasswd"}},
		{"unknown key", "tls_config:\n  cert_file: x\n", []string{"--web.config.file", "tls_config", "tls_server_config"}},
		{"valid", "tls_server_config:\n  cert_file: " + certFile + "\n  key_file: " + keyFile + "\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeConfig(t, c.config)
			out, errOut := tempFile(t), tempFile(t)
			// No GOMAXPROCS or memory limit for the test process: run sets them before checking.
			rc := run([]string{"--config.check", "--runtime.gomaxprocs=0", "--no-auto-gomemlimit", "--web.config.file=" + path}, out, errOut)
			stderr, _ := os.ReadFile(errOut.Name())
			if c.want == nil {
				if rc != 0 {
					t.Fatalf("valid file: exit %d, %s", rc, stderr)
				}
				return
			}
			if rc != 1 {
				t.Fatalf("exit %d, want 1; stderr %q", rc, stderr)
			}
			for _, w := range append(c.want, path) {
				if !strings.Contains(string(stderr), w) {
					t.Errorf("stderr %q does not say %q", stderr, w)
				}
			}
		})
	}
}

func tempFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestUpstreamClientRedirects: with --vllm.http-config.file the redirect
// rule is the one without it (same host, followed); follow_redirects: false
// follows none, and the redirect fails the scrape as http_status with an
// error that names the option and the fix. Another host is never followed.
func TestUpstreamClientRedirects(t *testing.T) {
	rs := pagetest.ServeRedirects(t, []byte(tlsPage), http.StatusMovedPermanently)
	up := rs.Up
	for _, c := range []struct {
		config, path string
		want         []string // nil: the page is read
	}{
		{"follow_redirects: true\n", "/metrics", nil},
		{"follow_redirects: false\n", "/metrics", []string{"301 Moved Permanently", "/metrics/", "follow_redirects is false in --vllm.http-config.file", "--vllm.scrape-uri"}},
		{"follow_redirects: true\n", "/elsewhere", []string{"another host", "--vllm.scrape-uri"}},
		{"follow_redirects: false\n", "/elsewhere", []string{"another host", "--vllm.scrape-uri"}},
	} {
		client, err := upstreamClient(writeConfig(t, c.config), up.URL+c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := fetchWith(t, client, up.URL+c.path)
		if c.want == nil {
			if err != nil || string(body) != tlsPage {
				t.Errorf("%s%s: %v, body %q", c.config, c.path, err, body)
			}
			continue
		}
		var se *scrape.Error
		if !errors.As(err, &se) || se.Reason != scrape.ReasonHTTPStatus {
			t.Errorf("%s%s: error %v, want reason %s", c.config, c.path, err, scrape.ReasonHTTPStatus)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s%s: error %q does not say %q", c.config, c.path, err, w)
			}
		}
	}
	if rs.OtherHit() {
		t.Error("a redirect to another host was followed")
	}
}
