package mapping

import (
	"cmp"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"go.yaml.in/yaml/v2"

	"github.com/fos-study/vllm-normalizer/exposition"
)

//go:embed profiles/*.yaml
var profilesFS embed.FS

// Servers as profiles and vllm_normalizer_upstream_info name them.
const (
	ServerVLLM    = "vllm"
	ServerUnknown = "unknown"
)

// Profile is what the product knows about one kind of server: how to tell
// its page, which labels name the model and the data-parallel engine, and
// which of its families plays which role, scaled to the role's unit. One
// data file per server under profiles/.
type Profile struct {
	Version int    `yaml:"version"`
	Server  string `yaml:"server"`
	// Title is the server's name as people write it (SGLang, llama.cpp):
	// help texts, the landing and diagnosis pages and the docs name the
	// servers by it. An operator file may leave it out (Server then).
	Title  string `yaml:"title"`
	Detect struct {
		// Prefixes: the families of this server start with one of them;
		// the first names the server's families in odd-page evidence.
		Prefixes []string `yaml:"prefixes"`
		// Fingerprints are families (without prefix) that only this
		// server prints: strong evidence, weighed above other families.
		Fingerprints []string `yaml:"fingerprints"`
		// OpenMetricsFrontend: a frontend of this server answers
		// OpenMetrics whatever the request asks for; such an answer to the
		// sidecar's text-first request counts as a fingerprint.
		OpenMetricsFrontend bool `yaml:"openmetrics_frontend"`
	} `yaml:"detect"`
	Labels struct {
		Model   string   `yaml:"model"`
		Engine  string   `yaml:"engine"`
		Process []string `yaml:"process"`
		// ProcessAggregate is how a gauge's series that differ only in
		// process labels are combined on the canonical page: "max" where
		// ranks repeat one engine's numbers (SGLang), "" to keep them
		// apart for the routing view's own rule (vLLM's pid: counts
		// summed, KV usage the maximum).
		ProcessAggregate string `yaml:"process_aggregate"`
		// Parts are labels that split a gauge into parts printed beside
		// their total (the total has the label empty or absent, as
		// SGLang's priority label): where a total is printed, the parts
		// are left out, so that nothing is counted twice.
		Parts []string `yaml:"parts"`
	} `yaml:"labels"`
	// FillsGaps marks families printed beside another server's (Dynamo's
	// runtime around an engine): on such a page the engine is the server
	// and they are not reported as odd; a page of them alone (Dynamo's
	// frontend) is this profile's.
	FillsGaps bool `yaml:"fills_gaps"`
	// RolesFromCatalogue: the families are vLLM's own, whose roles the
	// catalogue gives (vLLM only).
	RolesFromCatalogue bool      `yaml:"roles_from_catalogue"`
	Roles              []Binding `yaml:"roles"`
	// KV says where the page gives each engine's KV-cache size and free
	// space in tokens (the kv_cache_capacity and kv_cache_free roles);
	// in each list the first source the page has is used.
	KV struct {
		Capacity []KVSource `yaml:"capacity"`
		Free     []KVSource `yaml:"free"`
	} `yaml:"kv"`
	// NotComparable lists native families that look like a role and are
	// left out on purpose; they are documentation, never read.
	NotComparable []struct {
		Family string `yaml:"family"`
		Role   Role   `yaml:"role"`
		Why    string `yaml:"why"`
	} `yaml:"not_comparable"`

	// byName: native family name (every prefix, as TYPE lines print it and
	// without _total) -> indexes into Roles, in the file's order.
	byName map[string][]int
	// source is the operator file the profile came from; "" when built in.
	source string
}

// Binding says that a native family plays a role. Family is the name
// without the profile's prefix, as a text-format TYPE line prints it.
type Binding struct {
	Role   Role    `yaml:"role"`
	Family string  `yaml:"family"`
	Scale  float64 `yaml:"scale"`
	// OlderType is the type the family had in older releases of the
	// server, under the same name, when that type cannot play the role
	// (SGLang's kv_transfer_* gauges became histograms): such a page
	// leaves the role empty. Documentation, checked against the fixtures.
	OlderType string `yaml:"older_type"`
	// Why says why the family plays more than one role; a family bound
	// twice without it is refused, as it would serve one quantity as
	// another (waiting served as running).
	Why string `yaml:"why"`
}

