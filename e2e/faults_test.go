package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
	"github.com/fos-study/vllm-normalizer/scrape"
)

// fault is one way an upstream misbehaves.
type fault struct {
	name string
	// reason the scrape fails with; "" when it must succeed.
	reason string
	// handler is what the upstream does once the fault starts; nil with
	// refused, where the upstream stops listening instead.
	handler http.Handler
	refused bool
	// interval and timeout default to paced, both.
	interval, timeout time.Duration
	extra             []string
	// hwm bounds the sidecar's peak resident set (VmHWM) over its life.
	hwm int64
	// latency bounds each /metrics answer during the fault; 0 means
	// metricsLatencyBound. Only a page that itself holds 100k series
	// gets more: its bytes take their time to write and read.
	latency time.Duration
	// check looks further at the page served after the fault.
	check func(t *testing.T, p *testbin.Process, s series, body []byte)
}

// Peak RSS (VmHWM) bounds. The sidecar alone peaks near 21 MiB on small
// pages; an endless body or a gzip bomb costs at most the default
// --vllm.max-body-bytes=4MiB it reads; 100k series (with the body limit
// raised to 32MiB) parsed, normalised and served peak near 95 MiB.
const (
	hwmSmall = 48 * mib  // every fault on a small page
	hwmBody  = 80 * mib  // 128 MiB streamed, 1 GiB gzip bomb
	hwmLarge = 120 * mib // 100k series
)

// metricsLatencyBound is how long /metrics may take while the upstream
// misbehaves, beyond the slowest answer of a control phase just before
// it: the page is prepared off the request path.
const metricsLatencyBound = 200 * time.Millisecond

// faultInterval is the scrape interval and timeout of most faults: a good
// page read on a busy machine (load 30 on 2 cores) must not time out, or a
// fault would be counted under the wrong reason.
const faultInterval = 500 * time.Millisecond

func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): runs the binary through every fault, a minute or more")
	}
	good := fixture(t, "13")
	nanInd := fixture(t, "07")
	flood := floodPage(100_000)

	faults := []fault{
		{name: "refused", reason: scrape.ReasonRefused, refused: true, hwm: hwmSmall},
		{name: "404", reason: scrape.ReasonHTTPStatus, handler: http.NotFoundHandler(), hwm: hwmSmall},
		{name: "500", reason: scrape.ReasonHTTPStatus, hwm: hwmSmall, handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "engine dead", http.StatusInternalServerError)
		})},
		{name: "slower than timeout", reason: scrape.ReasonTimeout, hwm: hwmSmall, handler: hang(10 * time.Second)},
		{name: "trickle", reason: scrape.ReasonTimeout, hwm: hwmSmall, handler: trickle(good, 10*time.Millisecond)},
		{name: "streamed 128MiB body", reason: scrape.ReasonBodyTooLarge, hwm: hwmBody,
			interval: time.Second, timeout: time.Second, handler: stream(128 * mib)},
		{name: "gzip bomb", reason: scrape.ReasonBodyTooLarge, hwm: hwmBody,
			interval: time.Second, timeout: time.Second, handler: gzipBomb(1024 * mib)},
		{name: "binary garbage", reason: scrape.ReasonParse, hwm: hwmSmall, handler: static(garbage(64 << 10))},
		{name: "nan(ind)", reason: scrape.ReasonParse, hwm: hwmSmall, handler: static(nanInd)},
		{name: "duplicate help and type", hwm: hwmSmall, handler: static([]byte(duplicateHeaders)), check: checkDuplicateHeaders},
		{name: "conflicting types", reason: scrape.ReasonParse, hwm: hwmSmall, handler: static([]byte(conflictingTypes))},
		{name: "hostile label values", hwm: hwmSmall, handler: static([]byte(hostileLabels)), check: checkHostileLabels},
		// Bodies that end before their end, every way the wire allows.
		{name: "short of content-length", reason: scrape.ReasonTruncated, hwm: hwmSmall, handler: cut(func(w io.Writer) {
			fmt.Fprintf(w, "%sContent-Length: %d\r\n\r\n%s", rawHead, len(good), midLine(good))
		}, false)},
		{name: "chunked without the last chunk", reason: scrape.ReasonTruncated, hwm: hwmSmall, handler: cut(func(w io.Writer) {
			fmt.Fprintf(w, "%sTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", rawHead, len(good), good)
		}, false)},
		{name: "gzip without trailer", reason: scrape.ReasonTruncated, hwm: hwmSmall, handler: cut(func(w io.Writer) {
			gz := gzipOf(good)
			gz = gz[:len(gz)-8]
			fmt.Fprintf(w, "%sContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s", rawHead, len(gz), gz)
		}, false)},
		{name: "reset mid-body", reason: scrape.ReasonTruncated, hwm: hwmSmall, handler: cut(func(w io.Writer) {
			fmt.Fprintf(w, "%sContent-Length: %d\r\n\r\n%s", rawHead, len(good), midLine(good))
		}, true)},
		{name: "close-delimited cut mid-line", reason: scrape.ReasonTruncated, hwm: hwmSmall, handler: cut(func(w io.Writer) {
			fmt.Fprintf(w, "%sConnection: close\r\n\r\n%s", rawHead, midLine(good))
		}, false)},
		// One sample just over each default label limit (64 labels, names
		// of 128 bytes, values of 4096 bytes).
		{name: "label limit", reason: scrape.ReasonLabelLimit, hwm: hwmSmall, handler: static(withSample(good, 64, 1, 1))},
		{name: "label name length limit", reason: scrape.ReasonLabelNameLengthLimit, hwm: hwmSmall, handler: static(withSample(good, 1, 129, 1))},
		{name: "label value length limit", reason: scrape.ReasonLabelValueLengthLimit, hwm: hwmSmall, handler: static(withSample(good, 1, 1, 4097))},
		{name: "at every label limit", hwm: hwmSmall, handler: static(withSample(good, 63, 128, 4096))},
		{name: "100k series over the sample limit", reason: scrape.ReasonSampleLimit, hwm: hwmLarge,
			interval: time.Second, timeout: time.Second, handler: static(flood),
			extra: []string{"--vllm.max-body-bytes=32MiB"}}, // the flood is 4.5 MiB
		{name: "100k series without sample limit", hwm: hwmLarge, latency: time.Second,
			interval: time.Second, timeout: time.Second, extra: []string{"--vllm.sample-limit=0", "--vllm.max-body-bytes=32MiB"}, handler: static(flood),
			check: func(t *testing.T, _ *testbin.Process, s series, _ []byte) {
				if n := len(s.with("vllm:e2e_flood{")); n != 100_000 {
					t.Errorf("served %d of the 100000 flood series", n)
				}
			}},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) { runFault(t, good, f) })
	}
}

