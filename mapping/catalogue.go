package mapping

import (
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v2"
)

//go:embed catalogue.yaml
var catalogueYAML []byte

// CatalogueVersion is the only catalogue format version this package reads.
const CatalogueVersion = 1

// Kinds of metric, as the catalogue's kind field spells them.
const (
	KindRouting    = "routing"    // a gauge that means "now"
	KindDiagnostic = "diagnostic" // a counter or histogram that needs a window
	KindInfo       = "info"       // labels carry the data, the value does not
)

// Catalogue is every vllm: metric family the normalizer knows, with its
// history. It is read-only once loaded.
type Catalogue struct {
	Version int `yaml:"version"`
	// Prefix starts every family name vLLM prints ("vllm:").
	Prefix  string   `yaml:"prefix"`
	Metrics []Metric `yaml:"metrics"`

	byName map[string]int
	roles  *Roles
	// Computed once by validate from Metrics, for what every scrape asks
	// (Normalize's statuses, detectUpstream's version hint): the metrics'
	// indexes in name order, each metric's final replacements (sorted,
	// comma-separated), and its Added and Removed releases parsed.
	byNameOrder    []int
	replacements   []string
	added, removed []parsedRelease
}

// parsedRelease is parseRelease's result, kept.
type parsedRelease struct {
	r  release
	ok bool
}

// Roles returns every role with the catalogue family that plays it.
func (c *Catalogue) Roles() *Roles { return c.roles }

// Metric is one catalogue entry.
type Metric struct {
	// Name is the family name as a text-format TYPE line prints it
	// (counters end in _total).
	Name   string   `yaml:"name"`
	Type   string   `yaml:"type"`
	Unit   string   `yaml:"unit"`
	Labels []string `yaml:"labels"`
	Kind   string   `yaml:"kind"`
	// Engines lists the vLLM engines ("v0", "v1") that ever printed it.
	Engines []string `yaml:"engines"`
	// Added, Deprecated, Hidden and Removed are release tags ("v0.9.1") or
	// "main YYYY-MM-DD ..." when no tagged release is known.
	Added      string `yaml:"added"`
	Deprecated string `yaml:"deprecated,omitempty"`
	Hidden     string `yaml:"hidden,omitempty"`
	Removed    string `yaml:"removed,omitempty"`
	// Replacement is the family that carries this one's data under a new
	// name; empty when the metric is current or removed without successor.
	Replacement string `yaml:"replacement,omitempty"`
	// Split is a rename that depends on the value of one label.
	Split *Split `yaml:"split,omitempty"`
	// Alias asks for this legacy name to be re-emitted from its
	// replacement when legacy aliases are on.
	Alias bool   `yaml:"alias,omitempty"`
	Note  string `yaml:"note,omitempty"`
	// Role is the role (roles.yaml) this current family plays.
	Role string `yaml:"role,omitempty"`
	// AfterFirstRequest says which V1 releases print the family only once
	// the server has served its first request (the change that seeds it
	// at startup); empty when every release prints it from the start.
	AfterFirstRequest string `yaml:"after_first_request,omitempty"`
}

// Split describes a legacy family whose series go to different current
// families according to the value of Label; Label itself is dropped.
type Split struct {
	Label string            `yaml:"label"`
	Into  map[string]string `yaml:"into"`
}

// MetricType returns the Prometheus type of the entry.
func (m *Metric) MetricType() model.MetricType { return model.MetricType(m.Type) }

// IsRenamed reports whether the metric's data lives on under other names.
func (m *Metric) IsRenamed() bool { return m.Replacement != "" || m.Split != nil }

// IsRemoved reports whether vLLM removed the metric without a successor.
func (m *Metric) IsRemoved() bool { return !m.IsRenamed() && m.Removed != "" }

