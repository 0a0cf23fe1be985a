package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
	"github.com/fos-study/vllm-normalizer/scripts/manymodels"
)

// shippedMemoryLimit is the sidecar container's memory limit in the shipped
// manifest (deploy/kubernetes/deployment.yaml), in bytes; deploy's tests
// check that the kustomize component ships the same. The peak RSS the worst
// page the default flags accept may cost is three quarters of it: a
// quarter is left as margin.
func shippedMemoryLimit(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(repoRoot() + "/deploy/kubernetes/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name      string `yaml:"name"`
						Resources struct {
							Limits map[string]string `yaml:"limits"`
						} `yaml:"resources"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "vllm-normalizer" {
			continue
		}
		v, ok := strings.CutSuffix(c.Resources.Limits["memory"], "Mi")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			t.Fatalf("the sidecar's memory limit %q is not a number of Mi", c.Resources.Limits["memory"])
		}
		return n * mib
	}
	t.Fatal("deploy/kubernetes/deployment.yaml has no vllm-normalizer container")
	return 0
}

// readmeDefault is a flag's default as docs/flags.md's table states it;
// the test reads the table to stay in step with it (TestFlagTable
// checks the table against the flags).
func readmeDefault(t *testing.T, flag string) string {
	t.Helper()
	b, err := os.ReadFile(repoRoot() + "/docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "| `--"+flag+"` | `"); ok {
			return v[:strings.IndexByte(v, '`')]
		}
	}
	t.Fatalf("--%s is not in docs/flags.md's flag table", flag)
	return ""
}

// defaultLimit is a numeric default of docs/flags.md.
func defaultLimit(t *testing.T, flag string) int64 {
	t.Helper()
	{
		v := readmeDefault(t, flag)
		mult := int64(1)
		if n, ok := strings.CutSuffix(v, "MiB"); ok {
			v, mult = n, mib
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("docs/flags.md default of --%s: %v", flag, err)
		}
		return n * mult
	}
}

// shippedContainer returns the shipped container's memory limit and the
// budget a test's peak RSS must stay within (three quarters of it), and
// gives the binary the soft limit --auto-gomemlimit would set in that
// container (outside one it finds no limit).
func shippedContainer(t *testing.T) (limit, budget int64) {
	t.Helper()
	limit = shippedMemoryLimit(t)
	ratio, err := strconv.ParseFloat(readmeDefault(t, "auto-gomemlimit.ratio"), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOMEMLIMIT", strconv.FormatInt(int64(float64(limit)*ratio), 10))
	return limit, limit * 3 / 4
}

// worstPage is a page at every default limit at once: maxSeries counter
// series that the history keeps (each windowed), one sample with the most
// labels, the longest names and the longest values allowed, and filler
// gauges up to the sample limit whose label values fill the page to the
// body limit. v moves the counters.
func worstPage(t *testing.T, body, samples, labelsN, nameLen, valueLen, maxSeries int64, v int) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("# HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n# TYPE vllm:prompt_tokens_total counter\n")
	for i := range maxSeries {
		fmt.Fprintf(&b, "vllm:prompt_tokens_total{engine=\"%d\",model_name=\"m\"} %d\n", i, v*int(i%7+1))
	}
	b.WriteString("# TYPE vllm:e2e_wide gauge\nvllm:e2e_wide{")
	for i := range labelsN - 1 { // __name__ is one of the labels
		if i > 0 {
			b.WriteByte(',')
		}
		name := fmt.Sprintf("l%d_", i)
		name += strings.Repeat("n", int(nameLen)-len(name))
		fmt.Fprintf(&b, "%s=%q", name, strings.Repeat("v", int(valueLen)))
	}
	b.WriteString("} 1\n# TYPE vllm:e2e_fill gauge\n")
	fill := samples - maxSeries - 1
	per := (body - int64(b.Len()) - 1024) / fill
	const line = `vllm:e2e_fill{i="%07d",pad=""} 1` + "\n"
	pad := max(per-int64(len(fmt.Sprintf(line, 0))), 0)
	if pad > valueLen {
		t.Fatalf("the page cannot reach the body limit within the value length limit (%d > %d)", pad, valueLen)
	}
	padding := strings.Repeat("p", int(pad))
	for i := range fill {
		fmt.Fprintf(&b, `vllm:e2e_fill{i="%07d",pad="%s"} 1`+"\n", i, padding)
	}
	if int64(b.Len()) > body {
		t.Fatalf("page of %d bytes is over the body limit %d", b.Len(), body)
	}
	return b.Bytes()
}

