package mapping

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/relabel"
)

func TestLoadConfigValid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		yaml  string
		rules int
	}{
		{"empty", "", 0},
		{"whitespace and comment", "\n# nothing here\n", 0},
		{"every action", `
metric_relabel_configs:
  - {source_labels: [__name__], regex: 'vllm:num_requests_swapped', action: drop}
  - {source_labels: [__name__], regex: 'vllm:.*', action: keep}
  - {source_labels: [model_name], regex: '(.*)/(.*)', target_label: org, replacement: $1}
  - {regex: 'pid', action: labeldrop}
  - {regex: 'model_name|engine|le|__name__|finished_reason|org', action: labelkeep}
  - {regex: 'model_(.*)', replacement: 'm_$1', action: labelmap}
  - {source_labels: [model_name], target_label: model_lc, action: lowercase}
  - {source_labels: [model_name], target_label: model_uc, action: Uppercase}
  - {source_labels: [model_name], target_label: shard, modulus: 4, action: hashmod}
  - {source_labels: [model_name], target_label: org, action: keepequal}
  - {source_labels: [model_name], target_label: other, action: dropequal}
extra_renames:
  - {from: 'vllm:plugin_old', to: 'vllm:plugin_new'}
drop: ['vllm:lora_requests_info']
`, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadConfig([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if len(c.MetricRelabelConfigs) != tc.rules {
				t.Fatalf("%d rules, want %d", len(c.MetricRelabelConfigs), tc.rules)
			}
			for i, rc := range c.MetricRelabelConfigs {
				if rc.NameValidationScheme == 0 {
					t.Errorf("rule %d was not validated (no name validation scheme)", i)
				}
			}
		})
	}
	c, _ := LoadConfig([]byte("metric_relabel_configs:\n  - {source_labels: [a], target_label: b, action: Uppercase}\n"))
	if c.MetricRelabelConfigs[0].Action != relabel.Uppercase {
		t.Errorf("action = %q", c.MetricRelabelConfigs[0].Action)
	}
}

func TestLoadConfigRejects(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown top-level key", "metric_relabel_config: []\n",
			`top level: unknown key "metric_relabel_config"; valid keys are metric_relabel_configs, extra_renames, drop`},
		{"unknown rule key", "metric_relabel_configs:\n  - {source_labels: [a], regex: x, action: drop}\n  - {sourcelabels: [a], action: drop}\n",
			`metric_relabel_configs[1]: unknown key "sourcelabels"; valid keys are source_labels, separator, regex`},
		{"unknown action", "metric_relabel_configs:\n  - {action: drop, regex: a, source_labels: [x]}\n  - {action: keep, regex: a, source_labels: [x]}\n  - {source_labels: [a], target_label: b, action: replce}\n",
			`metric_relabel_configs[2]: action "replce" is unknown; use one of replace, keep, drop, keepequal, dropequal, hashmod, labelmap, labeldrop, labelkeep, lowercase, uppercase`},
		{"bad regex", "metric_relabel_configs:\n  - {source_labels: [__name__], regex: 'vllm:(gpu', action: drop}\n",
			`metric_relabel_configs[0]: regex "vllm:(gpu" does not compile (error parsing regexp: missing closing ): ` + "`^(?s:vllm:(gpu)$`" + `); write an RE2 expression`},
		{"replace without target_label", "metric_relabel_configs:\n  - {source_labels: [__name__], regex: 'vllm:(.*)', replacement: 'x_$1'}\n",
			`metric_relabel_configs[0]: action replace: relabel configuration for replace action requires 'target_label' value; add target_label:`},
		{"hashmod without modulus", "metric_relabel_configs:\n  - {source_labels: [a], target_label: b, action: hashmod}\n",
			`metric_relabel_configs[0]: action hashmod: relabel configuration for hashmod requires non-zero modulus; add modulus:`},
		{"labeldrop with target", "metric_relabel_configs:\n  - {regex: a, target_label: b, action: labeldrop}\n",
			`metric_relabel_configs[0]: action labeldrop: labeldrop action requires only 'regex', and no other fields; labeldrop and labelkeep take only regex`},
		{"bad target label", "metric_relabel_configs:\n  - {source_labels: [a], target_label: '', action: lowercase}\n",
			`metric_relabel_configs[0]: action lowercase: relabel configuration for lowercase action requires 'target_label' value`},
		{"rule is not a mapping", "metric_relabel_configs:\n  - drop\n",
			`cannot unmarshal !!str` + " `drop`"},
		{"wrong field type", "metric_relabel_configs:\n  - {source_labels: a, action: drop}\n",
			`cannot unmarshal !!str ` + "`a`" + ` into model.LabelNames`},
		{"rename unknown key", "extra_renames:\n  - {from: a, too: b}\n",
			`extra_renames[0]: unknown key "too"; valid keys are from, to`},
		{"rename bad name", "extra_renames:\n  - {from: a, to: 'b c'}\n",
			`extra_renames[0]: to "b c" is not a valid metric name`},
		{"rename to itself", "extra_renames:\n  - {from: a, to: a}\n",
			`extra_renames[0]: from and to are both "a"; remove the entry`},
		{"rename chain", "extra_renames:\n  - {from: a, to: b}\n  - {from: b, to: c}\n",
			`extra_renames[0]: target "b" is renamed again by extra_renames[1]; renames are not chained, rename "a" straight to "c"`},
		{"duplicate rename", "extra_renames:\n  - {from: a, to: b}\n  - {from: a, to: c}\n",
			`extra_renames[1]: "a" is already renamed by extra_renames[0]`},
		{"drop bad name", "drop: ['vllm:ok', '']\n",
			`drop[1]: "" is not a valid metric family name`},
		{"not a mapping", "- a\n- b\n", "the configuration is not a YAML mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("accepted; want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error\n  %s\ndoes not contain\n  %s", err, tc.want)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	cat := mustCatalogue(t)
	if _, err := New(cat, Options{NameStyle: "dots"}); err == nil || !strings.Contains(err.Error(), `name style "dots" is unknown; use "colon" or "underscore"`) {
		t.Errorf("bad name style: %v", err)
	}
	cfg, err := LoadConfig([]byte("extra_renames:\n  - {from: 'vllm:gpu_cache_usage_perc', to: 'vllm:x'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cat, Options{Config: cfg}); err == nil || !strings.Contains(err.Error(), `extra_renames[0]: "vllm:gpu_cache_usage_perc" is already renamed by the catalogue (to vllm:kv_cache_usage_perc)`) {
		t.Errorf("contradicting extra rename: %v", err)
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("nil catalogue accepted")
	}
}
