package e2e

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// A server no built-in profile knows: its own prefix, its own model label,
// KV usage in percent.
const acmeProfile = `version: 1
server: acme
detect:
  prefixes: ["acme:"]
labels:
  model: served_model
  engine: ""
  process: []
roles:
  - role: requests_running
    family: batch_size
  - role: requests_waiting
    family: queue_depth
  - role: kv_cache_usage
    family: kv_used_percent
    scale: %s
  - role: prompt_tokens
    family: prompt_tokens_total
  - role: generation_tokens
    family: output_tokens_total
`

// acmePage is the made-up server's page; its token counters grow by 500
// and 250 a second of wall time, whenever and however often it is asked
// (a truth that does not hang on the scrape cadence a busy machine keeps).
func acmePage() http.Handler {
	start := time.Now()
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		sec := time.Since(start).Seconds()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		fmt.Fprintf(w, `# HELP acme:batch_size Requests in the running batch.
# TYPE acme:batch_size gauge
acme:batch_size{served_model="m1"} 3
# TYPE acme:queue_depth gauge
acme:queue_depth{served_model="m1"} 2
# TYPE acme:kv_used_percent gauge
acme:kv_used_percent{served_model="m1"} 40
# TYPE acme:prompt_tokens_total counter
acme:prompt_tokens_total{served_model="m1"} %g
# TYPE acme:output_tokens_total counter
acme:output_tokens_total{served_model="m1"} %g
`, 500*sec, 250*sec)
	})
}

