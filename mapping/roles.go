package mapping

import (
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v2"
)

//go:embed roles.yaml
var rolesYAML []byte

// Role names a quantity that a derivation or the routing view reads,
// whatever a server calls it. roles.yaml defines each one; the code names
// them with these constants and never with a metric name.
type Role string

// The roles. Their types and units are in roles.yaml.
const (
	RoleRequestsRunning            Role = "requests_running"
	RoleRequestsWaiting            Role = "requests_waiting"
	RoleKVCacheUsage               Role = "kv_cache_usage"
	RoleKVCacheCapacity            Role = "kv_cache_capacity"
	RoleKVCacheFree                Role = "kv_cache_free"
	RolePreemptions                Role = "preemptions"
	RolePrefixCacheQueries         Role = "prefix_cache_queries"
	RolePrefixCacheHits            Role = "prefix_cache_hits"
	RoleExternalPrefixCacheQueries Role = "external_prefix_cache_queries"
	RoleExternalPrefixCacheHits    Role = "external_prefix_cache_hits"
	RolePrefixCacheHitRateGauge    Role = "prefix_cache_hit_rate_gauge"
	RoleCPUCacheUsage              Role = "cpu_cache_usage"
	RolePromptTokens               Role = "prompt_tokens"
	RoleGenerationTokens           Role = "generation_tokens"
	RoleRequestsFinished           Role = "requests_finished"
	RoleTTFT                       Role = "ttft"
	RoleInterTokenLatency          Role = "inter_token_latency"
	RoleTimePerOutputToken         Role = "time_per_output_token"
	RoleE2ELatency                 Role = "e2e_latency"
	RoleQueueTime                  Role = "queue_time"
	RolePrefillTime                Role = "prefill_time"
	RoleDecodeTime                 Role = "decode_time"
	RoleRequestPromptTokens        Role = "request_prompt_tokens"
	RoleRequestGenerationTokens    Role = "request_generation_tokens"
	RoleCacheConfig                Role = "cache_config"
	RoleLoRAInfo                   Role = "lora_info"
	RoleSleepState                 Role = "sleep_state"

	RoleRequestsWaitingByReason Role = "requests_waiting_by_reason"
	RolePromptTokensBySource    Role = "prompt_tokens_by_source"
	RoleKVTransferTime          Role = "kv_transfer_time"
	RoleKVTransferBytes         Role = "kv_transfer_bytes"
	RoleKVTransferFailures      Role = "kv_transfer_failures"
	RoleKVOffloadLoadBytes      Role = "kv_offload_load_bytes"
	RoleKVOffloadStoreBytes     Role = "kv_offload_store_bytes"
	RoleKVOffloadCPUUsage       Role = "kv_offload_cpu_cache_usage"

	RoleAdmissionRejections Role = "admission_rejections"
)

// Canonical label names: every profile's model and engine labels are
// renamed to these on the canonical page, as vLLM spells them.
const (
	LabelModel  = "model_name"
	LabelEngine = "engine"
)

// CompareEngines orders engine label values as numbers when both are, else
// as strings: engine "2" comes before engine "10". Whatever sums or lists
// over engines does so in this order, so that a float sum does not change
// in its last bits with map iteration order.
func CompareEngines(a, b string) int {
	ea, erra := strconv.Atoi(a)
	eb, errb := strconv.Atoi(b)
	if erra != nil || errb != nil {
		return cmp.Compare(a, b)
	}
	return cmp.Compare(ea, eb)
}

// The sleep-state role's label and its value for an engine that serves.
const (
	LabelSleepState = "sleep_state"
	SleepStateAwake = "awake"
)

// The finished-request role's reason label and its value for a request
// the client abandoned (it went away before the request ended).
const (
	LabelFinishedReason = "finished_reason"
	FinishedReasonAbort = "abort"
)

// Role types, as roles.yaml spells them.
const (
	RoleTypeGauge     = "gauge"
	RoleTypeCounter   = "counter"
	RoleTypeHistogram = "histogram"
	RoleTypeInfo      = "info"
)

