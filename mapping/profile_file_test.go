package mapping

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// acmeProfile describes a server no built-in profile knows, as an operator
// would write it: percent KV usage, a model label of its own.
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
  - role: kv_cache_usage
    family: kv_used_percent
    scale: 0.01
  - role: prompt_tokens
    family: prompt_tokens_total
`

const acmePage = `# TYPE acme:batch_size gauge
acme:batch_size{served_model="m1"} 3
# TYPE acme:kv_used_percent gauge
acme:kv_used_percent{served_model="m1"} 40
# TYPE acme:prompt_tokens_total counter
acme:prompt_tokens_total{served_model="m1"} 120
`

func parsePageText(t *testing.T, page string) []exposition.Family {
	t.Helper()
	fams, _, err := exposition.Parse([]byte(page), "text/plain", exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// An operator profile adds a server: its page is detected and read under
// the canonical names, scaled, with model_name as the model label.
func TestProfilesWithAddsServer(t *testing.T) {
	ps, roles := loadProfiles(t)
	fams := parsePageText(t, acmePage)
	if p := ps.Detect(fams); p != nil {
		t.Fatalf("built-in profiles detect the made-up page as %s", p.Server)
	}
	ext, err := ps.With([]ProfileSource{{Name: "acme.yaml", Data: []byte(acmeProfile)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ext.All()) != len(ps.All())+1 || ext.All()[0].Server != ServerVLLM {
		t.Fatalf("profiles after With: %d, first %s; want %d, vllm first", len(ext.All()), ext.All()[0].Server, len(ps.All())+1)
	}
	p := ext.Detect(fams)
	if p == nil || p.Server != "acme" || p.Source() != "acme.yaml" {
		t.Fatalf("detected %v, want acme from acme.yaml", p)
	}
	got := map[string]float64{}
	for _, f := range p.Canonical(fams, roles) {
		for _, s := range f.Samples {
			got[s.Name()+"/"+s.Labels.Get(LabelModel)] = s.Value
		}
	}
	want := map[string]float64{
		"vllm:num_requests_running/m1": 3,
		"vllm:kv_cache_usage_perc/m1":  0.4,
		"vllm:prompt_tokens_total/m1":  120,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("canonical %s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("canonical page has %d series, want %d: %v", len(got), len(want), got)
	}
	// ps itself is unchanged: a failed reload keeps the old set.
	if ps.Detect(fams) != nil {
		t.Error("With changed the profiles it was called on")
	}
}

// A file naming a built-in server replaces that profile.
func TestProfilesWithReplacesServer(t *testing.T) {
	ps, _ := loadProfiles(t)
	repl := strings.Replace(strings.Replace(acmeProfile, "server: acme", "server: sglang", 1), `["acme:"]`, `["sglang:"]`, 1)
	ext, err := ps.With([]ProfileSource{{Name: "sglang-mine.yaml", Data: []byte(repl)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ext.All()) != len(ps.All()) {
		t.Fatalf("%d profiles after replacing one, want %d", len(ext.All()), len(ps.All()))
	}
	p := ext.Detect(fixtureFamilies(t, "04-"))
	if p == nil || p.Source() != "sglang-mine.yaml" {
		t.Fatalf("the SGLang fixture is read by %v, want the operator's sglang-mine.yaml", p)
	}
	// The replaced profile's sglang_ prefix is gone with it.
	if got := ext.Detect(parsePageText(t, "# TYPE sglang_num_running_reqs gauge\nsglang_num_running_reqs 1\n")); got != nil {
		t.Errorf("a sglang_ page is still read by %s (%q)", got.Server, got.Source())
	}
}

// Bad files fail with the file, the rule, the value and the fix.
func TestProfilesWithRejects(t *testing.T) {
	ps, _ := loadProfiles(t)
	for _, c := range []struct {
		name string
		srcs []string
		want []string
	}{
		{"unknown role", []string{strings.Replace(acmeProfile, "role: requests_running", "role: requests_runing", 1)},
			[]string{"f0.yaml", `role "requests_runing" is not defined`}},
		{"unknown key", []string{acmeProfile + "extra: 1\n"}, []string{"f0.yaml", "extra"}},
		{"not YAML", []string{"nonsense: [\n"}, []string{"f0.yaml", "did not find expected node content", "fix the YAML", "Engine profile files"}},
		{"no version", []string{strings.Replace(acmeProfile, "version: 1", "version: 2", 1)},
			[]string{"f0.yaml", "version is 2", "version 1"}},
		{"negative scale", []string{strings.Replace(acmeProfile, "scale: 0.01", "scale: -1", 1)},
			[]string{"f0.yaml", "scale -1", "positive"}},
		{"two files one server", []string{acmeProfile, acmeProfile}, []string{"f1.yaml", `server "acme" is already described by f0.yaml`}},
		{"prefix overlaps a built-in", []string{strings.Replace(acmeProfile, `["acme:"]`, `["vllm"]`, 1)},
			[]string{"f0.yaml", `"vllm" overlaps "vllm:" of server "vllm" (built in)`, "server: vllm"}},
		{"prefix overlaps another file", []string{acmeProfile, strings.Replace(strings.Replace(acmeProfile, "server: acme", "server: acme2", 1), `["acme:"]`, `["acme:v2_"]`, 1)},
			[]string{"f1.yaml", `"acme:v2_" overlaps "acme:" of server "acme" (f0.yaml)`}},
		{"vllm without the catalogue", []string{strings.Replace(strings.Replace(acmeProfile, "server: acme", "server: vllm", 1), `["acme:"]`, `["vllm:"]`, 1)},
			[]string{"f0.yaml", "roles_from_catalogue"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var srcs []ProfileSource
			for i, s := range c.srcs {
				srcs = append(srcs, ProfileSource{Name: "f" + string(rune('0'+i)) + ".yaml", Data: []byte(s)})
			}
			ext, err := ps.With(srcs)
			if err == nil {
				t.Fatalf("accepted; profiles %d", len(ext.All()))
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// The Mapper carries its profiles, so a reload swaps both at once.
func TestMapperCarriesProfiles(t *testing.T) {
	cat, err := LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fams := parsePageText(t, acmePage)
	if p := m.Profiles().Detect(fams); p != nil {
		t.Fatalf("default mapper reads the made-up page as %s", p.Server)
	}
	ps, err := LoadProfiles(cat.Roles())
	if err != nil {
		t.Fatal(err)
	}
	ext, err := ps.With([]ProfileSource{{Name: "acme.yaml", Data: []byte(acmeProfile)}})
	if err != nil {
		t.Fatal(err)
	}
	m2, err := New(cat, Options{Profiles: ext})
	if err != nil {
		t.Fatal(err)
	}
	if p := m2.Profiles().Detect(fams); p == nil || p.Server != "acme" {
		t.Fatalf("mapper with the acme profile detects %v", p)
	}
	other, err := LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(other, Options{Profiles: ext}); err == nil {
		t.Error("New accepted profiles checked against another catalogue's roles")
	}
}

// The built-in profiles are in the operator's format: each file, given as
// an operator file, replaces itself and reads its fixtures as before.
func TestBuiltInProfilesAreOperatorFiles(t *testing.T) {
	ps, _ := loadProfiles(t)
	fixtureOf := map[string]string{"vllm": "13-", "sglang": "04-", "trtllm": "25-", "llamacpp": "08-", "dynamo": "24-", "atom": "35-", "tokenspeed": "36-"}
	for _, p := range ps.All() {
		b, err := os.ReadFile(filepath.Join("profiles", p.Server+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		ext, err := ps.With([]ProfileSource{{Name: "operator-" + p.Server + ".yaml", Data: b}})
		if err != nil {
			t.Fatalf("%s.yaml as an operator file: %v", p.Server, err)
		}
		if len(ext.All()) != len(ps.All()) {
			t.Errorf("%s.yaml as an operator file added a profile instead of replacing its own", p.Server)
		}
		prefix, ok := fixtureOf[p.Server]
		if !ok {
			t.Errorf("no fixture named for server %s; add one to fixtureOf", p.Server)
			continue
		}
		got := ext.Detect(fixtureFamilies(t, prefix))
		if got == nil || got.Server != p.Server || got.Source() != "operator-"+p.Server+".yaml" {
			t.Errorf("fixture %s read by %v, want the operator's %s profile", prefix, got, p.Server)
		}
	}
}
