package e2e

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
	"github.com/fos-study/vllm-normalizer/scrape"
)

// selfSigned writes a certificate for 127.0.0.1 and its key to dir and
// returns their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "vllm-normalizer e2e"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true,

		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTLSAndBasicAuth: with --web.config.file the sidecar serves https only,
// and only to the right user and password.
func TestTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("right-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig := filepath.Join(dir, "web.yml")
	writeFile(t, webConfig, "tls_server_config:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+
		"\nbasic_auth_users:\n  router: "+string(hash)+"\n")

	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, static(fixture(t, "13")))
	addr := testbin.FreeAddr(t)
	p := testbin.StartAt(t, addr, "https", sidecarArgs("http://"+ln.Addr().String()+"/metrics", fastInterval, fastTimeout,
		"--web.config.file="+webConfig)...)

	https := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	defer https.CloseIdleConnections()
	do := func(path, user, pass string) response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, p.URL+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := https.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		return response{status: resp.StatusCode, body: []byte(b.String())}
	}

	waitFor(t, settle, "vllm_up 1 over https", func() bool {
		r := do("/metrics", "router", "right-password")
		return r.status == http.StatusOK && strings.Contains(string(r.body), "\nvllm_up 1\n")
	})
	for _, path := range []string{"/metrics", "/metrics/routing", "/metrics/genai"} {
		r := do(path, "router", "right-password")
		switch {
		case r.status == http.StatusOK:
			mustParse(t, r.body)
			if path == "/metrics/genai" && !strings.Contains(string(r.body), "gen_ai_server_time_to_first_token_seconds_count") {
				t.Errorf("https %s with the right password served no GenAI histogram:\n%s", path, r.body)
			}
		case path == "/metrics/routing" && r.status == http.StatusServiceUnavailable:
			// Authenticated, and the routing view's own staleness rule
			// answered: a busy test machine can delay a scrape past three
			// 200 ms intervals. Auth is what this test is about.
		default:
			t.Errorf("https %s with the right password answered %d", path, r.status)
		}
		for _, c := range []struct{ user, pass string }{{"router", "wrong-password"}, {"", ""}, {"someone", "right-password"}} {
			r := do(path, c.user, c.pass)
			if r.status != http.StatusUnauthorized {
				t.Errorf("https %s as %q/%q answered %d, want 401", path, c.user, c.pass, r.status)
			}
			if strings.Contains(string(r.body), "vllm_up") || strings.Contains(string(r.body), "gen_ai_") {
				t.Errorf("https %s as %q/%q served metrics", path, c.user, c.pass)
			}
		}
	}

	// Plain http to the TLS port: no page, whatever the credentials.
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	req.SetBasicAuth("router", "right-password")
	if resp, err := client.Do(req); err == nil {
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(b.String(), "vllm_up") {
			t.Errorf("plain http to the TLS port answered %d with a page:\n%s", resp.StatusCode, b.String())
		}
	}
}

// TestTargetParameterIgnored: the upstream is fixed by a flag; a target
// parameter in a request never makes the sidecar contact another server.
func TestTargetParameterIgnored(t *testing.T) {
	vllm := newSwitchable(static(fixture(t, "13")))
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, vllm)
	other := newSwitchable(static(v1Page(1, 1)))
	oln := listen(t, "127.0.0.1:0")
	serveOn(t, oln, other)
	p := testbin.Start(t, sidecarArgs("http://"+ln.Addr().String()+"/metrics", fastInterval, fastTimeout)...)

	target := "http://" + oln.Addr().String() + "/"
	for _, path := range []string{"/metrics", "/metrics/routing", "/metrics/genai", "/", "/probe", "/-/reload"} {
		for _, q := range []string{"?target=" + target, "?target=" + oln.Addr().String() + "&module=vllm", "?uri=" + target} {
			_, _ = get(client, p.URL+path+q, nil)
		}
	}
	before := vllm.requests.Load()
	waitFor(t, settle, "two more scrapes of the configured upstream", func() bool { return vllm.requests.Load() >= before+2 })
	if n := other.requests.Load(); n != 0 {
		t.Errorf("the server named in ?target= got %d requests", n)
	}
	s, _ := metrics(t, p)
	if _, ok := s[`vllm:num_requests_running{engine="0",model_name="m"}`]; ok {
		t.Error("the page holds the other server's series")
	}
}