// Replacements returns the current families that carry this metric's data,
// sorted; nil for a metric that was not renamed.
func (m *Metric) Replacements() []string {
	if m.Replacement != "" {
		return []string{m.Replacement}
	}
	if m.Split == nil {
		return nil
	}
	out := make([]string, 0, len(m.Split.Into))
	for _, to := range m.Split.Into {
		out = append(out, to)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the entry for a family name as printed in a TYPE line.
func (c *Catalogue) Lookup(name string) (*Metric, bool) {
	i, ok := c.byName[name]
	if !ok {
		return nil, false
	}
	return &c.Metrics[i], true
}

// LoadCatalogue parses and validates the catalogue embedded in the binary.
func LoadCatalogue() (*Catalogue, error) {
	c, err := parseCatalogue(catalogueYAML)
	if err != nil {
		return nil, err
	}
	if c.roles, err = buildRoles(rolesYAML, c); err != nil {
		return nil, err
	}
	return c, nil
}

func parseCatalogue(b []byte) (*Catalogue, error) {
	var c Catalogue
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("catalogue: %w", err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("catalogue: %w", err)
	}
	return &c, nil
}

var (
	validTypes   = map[string]bool{"counter": true, "gauge": true, "histogram": true}
	validKinds   = map[string]bool{KindRouting: true, KindDiagnostic: true, KindInfo: true}
	validEngines = map[string]bool{"v0": true, "v1": true}
)

func (c *Catalogue) validate() error {
	if c.Version != CatalogueVersion {
		return fmt.Errorf("version is %d; this build reads version %d only", c.Version, CatalogueVersion)
	}
	if c.Prefix == "" {
		return errors.New("prefix is empty; give the prefix of every family name")
	}
	if len(c.Metrics) == 0 {
		return errors.New("no metrics")
	}
	var errs []error
	c.byName = make(map[string]int, len(c.Metrics))
	for i := range c.Metrics {
		m := &c.Metrics[i]
		where := fmt.Sprintf("metrics[%d] %q", i, m.Name)
		if !strings.HasPrefix(m.Name, c.Prefix) || !model.LegacyValidation.IsValidMetricName(m.Name) {
			errs = append(errs, fmt.Errorf("%s: name must be a valid metric name starting with %s", where, c.Prefix))
		}
		if j, dup := c.byName[m.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: duplicate name, first defined at metrics[%d]", where, j))
		} else {
			c.byName[m.Name] = i
		}
		if !validTypes[m.Type] {
			errs = append(errs, fmt.Errorf("%s: type %q is invalid; use counter, gauge or histogram", where, m.Type))
		}
		if m.Type == "counter" && !strings.HasSuffix(m.Name, "_total") {
			errs = append(errs, fmt.Errorf("%s: a counter is listed by its exposed family name, which ends in _total", where))
		}
		if !validKinds[m.Kind] {
			errs = append(errs, fmt.Errorf("%s: kind %q is invalid; use routing, diagnostic or info", where, m.Kind))
		}
		if m.Kind == KindRouting && m.Type != "gauge" {
			errs = append(errs, fmt.Errorf("%s: kind routing is for gauges, not %s", where, m.Type))
		}
		if len(m.Engines) == 0 {
			errs = append(errs, fmt.Errorf("%s: engines is empty", where))
		}
		for _, e := range m.Engines {
			if !validEngines[e] {
				errs = append(errs, fmt.Errorf("%s: engine %q is invalid; use v0 or v1", where, e))
			}
		}
		if m.Added == "" {
			errs = append(errs, fmt.Errorf("%s: added is empty", where))
		}
		if m.Replacement != "" && m.Split != nil {
			errs = append(errs, fmt.Errorf("%s: replacement and split are exclusive", where))
		}
		if m.IsRenamed() && m.Deprecated == "" && m.Removed == "" {
			errs = append(errs, fmt.Errorf("%s: a renamed metric needs deprecated or removed", where))
		}
		if m.Alias && m.Replacement == "" {
			errs = append(errs, fmt.Errorf("%s: alias needs a replacement", where))
		}
		if m.Split != nil && (m.Split.Label == "" || len(m.Split.Into) == 0) {
			errs = append(errs, fmt.Errorf("%s: split needs a label and at least one target", where))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Replacements must exist, keep the type and end in a current metric.
	for i := range c.Metrics {
		m := &c.Metrics[i]
		for _, to := range m.Replacements() {
			t, ok := c.Lookup(to)
			if !ok {
				errs = append(errs, fmt.Errorf("metrics[%d] %q: replacement %q is not in the catalogue", i, m.Name, to))
				continue
			}
			if t.Type != m.Type {
				errs = append(errs, fmt.Errorf("metrics[%d] %q: replacement %q is a %s, not a %s", i, m.Name, to, t.Type, m.Type))
			}
			if t.Split != nil {
				errs = append(errs, fmt.Errorf("metrics[%d] %q: replacement %q is itself split; point at its targets", i, m.Name, to))
			}
		}
		if m.Replacement != "" {
			if _, err := c.resolve(m.Name); err != nil {
				errs = append(errs, fmt.Errorf("metrics[%d] %q: %w", i, m.Name, err))
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	c.byNameOrder = make([]int, len(c.Metrics))
	c.replacements = make([]string, len(c.Metrics))
	c.added = make([]parsedRelease, len(c.Metrics))
	c.removed = make([]parsedRelease, len(c.Metrics))
	for i := range c.Metrics {
		m := &c.Metrics[i]
		c.byNameOrder[i] = i
		var finals []string
		for _, to := range m.Replacements() {
			final, _ := c.resolve(to)
			finals = append(finals, final)
		}
		c.replacements[i] = strings.Join(sortedUnique(finals), ",")
		c.added[i].r, c.added[i].ok = parseRelease(m.Added)
		c.removed[i].r, c.removed[i].ok = parseRelease(m.Removed)
	}
	// Names are unique (checked above), so the order is total.
	slices.SortFunc(c.byNameOrder, func(a, b int) int { return strings.Compare(c.Metrics[a].Name, c.Metrics[b].Name) })
	return nil
}

// resolve follows replacement links from name to the current metric.
func (c *Catalogue) resolve(name string) (string, error) {
	seen := []string{name}
	for {
		m, ok := c.Lookup(name)
		if !ok || m.Replacement == "" {
			return name, nil
		}
		name = m.Replacement
		if slices.Contains(seen, name) {
			return "", fmt.Errorf("rename cycle %s -> %s", strings.Join(seen, " -> "), name)
		}
		seen = append(seen, name)
	}
}

// release is a parsed "vX.Y.Z" tag.
type release [3]int

var releaseRE = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)$`)

// parseRelease returns the release in s when s is exactly a tag; catalogue
// fields that give a main-branch date instead are not releases.
func parseRelease(s string) (release, bool) {
	m := releaseRE.FindStringSubmatch(s)
	if m == nil {
		return release{}, false
	}
	var r release
	for i := range r {
		r[i], _ = strconv.Atoi(m[i+1])
	}
	return r, true
}

func (r release) less(o release) bool {
	for i := range r {
		if r[i] != o[i] {
			return r[i] < o[i]
		}
	}
	return false
}

func (r release) String() string {
	return fmt.Sprintf("%d.%d.%d", r[0], r[1], r[2])
}