// TestDefaultsFitTheContainer runs the binary with its default limits on
// the worst page they accept, once the history holds --history.max-series
// series with the most label bytes it keeps over a full window, and checks the peak RSS against the shipped
// container's memory limit with a margin. The windows are 6s and 30s at
// 100 ms scrapes instead of 1m and 5m at 1 s: the same 301 points a series,
// so the same memory, in 30 s instead of 5 min (stretched alike where a busy
// machine serves the pages slowly).
func TestDefaultsFitTheContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a 30 s window")
	}
	var (
		body      = defaultLimit(t, "vllm.max-body-bytes")
		samples   = defaultLimit(t, "vllm.sample-limit")
		labelsN   = defaultLimit(t, "vllm.label-limit")
		nameLen   = defaultLimit(t, "vllm.label-name-length-limit")
		valueLen  = defaultLimit(t, "vllm.label-value-length-limit")
		maxSeries = defaultLimit(t, "history.max-series")
	)
	containerLimit, memoryBudget := shippedContainer(t)
	var step atomic.Int64
	var big atomic.Bool
	// The history at its worst: maxSeries series with labels of about
	// 512 bytes each (the most it keeps on average), too many for one page,
	// so each page carries a fifth of them in turn and every series is
	// seen every fifth scrape.
	model := strings.Repeat("m", 512-len("__name__vllm:prompt_tokens_totalengine0000model_name")-24) // 24: room for the length bytes of six strings
	// Each fifth's lines up to their value are written once: formatting
	// them every scrape took longer than the interval under -race on a busy
	// machine, and the handlers the sidecar's retries stacked up took the
	// test process to 13 GB and a 30-minute timeout.
	var parts [5][][]byte
	for part := range int64(5) {
		for i := part * maxSeries / 5; i < (part+1)*maxSeries/5; i++ {
			parts[part] = append(parts[part], fmt.Appendf(nil, "vllm:prompt_tokens_total{engine=\"%04d\",model_name=\"%s\"} ", i, model))
		}
	}
	small := func(v int) []byte {
		lines := parts[v%5]
		b := make([]byte, 0, len(lines)*(len(lines[0])+12)+64)
		b = append(b, "# TYPE vllm:prompt_tokens_total counter\n"...)
		for _, line := range lines {
			b = strconv.AppendInt(append(b, line...), int64(v), 10)
			b = append(b, '\n')
		}
		return b
	}
	bigPage := worstPage(t, body, samples, labelsN, nameLen, valueLen, maxSeries, 0)
	up := newSwitchable(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		v := int(step.Add(1))
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		if big.Load() {
			_, _ = w.Write(bigPage)
			return
		}
		_, _ = w.Write(small(v))
	}))
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, up)
	uri := "http://" + ln.Addr().String() + "/metrics"
	// 100 ms between scrapes, or on a busy machine twice the slowest of
	// five reads of a page by this process (up to 400 ms), the windows
	// stretched alike: 301 points a series either way, so the same memory.
	// The timeout is the whole interval: the most headroom there is.
	slowest := slowestRead(t, uri)
	interval := min(max(100*time.Millisecond, (2*slowest).Round(100*time.Millisecond)), 400*time.Millisecond)
	short, long := 60*interval, 300*interval
	t.Logf("scrapes every %s, windows %s and %s: this process served a page in up to %s", interval, short, long, slowest)
	p := testbin.Start(t, "--vllm.scrape-uri="+uri, "--vllm.scrape-interval="+interval.String(), "--vllm.timeout="+interval.String(),
		"--derive.window="+short.String(), "--derive.window="+long.String())
	waitFor(t, settle, "vllm_up 1", func() bool { q, _ := quick(t, p); return q["vllm_up"] == 1 })
	time.Sleep(long + 10*interval) // a full long window of maxSeries series
	s, _ := metrics(t, p)
	if got := s["vllm_normalizer_history_series"]; got != float64(maxSeries) {
		t.Fatalf("history holds %v series, want %d", got, maxSeries)
	}
	t.Logf("peak RSS %.1f MiB with the history full, before the worst page", float64(procStatus(t, p.Cmd.Process.Pid, "VmHWM"))/mib)
	// Readers polling every page while the worst one is served: the full
	// page as text and gzipped, the routing view, the GenAI view.
	pollPages(t, p, 50*time.Millisecond, "/metrics", "/metrics gzip", "/metrics/routing", "/metrics/genai gzip")
	big.Store(true)
	before := s.failures("timeout")
	// Three scrapes of the worst page, each one accepted.
	from := up.requests.Load()
	// The check reads one page: on a loaded machine a later scrape of the
	// 4 MiB page may time out at 100 ms intervals, which is not what this
	// test measures.
	waitFor(t, settle, "three scrapes of the worst page", func() bool {
		if up.requests.Load()-from < 4 {
			return false
		}
		s, _ = metrics(t, p)
		return s["vllm_up"] == 1 && s["vllm_normalizer_upstream_samples"] == float64(samples)
	})
	if s["vllm_up"] != 1 || s["vllm_normalizer_upstream_samples"] != float64(samples) {
		t.Fatalf("the worst page was not accepted: vllm_up %v, %v samples (want %d)\n%s", s["vllm_up"], s["vllm_normalizer_upstream_samples"], samples, p.Logs())
	}
	hwm := procStatus(t, p.Cmd.Process.Pid, "VmHWM")
	t.Logf("peak RSS %.1f MiB on a %.1f MiB page of %d samples, %v series in the history, history_limited %v, models kept %v, left out %v, 4 readers polling (budget %d MiB of the container's %d MiB); timeouts %v",
		float64(hwm)/mib, float64(len(bigPage))/mib, samples, s["vllm_normalizer_history_series"], s["vllm_normalizer_history_limited"], s["vllm_normalizer_history_models"], s["vllm_normalizer_history_models_left_out"], memoryBudget/mib, containerLimit/mib, s.failures("timeout")-before)
	if hwm > memoryBudget {
		t.Errorf("peak RSS %.1f MiB with the default limits, want <= %d MiB (3/4 of the container's %d MiB)", float64(hwm)/mib, memoryBudget/mib, containerLimit/mib)
	}
}

