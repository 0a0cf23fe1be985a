package mapping

import (
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/exposition"
	fixturepages "github.com/fos-study/vllm-normalizer/internal/fixtures"
)

func loadProfiles(t *testing.T) (*Profiles, *Roles) {
	t.Helper()
	cat, err := LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := LoadProfiles(cat.Roles())
	if err != nil {
		t.Fatal(err)
	}
	return ps, cat.Roles()
}

func fixtureFamilies(t *testing.T, prefix string) []exposition.Family {
	return fixturepages.Families(t, prefix)
}

// Each fixture is told apart by its families, whatever else the page holds
// (Dynamo pages add dynamo_* families beside the engine's own).
func TestDetectProfile(t *testing.T) {
	ps, _ := loadProfiles(t)
	for prefix, want := range map[string]string{
		"02-": "vllm", "13-": "vllm", "20-": "vllm",
		"04-": "sglang", "26-": "sglang",
		"25-": "trtllm",
		"08-": "llamacpp", "09-": "llamacpp",
		"35-": "atom", "36-": "tokenspeed", "37-": "sglang",
	} {
		p := ps.Detect(fixtureFamilies(t, prefix))
		if p == nil || p.Server != want {
			t.Errorf("fixture %s: detected %v, want %s", prefix, p, want)
		}
	}
	if p := ps.Detect(fixtureFamilies(t, "27-")); p != nil {
		t.Errorf("TGI page detected as %s; no profile describes TGI", p.Server)
	}
}

// The canonical page carries each role under its vLLM V1 name with the
// native values, scaled, and model_name as the model label.
func TestCanonicalSGLang(t *testing.T) {
	ps, roles := loadProfiles(t)
	fams := fixtureFamilies(t, "04-")
	p := ps.Detect(fams)
	canon := p.Canonical(fams, roles)
	native := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.Samples {
			native[s.Name()] = s.Value
		}
	}
	got := map[string]float64{}
	for _, f := range canon {
		for _, s := range f.Samples {
			if s.Labels.Get(LabelModel) == "" {
				t.Errorf("%s has no model_name: %s", f.Name, s.Labels)
			}
			got[s.Name()] += s.Value
		}
	}
	for role, nat := range map[Role]string{
		RoleRequestsRunning: "sglang:num_running_reqs",
		RoleRequestsWaiting: "sglang:num_queue_reqs",
		RoleKVCacheUsage:    "sglang:token_usage",
	} {
		name := roles.Family(role)
		if got[name] != native[nat] {
			t.Errorf("%s: canonical %s = %v, native %s = %v", role, name, got[name], nat, native[nat])
		}
	}
	if c := got[roles.Sample(RoleTTFT, PartCount)]; c != native["sglang:time_to_first_token_seconds_count"] || c == 0 {
		t.Errorf("ttft count %v, native %v", c, native["sglang:time_to_first_token_seconds_count"])
	}
}

