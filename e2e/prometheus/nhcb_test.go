package prometheus_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// Target labels of the two jobs of TestDashboardsOnNHCB: one sidecar,
// scraped as classic histograms and converted to native histograms with
// custom buckets, told apart by pod as two pods would be.
const (
	classicPod = "vllm-classic"
	nhcbPod    = "vllm-nhcb"
)

// TestDashboardsOnNHCB: every dashboard panel query that reads a histogram
// gives the same answer on a job whose histograms Prometheus 3 stores as
// native histograms with custom buckets (convert_classic_histograms_to_nhcb,
// no classic series kept) as on a classic job scraping the same sidecar:
// the quantiles, and the per-le counts of the length heatmaps (a native
// histogram's buckets summed up to each classic bound); and so does every
// 1m recording rule that reads a histogram. The upstream is the known-truth one,
// whose counters are linear in time: both jobs read the same rates
// whatever their scrape offsets.
func TestDashboardsOnNHCB(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	root := repoRoot(t)
	up := httptest.NewServer(newTruthUpstream(0))
	t.Cleanup(up.Close)
	side := testbin.Start(t, "--vllm.scrape-uri="+up.URL+"/metrics", "--vllm.scrape-interval=1s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar log:\n%s", side.Logs())
		}
	})
	labels := func(pod string) map[string]string { return map[string]string{"namespace": demoNamespace, "pod": pod} }
	prom := startPrometheus(t, promBin, []scrapeJob{
		{Name: "classic", Target: side.Addr, Labels: labels(classicPod)},
		{Name: "nhcb", Target: side.Addr, Labels: labels(nhcbPod), Extra: []string{
			"convert_classic_histograms_to_nhcb: true",
			"always_scrape_classic_histograms: false",
		}},
	}, []string{filepath.Join(root, "deploy", "prometheus", "recording.yml")})
	prom.waitFor(t, `count(vllm_up == 1) == 2`, time.Minute)
	// The panels' $__rate_interval (1m) and the 1m rules' windows filled:
	// rate() then reads the same on both jobs whatever their scrape
	// offsets, as the upstream's counters are linear in time.
	time.Sleep(70 * time.Second)
	at := time.Now()

	// The converted job holds native histograms and no classic series.
	if res := prom.mustQuery(t, fmt.Sprintf(`{__name__=~".+_bucket", pod=%q}`, nhcbPod), at); len(res) > 0 {
		t.Fatalf("the converted job kept %d classic bucket series, e.g. %v", len(res), res[0])
	}
	if res, err := queryPanel(prom, fmt.Sprintf(`vllm:time_to_first_token_seconds{pod=%q}`, nhcbPod), at); err != nil || len(res) == 0 || res[0].hist == nil {
		t.Fatalf("the converted job has no native TTFT histogram: %v %v", res, err)
	}

	files, err := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards found (%v)", err)
	}
	compared, worst := 0, 0.0 // worst: the largest relative difference seen
	differs := func(got, want, tolerance float64) bool {
		if want != 0 {
			worst = max(worst, math.Abs(got-want)/math.Abs(want))
		}
		return math.Abs(got-want) > tolerance*math.Abs(want)+1e-9
	}
	for _, path := range files {
		file, d := readDashboard(t, path)
		vals, customs := resolveVars(t, prom, d, file)
		walkPanels(d.Panels, func(p dashPanel) {
			for _, tg := range p.Targets {
				if !strings.Contains(tg.Expr, "_bucket") {
					continue // reads no histogram
				}
				for _, c := range combos(customs) {
					answer := func(pod string) panelResult {
						vs := maps.Clone(vals)
						vs["pod"], vs["namespace"], vs["model_name"] = []string{pod}, []string{demoNamespace}, []string{truthModel}
						for k, v := range c {
							vs[k] = []string{v}
						}
						expr, err := substitute(tg.Expr, vs)
						if err != nil {
							t.Fatalf("%s panel %q: %v", file, p.Title, err)
						}
						res, err := queryPanel(prom, expr, at)
						if err != nil {
							t.Fatalf("%s panel %q: %v", file, p.Title, err)
						}
						return res
					}
					classic, _ := answer(classicPod).answer()
					floats, hists := answer(nhcbPod).answer()
					if len(classic) == 0 {
						t.Errorf("%s panel %q target %s (%v): no data on the classic job", file, p.Title, tg.RefID, c)
						continue
					}
					for _, v := range classic {
						got, ok := nativeValue(v, floats, hists)
						if !ok {
							t.Errorf("%s panel %q target %s (%v): %s on the classic job, absent on the converted one %v %v", file, p.Title, tg.RefID, c, v, floats, hists)
							continue
						}
						if differs(got, v.value, 0.02) {
							t.Errorf("%s panel %q target %s (%v): %s on the classic job, %g on the converted one", file, p.Title, tg.RefID, c, v, got)
						}
					}
					compared++
					t.Logf("%s panel %q target %s: %d values agree", file, p.Title, tg.RefID, len(classic))
				}
			}
		})
	}
	if compared < 4 {
		t.Errorf("compared %d panel queries reading histograms, want the diagnosis dashboard's four at least", compared)
	}

	// The recording rules that read histograms, evaluated on both pods at
	// once: those of 1m windows, filled (a 5m rule is the same expression
	// over a window longer than the run, which rate() extrapolates over the
	// time each job has scraped, so the jobs' scrape offsets move it).
	histRules := 0
	for g, rs := range prom.rules(t) {
		for _, r := range rs {
			if r.Type != "recording" || !strings.Contains(r.Query, "histogram") || !strings.HasSuffix(r.Name, "1m") {
				continue
			}
			get := func(pod string) []panelValue {
				res, err := queryPanel(prom, fmt.Sprintf(`%s{pod=%q}`, r.Name, pod), at)
				if err != nil {
					t.Fatalf("%s: %v", g, err)
				}
				v, _ := res.answer()
				return v
			}
			classic, converted := get(classicPod), get(nhcbPod)
			if len(classic) != len(converted) {
				t.Errorf("rule %s: %d series on the classic job %v, %d on the converted one %v", r.Name, len(classic), classic, len(converted), converted)
				continue
			}
			if len(classic) == 0 {
				continue
			}
			histRules++
			for _, v := range classic {
				got, ok := nativeValue(v, converted, nil)
				if !ok {
					t.Errorf("rule %s: %s on the classic job, absent on the converted one", r.Name, v)
				} else if differs(got, v.value, 0.02) {
					t.Errorf("rule %s: %s on the classic job, %g on the converted one", r.Name, v, got)
				}
			}
		}
	}
	if histRules < 8 {
		t.Errorf("only %d recording rules reading histograms have series on both jobs", histRules)
	}
	t.Logf("%d recording rules reading histograms give the same answers on both jobs; the largest relative difference of a panel or rule value: %.2g", histRules, worst)
}

