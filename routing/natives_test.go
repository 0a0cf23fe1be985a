package routing

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// viewsOfFixture reads a fixture through its profile and builds both
// views as the collector does: readers, block size, the server's own
// families and the page.
func viewsOfFixture(t *testing.T, prefix string) (server string, epp, compat map[string]float64) {
	t.Helper()
	in := inputOfFixture(t, prefix, 0)
	e, c := new(Viewer).Views(in)
	return in.Server, routingSamples(t, e), routingSamples(t, c)
}

// inputOfFixture is a fixture's Input as the collector makes it, every
// value raised by bump times its place in its family.
func inputOfFixture(t *testing.T, prefix string, bump float64) Input {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "fixtures", prefix+"*.prom"))
	if len(paths) != 1 {
		t.Fatalf("fixture %s*: %v", prefix, paths)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	fams := parsePage(t, string(b))
	for i := range fams {
		for j := range fams[i].Samples {
			fams[i].Samples[j].Value += bump * float64(j+1)
		}
	}
	p := testProfiles.Detect(fams)
	if p == nil {
		t.Fatalf("%s: no profile", paths[0])
	}
	readers, err := LoadReaders()
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Canon: p.Canonical(fams, testRoles), Roles: testRoles, Server: p.Server, Readers: readers, Style: func(s string) string { return s }, Page: fams,
		Native: func(name string) *exposition.Family {
			if f, ok := p.Native(fams, testRoles, name); ok {
				return &f
			}
			return nil
		}}
	in.BlockSize, _ = p.KVBlockSize(fams)
	return in
}

// TestBuildKeptNamesMatchFresh: one Viewer building the views of scrape
// after scrape (a page with moving values, other servers' pages with
// their own names, the first page again) builds, from each Collapsed,
// byte for byte the views a build remembering no named label sets does.
func TestBuildKeptNamesMatchFresh(t *testing.T) {
	var v Viewer
	steps := []struct {
		prefix string
		bump   float64
	}{{"13-", 0}, {"13-", 1}, {"13-", 2}, {"25-", 0}, {"25-", 3}, {"35-", 0}, {"36-", 0}, {"04-", 0}, {"02-", 0}, {"02-", 1}, {"26-", 0}, {"13-", 4}, {"13-", 5}}
	for i, st := range steps {
		c := v.Collapse(inputOfFixture(t, st.prefix, st.bump))
		fresh := *c
		fresh.names = nil
		e0, c0, n0 := fresh.Build()
		e1, c1, n1 := c.Build()
		if got, want := exposition.AppendText(nil, e1), exposition.AppendText(nil, e0); string(got) != string(want) || n0 != n1 {
			t.Fatalf("step %d (%s): the routing view differs from a fresh build's:\n%s\nwant\n%s", i, st.prefix, got, want)
		}
		if got, want := exposition.AppendText(nil, c1), exposition.AppendText(nil, c0); string(got) != string(want) {
			t.Fatalf("step %d (%s): the compatibility page differs from a fresh build's:\n%s\nwant\n%s", i, st.prefix, got, want)
		}
	}
}

// ATOM and TokenSpeed pages fill the endpoint pickers' view under vLLM's
// names and under the names llm-d's engine configurations read for them,
// ATOM's cache information included, with the values the pages print.
func TestViewsNewerServers(t *testing.T) {
	server, epp, _ := viewsOfFixture(t, "35-")
	if server != "atom" {
		t.Fatalf("fixture 35 read as %s", server)
	}
	checkSamples(t, epp, map[string]float64{
		`{__name__="vllm:num_requests_running"}`:                                      6,
		`{__name__="vllm:num_requests_waiting"}`:                                      4,
		`{__name__="vllm:kv_cache_usage_perc"}`:                                       0.4,
		`{__name__="vllm:gpu_cache_usage_perc"}`:                                      0.4,
		`{__name__="atom:requests_running"}`:                                          6,
		`{__name__="atom:requests_waiting"}`:                                          4,
		`{__name__="atom:kv_cache_usage_ratio"}`:                                      0.4,
		`{__name__="vllm:cache_config_info", block_size="16", num_gpu_blocks="8000"}`: 1,
		`{__name__="atom:cache_config_info", block_size="16", num_gpu_blocks="8000"}`: 1,
	})
	server, epp, _ = viewsOfFixture(t, "36-")
	if server != "tokenspeed" {
		t.Fatalf("fixture 36 read as %s", server)
	}
	m := `model_name="Qwen/Qwen3-8B"`
	checkSamples(t, epp, map[string]float64{
		`{__name__="vllm:num_requests_running", ` + m + `}`:       2,
		`{__name__="vllm:num_requests_waiting", ` + m + `}`:       5,
		`{__name__="vllm:kv_cache_usage_perc", ` + m + `}`:        0.375,
		`{__name__="vllm:gpu_cache_usage_perc", ` + m + `}`:       0.375,
		`{__name__="tokenspeed:num_requests_running", ` + m + `}`: 2,
		`{__name__="tokenspeed:num_requests_waiting", ` + m + `}`: 5,
		`{__name__="tokenspeed:kv_cache_usage_perc", ` + m + `}`:  0.375,
	})
}