// RoleDef is one role of roles.yaml, with the canonical family that plays
// it: the current vLLM catalogue entry marked with the role.
type RoleDef struct {
	Name Role   `yaml:"name"`
	Type string `yaml:"type"`
	Unit string `yaml:"unit"`
	Help string `yaml:"help"`
	// Bounds overrides the range the unit gives a gauge role ([lo, hi]).
	Bounds []float64 `yaml:"range"`
	// Family is the canonical family name, as a text-format TYPE line
	// prints it (counters end in _total): the catalogue family marked with
	// the role, or, for a role the sidecar computes (Computed), the name
	// roles.yaml gives.
	Family string `yaml:"family"`
	// Computed: no vLLM family plays the role; Profile.Canonical fills it
	// from the profile's kv section.
	Computed bool `yaml:"-"`
}

// Part is which sample of a role's family a name stands for.
type Part uint8

// Parts of a family: the value of a gauge or counter, and the three
// sample kinds of a classic histogram.
const (
	PartValue Part = iota
	PartBucket
	PartSum
	PartCount
)

// Roles is every role with its canonical family. Read-only once built.
type Roles struct {
	defs     []RoleDef
	byName   map[Role]int
	byFamily map[string]int // canonical family name -> index into defs
	// legacy are the catalogue's legacy names of each role's family (the
	// families it renamed into it), for consumers that still read them.
	legacy map[Role][]string
}

type rolesFile struct {
	Version int       `yaml:"version"`
	Roles   []RoleDef `yaml:"roles"`
}

var validRoleTypes = map[string]bool{RoleTypeGauge: true, RoleTypeCounter: true, RoleTypeHistogram: true, RoleTypeInfo: true}

// buildRoles parses roles.yaml and gives each role the catalogue family
// that plays it. Every role needs exactly one current catalogue family of
// a matching type: the routing view prints the role under that name.
func buildRoles(b []byte, c *Catalogue) (*Roles, error) {
	var f rolesFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("roles: %w", err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("roles: version is %d; this build reads version 1 only", f.Version)
	}
	r := &Roles{defs: f.Roles, byName: make(map[Role]int, len(f.Roles))}
	var errs []error
	for i, d := range r.defs {
		where := fmt.Sprintf("roles[%d] %q", i, d.Name)
		if d.Name == "" {
			errs = append(errs, fmt.Errorf("%s: name is empty", where))
		}
		if j, dup := r.byName[d.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: duplicate role, first defined at roles[%d]", where, j))
		}
		r.byName[d.Name] = i
		if !validRoleTypes[d.Type] {
			errs = append(errs, fmt.Errorf("%s: type %q is invalid; use gauge, counter, histogram or info", where, d.Type))
		}
		if d.Unit == "" || d.Help == "" {
			errs = append(errs, fmt.Errorf("%s: unit and help are required", where))
		}
		if d.Bounds != nil && (len(d.Bounds) != 2 || !(d.Bounds[0] < d.Bounds[1]) || d.Type != RoleTypeGauge) {
			errs = append(errs, fmt.Errorf("%s: range %v must be [lo, hi] with lo < hi, on a gauge", where, d.Bounds))
		}
		if d.Family != "" {
			r.defs[i].Computed = true
			if d.Type != RoleTypeGauge {
				errs = append(errs, fmt.Errorf("%s: family %q is for computed gauges only; a %s role takes its family from the catalogue", where, d.Family, d.Type))
			}
		}
	}
	for i := range c.Metrics {
		m := &c.Metrics[i]
		if m.Role == "" {
			continue
		}
		where := fmt.Sprintf("catalogue metrics[%d] %q", i, m.Name)
		k, ok := r.byName[Role(m.Role)]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: role %q is not defined in roles.yaml", where, m.Role))
			continue
		}
		d := &r.defs[k]
		if m.IsRenamed() {
			errs = append(errs, fmt.Errorf("%s: role %q on a legacy family; put it on the current family that replaced it", where, m.Role))
		}
		want := d.Type
		if want == RoleTypeInfo {
			want = RoleTypeGauge
		}
		if m.Type != want {
			errs = append(errs, fmt.Errorf("%s: role %q is a %s, the family a %s", where, m.Role, d.Type, m.Type))
		}
		if d.Family != "" {
			errs = append(errs, fmt.Errorf("%s: role %q is already played by %s; a role has one canonical family", where, m.Role, d.Family))
			continue
		}
		d.Family = m.Name
	}
	for _, d := range r.defs {
		if d.Family == "" {
			errs = append(errs, fmt.Errorf("role %q: no catalogue family has it; mark the current vLLM family that plays it with role: %s", d.Name, d.Name))
		}
	}
	r.byFamily = make(map[string]int, len(r.defs))
	for i, d := range r.defs {
		r.byFamily[d.Family] = i
	}
	r.legacy = map[Role][]string{}
	for i := range c.Metrics {
		m := &c.Metrics[i]
		if m.Replacement == "" {
			continue
		}
		final, err := c.resolve(m.Name)
		if err != nil {
			continue // reported by the catalogue's own validation
		}
		for _, d := range r.defs {
			if d.Family == final {
				r.legacy[d.Name] = append(r.legacy[d.Name], m.Name)
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("roles: %w", errors.Join(errs...))
	}
	return r, nil
}

// Def returns a role's definition.
func (r *Roles) Def(role Role) (RoleDef, bool) {
	i, ok := r.byName[role]
	if !ok {
		return RoleDef{}, false
	}
	return r.defs[i], true
}

// ByFamily returns the definition of the role a canonical family plays.
func (r *Roles) ByFamily(family string) (RoleDef, bool) {
	i, ok := r.byFamily[family]
	if !ok {
		return RoleDef{}, false
	}
	return r.defs[i], true
}

// All returns every role, in roles.yaml's order.
func (r *Roles) All() []RoleDef { return r.defs }

// Family returns the canonical family name of a role ("" if unknown).
func (r *Roles) Family(role Role) string {
	d, _ := r.Def(role)
	return d.Family
}

// Expand replaces each {role} in s with the role's canonical family, so
// that text written once over roles (a derived gauge's HELP and PromQL, a
// diagnosis cause's PromQL) names what the catalogue names; a {word} that
// is no role is kept as written.
func (r *Roles) Expand(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			break
		}
		name := r.Family(Role(s[i+1 : i+j]))
		if name == "" {
			b.WriteString(s[:i+j+1]) // not a role: kept as written
		} else {
			b.WriteString(s[:i])
			b.WriteString(name)
		}
		s = s[i+j+1:]
	}
	b.WriteString(s)
	return b.String()
}

