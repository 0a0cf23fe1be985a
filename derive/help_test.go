package derive

import (
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// helpInputs is, per derived gauge, what a reader of its HELP must learn it
// is computed from: the roles whose families it reads (their names come
// from mapping/catalogue.yaml, not from derive) and any other gauge it is
// built of. Written by hand from docs/derived.md's definitions.
var helpInputs = map[string]struct {
	roles  []mapping.Role
	gauges []string
}{
	"vllm_derived_preemptions_per_second":                   {roles: []mapping.Role{"preemptions"}},
	"vllm_derived_prefix_cache_hit_ratio":                   {roles: []mapping.Role{"prefix_cache_hits", "prefix_cache_queries", "prefix_cache_hit_rate_gauge"}},
	"vllm_derived_external_prefix_cache_hit_ratio":          {roles: []mapping.Role{"external_prefix_cache_hits", "external_prefix_cache_queries"}},
	"vllm_derived_queue_time_mean_seconds":                  {roles: []mapping.Role{"queue_time"}},
	"vllm_derived_prefill_time_mean_seconds":                {roles: []mapping.Role{"prefill_time"}},
	"vllm_derived_decode_time_mean_seconds":                 {roles: []mapping.Role{"decode_time"}},
	"vllm_derived_ttft_queue_ratio":                         {gauges: []string{"vllm_derived_queue_time_mean_seconds", "vllm_derived_prefill_time_mean_seconds"}},
	"vllm_derived_ttft_seconds":                             {roles: []mapping.Role{"ttft"}},
	"vllm_derived_inter_token_latency_seconds":              {roles: []mapping.Role{"inter_token_latency"}},
	"vllm_derived_e2e_latency_seconds":                      {roles: []mapping.Role{"e2e_latency"}},
	"vllm_derived_prompt_tokens_per_second":                 {roles: []mapping.Role{"prompt_tokens"}},
	"vllm_derived_generation_tokens_per_second":             {roles: []mapping.Role{"generation_tokens"}},
	"vllm_derived_requests_per_second":                      {roles: []mapping.Role{"requests_finished"}},
	"vllm_derived_prompt_tokens_mean":                       {roles: []mapping.Role{"request_prompt_tokens"}},
	"vllm_derived_generation_tokens_mean":                   {roles: []mapping.Role{"request_generation_tokens"}},
	"vllm_derived_requests_in_flight":                       {roles: []mapping.Role{"requests_running", "requests_waiting"}},
	"vllm_derived_kv_cache_free_tokens":                     {roles: []mapping.Role{"kv_cache_usage"}},
	"vllm_derived_slo_attainment_ratio":                     {roles: []mapping.Role{"ttft", "time_per_output_token", "e2e_latency"}},
	"vllm_derived_idle_seconds":                             {roles: []mapping.Role{"requests_running", "requests_waiting", "requests_finished", "prompt_tokens", "generation_tokens"}},
	"vllm_derived_generation_tokens_per_second_per_request": {roles: []mapping.Role{"generation_tokens", "requests_running"}},
	"vllm_derived_engine_imbalance_ratio":                   {roles: []mapping.Role{"requests_running", "requests_waiting"}},
	"vllm_derived_kv_cache_usage_spread":                    {roles: []mapping.Role{"kv_cache_usage"}},
	"vllm_derived_prefill_tokens_per_second":                {roles: []mapping.Role{"prompt_tokens_by_source", "prompt_tokens", "prefix_cache_hits", "external_prefix_cache_hits"}},
	"vllm_derived_prefill_backlog_seconds":                  {roles: []mapping.Role{"requests_waiting", "request_prompt_tokens"}, gauges: []string{"vllm_derived_prefill_tokens_per_second"}},
	"vllm_derived_requests_waiting_deferred_ratio":          {roles: []mapping.Role{"requests_waiting_by_reason"}},
	"vllm_derived_kv_transfer_failure_ratio":                {roles: []mapping.Role{"kv_transfer_failures", "kv_transfer_time"}},
	"vllm_derived_kv_transfer_seconds":                      {roles: []mapping.Role{"kv_transfer_time"}},
	"vllm_derived_kv_transfer_bytes_per_second":             {roles: []mapping.Role{"kv_transfer_bytes", "kv_transfer_time"}},
	"vllm_derived_kv_offload_load_bytes_per_second":         {roles: []mapping.Role{"kv_offload_load_bytes"}},
	"vllm_derived_kv_offload_store_bytes_per_second":        {roles: []mapping.Role{"kv_offload_store_bytes"}},
	"vllm_derived_finished_ratio":                           {roles: []mapping.Role{"requests_finished"}},
	"vllm_derived_admission_rejections_per_second":          {roles: []mapping.Role{"admission_rejections"}},
	"vllm_derived_admission_rejected_ratio":                 {roles: []mapping.Role{"admission_rejections", "ttft"}},
	"vllm_derived_admission_at_cap":                         {roles: []mapping.Role{"admission_rejections", "requests_running", "requests_waiting"}},
}

// checkHelp: a derived family's HELP is there, has no unfilled template,
// and names what the gauge is computed from, by the families' served names.
func checkHelp(t *testing.T, roles *mapping.Roles, f exposition.Family) {
	t.Helper()
	if f.Help == "" || strings.ContainsAny(f.Help, "{}") && !strings.Contains(f.Help, `slo="`) {
		t.Errorf("%s: HELP %q is empty or has an unfilled {role}", f.Name, f.Help)
	}
	in, ok := helpInputs[f.Name]
	if !ok {
		return // a gauge added by a test, not one of the product's
	}
	for _, r := range in.roles {
		d, ok := roles.Def(r)
		if !ok {
			t.Fatalf("role %s is not in roles.yaml", r)
		}
		name := strings.TrimSuffix(d.Family, "_total")
		if !strings.Contains(f.Help, name) {
			t.Errorf("%s: HELP does not name %s (role %s): %q", f.Name, name, r, f.Help)
		}
	}
	for _, g := range in.gauges {
		if !strings.Contains(f.Help, g) {
			t.Errorf("%s: HELP does not name %s: %q", f.Name, g, f.Help)
		}
	}
}

// Every gauge of the spec table has an entry above, so that none is left
// without a HELP check.
func TestHelpInputsCoverSpecs(t *testing.T) {
	for _, s := range Specs(testRoles()) {
		if _, ok := helpInputs[s.Name]; !ok {
			t.Errorf("%s: no helpInputs entry; say which families its HELP must name", s.Name)
		}
	}
}