// KVSource is one place a page gives a KV-cache figure in tokens. Family
// (without the profile's prefix) is either an info gauge whose labels carry
// integers, TokensLabel or BlocksLabel times BlockSizeLabel (with all
// three the tokens are used and the product checked against them), or a
// gauge whose value is tokens, or blocks when BlockSizeFamily names the
// gauge of tokens per block with the same labels.
type KVSource struct {
	Family          string `yaml:"family"`
	TokensLabel     string `yaml:"tokens_label"`
	BlocksLabel     string `yaml:"blocks_label"`
	BlockSizeLabel  string `yaml:"block_size_label"`
	BlockSizeFamily string `yaml:"block_size_family"`
	// PlusFamily names a gauge of tokens with the same labels whose value
	// is added to the gauge's (SGLang's evictable radix-cache tokens beside
	// its available ones: free as vLLM counts free).
	PlusFamily string `yaml:"plus_family"`
}

func (k *KVSource) info() bool { return k.TokensLabel != "" || k.BlocksLabel != "" }

// Profiles are the server profiles, vLLM's first. Read-only once loaded.
type Profiles struct {
	list  []*Profile
	roles *Roles
}

// LoadProfiles reads the embedded profiles and checks them against roles.
func LoadProfiles(roles *Roles) (*Profiles, error) {
	files, err := fs.Glob(profilesFS, "profiles/*.yaml")
	if err != nil {
		return nil, err
	}
	datas := make(map[string][]byte, len(files))
	for _, f := range files {
		b, err := profilesFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		datas[path.Base(f)] = b
	}
	return parseProfiles(datas, roles)
}

