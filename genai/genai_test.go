package genai

import (
	"bufio"
	"bytes"
	"cmp"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/internal/fixtures"
	"github.com/fos-study/vllm-normalizer/internal/mappingtest"
	"github.com/fos-study/vllm-normalizer/internal/pagetest"
	"github.com/fos-study/vllm-normalizer/internal/testbin"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/routing"
)

// canonical reads a fixture as the collector does up to the canonical
// page: parse, normalise, detect the server, rename roles.
func canonical(t testing.TB, prefix string) ([]exposition.Family, *mapping.Roles, string) {
	t.Helper()
	return canonicalOf(t, fixtures.Families(t, prefix))
}

func canonicalOf(t testing.TB, fams []exposition.Family) ([]exposition.Family, *mapping.Roles, string) {
	t.Helper()
	cat := mappingtest.Catalogue(t)
	norm, _ := mappingtest.Mapper(t, mapping.Options{}).Normalize(fams)
	roles := cat.Roles()
	ps, err := mapping.LoadProfiles(roles)
	if err != nil {
		t.Fatal(err)
	}
	p := ps.Detect(norm)
	if p == nil {
		return nil, roles, ""
	}
	return p.Canonical(norm, roles), roles, p.Server
}

func fixtureText(t *testing.T, prefix string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join("..", "testdata", "fixtures", prefix+"*"))
	if len(m) != 1 {
		t.Fatalf("fixture %s*: %v", prefix, m)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nativeHist is one histogram as the fixture's text prints it, read line
// by line without the project's parser: per model, the cumulative count of
// each le (as printed), summed over every series of that model; and the
// summed _sum and _count.
type nativeHist struct {
	les        map[string][]string // model -> le strings in page order
	bucket     map[string]map[string]float64
	sum, count map[string]float64
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (\S+)`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"`)

func readNative(t *testing.T, text, family, modelLabel string) nativeHist {
	t.Helper()
	h := nativeHist{les: map[string][]string{}, bucket: map[string]map[string]float64{}, sum: map[string]float64{}, count: map[string]float64{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		lbl := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			lbl[p[1]] = p[2]
		}
		model := lbl[modelLabel]
		switch m[1] {
		case family + "_bucket":
			le := lbl["le"]
			if h.bucket[model] == nil {
				h.bucket[model] = map[string]float64{}
			}
			if _, seen := h.bucket[model][le]; !seen {
				h.les[model] = append(h.les[model], le)
			}
			h.bucket[model][le] += v
		case family + "_sum":
			h.sum[model] += v
		case family + "_count":
			h.count[model] += v
		}
	}
	if len(h.bucket) == 0 {
		t.Fatalf("the fixture has no %s_bucket line", family)
	}
	return h
}

// expected is the view's series of one metric, worked out from the
// fixture's text: the advised bounds' counts (and +Inf) when the engine
// prints every advised bound, else every bucket as printed.
func expected(t *testing.T, h nativeHist, m Metric, name, provider string) (map[string]float64, bool) {
	t.Helper()
	out := map[string]float64{}
	exact := true
	for model, les := range h.les {
		var finite []float64
		for _, le := range les {
			f, _ := strconv.ParseFloat(le, 64)
			finite = append(finite, f)
		}
		for _, a := range m.Advised {
			if !slices.Contains(finite, a) {
				exact = false
			}
		}
		_ = model
	}
	key := func(sample, model, le string) string {
		s := `{__name__="` + sample + `", gen_ai_operation_name="chat", gen_ai_provider_name="` + provider + `", gen_ai_request_model="` + model + `"`
		if le != "" {
			s += `, le="` + le + `"`
		}
		return s + "}"
	}
	for model, les := range h.les {
		for i, le := range les {
			if exact && le != "+Inf" && !slices.Contains(m.Advised, mustFloat(t, le)) {
				continue
			}
			out[key(name+"_bucket", model, le)] = h.bucket[model][les[i]]
		}
		out[key(name+"_sum", model, "")] = h.sum[model]
		out[key(name+"_count", model, "")] = h.count[model]
	}
	return out, exact
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var leValue = regexp.MustCompile(`le="([^"]*)"`)

// byBound re-keys series with each le as a number, as readers compare
// bounds: "12" and "12.0" are one bound (the parser writes bounds of a
// text page canonically, as Prometheus 3 does).
func byBound(t *testing.T, m map[string]float64) map[string]float64 {
	t.Helper()
	out := make(map[string]float64, len(m))
	for k, v := range m {
		k = leValue.ReplaceAllStringFunc(k, func(le string) string {
			b := leValue.FindStringSubmatch(le)[1]
			return `le="` + strconv.FormatFloat(mustFloat(t, b), 'g', -1, 64) + `"`
		})
		out[k] = v
	}
	return out
}

func samplesOf(t *testing.T, fams []exposition.Family) map[string]float64 {
	t.Helper()
	return pagetest.Samples(t, exposition.AppendText(nil, fams), "text/plain; version=0.0.4")
}

// TestKnownTruthOnFixtures: on real pages of vLLM V1 and V0, SGLang and
// TensorRT-LLM, every bucket, sum and count of the view equals what the
// page's own text gives at those bounds, the advised bounds are used
// exactly where the engine prints all of them, and a role the engine does
// not fill (per-request TPOT on V0 and SGLang) gives no histogram.
func TestKnownTruthOnFixtures(t *testing.T) {
	const (
		ttft = "gen_ai_server_time_to_first_token_seconds"
		tpot = "gen_ai_server_time_per_output_token_seconds"
		dur  = "gen_ai_server_request_duration_seconds"
	)
	for _, tc := range []struct {
		fixture, provider string
		native            map[string]string // view name -> native family; absent: no histogram
		exact             map[string]bool   // view name -> re-bucketed to the advised bounds
		modelLabel        string            // the page's model label; "" = model_name
	}{
		// vLLM V1 2026: TTFT and per-request TPOT (not the inter-token
		// latency) contain the advised bounds; e2e does not.
		{"13-", "vllm", map[string]string{ttft: "vllm:time_to_first_token_seconds", tpot: "vllm:request_time_per_output_token_seconds", dur: "vllm:e2e_request_latency_seconds"},
			map[string]bool{ttft: true, tpot: true}, ""},
		{"20-", "vllm", map[string]string{ttft: "vllm:time_to_first_token_seconds", tpot: "vllm:request_time_per_output_token_seconds", dur: "vllm:e2e_request_latency_seconds"},
			map[string]bool{ttft: true, tpot: true}, ""},
		// vLLM V0: its time_per_output_token_seconds is one observation
		// per token gap (the inter-token latency), so there is no TPOT.
		{"12-", "vllm", map[string]string{ttft: "vllm:time_to_first_token_seconds", dur: "vllm:e2e_request_latency_seconds"},
			map[string]bool{ttft: true}, ""},
		{"02-", "vllm", map[string]string{ttft: "vllm:time_to_first_token_seconds", dur: "vllm:e2e_request_latency_seconds"},
			map[string]bool{ttft: true}, ""},
		// Early SGLang: TTFT bounds contain the advised ones.
		{"04-", "sglang", map[string]string{ttft: "sglang:time_to_first_token_seconds", dur: "sglang:e2e_request_latency_seconds"},
			map[string]bool{ttft: true}, ""},
		// SGLang 0.5: its TTFT bounds (0.1, 0.2, 0.4, ...) do not.
		{"26-", "sglang", map[string]string{ttft: "sglang:time_to_first_token_seconds", dur: "sglang:e2e_request_latency_seconds"},
			map[string]bool{}, ""},
		// SGLang 0.5.22 on a hybrid model (constructed page 37): its
		// per-request TPOT, split by is_streaming, is the view's TPOT.
		{"37-", "sglang", map[string]string{ttft: "sglang:time_to_first_token_seconds", tpot: "sglang:request_time_per_output_token_seconds", dur: "sglang:e2e_request_latency_seconds"},
			map[string]bool{}, ""},
		// TokenSpeed (constructed page 36): its per-request TPOT is e2e
		// latency per token, not comparable, so no TPOT.
		{"36-", "tokenspeed", map[string]string{ttft: "tokenspeed:time_to_first_token_seconds", dur: "tokenspeed:e2e_request_latency_seconds"},
			map[string]bool{}, ""},
		// Four data-parallel engines (a constructed page) with TTFT bounds
		// that lack most advised ones: summed, the engine's bounds kept.
		{"34-vllm-dp4-starved-rank-constructed-t615", "vllm", map[string]string{ttft: "vllm:time_to_first_token_seconds"},
			map[string]bool{}, ""},
		// TensorRT-LLM: per-request TPOT, vLLM's bounds.
		{"25-", "trtllm", map[string]string{ttft: "trtllm_time_to_first_token_seconds", tpot: "trtllm_time_per_output_token_seconds", dur: "trtllm_e2e_request_latency_seconds"},
			map[string]bool{ttft: true, tpot: true}, ""},
		// Dynamo's frontend (model label "model"): bounds of its own.
		{"24-", "dynamo", map[string]string{ttft: "dynamo_frontend_time_to_first_token_seconds", dur: "dynamo_frontend_request_duration_seconds"},
			map[string]bool{}, "model"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			canon, roles, server := canonical(t, tc.fixture)
			if server != tc.provider {
				t.Fatalf("server %q, want %q", server, tc.provider)
			}
			v, err := New(Options{})
			if err != nil {
				t.Fatal(err)
			}
			fams := v.View(canon, roles, server)
			got := byBound(t, samplesOf(t, fams))
			text := fixtureText(t, tc.fixture)
			want := map[string]float64{}
			for _, m := range Metrics {
				name := m.Name(Suffixed)
				i := slices.IndexFunc(fams, func(f exposition.Family) bool { return f.Name == name })
				native, ok := tc.native[name]
				if !ok {
					if i >= 0 {
						t.Errorf("%s is served, but the engine fills no such role", name)
					}
					continue
				}
				if i < 0 {
					t.Errorf("%s is missing", name)
					continue
				}
				w, exact := expected(t, readNative(t, text, native, cmp.Or(tc.modelLabel, "model_name")), m, name, tc.provider)
				if exact != tc.exact[name] {
					t.Errorf("%s: the fixture's bounds contain the advised ones: %v, this test expects %v", name, exact, tc.exact[name])
				}
				help := fams[i].Help
				if exact != strings.Contains(help, "advised bounds, a subset") || exact == strings.Contains(help, "engine's own bounds") {
					t.Errorf("%s: HELP %q does not say which bounds (exact %v)", name, help, exact)
				}
				maps.Copy(want, byBound(t, w))
			}
			for k, w := range want {
				g, ok := got[k]
				if !ok {
					t.Errorf("missing %s (want %g)", k, w)
				} else if g != w && math.Abs(g-w) > 1e-12*math.Abs(w) {
					t.Errorf("%s = %.17g, want %.17g", k, g, w)
				}
			}
			for k, g := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("unexpected series %s = %g", k, g)
				}
			}
		})
	}
}

