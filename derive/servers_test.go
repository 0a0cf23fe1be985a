package derive

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/internal/fixtures"
	"github.com/fos-study/vllm-normalizer/internal/mappingtest"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/window"
)

// For a real page of every server kind, observed twice with every counter,
// bucket, _sum and _count advanced, each derived gauge exists exactly when
// the roles it reads are on the server's canonical page: a role a server
// lacks leaves its gauges absent, never 0, and one it has is never lost.
// SLO attainment has a target for each latency; the running gauge is
// raised by one on the second page, so that the per-request speed has a
// denominator.
func TestDerivedWhereRolesExist(t *testing.T) {
	roles := mappingtest.Catalogue(t).Roles()
	profiles, err := mapping.LoadProfiles(roles)
	if err != nil {
		t.Fatal(err)
	}
	mapper := mappingtest.Mapper(t, mapping.Options{})
	d, err := New(roles).WithSLOs(SLOTargets{TTFT: []time.Duration{time.Second}, TPOT: []time.Duration{time.Second}, E2E: []time.Duration{time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	for prefix, server := range map[string]string{
		"02-": "vllm", "13-": "vllm", "20-": "vllm",
		"04-": "sglang", "26-": "sglang",
		"25-": "trtllm",
		"08-": "llamacpp", "09-": "llamacpp",
	} {
		t.Run(prefix+server, func(t *testing.T) {
			first := readFixture(t, prefix)
			norm, _ := mapper.Normalize(first)
			p := profiles.Detect(norm)
			if p == nil || p.Server != server {
				t.Fatalf("detected %v, want %s", p, server)
			}
			canon := p.Canonical(norm, roles)
			later, _ := mapper.Normalize(advanced(readFixture(t, prefix)))
			laterCanon := p.Canonical(later, roles)
			for fi := range laterCanon {
				if laterCanon[fi].Name == roles.Family(mapping.RoleRequestsRunning) {
					for si := range laterCanon[fi].Samples {
						laterCanon[fi].Samples[si].Value++
					}
				}
			}
			h := window.New([]time.Duration{time.Minute}, time.Second, d.Inputs())
			idle := d.NewIdleTracker(at(0))
			h.Observe(at(0), canon)
			idle.Observe(at(0), canon)
			h.Observe(at(10), laterCanon)
			idle.Observe(at(10), laterCanon)
			got := map[string]bool{}
			derived := d.Derive(h, at(10), []string{mapping.LabelModel, mapping.LabelEngine})
			for _, f := range append(derived, d.Capacity(laterCanon, idle, at(10), true)...) {
				got[f.Name] = len(f.Samples) > 0
			}
			if len(got) == 0 {
				t.Fatalf("no derived gauge at all from a %s page", server)
			}
			t.Logf("%d derived families", len(got))
			has := map[mapping.Role]bool{}
			for _, f := range canon {
				for _, d := range roles.All() {
					if d.Family == f.Name && len(f.Samples) > 0 {
						has[d.Name] = true
					}
				}
			}
			for _, s := range Specs(roles) {
				if conditionalGauges[s.Name] != "" {
					continue // present with more than their roles; TestTopologyGauges
				}
				want := true
				for _, in := range s.Inputs {
					if in != mapping.RolePrefixCacheHitRateGauge && !has[in] {
						want = false
					}
				}
				if s.AnyInput {
					want = slices.ContainsFunc(s.Inputs, func(in mapping.Role) bool { return has[in] })
				}
				if !want && slices.Contains(s.Inputs, mapping.RolePrefixCacheHitRateGauge) && has[mapping.RolePrefixCacheHitRateGauge] {
					continue // the V0 gauge fallback: its own tests cover it
				}
				if got[s.Name] != want {
					t.Errorf("%s: present %v, want %v (roles on the page: %v)", s.Name, got[s.Name], want, keys(has))
				}
			}
		})
	}
}

func readFixture(t *testing.T, prefix string) []exposition.Family {
	return fixtures.Families(t, prefix)
}

// advanced returns the page a little later: every counter value, histogram
// bucket, _sum and _count one higher (one more observation, in the lowest
// bucket), gauges unchanged.
func advanced(fams []exposition.Family) []exposition.Family {
	for fi := range fams {
		f := &fams[fi]
		if f.Type != model.MetricTypeCounter && f.Type != model.MetricTypeHistogram {
			continue
		}
		for si := range f.Samples {
			if strings.HasSuffix(f.Samples[si].Name(), "_created") {
				continue
			}
			f.Samples[si].Value++
		}
	}
	return fams
}

func keys(m map[mapping.Role]bool) []string {
	var out []string
	for k := range m {
		out = append(out, string(k))
	}
	slices.Sort(out)
	return out
}
