package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The committed pages are what the generator writes.
func TestFixturesAreCurrent(t *testing.T) {
	pages, err := build("../..")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range pages {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go run ./scripts/newengines from the module root", path)
		}
	}
}

// Each page parses with the parser routers use, its usage gauges agree
// with the counts they are made of, and the hybrid page keeps the real
// page's lines but the three it sets.
func TestPagesAreConsistent(t *testing.T) {
	pages, err := build("../..")
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]map[string]float64{}
	for path, page := range pages {
		parser := expfmt.NewTextParser(model.LegacyValidation)
		parsed, err := parser.TextToMetricFamilies(bytes.NewReader(page))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for name, f := range parsed {
			if fams[name] == nil {
				fams[name] = map[string]float64{}
			}
			for _, m := range f.Metric {
				v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				fams[name][path] = v
			}
		}
	}
	one := func(name string) float64 {
		for _, v := range fams[name] {
			return v
		}
		t.Fatalf("%s is on no page", name)
		return 0
	}
	if u, used, total := one("atom:kv_cache_usage_ratio"), one("atom:kv_cache_blocks_used"), one("atom:kv_cache_blocks_total"); u != used/total {
		t.Errorf("ATOM usage %v, want used/total = %v", u, used/total)
	}
	if sum := one("sglang:kv_used_tokens") + one("sglang:kv_evictable_tokens") + one("sglang:kv_available_tokens"); sum != one("sglang:max_total_num_tokens") {
		t.Errorf("SGLang's pools add up to %v, max_total_num_tokens is %v", sum, one("sglang:max_total_num_tokens"))
	}
	if kv, full, swa := one("sglang:kv_cache_usage_perc"), one("sglang:full_token_usage"), one("sglang:swa_token_usage"); kv != max(full, swa) {
		t.Errorf("kv_cache_usage_perc %v, want max(full %v, swa %v)", kv, full, swa)
	}
	if tu := one("sglang:token_usage"); tu != max(one("sglang:full_token_usage"), one("sglang:swa_token_usage"), one("sglang:mamba_usage")) {
		t.Errorf("token_usage %v is not the highest pool", tu)
	}
	base, err := os.ReadFile("../../" + hybridIn)
	if err != nil {
		t.Fatal(err)
	}
	hybrid := string(pages["../../"+hybridOut])
	changed := 0
	for l := range strings.SplitSeq(string(base), "\n") {
		if !strings.Contains(hybrid, l+"\n") {
			changed++
		}
	}
	if changed != len(hybridSet) {
		t.Errorf("%d lines of fixture 26 changed, want the %d set ones", changed, len(hybridSet))
	}
}
