package mapping

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Pod roles: what a pod serves in a disaggregated deployment. vLLM's page
// does not say it (both sides usually run the KV connector as kv_both), so
// the deployment tells the sidecar (--upstream.role, from llm-d's
// llm-d.ai/role pod label).
const (
	PodRolePrefill = "prefill"
	PodRoleDecode  = "decode"
	PodRoleEncode  = "encode"
	// PodRoleBoth is llm-d's deprecated spelling of prefill-decode, and
	// what a pod without the label serves.
	PodRoleBoth = "both"
	// LabelRole carries the pod role on derived and routing series and on
	// vllm_normalizer_upstream_info.
	LabelRole = "role"
)

// llmdRoles are the values of llm-d's llm-d.ai/role label: a pod serves
// each stage its value names, joined by "-".
var llmdRoles = []string{PodRoleDecode, PodRolePrefill, PodRoleEncode, "prefill-decode", "encode-prefill", "encode-prefill-decode", PodRoleBoth}

// labelValue is a Kubernetes label value, which is what the downward API
// can give: at most 63 characters, alphanumeric at both ends, '-', '_'
// and '.' between.
var labelValue = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// PodRole is a pod's role: the value as served in the role label, and the
// stages it serves.
type PodRole struct {
	Value                   string
	Prefill, Decode, Encode bool
}

// DiagnosisRole is the role as the diagnosis reads it: "prefill" for a pod
// that prefills and does not decode, "decode" for one that decodes and does
// not prefill, "" otherwise (both, or neither).
func (r PodRole) DiagnosisRole() string {
	switch {
	case r.Prefill && !r.Decode:
		return PodRolePrefill
	case r.Decode && !r.Prefill:
		return PodRoleDecode
	}
	return ""
}

// ParsePodRole reads a pod role. A role never stops the sidecar: empty
// means both (a pod without the llm-d.ai/role label gets ""); any value
// llm-d does not define is served as given when it is a well-formed label
// value, its stages read from its "-"-separated parts, with a warning; a
// malformed one is served as both, with a warning. A value no part of
// which names a stage serves both, as a pod outside a disaggregated
// deployment does.
func ParsePodRole(s string) (role PodRole, warning string) {
	if s == "" {
		s = PodRoleBoth
	}
	if !labelValue.MatchString(s) {
		warning = fmt.Sprintf("the upstream role %.80q is not a Kubernetes label value (at most 63 characters: letters, digits, '-', '_', '.'); it is served as %s. Give one of llm-d.ai/role's values: %s", s, PodRoleBoth, strings.Join(llmdRoles, ", "))
		s = PodRoleBoth
	}
	role.Value = s
	if s == PodRoleBoth {
		role.Prefill, role.Decode = true, true
		return role, warning
	}
	for p := range strings.SplitSeq(s, "-") {
		switch p {
		case PodRolePrefill:
			role.Prefill = true
		case PodRoleDecode:
			role.Decode = true
		case PodRoleEncode:
			role.Encode = true
		}
	}
	if !role.Prefill && !role.Decode && !role.Encode {
		role.Prefill, role.Decode = true, true
	}
	if warning == "" && !slices.Contains(llmdRoles, s) {
		warning = fmt.Sprintf("the upstream role %q is not one of llm-d.ai/role's values (%s); it is served as given, read as a pod that serves%s", s, strings.Join(llmdRoles, ", "), role.stages())
	}
	return role, warning
}

// stages lists what the role serves, for a warning.
func (r PodRole) stages() string {
	var out strings.Builder
	for _, s := range []struct {
		on   bool
		name string
	}{{r.Encode, " encode"}, {r.Prefill, " prefill"}, {r.Decode, " decode"}} {
		if s.on {
			out.WriteString(s.name)
		}
	}
	return out.String()
}