// TestEngineProfileFile: a server the build knows nothing about is read
// from --engine.profile-file: its roles come out under the canonical names
// with model_name, its counters are derived into rates, the page says which
// server it is; editing the file and reloading takes effect without a
// restart, and a broken edit keeps the previous profiles.
func TestEngineProfileFile(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, acmePage())
	uri := "http://" + ln.Addr().String() + "/metrics"
	path := filepath.Join(t.TempDir(), "acme.yaml")
	writeFile(t, path, fmt.Sprintf(acmeProfile, "0.01"))

	// The derived gauges are on the compatibility page (the routing
	// listener's /metrics), not on the endpoint pickers' /metrics/routing.
	routingAddr := testbin.FreeAddr(t)
	p := testbin.Start(t, sidecarArgs(uri, fastInterval, fastTimeout, "--engine.profile-file="+path, "--web.enable-lifecycle", "--web.routing-listen-address="+routingAddr)...)
	routing := func() series {
		r := mustGet(t, "http://"+routingAddr+"/metrics")
		if r.status != http.StatusOK {
			return nil
		}
		return mustParse(t, r.body)
	}
	const rate = `vllm_derived_prompt_tokens_per_second{model_name="m1",role="both",window="2s"}`
	waitFor(t, settle, "the made-up server's roles and rates on the routing view", func() bool {
		s := routing()
		return s[rate] > 0 && s[`vllm:kv_cache_usage_perc{model_name="m1",role="both"}`] > 0
	})
	s := routing()
	for k, want := range map[string]float64{
		`vllm:num_requests_running{model_name="m1",role="both"}`: 3,
		`vllm:num_requests_waiting{model_name="m1",role="both"}`: 2,
		`vllm:kv_cache_usage_perc{model_name="m1",role="both"}`:  0.4,
	} {
		if got, ok := s[k]; !ok || got != want {
			t.Errorf("routing view %s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	// 500 prompt tokens a second, 250 generated; 30 % for the delay between
	// a scrape's timestamp and the upstream's reading on a busy machine.
	gen := `vllm_derived_generation_tokens_per_second{model_name="m1",role="both",window="2s"}`
	if r, g := s[rate], s[gen]; r < 350 || r > 650 || g < 175 || g > 325 || math.Abs(r-2*g) > 1e-6*r {
		t.Errorf("derived rates prompt %v, generation %v; want 500/s and 250/s within 30 %%, prompt twice generation", r, g)
	}
	full, _ := metrics(t, p)
	if !hasSeries(full, "vllm_normalizer_upstream_info", `server="acme"`) {
		t.Errorf("vllm_normalizer_upstream_info does not name server acme: %v", full.with("vllm_normalizer_upstream_info"))
	}
	// The native families stay on the full page as printed.
	if full[`acme:batch_size{served_model="m1"}`] != 3 {
		t.Errorf("the full page lost acme:batch_size: %v", full.with("acme:"))
	}

	// Edit the profile (another scale for KV usage) and reload.
	writeFile(t, path, fmt.Sprintf(acmeProfile, "0.02"))
	if r := post(t, p.URL+"/-/reload"); r != http.StatusOK {
		t.Fatalf("POST /-/reload answered %d\n%s", r, p.Logs())
	}
	waitFor(t, settle, "KV usage read with the reloaded profile's scale", func() bool {
		return routing()[`vllm:kv_cache_usage_perc{model_name="m1",role="both"}`] == 0.8
	})
	// A broken edit is refused, naming the file and the rule; the last
	// good profiles stay.
	writeFile(t, path, fmt.Sprintf(acmeProfile, "0.02")+"  - role: no_such_role\n    family: x\n")
	if r := post(t, p.URL+"/-/reload"); r != http.StatusInternalServerError {
		t.Fatalf("POST /-/reload of a broken profile answered %d, want 500", r)
	}
	time.Sleep(100 * time.Millisecond)
	if !strings.Contains(p.Logs(), `no_such_role`) || !strings.Contains(p.Logs(), "acme.yaml") {
		t.Errorf("the log does not name the bad role:\n%s", p.Logs())
	}
	// A contradictory edit (the queue served as the running batch) is
	// refused the same way.
	writeFile(t, path, strings.Replace(fmt.Sprintf(acmeProfile, "0.02"), "family: batch_size", "family: queue_depth", 1))
	if r := post(t, p.URL+"/-/reload"); r != http.StatusInternalServerError {
		t.Fatalf("POST /-/reload of a profile binding queue_depth to two roles answered %d, want 500", r)
	}
	time.Sleep(3 * fastInterval)
	if got := routing()[`vllm:kv_cache_usage_perc{model_name="m1",role="both"}`]; got != 0.8 {
		t.Errorf("after a refused reload KV usage is %v, want 0.8 from the last good profile", got)
	}
	if got := routing()[`vllm:num_requests_running{model_name="m1",role="both"}`]; got != 3 {
		t.Errorf("after a refused reload running is %v, want 3 from the last good profile", got)
	}
}

func hasSeries(s series, name, label string) bool {
	for k := range s {
		if strings.HasPrefix(k, name+"{") && strings.Contains(k, label) {
			return true
		}
	}
	return false
}

func post(t *testing.T, url string) int {
	t.Helper()
	resp, err := client.Post(url, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestEngineProfileCheck: --config.check reads the profile files too and
// names the file, the rule and the fix of a bad one.
func TestEngineProfileCheck(t *testing.T) {
	bin := testbin.Build(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "acme.yaml")
	writeFile(t, good, fmt.Sprintf(acmeProfile, "0.01"))
	overlap := filepath.Join(dir, "overlap.yaml")
	writeFile(t, overlap, strings.NewReplacer("server: acme", "server: acme2", `["acme:"]`, `["sglang"]`).Replace(fmt.Sprintf(acmeProfile, "0.01")))
	// edit writes the good profile with one line changed.
	edit := func(name, from, to string) string {
		p := filepath.Join(dir, name+".yaml")
		writeFile(t, p, strings.Replace(fmt.Sprintf(acmeProfile, "0.01"), from, to, 1))
		return p
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		out  []string
	}{
		{"good", []string{"--engine.profile-file=" + good}, 0, []string{"acme.yaml is valid"}},
		{"missing", []string{"--engine.profile-file=" + filepath.Join(dir, "none.yaml")}, 1, []string{"--engine.profile-file", "none.yaml"}},
		{"overlap", []string{"--engine.profile-file=" + good, "--engine.profile-file=" + overlap}, 1, []string{"overlap.yaml", `"sglang" overlaps "sglang:"`, "server: sglang"}},
		// Profiles that contradict themselves.
		{"family for two roles", []string{"--engine.profile-file=" + edit("two-roles", "family: batch_size", "family: queue_depth")}, 1, []string{"two-roles.yaml", `family "queue_depth" already plays requests_running`, "why:"}},
		{"engine is model", []string{"--engine.profile-file=" + edit("engine-model", `engine: ""`, "engine: served_model")}, 1, []string{`labels.engine "served_model" is also labels.model`}},
		{"engine le", []string{"--engine.profile-file=" + edit("engine-le", `engine: ""`, "engine: le")}, 1, []string{`labels.engine "le"`, "reserves"}},
		{"model __name__", []string{"--engine.profile-file=" + edit("model-name", "model: served_model", "model: __name__")}, 1, []string{`labels.model "__name__"`, "reserves"}},
		{"scale past 1", []string{"--engine.profile-file=" + edit("scale", "scale: 0.01", "scale: 1e308")}, 1, []string{"scale 1e+308", "past 1", "give at most 1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"--config.check"}, c.args...)...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			_ = cmd.Run()
			if got := cmd.ProcessState.ExitCode(); got != c.code {
				t.Errorf("exit status %d, want %d; output:\n%s", got, c.code, out.String())
			}
			for _, w := range c.out {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output does not say %q:\n%s", w, out.String())
				}
			}
		})
	}
}
