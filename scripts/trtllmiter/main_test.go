package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const (
	basePage = "../../" + defaultIn
	outPage  = "../../" + defaultOut
)

func TestFixtureIsCurrent(t *testing.T) {
	src, err := os.ReadFile(basePage)
	if err != nil {
		t.Fatal(err)
	}
	want, err := build(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(outPage)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go run ./scripts/trtllmiter from the module root", outPage)
	}
}

// The real page is kept whole, and the added families parse (with the
// parser routers use) to one series each on the base page's model, with a
// utilization that is used over total blocks.
func TestExtendedPage(t *testing.T) {
	src, err := os.ReadFile(basePage)
	if err != nil {
		t.Fatal(err)
	}
	page, err := build(src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(page, src) {
		t.Fatal("the base page is not kept byte for byte at the start")
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) float64 {
		f, ok := fams[name]
		if !ok || len(f.Metric) != 1 {
			t.Fatalf("%s: want one series, got %v", name, f)
		}
		m := f.Metric[0]
		for _, l := range m.Label {
			if l.GetName() == "model_name" && l.GetValue() != "Qwen/Qwen3-0.6B" {
				t.Errorf("%s is labelled model_name=%q, not the base page's model", name, l.GetValue())
			}
		}
		if m.Gauge != nil {
			return m.Gauge.GetValue()
		}
		return m.Counter.GetValue()
	}
	if u, used, total := value("trtllm_kv_cache_utilization"), value("trtllm_kv_cache_used_blocks"), value("trtllm_kv_cache_max_blocks"); u != used/total {
		t.Errorf("utilization %v, want used/max = %v/%v", u, used, total)
	}
	if free := value("trtllm_kv_cache_free_blocks"); free != value("trtllm_kv_cache_max_blocks")-value("trtllm_kv_cache_used_blocks") {
		t.Errorf("free blocks %v do not complete used to max", free)
	}
	for _, a := range iteration {
		if fams[a.name].GetType().String() != strings.ToUpper(a.typ) {
			t.Errorf("%s parsed as %s, want %s", a.name, fams[a.name].GetType(), a.typ)
		}
	}
}

func TestRefusesToAddTwice(t *testing.T) {
	src, err := os.ReadFile(outPage)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := build(src); err == nil || !strings.Contains(err.Error(), "already has") {
		t.Fatalf("error %v, want one saying the family is already on the page", err)
	}
}
