package mapping

import (
	"strings"
	"testing"
)

// Every role of roles.yaml has one canonical family, the current V1 name.
func TestRolesCanonicalFamilies(t *testing.T) {
	cat, err := LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	roles := cat.Roles()
	if len(roles.All()) < 20 {
		t.Fatalf("only %d roles", len(roles.All()))
	}
	for _, d := range roles.All() {
		if d.Computed {
			// Filled from the profiles' kv sections: a name no server prints.
			if _, ok := cat.Lookup(d.Family); ok || d.Family == "" || strings.HasPrefix(d.Family, cat.Prefix) {
				t.Errorf("computed role %s: family %q must be a name of the sidecar's own", d.Name, d.Family)
			}
			continue
		}
		m, ok := cat.Lookup(d.Family)
		if !ok || m.Role != string(d.Name) {
			t.Errorf("role %s: family %q is not a catalogue entry marked with it", d.Name, d.Family)
		}
		if m.IsRenamed() {
			t.Errorf("role %s: canonical family %s is a legacy name", d.Name, d.Family)
		}
	}
	for role, want := range map[Role]string{
		RoleKVCacheUsage:      "vllm:kv_cache_usage_perc",
		RoleInterTokenLatency: "vllm:inter_token_latency_seconds",
		RoleQueueTime:         "vllm:request_queue_time_seconds",
		RolePreemptions:       "vllm:num_preemptions_total",
	} {
		if got := roles.Family(role); got != want {
			t.Errorf("role %s: family %q, want %q", role, got, want)
		}
	}
	if got := roles.Sample(RoleTTFT, PartBucket); got != "vllm:time_to_first_token_seconds_bucket" {
		t.Errorf("ttft bucket sample %q", got)
	}
}

func TestBuildRolesRejects(t *testing.T) {
	const roleA = "version: 1\nroles:\n  - {name: a, type: gauge, unit: x, help: h}\n"
	cat := func(extra string) *Catalogue {
		c, err := parseCatalogue([]byte("version: 1\nprefix: \"vllm:\"\nmetrics:\n  - name: vllm:a\n    type: gauge\n    unit: x\n    kind: routing\n    engines: [v1]\n    added: v0.9.2\n" + extra))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct{ name, roles, extra, want string }{
		{"unknown role", roleA, "    role: b\n", `role "b" is not defined in roles.yaml`},
		{"type mismatch", strings.Replace(roleA, "type: gauge", "type: histogram", 1), "    role: a\n", `role "a" is a histogram, the family a gauge`},
		{"no family", roleA, "", `role "a": no catalogue family has it`},
		{"bad type", strings.Replace(roleA, "type: gauge", "type: meter", 1), "    role: a\n", `type "meter" is invalid`},
		{"duplicate", roleA + "  - {name: a, type: gauge, unit: x, help: h}\n", "    role: a\n", "duplicate role"},
		{"two families", roleA, "    role: a\n  - name: vllm:b\n    type: gauge\n    unit: x\n    kind: routing\n    engines: [v1]\n    added: v0.9.2\n    role: a\n", "a role has one canonical family"},
		{"on a legacy name", roleA, "    role: a\n  - name: vllm:old\n    type: gauge\n    unit: x\n    kind: routing\n    engines: [v0]\n    added: v0.2.0\n    deprecated: v0.9.2\n    replacement: vllm:a\n    role: a\n", "role \"a\" on a legacy family"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildRoles([]byte(tc.roles), cat(tc.extra))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := buildRoles([]byte(roleA), cat("    role: a\n")); err != nil {
		t.Fatalf("valid roles rejected: %v", err)
	}
}