// TestManyModelsFitTheContainer runs the binary with its default limits on
// the pages that name the most models within every other default limit:
// 9,000 models of five series (3.2 MB), and 50,000 of one gauge (the
// sample limit), with the shipped container's soft limit and four readers,
// until the diagnosis' recent and baseline windows are full (8 s and 30 s
// here; its 30-minute chart is not, see docs/operating.md), and checks that
// the bounds bite as documented and the peak RSS stays within three
// quarters of the container's limit. Before the bound, 9,000 models peaked
// at 386.6 MiB.
func TestManyModelsFitTheContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("fills the diagnosis' windows")
	}
	for _, pg := range []struct {
		name   string
		models int
		page   func(from, n, v int) []byte
		size   [2]int // the page's bytes, at least and at most
	}{
		{"five series", 9000, manymodels.Page, [2]int{2_900_000, 3_300_000}},
		{"one gauge", defaultInt(t, "vllm.sample-limit"), manymodels.Gauge, [2]int{3_000_000, 3_500_000}},
	} {
		t.Run(pg.name, func(t *testing.T) { manyModelsFit(t, pg.models, pg.page, pg.size) })
	}
}

func defaultInt(t *testing.T, flag string) int { return int(defaultLimit(t, flag)) }

func manyModelsFit(t *testing.T, models int, page func(from, n, v int) []byte, size [2]int) {
	maxModels := defaultLimit(t, "history.max-models")
	containerLimit, memoryBudget := shippedContainer(t)
	var step atomic.Int64
	first := page(0, models, 0)
	if len(first) < size[0] || len(first) > size[1] {
		t.Fatalf("the page is %d bytes, want %d to %d", len(first), size[0], size[1])
	}
	up := newSwitchable(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(page(0, models, int(step.Add(1))))
	}))
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, up)
	uri := "http://" + ln.Addr().String() + "/metrics"
	// Two seconds to read and parse 3.2 MB: under -race beside the rest of
	// the suite, one second timed scrapes out.
	p := testbin.Start(t, "--vllm.scrape-uri="+uri, "--vllm.scrape-interval=2s", "--vllm.timeout=2s",
		"--derive.window=8s", "--derive.window=30s", "--diagnosis.window=8s", "--diagnosis.baseline=30s")
	waitFor(t, settle, "vllm_up 1", func() bool { q, _ := quick(t, p); return q["vllm_up"] == 1 })
	pollPages(t, p, 200*time.Millisecond, "/metrics", "/metrics gzip", "/metrics/routing", "/api/v1/diagnosis")
	time.Sleep(45 * time.Second) // the recent and baseline windows, with room
	// The last scrape may have timed out on a loaded machine: judge the
	// next one that did not.
	waitFor(t, settle, "vllm_up 1 after the windows filled", func() bool { q, _ := quick(t, p); return q["vllm_up"] == 1 })
	s, _ := metrics(t, p)
	if s["vllm_up"] != 1 || s["vllm_normalizer_upstream_samples"] != float64(bytes.Count(first, []byte("\n"))-bytes.Count(first, []byte("# TYPE"))) {
		t.Fatalf("the page was not accepted: vllm_up %v, %v samples\n%s", s["vllm_up"], s["vllm_normalizer_upstream_samples"], p.Logs())
	}
	kept, leftOut := s["vllm_normalizer_history_models"], s["vllm_normalizer_history_models_left_out"]
	// The series bound admits no more models than the model bound
	// (collector's TestDefaultModelBoundAdmitsEveryAdmittedPage says which).
	if kept < 1 || kept > float64(maxModels) || kept+leftOut != float64(models) {
		t.Errorf("models kept %v, left out %v; want 1 to %d kept of %d", kept, leftOut, maxModels, models)
	}
	if limited := s["vllm_normalizer_history_limited"]; (leftOut > 0) != (limited == 1) {
		t.Errorf("history_limited %v with %v models left out", limited, leftOut)
	}
	api, err := get(client, p.URL+"/api/v1/diagnosis", nil)
	if err != nil {
		t.Fatal(err)
	}
	hwm := procStatus(t, p.Cmd.Process.Pid, "VmHWM")
	t.Logf("peak RSS %.1f MiB on a %.1f MB page of %d models (%v kept, %v history series, --history.max-models=%d; heap in use %.1f MiB at the end; /api/v1/diagnosis %.1f MB), 4 readers polling (budget %d MiB of the container's %d MiB)",
		float64(hwm)/mib, float64(len(first))/1e6, models, kept, s["vllm_normalizer_history_series"], maxModels, s["go_memstats_heap_inuse_bytes"]/mib, float64(len(api.body))/1e6, memoryBudget/mib, containerLimit/mib)
	if hwm > memoryBudget {
		t.Errorf("peak RSS %.1f MiB with %d models, want <= %d MiB (3/4 of the container's %d MiB)", float64(hwm)/mib, models, memoryBudget/mib, containerLimit/mib)
	}
}

// pollPages reads each page of p every period until the test ends, as
// readers polling beside the scrapes; a page written "path gzip" asks for
// gzip, any other for identity.
func pollPages(t *testing.T, p *testbin.Process, period time.Duration, pages ...string) {
	t.Helper()
	stop := make(chan struct{})
	var readers sync.WaitGroup
	t.Cleanup(func() { close(stop); readers.Wait() })
	for _, page := range pages {
		path, gzip := strings.CutSuffix(page, " gzip")
		enc := "identity"
		if gzip {
			enc = "gzip"
		}
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(period):
				}
				_, _ = get(client, p.URL+path, map[string]string{"Accept-Encoding": enc})
			}
		})
	}
}