// runFault serves a good page until the sidecar is up, then the fault,
// and checks what the sidecar makes of it.
func runFault(t *testing.T, good []byte, f fault) {
	up := newSwitchable(static(good))
	ln := listen(t, "127.0.0.1:0")
	uri := "http://" + ln.Addr().String() + "/metrics"
	srv := serveOn(t, ln, up)
	interval, timeout := f.interval, f.timeout
	if interval == 0 {
		interval = paced(t, uri)
		timeout = interval
	}
	p := testbin.Start(t, sidecarArgs(uri, interval, timeout, f.extra...)...)

	waitFor(t, settle, "vllm_up 1 on the good page", func() bool {
		q, _ := quick(t, p)
		return q["vllm_up"] == 1
	})
	// Control: how slow /metrics answers are on this machine right now,
	// with the upstream well, over two intervals.
	var control []time.Duration
	for end := time.Now().Add(2 * interval); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		_, took := quick(t, p)
		control = append(control, took)
	}

	before := up.requests.Load()
	if f.refused {
		_ = srv.Close()
	} else {
		up.set(f.handler)
	}

	// Poll /metrics while the fault lasts: every answer must be quick,
	// whatever the upstream is doing.
	var during []time.Duration
	starved := false
	// Ten intervals, or 30 s where a scrape on a busy machine takes longer.
	wait := max(10*interval, 30*time.Second)
	deadline := time.Now().Add(wait)
	for {
		q, took := quick(t, p)
		during = append(during, took)
		if f.reason != "" && q.failures(f.reason) >= 2 {
			break
		}
		if f.reason == "" && up.requests.Load()-before >= 2 && q["vllm_up"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			// Scrapes that all timed out never saw what the fault sends:
			// the machine was too slow to tell its reason. The rest (the
			// scrape failed, nothing leaked, no other reason) is judged.
			if f.reason != "" && f.reason != scrape.ReasonTimeout && q.failures(scrape.ReasonTimeout) >= 2 {
				starved = true
				waive(t, "every scrape of the fault timed out (%v) within %s, so none saw it; last state %v", q.failures(scrape.ReasonTimeout), wait, q)
				break
			}
			t.Fatalf("no second scrape with the fault within %s; last state %v\nlogs:\n%s", wait, q, p.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	bound := metricsLatencyBound
	if f.latency > 0 {
		bound = f.latency
	}
	// An answer that waited for the scrape would take up to the timeout
	// more, and with a hanging upstream most answers would: the median
	// tells, where the slowest answer on a busy machine is the scheduler's.
	// Where the control phase had no slow answer (a quiet machine) the
	// slowest is held too, except for pages so large that their first
	// reader's encoding takes its time (f.latency): to half the scrape
	// timeout beyond the bound, since an answer that waited for the scrape
	// waits for most of it, while go test runs other packages beside this
	// one and one answer may lose a scheduler slice of ~200 ms.
	slowest, median, controlMedian := slices.Max(during), medianOf(during), medianOf(control)
	if median > bound+controlMedian {
		t.Errorf("median /metrics answer took %s during the fault, want < %s plus the median before it (%s)", median, bound, controlMedian)
	}
	slowBound := bound + timeout/2
	if quiet := slices.Max(control) < bound/2 && f.latency == 0 && !machineBusy(); quiet && slowest > slowBound+slices.Max(control) {
		t.Errorf("on a quiet machine the slowest /metrics answer took %s during the fault, want < %s plus the slowest before it (%s)", slowest, slowBound, slices.Max(control))
	}

	if p.Exited() {
		t.Fatalf("the sidecar exited\n%s", p.Logs())
	}
	s, r := metrics(t, p)
	wantUp := 0.0
	if f.reason == "" {
		wantUp = 1
	}
	if got, ok := s["vllm_up"]; !ok || got != wantUp {
		t.Errorf("vllm_up = %v (present %v), want %v", got, ok, wantUp)
	}
	for _, reason := range scrape.FailureReasons {
		got := s.failures(reason)
		switch {
		case reason == f.reason && got < 2 && !starved:
			t.Errorf("failures{reason=%q} = %v, want >= 2", reason, got)
		case reason == scrape.ReasonTimeout && f.reason != scrape.ReasonTimeout:
			// A good page's scrape may time out on a busy machine:
			// that is a scrape taking longer than the timeout, not a
			// fault misread.
			if got != 0 {
				t.Logf("failures{reason=%q} = %v beside the fault %q", reason, got, f.reason)
			}
		case reason != f.reason && got != 0:
			t.Errorf("failures{reason=%q} = %v, want 0 (the fault is %q)", reason, got, f.reason)
		}
	}
	if f.reason != "" {
		if leaked := s.upstreamSeries(); len(leaked) > 0 {
			t.Errorf("a failed scrape still serves %d upstream series, e.g. %v", len(leaked), leaked[:min(5, len(leaked))])
		}
		if want := `reason=` + f.reason; !strings.Contains(p.Logs(), want) && !starved {
			t.Errorf("no log line with %s:\n%s", want, p.Logs())
		}
	}
	if f.check != nil {
		f.check(t, p, s, r.body)
	}
	hwm := procStatus(t, p.Cmd.Process.Pid, "VmHWM")
	t.Logf("VmHWM %.1f MiB (bound %d MiB); /metrics answers during the fault: median %s, slowest %s (before it %s, %s)", float64(hwm)/mib, f.hwm/mib, median, slowest, controlMedian, slices.Max(control))
	if hwm > f.hwm {
		t.Errorf("peak RSS (VmHWM) %.1f MiB, want < %d MiB", float64(hwm)/mib, f.hwm/mib)
	}
	// Shutdown cancels the scrape in flight; on a busy machine that and
	// the last answers take their time.
	if err := p.Stop(15 * time.Second); err != nil {
		t.Errorf("stop: %v\n%s", err, p.Logs())
	}
}

// paced is the scrape interval (and timeout) of a fault run on uri's good
// page: faultInterval, or five times the slowest of five reads of the page
// by this process where that is longer (up to 5 s): the upstream lives in
// this process, and on a busy machine a scrape that times out never sees
// the fault.
func paced(t *testing.T, uri string) time.Duration {
	t.Helper()
	slowest := slowestRead(t, uri)
	d := min(max(faultInterval, (5*slowest).Round(100*time.Millisecond)), 5*time.Second)
	if d != faultInterval {
		t.Logf("scrapes every %s: this process took up to %s to serve the good page", d, slowest)
	}
	return d
}

// quick reads /metrics and only its vllm_up and failure counter lines:
// cheap enough to poll, even when the page holds 100k series.
func quick(t testing.TB, p *testbin.Process) (series, time.Duration) {
	t.Helper()
	r := mustGet(t, p.URL+"/metrics")
	if r.status != http.StatusOK {
		t.Fatalf("/metrics answered %d", r.status)
	}
	out := series{}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "vllm_up ") && !strings.HasPrefix(line, "vllm_normalizer_scrape_failures_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad line %q", line)
		}
		out[line[:i]] = v
	}
	return out, r.took
}

