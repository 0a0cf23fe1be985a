package harness

import (
	"bytes"
	"slices"
	"sort"
	"testing"
)

// RouterRead is what a router's own code read from one page: the fields the
// endpoint picker keeps per endpoint. Reads lists the fields this consumer
// (at this version) reads at all.
type RouterRead struct {
	Waiting, Running         float64
	KV                       float64
	BlockSize, NumGPUBlocks  int
	LoRARunning, LoRAWaiting []string
	MaxLoRA                  int
}

// Fields a router reads.
const (
	FieldWaiting = "waiting"
	FieldRunning = "running"
	FieldKV      = "kv"
	FieldCache   = "cache_config"
	FieldLoRA    = "lora"
)

// Page is one raw page the consumer tests run on.
type Page struct {
	Name string
	Body []byte
	// DataParallel pages have several engines; the routing view must then
	// give the collapsed truth.
	DataParallel bool
}

// Pages are the real pages every consumer test reads: the V0 and V1
// fixtures, the legacy+current composite, and demo pages (the V1 fixture
// under simulated load) with one and with two data-parallel engines.
func Pages(t testing.TB) []Page {
	t.Helper()
	return []Page{
		{Name: "v0-0.7 (01)", Body: Fixture(t, "01")},
		{Name: "v0-0.4 (02)", Body: Fixture(t, "02")},
		{Name: "v0-0.5 (12)", Body: Fixture(t, "12")},
		{Name: "composite (03)", Body: Fixture(t, "03")},
		{Name: "v1 (13)", Body: Fixture(t, "13")},
		{Name: "v1 demo, 1 engine", Body: DemoPage(t, 1)},
		{Name: "v1 demo, 2 data-parallel engines", Body: DemoPage(t, 2), DataParallel: true},
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// CheckRouter asserts the rule of issue 11 for one consumer on one page:
// every field it reads from the sidecar is at least as right as from the
// raw page, and, when exact is set (the routing view), equal to the truth.
// Fields the raw page has no data for (the truth is unknown) are only
// required not to be invented.
func CheckRouter(t testing.TB, where string, fields []string, truth Truth, raw, side RouterRead, exact bool) {
	t.Helper()
	num := func(field string, has bool, want, rawV, sideV float64) {
		t.Helper()
		if !slices.Contains(fields, field) {
			return
		}
		if !has {
			if sideV != rawV && sideV != 0 {
				t.Errorf("%s: %s read %v from the sidecar where the raw page has no data (raw read %v)", where, field, sideV, rawV)
			}
			return
		}
		if !AtLeastAsRight(sideV, rawV, want) {
			t.Errorf("%s: %s read %v from the sidecar, %v from raw; truth %v: worse than raw", where, field, sideV, rawV, want)
		}
		if exact && !Equal(sideV, want) {
			t.Errorf("%s: %s read %v from the sidecar, want the collapsed truth %v (raw read %v)", where, field, sideV, want, rawV)
		}
	}
	num(FieldWaiting, truth.HasWaiting, truth.Waiting, raw.Waiting, side.Waiting)
	num(FieldRunning, truth.HasRunning, truth.Running, raw.Running, side.Running)
	num(FieldKV, truth.HasKV, truth.KV, raw.KV, side.KV)
	num(FieldCache, truth.HasCacheInfo, float64(truth.NumGPUBlocks), float64(raw.NumGPUBlocks), float64(side.NumGPUBlocks))
	num(FieldCache, truth.HasCacheInfo, float64(truth.BlockSize), float64(raw.BlockSize), float64(side.BlockSize))
	if slices.Contains(fields, FieldLoRA) && truth.HasLoRA {
		same := func(r RouterRead) bool {
			return slices.Equal(sortedCopy(r.LoRARunning), truth.LoRARunning) &&
				slices.Equal(sortedCopy(r.LoRAWaiting), truth.LoRAWaiting) && r.MaxLoRA == truth.MaxLoRA
		}
		if (exact || same(raw)) && !same(side) {
			t.Errorf("%s: LoRA read %v/%v/%d from the sidecar, want %v/%v/%d (raw read %v/%v/%d)", where,
				side.LoRARunning, side.LoRAWaiting, side.MaxLoRA, truth.LoRARunning, truth.LoRAWaiting, truth.MaxLoRA,
				raw.LoRARunning, raw.LoRAWaiting, raw.MaxLoRA)
		}
	}
}

// HasFamily reports whether a text page declares the family name.
func HasFamily(page []byte, name string) bool {
	return bytes.Contains(page, []byte("# TYPE "+name+" "))
}

// EachPage runs check, as a subtest per page of Pages, with the page's
// truth, an upstream serving the page and a sidecar scraping it: what
// every consumer's never-worse-than-raw test starts from.
func EachPage(t *testing.T, check func(t *testing.T, p Page, truth Truth, up *Upstream, side *Sidecar)) {
	for _, p := range Pages(t) {
		t.Run(p.Name, func(t *testing.T) {
			truth, err := ComputeTruth(p.Body)
			if err != nil {
				t.Fatal(err)
			}
			up := NewUpstream(t, p.Body)
			check(t, p, truth, up, StartSidecar(t, up))
		})
	}
}