// panelSample is one element of an instant vector: a float, or a native
// histogram.
type panelSample struct {
	metric map[string]string
	value  float64
	hist   *nativeHistogram
}

// nativeHistogram is a native histogram as the query API returns it.
type nativeHistogram struct {
	count   float64
	buckets []nativeBucket
}

type nativeBucket struct{ upper, count float64 }

type panelResult []panelSample

// queryPanel evaluates expr at time at, keeping native histograms.
func queryPanel(p *promServer, expr string, at time.Time) (panelResult, error) {
	data, err := p.apiGet("/api/v1/query", url.Values{"query": {expr}, "time": {strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 3, 64)}})
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", expr, err)
	}
	var res struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric    map[string]string `json:"metric"`
			Value     []any             `json:"value"`
			Histogram []json.RawMessage `json:"histogram"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &res); err != nil || res.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: %s result (%v)", expr, res.ResultType, err)
	}
	out := make(panelResult, 0, len(res.Result))
	for _, r := range res.Result {
		s := panelSample{metric: r.Metric}
		switch {
		case len(r.Value) == 2:
			v, err := sampleValue([2]any{r.Value[0], r.Value[1]})
			if err != nil {
				return nil, err
			}
			s.value = v
		case len(r.Histogram) == 2:
			var h struct {
				Count   string  `json:"count"`
				Buckets [][]any `json:"buckets"`
			}
			if err := json.Unmarshal(r.Histogram[1], &h); err != nil {
				return nil, err
			}
			s.hist = &nativeHistogram{}
			s.hist.count, _ = strconv.ParseFloat(h.Count, 64)
			for _, b := range h.Buckets {
				if len(b) != 4 {
					return nil, fmt.Errorf("query %q: bucket %v", expr, b)
				}
				upper, err1 := strconv.ParseFloat(fmt.Sprint(b[2]), 64)
				n, err2 := strconv.ParseFloat(fmt.Sprint(b[3]), 64)
				if err1 != nil || err2 != nil {
					return nil, fmt.Errorf("query %q: bucket %v", expr, b)
				}
				s.hist.buckets = append(s.hist.buckets, nativeBucket{upper, n})
			}
		default:
			return nil, fmt.Errorf("query %q: sample %v has no value", expr, r.Metric)
		}
		out = append(out, s)
	}
	return out, nil
}

// panelValue is one value of a panel's answer: its labels but the
// target's (pod, instance, job) and le, and le read as a number.
type panelValue struct {
	series string
	le     float64 // NaN without le
	value  float64
}

func (v panelValue) String() string {
	if math.IsNaN(v.le) {
		return fmt.Sprintf("%s %g", v.series, v.value)
	}
	return fmt.Sprintf("%s le=%g %g", v.series, v.le, v.value)
}

// answer splits a panel's result into float values and native histograms
// (by series).
func (r panelResult) answer() ([]panelValue, map[string]*nativeHistogram) {
	var floats []panelValue
	hists := map[string]*nativeHistogram{}
	for _, s := range r {
		var parts []string
		for k, v := range s.metric {
			switch k {
			case "pod", "instance", "job", "le":
				continue
			}
			parts = append(parts, k+"="+v)
		}
		sort.Strings(parts)
		series := "{" + strings.Join(parts, ",") + "}"
		if s.hist != nil {
			hists[series] = s.hist
			continue
		}
		le := math.NaN()
		if v, ok := s.metric["le"]; ok {
			le, _ = strconv.ParseFloat(v, 64)
		}
		floats = append(floats, panelValue{series, le, s.value})
	}
	return floats, hists
}

// countAtOrBelow is what the classic bucket le of the histogram h converts
// from would hold: the counts of h's buckets up to le (the query API leaves
// empty buckets out).
func (h *nativeHistogram) countAtOrBelow(le float64) float64 {
	if math.IsInf(le, 1) {
		return h.count
	}
	n := 0.0
	for _, b := range h.buckets {
		if b.upper <= le {
			n += b.count
		}
	}
	return n
}

// nativeValue is the converted job's value for the classic job's value v:
// the float of the same series and le, or what the native histogram of the
// same series holds at le.
func nativeValue(v panelValue, floats []panelValue, hists map[string]*nativeHistogram) (float64, bool) {
	for _, f := range floats {
		if f.series == v.series && (f.le == v.le || math.IsNaN(f.le) && math.IsNaN(v.le)) {
			return f.value, true
		}
	}
	if h, ok := hists[v.series]; ok && !math.IsNaN(v.le) {
		return h.countAtOrBelow(v.le), true
	}
	return 0, false
}