// hang answers nothing until the client gives up (or d passes).
func hang(d time.Duration) http.Handler {
	return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(d):
		}
	})
}

// trickle sends body one byte at a time, every gap.
func trickle(body []byte, gap time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for i := range body {
			if _, err := w.Write(body[i : i+1]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(gap):
			}
		}
	})
}

// stream sends total bytes of valid-looking samples, generated as they are
// written: the test holds one 64 KiB chunk, never the page.
func stream(total int64) http.Handler {
	var chunk bytes.Buffer
	for i := 0; chunk.Len() < 64<<10; i++ {
		fmt.Fprintf(&chunk, "vllm:e2e_stream{i=\"%d\"} 1\n", i)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for sent := int64(0); sent < total; sent += int64(chunk.Len()) {
			if _, err := w.Write(chunk.Bytes()); err != nil {
				return
			}
		}
	})
}

// gzipBomb sends a gzip body that inflates to total bytes, as concatenated
// gzip members of 8 MiB each (about 8 KiB on the wire).
func gzipBomb(total int64) http.Handler {
	const memberSize = 8 * mib
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	line := []byte("vllm:e2e_bomb 1\n")
	for n := 0; n < memberSize; n += len(line) {
		_, _ = zw.Write(line)
	}
	_ = zw.Close()
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Header().Set("Content-Encoding", "gzip")
		for sent := int64(0); sent < total; sent += memberSize {
			if _, err := w.Write(member.Bytes()); err != nil {
				return
			}
		}
	})
}