// TestScrapeURIPasswordNeverShown: a password in --vllm.scrape-uri reaches
// the upstream, and never a log line or a page, on success and on every
// kind of failure.
func TestScrapeURIPasswordNeverShown(t *testing.T) {
	const secret = "hunter2-TOPSECRET"
	good := fixture(t, "13")
	authed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, pw, ok := r.BasicAuth(); !ok || u != "scraper" || pw != secret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		static(good).ServeHTTP(w, r)
	})
	up := newSwitchable(authed)
	ln := listen(t, "127.0.0.1:0")
	srv := serveOn(t, ln, up)
	p := testbin.Start(t, sidecarArgs("http://scraper:"+secret+"@"+ln.Addr().String()+"/metrics", fastInterval, fastTimeout,
		"--log.level=debug")...)

	check := func(when string) {
		t.Helper()
		if strings.Contains(p.Logs(), secret) {
			t.Errorf("%s: the password is in the logs:\n%s", when, p.Logs())
		}
		for _, path := range []string{"/metrics", "/metrics/routing", "/metrics/genai", "/"} {
			if r, err := get(client, p.URL+path, nil); err == nil && strings.Contains(string(r.body), secret) {
				t.Errorf("%s: the password is on %s", when, path)
			}
		}
	}
	waitFor(t, settle, "vllm_up 1 with basic auth to the upstream", func() bool {
		q, _ := quick(t, p)
		return q["vllm_up"] == 1
	})
	check("after a successful scrape")

	for _, f := range []struct {
		reason string
		h      http.Handler
	}{
		{scrape.ReasonHTTPStatus, http.NotFoundHandler()},
		{scrape.ReasonParse, static([]byte("vllm:x{a=b 1\n"))},
		{scrape.ReasonTimeout, hang(10 * time.Second)},
		{scrape.ReasonEmpty, static(nil)},
	} {
		up.set(f.h)
		waitFor(t, settle, "a "+f.reason+" failure", func() bool {
			q, _ := quick(t, p)
			return q.failures(f.reason) >= 1
		})
		check("after a " + f.reason + " failure")
	}
	_ = srv.Close()
	waitFor(t, settle, "a refused failure", func() bool {
		q, _ := quick(t, p)
		return q.failures(scrape.ReasonRefused) >= 1
	})
	check("after a refused failure")
	if !strings.Contains(p.Logs(), "scraper:xxxxx@") {
		t.Errorf("the logs do not show the redacted URI (scraper:xxxxx@...):\n%s", p.Logs())
	}
}

// TestPprofOffByDefault: profiling is served only with --web.enable-pprof.
func TestPprofOffByDefault(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, static(v1Page(1, 1)))
	uri := "http://" + ln.Addr().String() + "/metrics"
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, http.StatusNotFound},
		{[]string{"--web.enable-pprof"}, http.StatusOK},
	} {
		p := testbin.Start(t, sidecarArgs(uri, fastInterval, fastTimeout, c.args...)...)
		if got := mustGet(t, p.URL+"/debug/pprof/").status; got != c.want {
			t.Errorf("with %v, /debug/pprof/ answered %d, want %d", c.args, got, c.want)
		}
		// The command line may hold the scrape URI's password.
		if got := mustGet(t, p.URL+"/debug/pprof/cmdline").status; got != http.StatusNotFound {
			t.Errorf("with %v, /debug/pprof/cmdline answered %d, want 404", c.args, got)
		}
		_ = p.Stop(5 * time.Second)
	}
}

// TestDockerfileRunsAsNonRoot: the image's last USER is neither empty nor
// root.
func TestDockerfileRunsAsNonRoot(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(), "Dockerfile"))
	if os.IsNotExist(err) {
		t.Skip("no Dockerfile at the repository root")
	}
	if err != nil {
		t.Fatal(err)
	}
	user := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			user = "" // a new stage starts as root unless it says otherwise
			if strings.HasSuffix(line, ":nonroot") || strings.Contains(line, ":nonroot ") {
				user = "nonroot (base image)"
			}
		case "USER":
			if len(fields) > 1 {
				user = fields[1]
			}
		}
	}
	name, _, _ := strings.Cut(user, ":")
	if user == "" || name == "root" || name == "0" {
		t.Errorf("the final image runs as %q; add USER with a non-root uid", user)
	}
}
