package mapping

// Checks of the engine profiles in mapping/profiles/ as data, before any
// loader reads them: the files follow the version-1 schema exactly, name
// only known roles, and agree with the real pages of their server in
// testdata/fixtures. Roles and their types come from roles.yaml.

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"go.yaml.in/yaml/v2"

	"github.com/fos-study/vllm-normalizer/exposition"
)

type profileDataV1 struct {
	Version int    `yaml:"version"`
	Server  string `yaml:"server"`
	Title   string `yaml:"title"`
	Detect  struct {
		Prefixes            []string `yaml:"prefixes"`
		Fingerprints        []string `yaml:"fingerprints"`
		OpenMetricsFrontend bool     `yaml:"openmetrics_frontend"`
	} `yaml:"detect"`
	Labels struct {
		Model            *string  `yaml:"model"`
		Engine           *string  `yaml:"engine"`
		Process          []string `yaml:"process"`
		ProcessAggregate string   `yaml:"process_aggregate"`
		Parts            []string `yaml:"parts"`
	} `yaml:"labels"`
	RolesFromCatalogue bool `yaml:"roles_from_catalogue"`
	FillsGaps          bool `yaml:"fills_gaps"`
	Roles              []struct {
		Role      string   `yaml:"role"`
		Family    string   `yaml:"family"`
		Scale     *float64 `yaml:"scale"`
		OlderType string   `yaml:"older_type"`
	} `yaml:"roles"`
	KV struct {
		Capacity []map[string]string `yaml:"capacity"`
		Free     []map[string]string `yaml:"free"`
	} `yaml:"kv"`
	NotComparable []struct {
		Family string `yaml:"family"`
		Role   string `yaml:"role"`
		Why    string `yaml:"why"`
	} `yaml:"not_comparable"`
}

// roleTypes is the type a family must have on a page to play each role of
// roles.yaml (an info role is a gauge whose labels carry the data).
func roleTypes(t *testing.T) map[string]model.MetricType {
	t.Helper()
	out := map[string]model.MetricType{}
	for _, d := range mustCatalogue(t).Roles().All() {
		typ := model.MetricType(d.Type)
		if d.Type == RoleTypeInfo {
			typ = model.MetricTypeGauge
		}
		out[string(d.Name)] = typ
	}
	return out
}

func loadProfileData(t *testing.T) map[string]profileDataV1 {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("profiles", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no profiles under mapping/profiles: %v", err)
	}
	out := map[string]profileDataV1{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var pr profileDataV1
		if err := yaml.UnmarshalStrict(b, &pr); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".yaml")] = pr
	}
	return out
}

func TestProfileFilesFollowTheSchema(t *testing.T) {
	profiles := loadProfileData(t)
	profileRoleTypes := roleTypes(t)
	for _, want := range []string{"vllm", "sglang", "trtllm", "llamacpp", "atom", "tokenspeed"} {
		if _, ok := profiles[want]; !ok {
			t.Errorf("mapping/profiles/%s.yaml is missing", want)
		}
	}
	prefixOwner := map[string]string{}
	for file, p := range profiles {
		if p.Version != 1 || p.Server != file {
			t.Errorf("%s.yaml: version %d server %q, want version 1 and server %q", file, p.Version, p.Server, file)
		}
		if p.Title == "" {
			t.Errorf("%s.yaml has no title: add title: <the server's name as people write it>, e.g. title: SGLang", file)
		}
		if len(p.Detect.Prefixes) == 0 || p.Labels.Model == nil || p.Labels.Engine == nil {
			t.Errorf("%s.yaml: detect.prefixes, labels.model and labels.engine are required", file)
		}
		for _, pre := range p.Detect.Prefixes {
			if o, dup := prefixOwner[pre]; dup {
				t.Errorf("prefix %q detects both %s and %s", pre, o, file)
			}
			prefixOwner[pre] = file
		}
		if p.RolesFromCatalogue == (len(p.Roles) > 0) {
			t.Errorf("%s.yaml: give either roles_from_catalogue: true or a roles list", file)
		}
		for i, r := range p.Roles {
			if _, ok := profileRoleTypes[r.Role]; !ok {
				t.Errorf("%s.yaml roles[%d]: unknown role %q", file, i, r.Role)
			}
			if r.Scale != nil && *r.Scale <= 0 {
				t.Errorf("%s.yaml roles[%d]: scale %v must be positive", file, i, *r.Scale)
			}
			for _, pre := range p.Detect.Prefixes {
				if strings.HasPrefix(r.Family, pre) {
					t.Errorf("%s.yaml roles[%d]: family %q carries the prefix; write it without", file, i, r.Family)
				}
			}
			for _, nc := range p.NotComparable {
				if nc.Family == r.Family && nc.Role == r.Role {
					t.Errorf("%s.yaml: %s is both a %s and not comparable with it", file, r.Family, r.Role)
				}
			}
		}
		for i, nc := range p.NotComparable {
			if _, ok := profileRoleTypes[nc.Role]; !ok || nc.Family == "" || nc.Why == "" {
				t.Errorf("%s.yaml not_comparable[%d]: needs a family, a known role and why (got %+v)", file, i, nc)
			}
		}
	}
}