// On a hybrid-attention SGLang page (fixture 37: full attention 0.3,
// Mamba states 0.9) vLLM's name carries the KV pools' own usage, and
// SGLang's token_usage what SGLang printed, 0.9, on both pages. Before,
// token_usage was served with the KV role's value (0.3).
func TestViewsNativeNameKeepsNativeValue(t *testing.T) {
	_, epp, compat := viewsOfFixture(t, "37-")
	for page, got := range map[string]map[string]float64{"epp": epp, "compat": compat} {
		m := `model_name="Qwen/Qwen3-0.6B"`
		if v := got[`{__name__="sglang:token_usage", `+m+`}`]; v != 0.9 {
			t.Errorf("%s: sglang:token_usage = %v, the page prints 0.9", page, v)
		}
		if v := got[`{__name__="vllm:kv_cache_usage_perc", `+m+`}`]; v != 0.3 {
			t.Errorf("%s: vllm:kv_cache_usage_perc = %v, want kv_cache_usage_perc's 0.3", page, v)
		}
	}
}

// Every family AIBrix reads of an SGLang or TensorRT-LLM pod (the table in
// readers.yaml, as read from AIBrix's code) that the page prints is on the
// compatibility page under the name AIBrix reads, each series with the
// value the server printed.
func TestCompatServesWhatAIBrixReads(t *testing.T) {
	readers, err := LoadReaders()
	if err != nil {
		t.Fatal(err)
	}
	var aibrix ConsumerReads
	for _, c := range readers.Consumers {
		if c.Consumer == "aibrix" {
			aibrix = c
		}
	}
	for engine, fixture := range map[string]string{"sglang": "26-", "trtllm": "31-"} {
		reads, ok := aibrix.Engines[engine]
		if !ok {
			t.Fatalf("readers.yaml has no AIBrix entry for %s", engine)
		}
		paths, _ := filepath.Glob(filepath.Join("..", "testdata", "fixtures", fixture+"*.prom"))
		b, err := os.ReadFile(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		raw := routingSamples(t, parsePage(t, string(b)))
		_, _, compat := viewsOfFixture(t, fixture)
		names := append([]string{reads.Waiting, reads.Running, reads.KVUsage}, reads.Families...)
		served := 0
		for _, name := range names {
			if name == "" {
				continue
			}
			onPage := false
			for k, v := range raw {
				if !ofFamily(k, name) || !strings.Contains(k, `model_name=`) {
					continue
				}
				onPage = true
				// A single engine's single series: the view serves it
				// with its value, under the labels AIBrix keys on.
				if got, ok := compat[k]; ok {
					if got != v {
						t.Errorf("%s: %s = %v on the compatibility page, %v on the server's", engine, k, got, v)
					}
					served++
					continue
				}
				if got, ok := compat[collapsed(k)]; !ok || got != v {
					t.Errorf("%s: %s (%v on the server's page) is not on the compatibility page (%v, %v)", engine, k, v, got, ok)
				}
				served++
			}
			if !onPage && (engine == "sglang" && name != reads.KVUsage) {
				t.Logf("%s: %s not printed by fixture %s", engine, name, fixture)
			}
		}
		if served == 0 {
			t.Errorf("%s: nothing AIBrix reads was found on fixture %s", engine, fixture)
		}
	}
}

// collapsed is a series key reduced to what the routing view keeps of a
// collapsed gauge: the name, model_name and le.
func collapsed(key string) string {
	inner := strings.TrimSuffix(strings.TrimPrefix(key, "{"), "}")
	var keep []string
	for l := range strings.SplitSeq(inner, ", ") {
		if strings.HasPrefix(l, "__name__=") || strings.HasPrefix(l, "model_name=") || strings.HasPrefix(l, "le=") {
			keep = append(keep, l)
		}
	}
	return "{" + strings.Join(keep, ", ") + "}"
}

// Engines that agree on their KV usage give that value, not a weighted
// mean's float noise ((0.4×1 + 0.4×5)/6 is 0.39999999999999997).
func TestKVMeanWithoutFloatNoise(t *testing.T) {
	page := `# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.4
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.4
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1"} 1
vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="5"} 1
`
	got := routingSamples(t, View(parsePage(t, page), nil, testRoles, mapping.EngineV1, func(s string) string { return s }))
	if v := got[`{__name__="vllm:kv_cache_usage_perc", model_name="m"}`]; v != 0.4 {
		t.Errorf("KV usage of two engines at 0.4 = %.17g, want 0.4", v)
	}
}

// ofFamily says whether a series key is a sample of the family name
// (_created series are left out: the collector drops them before any view).
func ofFamily(key, name string) bool {
	for _, suffix := range []string{"", "_bucket", "_sum", "_count", "_total"} {
		if strings.HasPrefix(key, `{__name__="`+name+suffix+`"`) {
			return true
		}
	}
	return false
}
