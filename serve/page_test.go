package serve_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	fixturepages "github.com/fos-study/vllm-normalizer/internal/fixtures"
	"github.com/fos-study/vllm-normalizer/serve"
)

// page13 is a real vLLM V1 page (fixture 13) as the sidecar would serve it.
func page13(t *testing.T) []exposition.Family {
	t.Helper()
	return fixturepages.Families(t, "13-")
}

func request(t *testing.T, p *serve.Page, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	serve.Write(w, r, p)
	return w
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWriteNegotiates: text 0.0.4 unless OpenMetrics is asked for, gzip
// when Accept-Encoding admits it, each with its Content-Type,
// Content-Length, Content-Encoding and Vary; every variant holds the same
// series as the families, as a consumer's parser reads them.
func TestWriteNegotiates(t *testing.T) {
	fams := page13(t)
	var enc serve.Encoder
	p := enc.Prepare(fams, nil)
	text := exposition.AppendText(nil, fams)
	for _, c := range []struct {
		name        string
		header      map[string]string
		contentType string
		gzipped     bool
	}{
		{"plain", nil, exposition.ContentTypeText, false},
		{"prometheus accept", map[string]string{"Accept": "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4"}, exposition.ContentTypeOpenMetrics, false},
		// Prometheus 3 asks for protobuf first with created-timestamp
		// ingestion or native histograms on: the best the sidecar serves
		// of what it accepts is OpenMetrics, not text.
		{"prometheus accept, protobuf first", map[string]string{"Accept": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"}, exposition.ContentTypeOpenMetrics, false},
		{"protobuf only", map[string]string{"Accept": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,*/*;q=0.1"}, exposition.ContentTypeText, false},
		{"text preferred", map[string]string{"Accept": "text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5"}, exposition.ContentTypeText, false},
		{"gzip", map[string]string{"Accept-Encoding": "gzip, deflate"}, exposition.ContentTypeText, true},
		{"GZIP with q", map[string]string{"Accept-Encoding": "br;q=1.0, GZIP;q=0.5"}, exposition.ContentTypeText, true},
		{"gzip refused", map[string]string{"Accept-Encoding": "gzip;q=0, identity"}, exposition.ContentTypeText, false},
		{"identity", map[string]string{"Accept-Encoding": "identity"}, exposition.ContentTypeText, false},
		{"openmetrics gzip", map[string]string{"Accept": "application/openmetrics-text;version=1.0.0", "Accept-Encoding": "gzip"}, exposition.ContentTypeOpenMetrics, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := request(t, p, c.header)
			h := w.Result().Header
			if w.Code != http.StatusOK || h.Get("Content-Type") != c.contentType {
				t.Fatalf("status %d, Content-Type %q; want 200, %q", w.Code, h.Get("Content-Type"), c.contentType)
			}
			body := w.Body.Bytes()
			if h.Get("Content-Length") != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length %q, body %d bytes", h.Get("Content-Length"), len(body))
			}
			// The body depends on Accept (text or OpenMetrics) as on
			// Accept-Encoding: a cache in between must key on both.
			if got := h.Values("Vary"); !slices.Equal(got, []string{"Accept", "Accept-Encoding"}) {
				t.Errorf("Vary %q, want Accept and Accept-Encoding", got)
			}
			if got := h.Get("Content-Encoding") == "gzip"; got != c.gzipped {
				t.Fatalf("Content-Encoding %q, want gzip %v", h.Get("Content-Encoding"), c.gzipped)
			}
			if c.gzipped {
				body = gunzip(t, body)
			}
			if c.contentType == exposition.ContentTypeText {
				if !bytes.Equal(body, text) {
					t.Errorf("text body differs from the families' encoding (%d vs %d bytes)", len(body), len(text))
				}
			} else if !bytes.HasSuffix(body, []byte("# EOF\n")) {
				t.Errorf("OpenMetrics body does not end with # EOF")
			}
			// A consumer's parser reads the same series either way.
			back, _, err := exposition.Parse(body, c.contentType, exposition.ParseOptions{})
			if err != nil {
				t.Fatalf("the served page does not parse: %v", err)
			}
			if got, want := countSamples(back), countSamples(fams); got != want {
				t.Errorf("%d samples served, %d prepared", got, want)
			}
		})
	}
}

func countSamples(fams []exposition.Family) int {
	n := 0
	for _, f := range fams {
		n += len(f.Samples)
	}
	return n
}

// TestWriteKeepsVary: a handler that already varies on something keeps it.
func TestWriteKeepsVary(t *testing.T) {
	var enc serve.Encoder
	p := enc.Prepare(page13(t), nil)
	w := httptest.NewRecorder()
	w.Header().Set("Vary", "Origin")
	serve.Write(w, httptest.NewRequest(http.MethodGet, "/metrics", nil), p)
	if got := w.Result().Header.Values("Vary"); !slices.Equal(got, []string{"Origin", "Accept", "Accept-Encoding"}) {
		t.Errorf("Vary %q, want Origin, Accept and Accept-Encoding", got)
	}
}

// TestPageEncodesOnce: finish runs once, on first use, however many
// readers come at once; a page nobody reads is never finished; every
// reader gets the same bytes, and what finish added is on the page.
func TestPageEncodesOnce(t *testing.T) {
	fams := page13(t)
	var calls atomic.Int32
	finish := func(in []exposition.Family) []exposition.Family {
		calls.Add(1)
		return append(slices.Clip(in), exposition.Family{Name: "read_at", Type: model.MetricTypeGauge, Help: "when the page was first read",
			Samples: []exposition.Sample{{Labels: labels.FromStrings(model.MetricNameLabel, "read_at"), Value: 42}}})
	}
	var enc serve.Encoder
	unread := enc.Prepare(fams, finish)
	_ = unread
	if calls.Load() != 0 {
		t.Fatal("Prepare finished the page before anyone read it")
	}
	p := enc.Prepare(fams, finish)
	var wg sync.WaitGroup
	bodies := make([][]byte, 16)
	for i := range bodies {
		wg.Go(func() {
			h := map[string]string{}
			if i%2 == 1 {
				h["Accept-Encoding"] = "gzip"
			}
			w := request(t, p, h)
			b := w.Body.Bytes()
			if i%2 == 1 {
				b = gunzip(t, b)
			}
			bodies[i] = b
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("finish ran %d times for one page, want 1", n)
	}
	for i, b := range bodies {
		if !bytes.Equal(b, bodies[0]) {
			t.Fatalf("reader %d got other bytes than reader 0", i)
		}
	}
	if !bytes.Contains(bodies[0], []byte("\nread_at 42\n")) {
		t.Error("the family finish added is not on the page")
	}
	if got := p.Families(); len(got) != len(fams)+1 || got[len(got)-1].Name != "read_at" {
		t.Errorf("Families has %d families, want the %d prepared plus read_at", len(got), len(fams))
	}
	if len(fams) > 0 && fams[len(fams)-1].Name == "read_at" {
		t.Error("finish's result leaked into the prepared families")
	}
}

// TestPagesIndependent: an Encoder's next page does not write into the
// bytes of the page before it, which a slow client may still be reading.
func TestPagesIndependent(t *testing.T) {
	fams := page13(t)
	var enc serve.Encoder
	a := enc.Prepare(fams, nil)
	aText := bytes.Clone(a.Text())
	aGz, _ := a.Gzipped()
	aGz = bytes.Clone(aGz)
	b := enc.Prepare(fams[:len(fams)/2], nil)
	_ = b.Text()
	_, _ = b.Gzipped()
	if !bytes.Equal(a.Text(), aText) {
		t.Error("encoding the next page changed the previous page's text")
	}
	if gz, _ := a.Gzipped(); !bytes.Equal(gz, aGz) {
		t.Error("compressing the next page changed the previous page's gzip")
	}
	if bytes.Equal(a.Text(), b.Text()) {
		t.Error("two different pages encoded alike")
	}
}

// TestServedPageReadByRouterParser: the text page is what routers' expfmt
// parser (legacy name validation) reads without error.
func TestServedPageReadByRouterParser(t *testing.T) {
	var enc serve.Encoder
	p := enc.Prepare(page13(t), nil)
	body := request(t, p, nil).Body.String()
	tp := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := tp.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("expfmt rejects the page: %v", err)
	}
	if _, ok := mfs["vllm:num_requests_running"]; !ok {
		t.Error("the page lost vllm:num_requests_running")
	}
}

// TestGzipFirstIsTheText: a page read first with gzip is compressed from
// its text as it is encoded, a chunk at a time; what it holds is exactly
// the text a plain reader gets later, for pages of no family, of one
// family larger than a chunk, and of many chunks (fixture 13, ~59 KB).
func TestGzipFirstIsTheText(t *testing.T) {
	fams := page13(t)
	big := exposition.Family{Name: "big", Type: model.MetricTypeGauge, Help: "one family of many series"}
	for i := range 3000 {
		big.Samples = append(big.Samples, exposition.Sample{Labels: labels.FromStrings(model.MetricNameLabel, "big", "i", strconv.Itoa(i)), Value: float64(i) / 7})
	}
	for _, c := range []struct {
		name string
		fams []exposition.Family
	}{{"empty", nil}, {"one large family", []exposition.Family{big}}, {"fixture 13", fams}, {"fixture 13 and the large family", append(slices.Clip(fams), big)}} {
		t.Run(c.name, func(t *testing.T) {
			var enc serve.Encoder
			for range 2 { // the second page is sized from the first
				p := enc.Prepare(c.fams, nil)
				gz, n := p.Gzipped()
				if n[0] != strconv.Itoa(len(gz)) {
					t.Errorf("Content-Length %s for %d gzip bytes", n[0], len(gz))
				}
				want := exposition.AppendText(nil, c.fams)
				if got := gunzip(t, gz); !bytes.Equal(got, want) {
					t.Fatalf("the gzip page holds %d bytes that are not the %d of the text", len(got), len(want))
				}
				if !bytes.Equal(p.Text(), want) {
					t.Fatal("the text read after the gzip differs from the families' text")
				}
			}
		})
	}
}

// TestKeptLinesServeWhatAFreshEncoderServes: an Encoder keeping its lines
// serves, page after page (values moved, a family gone, one back, a
// series relabelled), text and gzip whose text are byte for byte what an
// Encoder keeping nothing serves.
func TestKeptLinesServeWhatAFreshEncoderServes(t *testing.T) {
	base := page13(t)
	var kept serve.Encoder
	kept.KeepLines()
	for n := range 12 {
		fams := slices.Clone(base)
		for i := range fams {
			fams[i].Samples = slices.Clone(fams[i].Samples)
			for j := range fams[i].Samples {
				fams[i].Samples[j].Value += float64(n * (i + j))
			}
		}
		switch n % 4 {
		case 1:
			fams = slices.Delete(fams, 3, 4)
		case 2:
			s := &fams[len(fams)/2].Samples[0]
			s.Labels = labels.NewBuilder(s.Labels).Set("scrape", strconv.Itoa(n)).Labels()
		}
		var fresh serve.Encoder
		want := fresh.Prepare(fams, nil).Text()
		p := kept.Prepare(fams, nil)
		gz, _ := p.Gzipped() // the text in chunks, through the kept lines
		if got := gunzip(t, gz); !bytes.Equal(got, want) {
			t.Fatalf("page %d: the gzipped text differs from a fresh encoder's", n)
		}
		if got := kept.Prepare(fams, nil).Text(); !bytes.Equal(got, want) {
			t.Fatalf("page %d: the text differs from a fresh encoder's", n)
		}
	}
}

// TestUnchangedPageServedLastGzip: a kept-lines Encoder's page whose text
// is the last page's is served the last page's gzip bytes (the same
// slice: nothing encoded or compressed); a page whose text differs, by a
// value or a label, is compressed afresh; every body decompresses to what
// a fresh encoder writes. A page read as text first is compressed from
// its text, and the next page like it reuses that. Without KeepLines
// nothing is reused.
func TestUnchangedPageServedLastGzip(t *testing.T) {
	base := page13(t)
	page := func(moved float64, label string) []exposition.Family {
		fams := slices.Clone(base)
		for i := range fams {
			fams[i].Samples = slices.Clone(fams[i].Samples)
		}
		fams[len(fams)-1].Samples[0].Value += moved
		if label != "" {
			s := &fams[1].Samples[0]
			s.Labels = labels.NewBuilder(s.Labels).Set("zz", label).Labels()
		}
		return fams
	}
	var enc serve.Encoder
	enc.KeepLines()
	var last []byte
	read := func(what string, fams []exposition.Family, textFirst, reused bool) {
		t.Helper()
		p := enc.Prepare(fams, nil)
		if textFirst {
			p.Text()
		}
		gz, n := p.Gzipped()
		var fresh serve.Encoder
		if want := fresh.Prepare(fams, nil).Text(); !bytes.Equal(gunzip(t, gz), want) {
			t.Fatalf("%s: the gzip body is not the page's text", what)
		}
		if n[0] != strconv.Itoa(len(gz)) {
			t.Errorf("%s: Content-Length %s for %d bytes", what, n[0], len(gz))
		}
		if got := last != nil && &gz[0] == &last[0]; got != reused {
			t.Errorf("%s: the last page's gzip bytes served: %v, want %v", what, got, reused)
		}
		last = gz
	}
	read("the first page", page(0, ""), false, false)
	read("the same page", page(0, ""), false, true)
	read("the same page again", page(0, ""), false, true)
	read("a value moved", page(1, ""), false, false)
	read("a label changed", page(1, "a"), false, false)
	read("the same, read as text first", page(1, "a"), true, false)
	read("the same after", page(1, "a"), false, true)
	read("a label back", page(1, ""), false, false)

	var plain serve.Encoder
	a, _ := plain.Prepare(page(0, ""), nil).Gzipped()
	if b, _ := plain.Prepare(page(0, ""), nil).Gzipped(); &a[0] == &b[0] {
		t.Error("an Encoder without KeepLines reused a page's gzip bytes")
	}
}