func TestParseProfilesRejects(t *testing.T) {
	_, roles := loadProfiles(t)
	vllm, err := profilesFS.ReadFile("profiles/vllm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const good = "version: 1\nserver: x\ndetect: {prefixes: [\"x:\"]}\nlabels: {model: model}\nroles:\n  - {role: requests_running, family: running}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown role", strings.Replace(good, "requests_running", "requests_flying", 1), `role "requests_flying" is not defined`},
		{"no prefixes", strings.Replace(good, `prefixes: ["x:"]`, "prefixes: []", 1), "detect.prefixes is empty"},
		{"empty prefix", strings.Replace(good, `"x:"`, `""`, 1), "empty prefix"},
		{"negative scale", strings.Replace(good, "family: running}", "family: running, scale: -1}", 1), "must be a positive number"},
		{"catalogue roles on another server", good + "roles_from_catalogue: true\n", "for the vllm profile only"},
		{"unknown key", good + "colour: red\n", "unknown key colour; valid keys are version, server, title, detect,"},
		// Nested: the path and that level's keys, not a Go type's spelling.
		{"unknown nested key", strings.Replace(good, "prefixes:", "prefix:", 1), "unknown key detect.prefix; valid keys there are prefixes, fingerprints, openmetrics_frontend"},
		{"unknown key in a list", strings.Replace(good, "family: running}", "family: running, scaling: 2}", 1), "unknown key roles[0].scaling; valid keys there are role, family, scale,"},
		{"same server twice", strings.Replace(good, "server: x", "server: vllm", 1), "roles_from_catalogue is for the vllm profile only"},
		// Contradictions: one quantity served as another, labels that say
		// two things or name bounds, a scale that leaves the role's range.
		{"family for two roles", good + "  - {role: requests_waiting, family: running}\n", `family "running" already plays requests_running (roles[0])`},
		{"family for two roles, one why", good + "  - {role: requests_waiting, family: running, why: both}\n", "why: on both entries"},
		{"family twice for one role", good + "  - {role: requests_running, family: running, why: again}\n", "remove the copy"},
		{"engine is model", strings.Replace(good, "{model: model}", "{model: model, engine: model}", 1), `labels.engine "model" is also labels.model`},
		{"process is engine", strings.Replace(good, "{model: model}", "{model: model, engine: rank, process: [rank]}", 1), `labels.process[0] "rank" is also labels.engine`},
		{"engine le", strings.Replace(good, "{model: model}", "{model: model, engine: le}", 1), `labels.engine "le" is a label Prometheus reserves`},
		{"model __name__", strings.Replace(good, "{model: model}", "{model: __name__}", 1), `labels.model "__name__" is a label Prometheus reserves`},
		{"process quantile", strings.Replace(good, "{model: model}", "{model: model, process: [quantile]}", 1), `labels.process[0] "quantile"`},
		{"parts reserved", strings.Replace(good, "{model: model}", "{model: model, parts: [__meta]}", 1), `labels.parts[0] "__meta"`},
		{"model not a label", strings.Replace(good, "{model: model}", "{model: model-name}", 1), "is not a label name"},
		{"ratio scale past 1", good + "  - {role: kv_cache_usage, family: kv, scale: 1e308}\n", "scale 1e+308 would carry the role's 0 to 1 (ratio) past 1"},
		{"ratio scale just past 1", good + "  - {role: kv_cache_usage, family: kv, scale: 100}\n", "past 1"},
		{"count scale huge", strings.Replace(good, "family: running}", "family: running, scale: 1e300}", 1), "is outside 1e-09 to 1e+09"},
		{"seconds scale tiny", good + "  - {role: ttft, family: ttft_ms, scale: 1e-300}\n", "is outside 1e-09 to 1e+09"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseProfiles(map[string][]byte{"vllm.yaml": vllm, "x.yaml": []byte(tc.yaml)}, roles)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	for _, ok := range []string{good,
		good + "  - {role: kv_cache_usage, family: kv_percent, scale: 0.01}\n",
		good + "  - {role: ttft, family: ttft_ns, scale: 1e-9}\n",
		// A family that plays two roles, saying why on both entries.
		strings.Replace(good, "family: running}", "family: running, why: the server counts one queue}", 1) + "  - {role: requests_waiting, family: running, why: the server counts one queue}\n",
	} {
		if _, err := parseProfiles(map[string][]byte{"vllm.yaml": vllm, "x.yaml": []byte(ok)}, roles); err != nil {
			t.Fatalf("valid profile rejected: %v\n%s", err, ok)
		}
	}
	if _, err := parseProfiles(map[string][]byte{"x.yaml": []byte(good)}, roles); err == nil {
		t.Fatal("profiles without vllm accepted")
	}
}

// A text page whose TYPE line names a counter without _total files its
// _created sample under the same family: only the value plays the role,
// never the creation time.
func TestCanonicalLeavesCompanionSamplesOut(t *testing.T) {
	ps, roles := loadProfiles(t)
	page := "# TYPE llamacpp:tokens_predicted counter\nllamacpp:tokens_predicted_total 5\nllamacpp:tokens_predicted_created 1.7e9\n" +
		"# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 2\n"
	fams, _, err := exposition.Parse([]byte(page), "text/plain; version=0.0.4", exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := ps.Detect(fams)
	if p == nil || p.Server != "llamacpp" {
		t.Fatalf("detected %v", p)
	}
	got := map[string][]float64{}
	for _, f := range p.Canonical(fams, roles) {
		for _, s := range f.Samples {
			got[s.Name()] = append(got[s.Name()], s.Value)
		}
	}
	if v := got[roles.Family(RoleGenerationTokens)]; len(v) != 1 || v[0] != 5 {
		t.Errorf("generation tokens %v, want the one value 5", v)
	}
	if v := got[roles.Family(RoleRequestsRunning)]; len(v) != 1 || v[0] != 2 {
		t.Errorf("running %v, want 2", v)
	}
}

// Detection weighs the evidence: a stray series of another server does not
// turn a page into "unknown", it is reported as odd; the Rust frontend's
// page (fixture 30, no cache_config_info) is vLLM's by its many families
// and roles; two servers of equal weight are neither.
func TestDetectionByWeight(t *testing.T) {
	ps, _ := loadProfiles(t)
	stray := func(prefix, extra string) []exposition.Family {
		fams := fixtureFamilies(t, prefix)
		more := parsePageText(t, extra)
		return append(fams, more...)
	}
	for _, c := range []struct {
		name   string
		fams   []exposition.Family
		server string
		odd    string
	}{
		{"SGLang page, one vllm: series", stray("26-", "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"x\"} 1\n"), "sglang", "1 vllm: family (vllm:num_requests_running)"},
		{"SGLang page, a stray vllm:cache_config_info", stray("26-", "# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"16\"} 1\n"), "sglang", "1 vllm: family (vllm:cache_config_info)"},
		{"vLLM page, two sglang: series", stray("13-", "# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs 1\n# TYPE sglang:token_usage gauge\nsglang:token_usage 0.5\n"), "vllm", "2 sglang: families (sglang:num_queue_reqs)"},
		{"Rust frontend", fixtureFamilies(t, "30-"), "vllm", ""},
		{"TensorRT-LLM with iteration stats", fixtureFamilies(t, "31-"), "trtllm", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := ps.Detection(c.fams)
			if d.Profile == nil || d.Profile.Server != c.server || d.Odd != c.odd {
				t.Errorf("detected %v, odd %q; want %s, odd %q", d.Profile, d.Odd, c.server, c.odd)
			}
		})
	}
	tie := parsePageText(t, "# TYPE vllm:a gauge\nvllm:a 1\n# TYPE sglang:b gauge\nsglang:b 1\n")
	if d := ps.Detection(tie); d.Profile != nil || d.Tie != "vllm and sglang" {
		t.Errorf("one unknown family of each: detected %v, tie %q; want none, tie \"vllm and sglang\"", d.Profile, d.Tie)
	}
	// Answered as OpenMetrics to a text-first request: vLLM's Rust frontend.
	if d := ps.DetectionOf(tie, true); d.Profile == nil || d.Profile.Server != "vllm" || d.Odd != "1 sglang: family (sglang:b)" {
		t.Errorf("the same page as OpenMetrics: detected %v, odd %q; want vllm, odd \"1 sglang: family (sglang:b)\"", d.Profile, d.Odd)
	}
}

// Every kv source form, read through the profiles' data: SGLang 0.5.16's
// num_pages × page_size gauges and 0.5.9's cache_config_info labels,
// vLLM's kv_cache_size_tokens beside a product that differs (counted once
// per engine, however many processes print it), and the product where the
// tokens label is "None".
func TestKVCapacitySources(t *testing.T) {
	ps, roles := loadProfiles(t)
	capacity := func(page string) (map[string]float64, CanonicalStats) {
		t.Helper()
		fams := parsePageText(t, page)
		p := ps.Detect(fams)
		if p == nil {
			t.Fatalf("no profile for %q", page)
		}
		canon, st := p.CanonicalStats(fams, roles)
		out := map[string]float64{}
		for _, f := range canon {
			if f.Name == roles.Family(RoleKVCacheCapacity) {
				for _, s := range f.Samples {
					out[s.Labels.String()] = s.Value
				}
			}
		}
		return out, st
	}
	const running = "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name=\"m\"} 1\n"
	name := roles.Family(RoleKVCacheCapacity)
	m := `{__name__="` + name + `", model_name="m"}`
	for _, c := range []struct {
		what, page string
		want       map[string]float64
		disagree   int
	}{
		{"SGLang gauges", running + "# TYPE sglang:num_pages gauge\nsglang:num_pages{model_name=\"m\",tp_rank=\"0\"} 1000\nsglang:num_pages{model_name=\"m\",tp_rank=\"1\"} 1000\n# TYPE sglang:page_size gauge\nsglang:page_size{model_name=\"m\",tp_rank=\"0\"} 16\nsglang:page_size{model_name=\"m\",tp_rank=\"1\"} 16\n",
			map[string]float64{m: 16000}, 0},
		{"SGLang info labels", running + "# TYPE sglang:cache_config_info gauge\nsglang:cache_config_info{model_name=\"m\",num_pages=\"500\",page_size=\"64\"} 1\n",
			map[string]float64{m: 32000}, 0},
		{"SGLang tokens first", running + "# TYPE sglang:max_total_num_tokens gauge\nsglang:max_total_num_tokens{model_name=\"m\"} 92962\n# TYPE sglang:cache_config_info gauge\nsglang:cache_config_info{model_name=\"m\",num_pages=\"500\",page_size=\"64\"} 1\n",
			map[string]float64{m: 92962}, 0},
		{"vLLM hybrid, two processes", "# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"4\",engine=\"0\",kv_cache_size_tokens=\"1428520\",num_gpu_blocks=\"15998\",pid=\"1\"} 1\nvllm:cache_config_info{block_size=\"4\",engine=\"0\",kv_cache_size_tokens=\"1428520\",num_gpu_blocks=\"15998\",pid=\"2\"} 1\nvllm:cache_config_info{block_size=\"16\",engine=\"1\",kv_cache_size_tokens=\"None\",num_gpu_blocks=\"1000\"} 1\n",
			map[string]float64{`{__name__="` + name + `", engine="0"}`: 1428520, `{__name__="` + name + `", engine="1"}`: 16000}, 1},
	} {
		got, st := capacity(c.page)
		if len(got) != len(c.want) || st.KVCapacityDisagreements != c.disagree {
			t.Errorf("%s: capacity %v, %d disagreements; want %v, %d", c.what, got, st.KVCapacityDisagreements, c.want, c.disagree)
			continue
		}
		for k, w := range c.want {
			if got[k] != w {
				t.Errorf("%s: %s = %v, want %v", c.what, k, got[k], w)
			}
		}
	}
}

// The constructed pages of the newer servers fill their roles with the
// values the generator (scripts/newengines) chose: ATOM and TokenSpeed as
// llm-d's engine configurations read them, SGLang 0.5.22's KV-only usage
// and free tokens where token_usage counts the Mamba states too.
func TestCanonicalNewerServers(t *testing.T) {
	ps, roles := loadProfiles(t)
	for _, c := range []struct {
		fixture, server string
		want            map[string]float64 // canonical sample -> value
	}{
		{"35-", "atom", map[string]float64{
			roles.Family(RoleRequestsRunning): 6, roles.Family(RoleRequestsWaiting): 4, roles.Family(RoleKVCacheUsage): 0.4,
			roles.Family(RoleKVCacheCapacity): 8000 * 16, roles.Sample(RolePreemptions, PartValue): 2,
			roles.Sample(RolePrefixCacheHits, PartValue): 38400, roles.Sample(RolePrefixCacheQueries, PartValue): 96000,
			roles.Sample(RoleRequestsFinished, PartValue): 120,
		}},
		{"36-", "tokenspeed", map[string]float64{
			roles.Family(RoleRequestsRunning): 2, roles.Family(RoleRequestsWaiting): 5, roles.Family(RoleKVCacheUsage): 0.375,
			roles.Sample(RoleTTFT, PartCount): 4, roles.Sample(RoleInterTokenLatency, PartCount): 1020,
			roles.Sample(RoleE2ELatency, PartCount): 4, roles.Sample(RoleRequestsFinished, PartValue): 4,
		}},
		{"37-", "sglang", map[string]float64{
			roles.Family(RoleKVCacheUsage): 0.3, roles.Family(RoleKVCacheCapacity): 92962,
			roles.Family(RoleKVCacheFree): 25074 + 40000, roles.Sample(RoleTimePerOutputToken, PartCount): 3,
		}},
	} {
		fams := fixtureFamilies(t, c.fixture)
		p := ps.Detect(fams)
		if p == nil || p.Server != c.server {
			t.Fatalf("fixture %s: detected %v, want %s", c.fixture, p, c.server)
		}
		got := map[string]float64{}
		for _, f := range p.Canonical(fams, roles) {
			for _, s := range f.Samples {
				got[s.Name()] += s.Value
			}
		}
		for name, w := range c.want {
			if v, ok := got[name]; !ok || v != w {
				t.Errorf("%s: canonical %s = %v (present %v), want %v", c.server, name, v, ok, w)
			}
		}
	}
}