// TestNoViewWithoutRoles: a page of a server whose profile fills none of
// the roles (llama.cpp), or of no known server, gives nothing.
func TestNoViewWithoutRoles(t *testing.T) {
	for _, prefix := range []string{"08-", "09-", "27-"} {
		canon, roles, server := canonical(t, prefix)
		v, _ := New(Options{})
		if fams := v.View(canon, roles, server); len(fams) != 0 {
			t.Errorf("%s (server %q): %d families, want none", prefix, server, len(fams))
		}
	}
}

const twoEngines = `# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.005",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.01",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.02",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.04",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.06",model_name="m"} 1
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.08",model_name="m"} 1
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} E0A
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.25",model_name="m"} E0A
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} E0A
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.75",model_name="m"} E0A
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} E0A
vllm:time_to_first_token_seconds_bucket{engine="0",le="2.5",model_name="m"} E0A
vllm:time_to_first_token_seconds_bucket{engine="0",le="5.0",model_name="m"} E0A
vllm:time_to_first_token_seconds_bucket{engine="0",le="7.5",model_name="m"} E0A
vllm:time_to_first_token_seconds_bucket{engine="0",le="10.0",model_name="m"} E0A
vllm:time_to_first_token_seconds_bucket{engine="0",le="20.0",model_name="m"} E0A
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} E0B
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.5
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} E0B
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.001",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.005",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.01",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.02",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.04",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.06",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.08",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} E1A
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.25",model_name="m"} E1A
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.5",model_name="m"} E1A
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.75",model_name="m"} E1A
vllm:time_to_first_token_seconds_bucket{engine="1",le="1.0",model_name="m"} E1A
vllm:time_to_first_token_seconds_bucket{engine="1",le="2.5",model_name="m"} E1A
vllm:time_to_first_token_seconds_bucket{engine="1",le="5.0",model_name="m"} E1A
vllm:time_to_first_token_seconds_bucket{engine="1",le="7.5",model_name="m"} E1A
vllm:time_to_first_token_seconds_bucket{engine="1",le="10.0",model_name="m"} E1A
vllm:time_to_first_token_seconds_bucket{engine="1",le="20.0",model_name="m"} E1A
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} E1B
vllm:time_to_first_token_seconds_sum{engine="1",model_name="m"} 2.5
vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} E1B
`