// Every real page of a server the profiles detect: the profile's families
// that are on the page have the type of their role, and the labels it names
// are ones the page uses.
func TestProfilesAgreeWithFixtures(t *testing.T) {
	profiles := loadProfileData(t)
	profileRoleTypes := roleTypes(t)
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "fixtures", "*.prom"))
	seen := map[string]int{}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fams, _, err := exposition.Parse(b, "text/plain; version=0.0.4", exposition.ParseOptions{})
		if err != nil {
			continue // a page that fails to parse by design (07) detects nothing
		}
		server, prefix := "", ""
		for _, f := range fams {
			for name, p := range profiles {
				for _, pre := range p.Detect.Prefixes {
					if strings.HasPrefix(f.Name, pre) {
						server, prefix = name, pre
					}
				}
			}
		}
		if server == "" || profiles[server].RolesFromCatalogue {
			continue
		}
		seen[server]++
		p := profiles[server]
		byName := map[string]exposition.Family{}
		pageLabels := map[string]bool{}
		for _, f := range fams {
			byName[f.Name] = f
			for _, s := range f.Samples {
				s.Labels.Range(func(l labels.Label) { pageLabels[l.Name] = true })
			}
		}
		base := filepath.Base(path)
		mapped := 0
		for _, r := range p.Roles {
			f, ok := byName[prefix+r.Family]
			if !ok {
				continue
			}
			mapped++
			// A family that changed type under one name (SGLang's
			// kv_transfer_*) is bound in its new type; pages of the old
			// one leave the role empty.
			if f.Type != profileRoleTypes[r.Role] && string(f.Type) != r.OlderType {
				t.Errorf("%s: %s is a %s, role %s needs a %s", base, f.Name, f.Type, r.Role, profileRoleTypes[r.Role])
			}
		}
		if mapped == 0 {
			t.Errorf("%s: detected as %s, but none of the profile's families is on the page", base, server)
		}
		if m := *p.Labels.Model; m != "" && !pageLabels[m] {
			t.Errorf("%s: model label %q is not on the page", base, m)
		}
	}
	for _, s := range []string{"sglang", "trtllm", "llamacpp", "atom", "tokenspeed"} {
		if seen[s] == 0 {
			t.Errorf("no fixture of %s among testdata/fixtures", s)
		}
	}
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	olderNames = regexp.MustCompile(`\(older ([^)]*)\)`)
)

// docName is a family as a docs cell writes it, without a label hint.
func docName(s string) string { return strings.SplitN(s, "{", 2)[0] }

