package mapping

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/relabel"
	"go.yaml.in/yaml/v2"
)

// Config is the user's mapping configuration (the --config.file YAML).
// The zero value is a valid empty configuration.
type Config struct {
	// MetricRelabelConfigs are applied to every served series, after the
	// built-in mapping, exactly as Prometheus applies metric_relabel_configs.
	MetricRelabelConfigs []*relabel.Config `yaml:"metric_relabel_configs,omitempty"`
	// ExtraRenames are renames on top of the catalogue's, applied in
	// Normalize with the same rules (the current name wins when both exist).
	ExtraRenames []ExtraRename `yaml:"extra_renames,omitempty"`
	// Drop lists families (by name as served before the name style is
	// applied) that are not served at all.
	Drop []string `yaml:"drop,omitempty"`
}

// ExtraRename renames one family.
type ExtraRename struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
}

var (
	configKeys  = []string{"metric_relabel_configs", "extra_renames", "drop"}
	relabelKeys = []string{"source_labels", "separator", "regex", "modulus", "target_label", "replacement", "action"}
	renameKeys  = []string{"from", "to"}
	actions     = []string{
		string(relabel.Replace), string(relabel.Keep), string(relabel.Drop),
		string(relabel.KeepEqual), string(relabel.DropEqual), string(relabel.HashMod),
		string(relabel.LabelMap), string(relabel.LabelDrop), string(relabel.LabelKeep),
		string(relabel.Lowercase), string(relabel.Uppercase),
	}
)

// LoadConfig parses a configuration strictly: unknown keys, unknown
// actions, bad regular expressions and incomplete rules are errors that
// name the rule, the bad value and the fix. Empty input is an empty config.
func LoadConfig(b []byte) (*Config, error) {
	cfg := &Config{}
	if len(bytes.TrimSpace(b)) == 0 {
		return cfg, nil
	}
	var top yaml.MapSlice
	if err := yaml.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("the configuration is not a YAML mapping: %w", err)
	}
	if err := checkKeys(top, configKeys); err != nil {
		return nil, fmt.Errorf("top level: %w", err)
	}
	var raw struct {
		MetricRelabelConfigs []yaml.MapSlice `yaml:"metric_relabel_configs"`
		ExtraRenames         []yaml.MapSlice `yaml:"extra_renames"`
		Drop                 []string        `yaml:"drop"`
	}
	if err := yaml.UnmarshalStrict(b, &raw); err != nil {
		return nil, fmt.Errorf("%w; metric_relabel_configs and extra_renames are lists of mappings, drop is a list of metric names", err)
	}

	for i, item := range raw.MetricRelabelConfigs {
		rc, err := loadRelabel(item)
		if err != nil {
			return nil, fmt.Errorf("metric_relabel_configs[%d]: %w", i, err)
		}
		cfg.MetricRelabelConfigs = append(cfg.MetricRelabelConfigs, rc)
	}

	from := map[string]int{}
	for i, item := range raw.ExtraRenames {
		where := fmt.Sprintf("extra_renames[%d]", i)
		if err := checkKeys(item, renameKeys); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		var r ExtraRename
		for _, kv := range item {
			v, ok := kv.Value.(string)
			if !ok {
				return nil, fmt.Errorf("%s: %s must be a metric name string, got %v", where, kv.Key, kv.Value)
			}
			if kv.Key == "from" {
				r.From = v
			} else {
				r.To = v
			}
		}
		for _, f := range []struct{ key, val string }{{"from", r.From}, {"to", r.To}} {
			if !model.LegacyValidation.IsValidMetricName(f.val) {
				return nil, fmt.Errorf("%s: %s %q is not a valid metric name; use letters, digits, _ and : (not starting with a digit)", where, f.key, f.val)
			}
		}
		if r.From == r.To {
			return nil, fmt.Errorf("%s: from and to are both %q; remove the entry", where, r.From)
		}
		if j, dup := from[r.From]; dup {
			return nil, fmt.Errorf("%s: %q is already renamed by extra_renames[%d]; keep one of them", where, r.From, j)
		}
		from[r.From] = i
		cfg.ExtraRenames = append(cfg.ExtraRenames, r)
	}
	for i, r := range cfg.ExtraRenames {
		if j, ok := from[r.To]; ok {
			return nil, fmt.Errorf("extra_renames[%d]: target %q is renamed again by extra_renames[%d]; renames are not chained, rename %q straight to %q",
				i, r.To, j, r.From, cfg.ExtraRenames[j].To)
		}
	}

	for i, name := range raw.Drop {
		if !model.LegacyValidation.IsValidMetricName(name) {
			return nil, fmt.Errorf("drop[%d]: %q is not a valid metric family name; list family names as the page prints them (a TYPE line's name)", i, name)
		}
	}
	cfg.Drop = raw.Drop
	return cfg, nil
}

func loadRelabel(item yaml.MapSlice) (*relabel.Config, error) {
	if err := checkKeys(item, relabelKeys); err != nil {
		return nil, err
	}
	for _, kv := range item {
		switch kv.Key {
		case "action":
			s, _ := kv.Value.(string)
			if !isAction(s) {
				return nil, fmt.Errorf("action %q is unknown; use one of %s", fmt.Sprint(kv.Value), strings.Join(actions, ", "))
			}
		case "regex":
			s := fmt.Sprint(kv.Value)
			if _, err := relabel.NewRegexp(s); err != nil {
				return nil, fmt.Errorf("regex %q does not compile (%v); write an RE2 expression, which is anchored at both ends", s, err)
			}
		}
	}
	b, err := yaml.Marshal(item)
	if err != nil {
		return nil, err
	}
	rc := &relabel.Config{}
	if err := yaml.UnmarshalStrict(b, rc); err != nil {
		return nil, fmt.Errorf("%w; see the Prometheus metric_relabel_configs documentation for each field's type", err)
	}
	// UnmarshalYAML no longer validates: without this a matching replace
	// rule would panic at scrape time. UTF-8 validation is what Prometheus
	// uses by default; it accepts vLLM's colon names.
	if err := rc.Validate(model.UTF8Validation); err != nil {
		return nil, fmt.Errorf("action %s: %w%s", rc.Action, err, relabelHint(rc))
	}
	return rc, nil
}

func relabelHint(rc *relabel.Config) string {
	switch {
	case rc.TargetLabel == "" && (rc.Action == relabel.Replace || rc.Action == relabel.HashMod ||
		rc.Action == relabel.Lowercase || rc.Action == relabel.Uppercase ||
		rc.Action == relabel.KeepEqual || rc.Action == relabel.DropEqual):
		return "; add target_label: <the label to write>, e.g. target_label: __name__ to rename series"
	case rc.Action == relabel.HashMod && rc.Modulus == 0:
		return "; add modulus: <a positive number>"
	case rc.Action == relabel.LabelDrop || rc.Action == relabel.LabelKeep:
		return "; labeldrop and labelkeep take only regex, matched against label names"
	case rc.Action == relabel.KeepEqual || rc.Action == relabel.DropEqual:
		return "; keepequal and dropequal take only source_labels and target_label"
	}
	return ""
}

func isAction(s string) bool {
	s = strings.ToLower(s)
	return slices.Contains(actions, s)
}

func checkKeys(m yaml.MapSlice, valid []string) error {
	for _, kv := range m {
		k, _ := kv.Key.(string)
		ok := slices.Contains(valid, k)
		if !ok {
			return fmt.Errorf("unknown key %q; valid keys are %s", fmt.Sprint(kv.Key), strings.Join(valid, ", "))
		}
	}
	return nil
}