// page fills twoEngines with each engine's count at le=0.1 (a) and in
// total (b); an engine with a < 0 is left off the page.
func page(t *testing.T, e0a, e0b, e1a, e1b float64) []exposition.Family {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.SplitAfter(twoEngines, "\n") {
		if e1a < 0 && strings.Contains(line, `engine="1"`) {
			continue
		}
		b.WriteString(strings.NewReplacer("E0A", f(e0a), "E0B", f(e0b), "E1A", f(e1a), "E1B", f(e1b)).Replace(line))
	}
	fams, _, err := exposition.Parse([]byte(b.String()), "text/plain; version=0.0.4", exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func f(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// TestSumOverEnginesResetSafe: the view sums engines per model, and a sum
// never goes down when one engine restarts or drops off the page (the
// routing view's rules): a reader's rate over it counts nothing twice.
func TestSumOverEnginesResetSafe(t *testing.T) {
	v, _ := New(Options{Provider: "my-vllm", Operation: "text_completion", ServerAddress: "vllm.ns.svc:8000"})
	key := func(le string) string {
		return `{__name__="gen_ai_server_time_to_first_token_seconds_bucket", gen_ai_operation_name="text_completion", gen_ai_provider_name="my-vllm", gen_ai_request_model="m", le="` + le + `", server_address="vllm.ns.svc", server_port="8000"}`
	}
	steps := []struct {
		what               string
		e0a, e0b, e1a, e1b float64
		want01, wantInf    float64 // the view's le=0.1 and +Inf counts
	}{
		{"both engines", 5, 6, 3, 4, 8, 10},
		{"both count on", 7, 9, 4, 6, 11, 15},
		// Engine 1 restarts: lower for one scrape, it holds its 4 and 6
		// (a one-scrape dip is no restart); still lower at the next, it
		// restarted, and its 4 and 6 so far still count.
		{"engine 1 lower", 8, 10, 1, 1, 8 + 4, 10 + 6},
		{"engine 1 restarted", 9, 11, 2, 2, 9 + 4 + 2, 11 + 6 + 2},
		// Engine 1 is gone: its last totals stay in the sum.
		{"engine 1 gone", 10, 12, -1, -1, 10 + 4 + 2, 12 + 6 + 2},
	}
	for _, s := range steps {
		canon, roles, server := canonicalOf(t, page(t, s.e0a, s.e0b, s.e1a, s.e1b))
		got := samplesOf(t, v.View(canon, roles, server))
		if got[key("0.1")] != s.want01 || got[key("+Inf")] != s.wantInf {
			t.Errorf("%s: le=0.1 %v, +Inf %v; want %v and %v\n%v", s.what, got[key("0.1")], got[key("+Inf")], s.want01, s.wantInf, got)
		}
		if _, ok := got[key("20.0")]; ok {
			t.Errorf("%s: le=20.0 is no advised bound of the time to first token, yet it is served", s.what)
		}
	}
}

// TestDifferentBoundsNoSum: engines of one model printing different bounds
// cannot be summed into one histogram; the view leaves it out rather than
// interpolate.
func TestDifferentBoundsNoSum(t *testing.T) {
	fams := page(t, 5, 6, 3, 4)
	for i, s := range fams[0].Samples {
		if s.Labels.Get("engine") == "1" && s.Labels.Get("le") == "20.0" {
			fams[0].Samples = slices.Delete(fams[0].Samples, i, i+1)
			break
		}
	}
	canon, roles, server := canonicalOf(t, fams)
	v, _ := New(Options{})
	if got := v.View(canon, roles, server); len(got) != 0 {
		t.Errorf("engines with different bounds were summed: %v", got)
	}
}

// TestCutShortHistogramLeftOut: a histogram without its +Inf bucket (a
// page cut short) is no histogram a reader can use.
func TestCutShortHistogramLeftOut(t *testing.T) {
	fams := page(t, 5, 6, -1, -1)
	fams[0].Samples = slices.DeleteFunc(fams[0].Samples, func(s exposition.Sample) bool { return s.Labels.Get("le") == "+Inf" })
	canon, roles, server := canonicalOf(t, fams)
	v, _ := New(Options{})
	if got := v.View(canon, roles, server); len(got) != 0 {
		t.Errorf("a histogram without +Inf is served: %v", got)
	}
}

func TestNameStyles(t *testing.T) {
	canon, roles, server := canonical(t, "13-")
	for style, want := range map[NameStyle][]string{
		Suffixed:   {"gen_ai_server_request_duration_seconds", "gen_ai_server_time_per_output_token_seconds", "gen_ai_server_time_to_first_token_seconds"},
		Unsuffixed: {"gen_ai_server_request_duration", "gen_ai_server_time_per_output_token", "gen_ai_server_time_to_first_token"},
	} {
		v, err := New(Options{NameStyle: style})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range v.View(canon, roles, server) {
			got = append(got, f.Name)
			if (style == Suffixed) != (f.Unit == "seconds") {
				t.Errorf("%s: unit %q in style %s", f.Name, f.Unit, style)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("style %s: families %v, want %v", style, got, want)
		}
	}
}

func TestOptionsCheck(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string // part of the error; "" = valid
	}{
		{Options{}, ""},
		{Options{ServerAddress: "vllm.ns.svc:8000", NameStyle: Unsuffixed}, ""},
		{Options{ServerAddress: "[::1]:8000"}, ""},
		{Options{ServerAddress: "vllm.ns.svc"}, "must be host:port"},
		{Options{ServerAddress: ":8000"}, "has no host"},
		{Options{ServerAddress: "h:0"}, "from 1 to 65535"},
		{Options{ServerAddress: "h:65536"}, "from 1 to 65535"},
		{Options{ServerAddress: "h:http"}, "from 1 to 65535"},
		{Options{ServerAddress: "h:+80"}, "from 1 to 65535"},
		{Options{NameStyle: "colon"}, "use suffixed"},
	} {
		err := tc.o.Check()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.o, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one saying %q", tc.o, err, tc.want)
		}
	}
}

// TestPromtoolCheckMetrics: promtool finds nothing to lint in the view of
// any fixture, in either name style. Under CI=true a missing promtool fails
// the test: CI must run it (deploy/ci-deps.sh installs it).
func TestPromtoolCheckMetrics(t *testing.T) {
	pt := testbin.PrometheusTool(t, "promtool")
	for _, prefix := range []string{"02-", "04-", "12-", "13-", "20-", "24-", "25-", "26-", "30-", "31-"} {
		for _, style := range []NameStyle{Suffixed, Unsuffixed} {
			canon, roles, server := canonical(t, prefix)
			v, _ := New(Options{NameStyle: style, ServerAddress: "vllm:8000"})
			fams := v.View(canon, roles, server)
			if len(fams) == 0 {
				t.Errorf("%s: empty view", prefix)
				continue
			}
			body := exposition.AppendText(nil, fams)
			cmd := exec.Command(pt, "check", "metrics")
			cmd.Stdin = bytes.NewReader(body)
			out, err := cmd.CombinedOutput()
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("%s %s: promtool check metrics: %v\n%s\npage:\n%s", prefix, style, err, out, body)
			}
		}
	}
}

// TestRenderCreated: the view's histograms carry their sums' created time
// under the view's own labels, so the OpenMetrics page dates each model's
// histogram (Prometheus's parser reads it on its buckets), and the text
// page is unchanged by it.
func TestRenderCreated(t *testing.T) {
	v, _ := New(Options{Provider: "my-vllm", Operation: "text_completion", ServerAddress: "vllm.ns.svc:8000"})
	canon, roles, server := canonicalOf(t, page(t, 5, 6, 3, 4))
	byName := map[string]*exposition.Family{}
	for i := range canon {
		byName[canon[i].Name] = &canon[i]
	}
	var sums routing.Sums
	family := func(r mapping.Role) *exposition.Family { return byName[roles.Family(r)] }
	dated := v.Render(sums.Sum(family, Roles(), routing.Restarts{StartOf: func(labels.Labels) float64 { return 1764700000 }, Now: 1764700030}), server)
	var plainSums routing.Sums
	plain := v.Render(plainSums.Sum(family, Roles(), routing.Restarts{}), server)
	if !bytes.Equal(exposition.AppendText(nil, dated), exposition.AppendText(nil, plain)) {
		t.Error("the text page changed with created times")
	}
	om := exposition.AppendOpenMetrics(nil, dated)
	buckets := 0
	for k, st := range pagetest.Starts(t, om) {
		if !strings.Contains(k, `_bucket"`) {
			continue
		}
		buckets++
		if st != 1764700000000 {
			t.Errorf("%s: start %d, want 1764700000000\n%s", k, st, om)
		}
	}
	if buckets == 0 {
		t.Fatalf("no bucket on the view:\n%s", om)
	}
}

// TestRenderKeptMatchesFresh: a Viewer rendering scrape after scrape (the
// same series with moving values, then another model's as many, other
// servers' pages, created times on and off) keeps each metric's relabelled series while the sums'
// label sets stay, and renders what a new Viewer renders from the same
// sums, families and OpenMetrics text alike.
func TestRenderKeptMatchesFresh(t *testing.T) {
	opts := Options{Provider: "", Operation: "text_completion", ServerAddress: "vllm.ns.svc:8000"}
	kept, _ := New(opts)
	var sums routing.Sums
	type step struct {
		canon  []exposition.Family
		roles  *mapping.Roles
		server string
	}
	var steps []step
	for n := range 6 {
		c, r, s := canonicalOf(t, page(t, 5+float64(n), 6+2*float64(n), 3+float64(n), 4))
		steps = append(steps, step{c, r, s})
	}
	// The same series but for another model: as many, other label sets.
	other := page(t, 9, 12, 7, 8)
	for i := range other {
		for j := range other[i].Samples {
			s := &other[i].Samples[j]
			s.Labels = labels.NewBuilder(s.Labels).Set("model_name", "other").Labels()
		}
	}
	c, r, s := canonicalOf(t, other)
	steps = append(steps, step{c, r, s})
	for _, prefix := range []string{"25-", "26-", "12-", "13-", "13-"} {
		c, r, s := canonical(t, prefix)
		steps = append(steps, step{c, r, s})
	}
	reused := 0
	for i, st := range steps {
		byName := map[string]*exposition.Family{}
		for j := range st.canon {
			byName[st.canon[j].Name] = &st.canon[j]
		}
		r := routing.Restarts{}
		if i%2 == 1 {
			r = routing.Restarts{StartOf: func(labels.Labels) float64 { return 1764700000 + float64(i) }, Now: 1764700030 + float64(i)}
		}
		tot := sums.Sum(func(role mapping.Role) *exposition.Family { return byName[st.roles.Family(role)] }, Roles(), r)
		first := func() *labels.Labels { // the first kept series of any metric
			for k := range kept.kept {
				if len(kept.kept[k].store) > 0 {
					return &kept.kept[k].store[0]
				}
			}
			return nil
		}
		before := first()
		got := kept.Render(tot, st.server)
		fresh, _ := New(opts)
		want := fresh.Render(tot, st.server)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d (%s): the kept view differs from a new Viewer's:\n%s\nwant\n%s", i, st.server, exposition.AppendOpenMetrics(nil, got), exposition.AppendOpenMetrics(nil, want))
		}
		if !bytes.Equal(exposition.AppendOpenMetrics(nil, got), exposition.AppendOpenMetrics(nil, want)) {
			t.Fatalf("step %d: the kept view's OpenMetrics text differs", i)
		}
		if before != nil && before == first() {
			reused++
		}
	}
	if reused < 5 {
		t.Fatalf("%d renders kept the last one's series, want at least the 5 of the moving values", reused)
	}
}