func garbage(n int) []byte {
	r := rand.New(rand.NewPCG(6, 6))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// floodPage is a page of n distinct series, about 40 bytes each.
func floodPage(n int) []byte {
	var b bytes.Buffer
	b.WriteString("# HELP vllm:e2e_flood One of very many series.\n# TYPE vllm:e2e_flood gauge\n")
	for i := range n {
		fmt.Fprintf(&b, "vllm:e2e_flood{i=\"%d\",model_name=\"m\"} %d\n", i, i)
	}
	return b.Bytes()
}

// duplicateHeaders prints one family twice with identical HELP and TYPE,
// as multi-process exporters do.
const duplicateHeaders = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="1",model_name="m"} 5.0
`

func checkDuplicateHeaders(t *testing.T, p *testbin.Process, s series, body []byte) {
	for _, prefix := range []string{"# HELP vllm:num_requests_running ", "# TYPE vllm:num_requests_running "} {
		if n := bytes.Count(body, []byte("\n"+prefix)); n != 1 {
			t.Errorf("%d lines start with %q, want exactly 1", n, prefix)
		}
	}
	for k, want := range map[string]float64{
		`vllm:num_requests_running{engine="0",model_name="m"}`: 2,
		`vllm:num_requests_running{engine="1",model_name="m"}`: 5,
	} {
		if got, ok := s[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	r := mustGet(t, p.URL+"/metrics/routing")
	if r.status != http.StatusOK {
		t.Fatalf("routing view answered %d", r.status)
	}
	if got := mustParse(t, r.body)[`vllm:num_requests_running{model_name="m",role="both"}`]; got != 7 {
		t.Errorf("routing view running = %v, want 2+5 = 7", got)
	}
}

// conflictingTypes declares one family as a gauge and again as a counter.
const conflictingTypes = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 1
# TYPE vllm:num_requests_running counter
vllm:num_requests_running{engine="1",model_name="m"} 2
`

