package mapping

import "fmt"

// Pod roles: what a pod serves in a disaggregated deployment. vLLM's page
// does not say it (both sides usually run the KV connector as kv_both), so
// the deployment tells the sidecar (--upstream.role, from llm-d's
// llm-d.ai/role pod label).
const (
	PodRolePrefill = "prefill"
	PodRoleDecode  = "decode"
	PodRoleBoth    = "both"
	// LabelRole carries the pod role on derived and routing series and on
	// vllm_normalizer_upstream_info.
	LabelRole = "role"
)

// ParsePodRole checks a pod role; empty means both, as a pod without the
// llm-d.ai/role label (the downward API then gives "") serves both.
func ParsePodRole(s string) (string, error) {
	switch s {
	case "":
		return PodRoleBoth, nil
	case PodRolePrefill, PodRoleDecode, PodRoleBoth:
		return s, nil
	}
	return "", fmt.Errorf("the upstream role %q is not one of prefill, decode or both (llm-d.ai/role's values); give one of them, or leave it empty for both", s)
}