// docs/engines.md's table of roles per server says what the profiles say:
// a "native" cell names the profile's families for the role in their order
// (later ones as "(older `name`)") with its scale, any other cell means the
// profile has no family for the role, a "not comparable" cell names
// not_comparable entries of that role, and the vLLM column names the
// catalogue family that plays the role.
func TestEnginesDocMatchesProfiles(t *testing.T) {
	profiles := loadProfileData(t)
	cat := mustCatalogue(t)
	b, err := os.ReadFile(filepath.Join("..", "docs", "engines.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "| role | unit | vLLM (V1 name) | SGLang | TensorRT-LLM | llama.cpp | Dynamo | ATOM | TokenSpeed |")
	if start < 0 {
		t.Fatal("docs/engines.md has no roles-per-server table")
	}
	columns := []string{"sglang", "trtllm", "llamacpp", "dynamo", "atom", "tokenspeed"}
	rows := 0
	documented := map[string]bool{}
	for _, line := range strings.Split(doc[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "| `") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3+len(columns) {
			t.Fatalf("row %q has %d cells, want %d", line, len(cells), 3+len(columns))
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows++
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			role := m[1]
			documented[role] = true
			if d, _ := cat.Roles().Def(Role(role)); d.Computed {
				// Each server's cell names every kv source of its profile.
				for ci, server := range append([]string{"vllm"}, columns...) {
					p := profiles[server]
					srcs := p.KV.Capacity
					if Role(role) == RoleKVCacheFree {
						srcs = p.KV.Free
					}
					for _, src := range srcs {
						for _, k := range []string{"family", "tokens_label", "blocks_label", "block_size_label", "block_size_family", "plus_family"} {
							if v := src[k]; v != "" && !strings.Contains(cells[2+ci], "`"+v+"`") {
								t.Errorf("%s/%s: the profile reads %s %q, the docs cell %q does not name it", server, role, k, v, cells[2+ci])
							}
						}
					}
				}
				continue
			}
			if fam := cat.Roles().Family(Role(role)); fam != "" {
				vllm := backticked.FindStringSubmatch(cells[2])
				if vllm == nil || !strings.HasPrefix(fam, cat.Prefix+strings.SplitN(vllm[1], "{", 2)[0]) {
					t.Errorf("%s: the vLLM column says %q, the catalogue's family is %s", role, cells[2], fam)
				}
			}
			for ci, server := range columns {
				cell, p := cells[3+ci], profiles[server]
				var want []string
				var scales []float64
				for _, r := range p.Roles {
					if r.Role == role {
						want = append(want, r.Family)
						if r.Scale != nil {
							scales = append(scales, *r.Scale)
						}
					}
				}
				if !strings.HasPrefix(cell, "native ") {
					if len(want) > 0 {
						t.Errorf("%s/%s: docs say %q, the profile maps %v", server, role, cell, want)
					}
					if strings.HasPrefix(cell, "not comparable") {
						for _, n := range backticked.FindAllStringSubmatch(cell, -1) {
							found := false
							for _, nc := range p.NotComparable {
								found = found || nc.Role == role && nc.Family == docName(n[1])
							}
							if !found {
								t.Errorf("%s/%s: docs call %s not comparable; the profile has no such not_comparable entry", server, role, n[1])
							}
						}
					}
					continue
				}
				got := []string{docName(backticked.FindStringSubmatch(cell)[1])}
				for _, o := range olderNames.FindAllStringSubmatch(cell, -1) {
					for _, n := range backticked.FindAllStringSubmatch(o[1], -1) {
						got = append(got, docName(n[1]))
					}
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("%s/%s: docs list %v, the profile maps %v", server, role, got, want)
				}
				for _, s := range scales {
					if !strings.Contains(cell, "×"+strconv.FormatFloat(s, 'g', -1, 64)) {
						t.Errorf("%s/%s: the profile scales by %v, the docs cell %q does not say ×%v", server, role, s, cell, s)
					}
				}
			}
		}
	}
	for _, d := range cat.Roles().All() {
		if !documented[string(d.Name)] {
			t.Errorf("role %s is missing from docs/engines.md's roles-per-server table", d.Name)
		}
	}
	if rows == 0 {
		t.Fatal("the roles-per-server table has no rows")
	}
}