// hostileLabels holds label values and HELP text with quotes, backslashes,
// escaped newlines and non-ASCII, one of them shaped to break out of its
// quotes and inject a series if written back unescaped.
const hostileLabels = `# HELP vllm:num_requests_running Running \\ requests\nsecond line.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="q\"uote back\\slash new\nline ünïcødé 模型 🚀"} 2
vllm:num_requests_running{engine="0",model_name="x\"} 666\nvllm:injected{a=\"b\"} 1\n#"} 3
vllm:num_requests_running{engine="0",model_name="\\"} 4
`

// The values above as they are after unescaping.
var hostileValues = map[string]float64{
	"q\"uote back\\slash new\nline ünïcødé 模型 🚀": 2,
	"x\"} 666\nvllm:injected{a=\"b\"} 1\n#":      3,
	`\`:                                          4,
}

func checkHostileLabels(t *testing.T, p *testbin.Process, s series, body []byte) {
	for _, page := range []struct {
		path string
		body []byte
		name string
		keys func(v string) string
	}{
		{"/metrics", body, "vllm:num_requests_running", func(v string) string {
			return `vllm:num_requests_running{engine="0",model_name="` + v + `"}`
		}},
		{"/metrics/routing", nil, "vllm:num_requests_running", func(v string) string {
			return `vllm:num_requests_running{model_name="` + v + `",role="both"}`
		}},
	} {
		b := page.body
		if b == nil {
			r := mustGet(t, p.URL+page.path)
			if r.status != http.StatusOK {
				t.Fatalf("%s answered %d", page.path, r.status)
			}
			b = r.body
		}
		got := mustParse(t, b)
		for v, want := range hostileValues {
			if g, ok := got[page.keys(v)]; !ok || g != want {
				t.Errorf("%s: series with model_name %q = %v (present %v), want %v", page.path, v, g, ok, want)
			}
		}
		for k := range got {
			if strings.Contains(k, "injected") && !strings.Contains(k, "model_name=") {
				t.Errorf("%s: a label value broke out of its quotes: series %s", page.path, k)
			}
		}
		if !bytes.Contains(b, []byte(`model_name="q\"uote back\\slash new\nline ünïcødé 模型 🚀"`)) {
			t.Errorf("%s: the label value is not written escaped:\n%s", page.path, truncate(b))
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.HasPrefix(line, "vllm:injected") {
				t.Errorf("%s: injected line %q", page.path, line)
			}
		}
	}
	if !bytes.Contains(body, []byte(`Running \\ requests\nsecond line.`)) {
		t.Errorf("HELP text not escaped as it came:\n%s", truncate(body))
	}
}

// rawHead starts an answer written on the raw connection.
const rawHead = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"

// cut answers on the hijacked connection with what write sends, then
// closes it, with a reset (RST) when reset is set.
func cut(write func(w io.Writer), reset bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		write(buf)
		_ = buf.Flush()
		if tc, ok := c.(*net.TCPConn); ok && reset {
			time.Sleep(20 * time.Millisecond)
			_ = tc.SetLinger(0)
		}
	})
}

// midLine is the first half of page, ending inside a line.
func midLine(page []byte) []byte {
	h := page[:len(page)/2]
	for len(h) > 0 && h[len(h)-1] == '\n' {
		h = h[:len(h)-1]
	}
	return h
}

func gzipOf(b []byte) []byte {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	_, _ = w.Write(b)
	_ = w.Close()
	return z.Bytes()
}

// withSample is page plus one gauge sample with n labels besides __name__,
// each name nameLen bytes long (at least its unique prefix) and each value
// valueLen bytes long.
func withSample(page []byte, n, nameLen, valueLen int) []byte {
	var b bytes.Buffer
	b.Write(page)
	b.WriteString("# TYPE vllm:e2e_wide gauge\nvllm:e2e_wide{")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		name := fmt.Sprintf("l%d_", i) // unique, even when longer than nameLen
		name += strings.Repeat("n", max(0, nameLen-len(name)))
		fmt.Fprintf(&b, "%s=\"%s\"", name, strings.Repeat("v", valueLen))
	}
	b.WriteString("} 1\n")
	return b.Bytes()
}

// medianOf returns the median of ds (which it sorts).
func medianOf(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// machineBusy reports whether the machine runs more than one runnable task
// per CPU (the last minute's load average): then one slow answer is the
// scheduler's, and only the median is judged.
func machineBusy() bool {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return false
	}
	load, err := strconv.ParseFloat(f[0], 64)
	return err == nil && load > float64(runtime.NumCPU())
}
