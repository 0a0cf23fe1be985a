package mapping

// Checks of the engine profiles in mapping/profiles/ as data, before any
// loader reads them: the files follow the version-1 schema exactly, name
// only known roles, and agree with the real pages of their server in
// testdata/fixtures. Roles and their types come from roles.yaml.

import (
	"os"
	"path/filepath"
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
	Detect  struct {
		Prefixes []string `yaml:"prefixes"`
	} `yaml:"detect"`
	Labels struct {
		Model            *string  `yaml:"model"`
		Engine           *string  `yaml:"engine"`
		Process          []string `yaml:"process"`
		ProcessAggregate string   `yaml:"process_aggregate"`
		Parts            []string `yaml:"parts"`
	} `yaml:"labels"`
	RolesFromCatalogue bool `yaml:"roles_from_catalogue"`
	Roles              []struct {
		Role   string   `yaml:"role"`
		Family string   `yaml:"family"`
		Scale  *float64 `yaml:"scale"`
	} `yaml:"roles"`
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
	for _, want := range []string{"vllm", "sglang", "trtllm", "llamacpp"} {
		if _, ok := profiles[want]; !ok {
			t.Errorf("mapping/profiles/%s.yaml is missing", want)
		}
	}
	prefixOwner := map[string]string{}
	for file, p := range profiles {
		if p.Version != 1 || p.Server != file {
			t.Errorf("%s.yaml: version %d server %q, want version 1 and server %q", file, p.Version, p.Server, file)
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
			if f.Type != profileRoleTypes[r.Role] {
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
	for _, s := range []string{"sglang", "trtllm", "llamacpp"} {
		if seen[s] == 0 {
			t.Errorf("no fixture of %s among testdata/fixtures", s)
		}
	}
}