// IsHistogram reports whether family is the canonical family of a
// histogram role (what rules and dashboards may read as _bucket, _sum and
// _count, or as one native histogram).
func (r *Roles) IsHistogram(family string) bool {
	for _, d := range r.defs {
		if d.Type == RoleTypeHistogram && d.Family == family {
			return true
		}
	}
	return false
}

// Legacy returns the names vLLM printed before the role's canonical family
// (the catalogue's renames into it), in catalogue order; nil if none.
func (r *Roles) Legacy(role Role) []string { return r.legacy[role] }

// Sample returns the canonical name of one part's samples: the family
// name for a gauge or counter value, with _bucket, _sum or _count for a
// histogram's parts.
func (r *Roles) Sample(role Role, part Part) string {
	d, _ := r.Def(role)
	return d.Sample(part)
}

// Sample is Roles.Sample for this role ("" when it has no family).
func (d RoleDef) Sample(part Part) string {
	if d.Family == "" {
		return ""
	}
	switch part {
	case PartBucket:
		return d.Family + "_bucket"
	case PartSum:
		return d.Family + "_sum"
	case PartCount:
		return d.Family + "_count"
	}
	return d.Family
}

// samplePart says which part of a role's family a native sample is; ok is
// false for a sample that is no part of the role's value: a gauge's or
// counter's value is the sample named as its family (a counter also with
// _total), never a _created or other companion sample that a text page may
// file under the same family.
func samplePart(family, sample string, histogram bool) (Part, bool) {
	rest, ok := strings.CutPrefix(sample, family)
	if !ok {
		return 0, false
	}
	if !histogram {
		return PartValue, rest == "" || rest == "_total" && !strings.HasSuffix(family, "_total")
	}
	switch rest {
	case "_bucket":
		return PartBucket, true
	case "_sum":
		return PartSum, true
	case "_count":
		return PartCount, true
	}
	return 0, false
}