func parseProfiles(files map[string][]byte, roles *Roles) (*Profiles, error) {
	ps := &Profiles{roles: roles}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	var errs []error
	servers := map[string]string{}
	for _, n := range names {
		p, err := parseProfile(n, files[n], roles)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := servers[p.Server]; dup {
			errs = append(errs, fmt.Errorf("profile %s: server %q is already described by %s", n, p.Server, other))
			continue
		}
		servers[p.Server] = n
		ps.list = append(ps.list, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if _, ok := servers[ServerVLLM]; !ok {
		return nil, fmt.Errorf("profiles: none describes server %q", ServerVLLM)
	}
	// vLLM first, then by file name: a fixed order for All. Detection does
	// not depend on it (a page matching two profiles is unknown).
	vllmFirst(ps.list)
	return ps, nil
}

func vllmFirst(list []*Profile) {
	slices.SortStableFunc(list, func(a, b *Profile) int {
		switch {
		case a.Server == ServerVLLM:
			return -1
		case b.Server == ServerVLLM:
			return 1
		}
		return 0
	})
}

func parseProfile(file string, b []byte, roles *Roles) (*Profile, error) {
	p := &Profile{byName: map[string][]int{}}
	if err := yaml.UnmarshalStrict(b, p); err != nil {
		var tree yaml.MapSlice
		if yaml.Unmarshal(b, &tree) == nil {
			if u := unknownKey(tree, reflect.TypeFor[Profile](), ""); u != "" {
				return nil, fmt.Errorf("profile %s: %s (docs/operating.md, \"Engine profile files\")", file, u)
			}
		}
		return nil, fmt.Errorf("profile %s: %w; fix the YAML: an engine profile is written as those of mapping/profiles/ (docs/operating.md, \"Engine profile files\")", file, err)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("profile %s: "+format, append([]any{file}, args...)...))
	}
	if p.Version != 1 {
		bad("version is %d; this build reads version 1 only", p.Version)
	}
	if p.Server == "" || p.Server == ServerUnknown || !model.LegacyValidation.IsValidLabelName(p.Server) {
		bad("server %q must be a short name such as sglang", p.Server)
	}
	if len(p.Detect.Prefixes) == 0 {
		bad("detect.prefixes is empty; give the prefix every family of the server starts with, e.g. [\"sglang:\"]")
	}
	for _, pre := range p.Detect.Prefixes {
		if pre == "" {
			bad("detect.prefixes has an empty prefix, which would match every page")
		}
	}
	if p.Labels.ProcessAggregate != "" && p.Labels.ProcessAggregate != "max" {
		bad("labels.process_aggregate %q is invalid; use max, or leave it out", p.Labels.ProcessAggregate)
	}
	if p.RolesFromCatalogue != (p.Server == ServerVLLM) {
		bad("roles_from_catalogue is for the vllm profile only, whose roles the catalogue holds")
	}
	if p.RolesFromCatalogue && len(p.Roles) > 0 {
		bad("roles_from_catalogue and roles are exclusive")
	}
	for i := range p.Roles {
		r := &p.Roles[i]
		d, ok := roles.Def(r.Role)
		if !ok {
			bad("roles[%d]: role %q is not defined in roles.yaml", i, r.Role)
			continue
		}
		if r.Family == "" {
			bad("roles[%d] (%s): family is empty", i, r.Role)
		}
		if r.Scale == 0 {
			r.Scale = 1
		}
		if r.Scale < 0 || math.IsInf(r.Scale, 0) || math.IsNaN(r.Scale) {
			bad("roles[%d] (%s): scale %v must be a positive number", i, r.Role, r.Scale)
		} else if msg := scaleOutOfRange(d, r.Scale); msg != "" {
			bad("roles[%d] (%s): scale %v %s", i, r.Role, r.Scale, msg)
		}
		if r.OlderType != "" && (!validRoleTypes[r.OlderType] || r.OlderType == d.Type) {
			bad("roles[%d] (%s): older_type %q must be another type than the role's %s (gauge, counter or histogram)", i, r.Role, r.OlderType, d.Type)
		}
		if r.Scale != 1 && (d.Type == RoleTypeInfo || d.Name == RoleSleepState) {
			bad("roles[%d] (%s): an %s role cannot be scaled", i, r.Role, d.Type)
		}
		for _, pre := range p.Detect.Prefixes {
			name := pre + r.Family
			p.byName[name] = append(p.byName[name], i)
			if base, ok := strings.CutSuffix(name, "_total"); ok && d.Type == RoleTypeCounter {
				// OpenMetrics TYPE lines name counters without _total.
				p.byName[base] = append(p.byName[base], i)
			}
		}
	}
	for _, msg := range sharedFamilies(p.Roles) {
		bad("%s", msg)
	}
	for _, msg := range labelCollisions(p) {
		bad("%s", msg)
	}
	for list, srcs := range map[string][]KVSource{"kv.capacity": p.KV.Capacity, "kv.free": p.KV.Free} {
		for i, k := range srcs {
			switch {
			case k.Family == "":
				bad("%s[%d]: family is empty", list, i)
			case k.info() && k.PlusFamily != "":
				bad("%s[%d] (%s): plus_family is for a gauge of tokens; an info family gives its tokens as labels", list, i, k.Family)
			case k.info() && k.BlockSizeFamily != "":
				bad("%s[%d] (%s): block_size_family is for a gauge of blocks; an info family gives the block size as block_size_label", list, i, k.Family)
			case (k.BlocksLabel == "") != (k.BlockSizeLabel == ""):
				bad("%s[%d] (%s): blocks_label and block_size_label go together (tokens = blocks × block size)", list, i, k.Family)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// Scale bounds: a unit conversion spans at most nano to giga; a larger
// factor turns ordinary values into +Inf or 0.
const (
	minScale = 1e-9
	maxScale = 1e9
)

// scaleOutOfRange says how a scale can carry a role's values out of its
// range, "" when it cannot: a share (unit ratio or boolean) stays within 0
// to 1 only with a scale of at most 1 (0.01 for a percentage), and any
// role's values stay finite and distinct from 0 only within nano to giga.
func scaleOutOfRange(d RoleDef, scale float64) string {
	if _, hi, ok := d.Range(); ok && hi == 1 && scale > 1 || d.Unit == "boolean" && scale > 1 {
		return fmt.Sprintf("would carry the role's 0 to 1 (%s) past 1; give at most 1 (0.01 turns a percentage into a fraction)", d.Unit)
	}
	if scale < minScale || scale > maxScale {
		return fmt.Sprintf("is outside %g to %g, the widest unit conversion (nano to giga), and would turn ordinary values into +Inf or 0; give the factor from the family's unit to the role's %s", minScale, maxScale, d.Unit)
	}
	return ""
}

// sharedFamilies returns an error message for each family bound more than
// once: twice to one role always (a copy), to two roles unless each
// binding says why (one quantity would be served as another).
func sharedFamilies(bs []Binding) []string {
	var out []string
	first := map[string]int{}
	for i, b := range bs {
		j, seen := first[b.Family]
		if !seen {
			first[b.Family] = i
			continue
		}
		switch {
		case bs[j].Role == b.Role:
			out = append(out, fmt.Sprintf("roles[%d] (%s): family %q is bound to %s already by roles[%d]; remove the copy", i, b.Role, b.Family, b.Role, j))
		case b.Why == "" || bs[j].Why == "":
			out = append(out, fmt.Sprintf("roles[%d] (%s): family %q already plays %s (roles[%d]): one family would be served as two quantities; bind each role to the family that measures it, or say in why: on both entries why this family is both", i, b.Role, b.Family, bs[j].Role, j))
		}
	}
	return out
}

// reservedLabels are label names a profile's label roles may not take:
// the bucket and quantile bounds, the metric name, and the names the
// sidecar reserves (a leading __).
var reservedLabels = []string{model.BucketLabel, model.QuantileLabel, model.MetricNameLabel}

// labelCollisions returns an error message for each label role of p that
// is not a label name, is reserved, or names the same label as another:
// the model label equal to the engine label would read every engine as a
// model.
func labelCollisions(p *Profile) []string {
	var out []string
	type use struct{ field, name string }
	var uses []use
	if p.Labels.Model != "" {
		uses = append(uses, use{"labels.model", p.Labels.Model})
	}
	if p.Labels.Engine != "" {
		uses = append(uses, use{"labels.engine", p.Labels.Engine})
	}
	for i, l := range p.Labels.Process {
		uses = append(uses, use{fmt.Sprintf("labels.process[%d]", i), l})
	}
	for i, l := range p.Labels.Parts {
		uses = append(uses, use{fmt.Sprintf("labels.parts[%d]", i), l})
	}
	seen := map[string]string{}
	for _, u := range uses {
		switch {
		case !model.LegacyValidation.IsValidLabelName(u.name):
			out = append(out, fmt.Sprintf("%s %q is not a label name; give the label as the page prints it, e.g. model_name", u.field, u.name))
		case slices.Contains(reservedLabels, u.name) || strings.HasPrefix(u.name, "__"):
			out = append(out, fmt.Sprintf("%s %q is a label Prometheus reserves (le, quantile, __name__, __*): its values are bounds or names, never a model, engine or process; give the label the page names it with", u.field, u.name))
		case seen[u.name] != "":
			out = append(out, fmt.Sprintf("%s %q is also %s: one label cannot say two things; give each its own label, or leave one out (\"\" for no engine label)", u.field, u.name, seen[u.name]))
		default:
			seen[u.name] = u.field
		}
	}
	return out
}

// ProfileSource is one operator-supplied profile file: where it came
// from (for errors) and its bytes. Reading the file is the caller's job.
type ProfileSource struct {
	Name string
	Data []byte
}

// With returns the profiles with srcs added: a source whose server is
// already described replaces that profile, any other adds one. ps is not
// changed. Each source is checked as the built-in files are, and also
// against the others: two sources for one server, or a prefix that another
// profile's prefix starts with (a family would be evidence for both), are
// errors that name the file, the value and the fix.
func (ps *Profiles) With(srcs []ProfileSource) (*Profiles, error) {
	if len(srcs) == 0 {
		return ps, nil
	}
	var errs []error
	added := map[string]string{} // server -> source name
	var extra []*Profile
	for _, src := range srcs {
		p, err := parseProfile(src.Name, src.Data, ps.roles)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := added[p.Server]; dup {
			errs = append(errs, fmt.Errorf("profile %s: server %q is already described by %s; keep one file per server", src.Name, p.Server, other))
			continue
		}
		added[p.Server] = src.Name
		p.source = src.Name
		extra = append(extra, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := &Profiles{roles: ps.roles}
	for _, p := range ps.list {
		if _, replaced := added[p.Server]; !replaced {
			out.list = append(out.list, p)
		}
	}
	for _, p := range extra {
		for _, q := range out.list {
			if pre, qpre, ok := overlap(p, q); ok {
				errs = append(errs, fmt.Errorf("profile %s: detect.prefixes %q overlaps %q of server %q%s: each family would count as both servers', and a page could be read under the wrong one's roles; choose a prefix only %s prints, or set server: %s to replace that profile",
					p.source, pre, qpre, q.Server, q.from(), p.Server, q.Server))
			}
		}
		out.list = append(out.list, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	vllmFirst(out.list)
	return out, nil
}

// overlap reports a prefix of p and one of q where either starts with the
// other, so that one family name could match both.
func overlap(p, q *Profile) (string, string, bool) {
	for _, a := range p.Detect.Prefixes {
		for _, b := range q.Detect.Prefixes {
			if strings.HasPrefix(a, b) || strings.HasPrefix(b, a) {
				return a, b, true
			}
		}
	}
	return "", "", false
}

// from says where an operator profile came from; "" for a built-in one.
func (p *Profile) from() string {
	if p.source == "" {
		return " (built in)"
	}
	return " (" + p.source + ")"
}

// Source is the operator file a profile was read from, "" when built in.
func (p *Profile) Source() string { return p.source }

// ServerTitles maps each built-in profile's server to its title.
func ServerTitles() map[string]string {
	out := map[string]string{}
	for _, p := range builtInHeads() {
		out[p.Server] = p.Title
	}
	return out
}

// ServerList names the built-in profiles' servers as a sentence does:
// "vLLM, SGLang and Dynamo", vLLM first and servers that fill gaps around
// an engine (Dynamo's runtime) last.
func ServerList() string {
	heads := builtInHeads()
	rank := func(h profileHead) int {
		switch {
		case h.Server == ServerVLLM:
			return 0
		case h.FillsGaps:
			return 2
		}
		return 1
	}
	slices.SortStableFunc(heads, func(a, b profileHead) int { return cmp.Compare(rank(a), rank(b)) })
	var titles []string
	for _, h := range heads {
		titles = append(titles, h.Title)
	}
	if len(titles) < 2 {
		return strings.Join(titles, "")
	}
	return strings.Join(titles[:len(titles)-1], ", ") + " and " + titles[len(titles)-1]
}

// profileHead is what names a built-in profile, read without checking the
// rest (LoadProfiles checks every field).
type profileHead struct {
	Server    string `yaml:"server"`
	Title     string `yaml:"title"`
	FillsGaps bool   `yaml:"fills_gaps"`
}

// builtInHeads are the built-in profiles' heads, by file name; a title left
// out is the server's name.
func builtInHeads() []profileHead {
	files, _ := fs.Glob(profilesFS, "profiles/*.yaml") // a valid pattern
	var out []profileHead
	for _, f := range files {
		var h profileHead
		b, err := profilesFS.ReadFile(f)
		if err == nil {
			err = yaml.Unmarshal(b, &h)
		}
		if err != nil || h.Server == "" {
			continue // LoadProfiles reports it
		}
		h.Title = cmp.Or(h.Title, h.Server)
		out = append(out, h)
	}
	return out
}

// All returns every profile, vLLM's first.
func (ps *Profiles) All() []*Profile { return ps.list }

// Detect returns the profile of the server that printed the page, as
// Detection decides; nil when none is found.
func (ps *Profiles) Detect(fams []exposition.Family) *Profile { return ps.Detection(fams).Profile }

// Detection is which server printed a page, and what on it was odd.
type Detection struct {
	// Profile is the server's; nil when no profile's prefix is on the page
	// or two servers have the same weight of evidence.
	Profile *Profile
	// Odd says which families of other servers the page also holds, with
	// their count and the least name ("" when none): a composite or mixed
	// page, served as the majority server's.
	Odd string
	// Tie names the servers whose evidence weighed the same (Profile nil).
	Tie string
}

// Weights of the evidence for a server: each family under its prefixes,
// each role its families fill, each fingerprint (a family only that
// server prints). One stray series cannot outweigh a page.
const (
	weightFamily      = 1
	weightRole        = 2
	weightFingerprint = 3
)

// Detection weighs the evidence for each profile: the page's families
// under its prefixes, the roles they fill and its fingerprints. The
// heaviest wins; families of the others are reported as odd. A page
// without any profile's families, or with two servers of equal weight, has
// no profile: reading one server's numbers under another's roles would be
// wrong.
func (ps *Profiles) Detection(fams []exposition.Family) Detection {
	return ps.DetectionOf(fams, false)
}

// DetectionOf is Detection for a page that came as OpenMetrics or not:
// a profile with detect.openmetrics_frontend (vLLM's Rust frontend answers
// OpenMetrics whatever the request asks, the sidecar asking for text
// first) counts an OpenMetrics answer as one more fingerprint.
func (ps *Profiles) DetectionOf(fams []exposition.Family, openMetrics bool) Detection {
	type evidence struct {
		score, families int
		least           string
	}
	ev := make([]evidence, len(ps.list))
	names := make(map[string]bool, len(fams))
	for i := range fams {
		names[fams[i].Name] = true
	}
	has := func(name string) bool {
		if names[name] {
			return true
		}
		base, ok := strings.CutSuffix(name, "_total")
		return ok && names[base]
	}
	for pi, p := range ps.list {
		e := &ev[pi]
		for i := range fams {
			if p.hasPrefix(fams[i].Name) {
				e.families++
				if e.least == "" || fams[i].Name < e.least {
					e.least = fams[i].Name
				}
			}
		}
		if e.families == 0 {
			continue
		}
		roles := 0
		for _, d := range ps.roles.All() {
			if p.fills(d, has, ps.roles) {
				roles++
			}
		}
		prints := 0
		for _, f := range p.Detect.Fingerprints {
			for _, pre := range p.Detect.Prefixes {
				if has(pre + f) {
					prints++
					break
				}
			}
		}
		if openMetrics && p.Detect.OpenMetricsFrontend {
			prints++
		}
		e.score = e.families*weightFamily + roles*weightRole + prints*weightFingerprint
	}
	// A gap-filling profile (Dynamo's families, printed beside an
	// engine's) is the server only of a page no other profile matches.
	others := false
	for i := range ev {
		others = others || ev[i].families > 0 && !ps.list[i].FillsGaps
	}
	best := -1
	for i := range ev {
		if others && ps.list[i].FillsGaps {
			continue
		}
		if ev[i].score > 0 && (best < 0 || ev[i].score > ev[best].score) {
			best = i
		}
	}
	if best < 0 {
		return Detection{}
	}
	var d Detection
	var odd, tie []string
	for i := range ev {
		switch {
		case i == best || ev[i].families == 0:
		case ps.list[i].FillsGaps:
			// Printed beside the engine's by design: not odd.
		case ev[i].score == ev[best].score:
			tie = append(tie, ps.list[i].Server)
		default:
			unit := "families"
			if ev[i].families == 1 {
				unit = "family"
			}
			odd = append(odd, fmt.Sprintf("%d %s %s (%s)", ev[i].families, ps.list[i].Detect.Prefixes[0], unit, ev[i].least))
		}
	}
	if len(tie) > 0 {
		d.Tie = strings.Join(append([]string{ps.list[best].Server}, tie...), " and ")
		return d
	}
	d.Profile = ps.list[best]
	d.Odd = strings.Join(odd, ", ")
	return d
}

func (p *Profile) hasPrefix(name string) bool {
	for _, pre := range p.Detect.Prefixes {
		if strings.HasPrefix(name, pre) {
			return true
		}
	}
	return false
}

// fills says whether the page has a family that plays role d for p: for
// vLLM the catalogue's family or one of its legacy names, for the others
// a family the profile binds to it.
func (p *Profile) fills(d RoleDef, has func(string) bool, roles *Roles) bool {
	if d.Computed {
		return false
	}
	if p.RolesFromCatalogue {
		if has(d.Family) {
			return true
		}
		return slices.ContainsFunc(roles.Legacy(d.Name), has)
	}
	for _, b := range p.Roles {
		if b.Role != d.Name {
			continue
		}
		for _, pre := range p.Detect.Prefixes {
			if has(pre + b.Family) {
				return true
			}
		}
	}
	return false
}

// Canonical returns the families of the page that play a role, under the
// role's canonical (vLLM V1) name, with values scaled to the role's unit
// and the model and engine labels renamed to model_name and engine, so
// that derivations and the routing view read every server alike. For the
// vLLM profile the normalised page already is canonical and is returned
// as is. Where several of the profile's families play one role (names of
// different releases), the first in the file that the page has is used.
func (p *Profile) Canonical(fams []exposition.Family, roles *Roles) []exposition.Family {
	out, _ := p.CanonicalStats(fams, roles)
	return out
}

// CanonicalStats counts what Canonical met that is worth a self-metric.
type CanonicalStats struct {
	// NaNSkipped are NaN samples left out where the series of one engine's
	// processes or ranks are combined by their maximum, as PromQL's max
	// leaves NaN out; a group of NaN only gives no sample.
	NaNSkipped int
	// KVCapacityDisagreements are engines whose page prints its KV size in
	// tokens beside blocks and block size whose product differs (on
	// hybrid-KV models vLLM's block_size is the smallest group's); the
	// printed tokens are used.
	KVCapacityDisagreements int
	// OutOfRange are samples of a gauge role outside the role's range (a
	// negative count, a usage past 1, an infinite or absurd size), by
	// canonical family: the canonical page carries them as NaN, so every
	// collapse leaves them out as it does NaN (RoleDef.Range).
	OutOfRange map[string]int
}

// CanonicalStats is Canonical, with what it counted. For every profile,
// the kv_cache_capacity and kv_cache_free roles are added from the
// profile's kv section.
func (p *Profile) CanonicalStats(fams []exposition.Family, roles *Roles) ([]exposition.Family, CanonicalStats) {
	var st CanonicalStats
	kv := p.kvFamilies(fams, roles, &st)
	if p.RolesFromCatalogue {
		if len(kv) == 0 {
			return withinRange(fams, roles, &st), st
		}
		out := make([]exposition.Family, len(fams), len(fams)+len(kv))
		copy(out, fams)
		for _, f := range kv {
			i, _ := slices.BinarySearchFunc(out, f.Name, func(a exposition.Family, name string) int { return strings.Compare(a.Name, name) })
			out = slices.Insert(out, i, f)
		}
		return withinRange(out, roles, &st), st
	}
	// The binding used per role: the lowest index present on the page.
	use := map[Role]int{}
	at := map[int]int{} // binding -> family index
	for fi := range fams {
		for _, bi := range p.byName[fams[fi].Name] {
			b := &p.Roles[bi]
			if cur, ok := use[b.Role]; !ok || bi < cur {
				use[b.Role] = bi
				at[bi] = fi
			}
		}
	}
	out := make([]exposition.Family, 0, len(use)+len(kv))
	for _, d := range roles.All() {
		bi, ok := use[d.Name]
		if !ok || d.Computed {
			continue
		}
		if f, ok := p.canonicalFamily(&fams[at[bi]], &p.Roles[bi], d, &st); ok {
			out = append(out, f)
		}
	}
	out = append(out, kv...)
	slices.SortFunc(out, func(a, b exposition.Family) int { return strings.Compare(a.Name, b.Name) })
	return withinRange(out, roles, &st), st
}

// Native returns the page's family name as the role it plays reads it
// (model and engine labels renamed, ranks combined, parts left out, as
// Canonical does) but with the server's own values: no scale. It is what
// the server's own name says, for views that serve that name beside the
// role's; ok is false when the page does not print name or the profile
// binds it to no role. vLLM's families are returned as printed.
func (p *Profile) Native(fams []exposition.Family, roles *Roles, name string) (exposition.Family, bool) {
	if p.RolesFromCatalogue {
		// vLLM's families carry the canonical labels already: a name it
		// printed (a legacy one beside its current twin included) is
		// read as printed.
		for i := range fams {
			if isNamed(fams[i].Name, name) {
				return fams[i], true
			}
		}
		return exposition.Family{}, false
	}
	for i := range fams {
		bis := p.byName[fams[i].Name]
		if !isNamed(fams[i].Name, name) || len(bis) == 0 {
			continue
		}
		b := p.Roles[bis[0]]
		d, ok := roles.Def(b.Role)
		if !ok {
			return exposition.Family{}, false
		}
		b.Scale = 1
		var st CanonicalStats
		return p.canonicalFamily(&fams[i], &b, d, &st)
	}
	return exposition.Family{}, false
}

// isNamed reports whether family, as parsed, is the one a reader names
// name: the same, or with the _total a counter's samples carry. Without
// building family+"_total", as this runs for every family per lookup.
func isNamed(family, name string) bool {
	base, counter := strings.CutSuffix(name, "_total")
	return family == name || counter && family == base
}

// canonicalFamily rewrites one native family as the role's canonical one.
// A family whose type cannot play the role (a gauge for a histogram role)
// is left out: a wrong reading is worse than none.
func (p *Profile) canonicalFamily(f *exposition.Family, b *Binding, d RoleDef, st *CanonicalStats) (exposition.Family, bool) {
	histogram := d.Type == RoleTypeHistogram
	switch {
	case histogram && f.Type != model.MetricTypeHistogram,
		d.Type == RoleTypeCounter && f.Type != model.MetricTypeCounter && f.Type != model.MetricTypeUnknown,
		(d.Type == RoleTypeGauge || d.Type == RoleTypeInfo) && f.Type != model.MetricTypeGauge && f.Type != model.MetricTypeUnknown:
		return exposition.Family{}, false
	}
	typ := model.MetricTypeGauge
	switch d.Type {
	case RoleTypeCounter:
		typ = model.MetricTypeCounter
	case RoleTypeHistogram:
		typ = model.MetricTypeHistogram
	}
	nativeBase := f.Name // histogram families are named without suffix
	out := exposition.Family{Name: d.Family, Type: typ, Help: f.Help, Samples: make([]exposition.Sample, 0, len(f.Samples))}
	var lb labels.Builder
	for _, s := range f.Samples {
		part, ok := samplePart(nativeBase, s.Name(), histogram)
		if !ok {
			continue
		}
		v := s.Value
		lb.Reset(s.Labels)
		lb.Set(model.MetricNameLabel, d.Sample(part))
		if p.Labels.Model != "" && p.Labels.Model != LabelModel {
			lb.Set(LabelModel, s.Labels.Get(p.Labels.Model))
			lb.Del(p.Labels.Model)
		}
		if p.Labels.Engine != "" && p.Labels.Engine != LabelEngine {
			lb.Set(LabelEngine, s.Labels.Get(p.Labels.Engine))
			lb.Del(p.Labels.Engine)
		}
		switch part {
		case PartBucket:
			le, err := strconv.ParseFloat(s.Labels.Get(model.BucketLabel), 64)
			if err != nil {
				continue
			}
			if b.Scale != 1 {
				lb.Set(model.BucketLabel, string(exposition.AppendFloat(nil, le*b.Scale)))
			}
		case PartValue, PartSum:
			v *= b.Scale
		}
		out.Samples = append(out.Samples, exposition.Sample{Labels: lb.Labels(), Value: v})
	}
	if d.Type == RoleTypeGauge {
		for _, l := range p.Labels.Parts {
			out.Samples = totalsOnly(out.Samples, l)
		}
	}
	if p.Labels.ProcessAggregate == "max" && len(p.Labels.Process) > 0 && d.Type == RoleTypeGauge {
		var skipped int
		out.Samples, skipped = maxOverLabels(out.Samples, p.Labels.Process)
		st.NaNSkipped += skipped
	}
	return out, true
}

// totalsOnly leaves out the samples that carry a part label value when a
// sample without one (the total) is printed too.
func totalsOnly(samples []exposition.Sample, label string) []exposition.Sample {
	total := false
	for _, s := range samples {
		if s.Labels.Get(label) == "" {
			total = true
			break
		}
	}
	if !total {
		return samples
	}
	out := samples[:0:0]
	for _, s := range samples {
		if s.Labels.Get(label) == "" {
			out = append(out, s)
		}
	}
	return out
}

// maxOverLabels drops the given labels and keeps, for each remaining label
// set, the highest value, in first-seen order. NaN samples are left out and
// counted, as PromQL's max leaves them out: one bad rank must not spoil the
// others' value. A label set of NaN only stays NaN, so that whatever sums
// it downstream withdraws its sum rather than read less load.
func maxOverLabels(samples []exposition.Sample, drop []string) ([]exposition.Sample, int) {
	out := samples[:0:0]
	at := map[string]int{}
	nan := 0
	var lb labels.Builder
	for _, s := range samples {
		lb.Reset(s.Labels)
		lb.Del(drop...)
		l := lb.Labels()
		key := l.String()
		if math.IsNaN(s.Value) {
			nan++
		}
		if i, ok := at[key]; ok {
			if cur := out[i].Value; math.IsNaN(cur) || s.Value > cur {
				out[i].Value = s.Value
			}
			continue
		}
		at[key] = len(out)
		out = append(out, exposition.Sample{Labels: l, Value: s.Value})
	}
	return out, nan
}

// unknownKey names the first key of v that type t has no yaml field for,
// with its path and the keys valid there, "" when there is none: yaml's own
// error spells an anonymous struct's Go type instead.
func unknownKey(v any, t reflect.Type, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(yaml.MapSlice)
		if !ok {
			return ""
		}
		fields := map[string]reflect.Type{}
		var names []string
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			fields[name] = f.Type
			names = append(names, name)
		}
		for _, kv := range m {
			key := fmt.Sprint(kv.Key)
			at := key
			if path != "" {
				at = path + "." + key
			}
			ft, ok := fields[key]
			if !ok {
				there := ""
				if path != "" {
					there = " there"
				}
				return fmt.Sprintf("unknown key %s; valid keys%s are %s", at, there, strings.Join(names, ", "))
			}
			if u := unknownKey(kv.Value, ft, at); u != "" {
				return u
			}
		}
	case reflect.Slice:
		items, _ := v.([]any)
		for i, item := range items {
			if u := unknownKey(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); u != "" {
				return u
			}
		}
	}
	return ""
}
