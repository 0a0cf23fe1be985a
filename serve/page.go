// Package serve holds pages encoded once and hands them to HTTP clients:
// content negotiation (text 0.0.4 or OpenMetrics, gzip or not) without
// re-encoding per request.
package serve

import (
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/common/expfmt"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// Page is one page, encoded once when published and served as is.
// Its gzip variant is compressed on the first request that accepts gzip,
// once per snapshot: a snapshot nobody reads compressed costs nothing, and
// the scrape cycle never waits for a compressor. The OpenMetrics variant is
// likewise encoded on first demand only: none of the known consumers asks
// for it.
type Page struct {
	fams []exposition.Family
	text []byte
	// textLen is the Content-Length header value of text.
	textLen []string

	gzPool    *sync.Pool // of *gzip.Writer, shared by an Encoder's pages
	gzOnce    sync.Once
	textGz    []byte
	textGzLen []string

	omOnce sync.Once
	om     []byte
	omGz   []byte
}

// Encoder holds what preparing a page reuses from one scrape to the next:
// a pool of gzip writers (a compressor's state is ~1 MB to allocate) and
// the size of the last output, so that each new buffer is allocated once at
// about the right size instead of grown by doubling. The output buffers
// themselves are always fresh: a published snapshot's bytes may still be
// written to a slow client while the next scrape encodes.
type Encoder struct {
	gzPool   *sync.Pool
	textHint int
}

func (e *Encoder) Prepare(fams []exposition.Family) *Page {
	if e.gzPool == nil {
		e.gzPool = &sync.Pool{New: func() any {
			gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
			return gz
		}}
	}
	p := &Page{fams: fams, gzPool: e.gzPool}
	p.text = exposition.AppendText(make([]byte, 0, e.textHint), fams)
	e.textHint = len(p.text) + len(p.text)/16 + 512
	p.textLen = []string{strconv.Itoa(len(p.text))}
	return p
}

// Gzipped returns the compressed text page, compressing it on first use.
func (p *Page) Gzipped() ([]byte, []string) {
	p.gzOnce.Do(func() {
		gz := p.gzPool.Get().(*gzip.Writer)
		p.textGz = compress(gz, p.text, len(p.text)/6+512)
		p.gzPool.Put(gz)
		p.textGzLen = []string{strconv.Itoa(len(p.textGz))}
	})
	return p.textGz, p.textGzLen
}

// OpenMetrics returns the OpenMetrics page and its gzip, encoding both on
// first use.
func (p *Page) OpenMetrics() ([]byte, []byte) {
	p.omOnce.Do(func() {
		p.om = exposition.AppendOpenMetrics(nil, p.fams)
		gz := p.gzPool.Get().(*gzip.Writer)
		p.omGz = compress(gz, p.om, len(p.om)/6+512)
		p.gzPool.Put(gz)
	})
	return p.om, p.omGz
}

// compress gzips b into a new slice of capacity hint (grown if short),
// resetting gz onto it.
func compress(gz *gzip.Writer, b []byte, hint int) []byte {
	out := appendWriter(make([]byte, 0, hint))
	gz.Reset(&out)
	_, _ = gz.Write(b)
	_ = gz.Close()
	gz.Reset(nil) // do not keep the page alive through the pool
	return out
}

// appendWriter is an io.Writer appending to itself.
type appendWriter []byte

func (w *appendWriter) Write(p []byte) (int, error) {
	*w = append(*w, p...)
	return len(p), nil
}

// Header values shared by every response. Each slice has len == cap, so a
// later Header.Add by anyone appends to a copy, never into these.
var (
	hdrText        = []string{exposition.ContentTypeText}
	hdrOpenMetrics = []string{exposition.ContentTypeOpenMetrics}
	hdrVary        = []string{"Accept-Encoding"}
	hdrGzip        = []string{"gzip"}
)

// openMetricsAccepted are the formats an Accept header naming OpenMetrics
// is negotiated against.
var openMetricsAccepted = expfmt.DefaultOpenMetricsAcceptedFormats()

// Write answers r with p in the format and encoding r accepts.
func Write(w http.ResponseWriter, r *http.Request, p *Page) {
	gz := acceptsGzip(r.Header.Get("Accept-Encoding"))
	if accept := r.Header.Get("Accept"); containsFold(accept, "openmetrics") &&
		expfmt.NegotiateAccept(r.Header, openMetricsAccepted...).FormatType() == expfmt.TypeOpenMetrics {
		body, zipped := p.OpenMetrics()
		if gz {
			body = zipped
		}
		write(w, hdrOpenMetrics, body, []string{strconv.Itoa(len(body))}, gz)
		return
	}
	if gz {
		body, n := p.Gzipped()
		write(w, hdrText, body, n, true)
		return
	}
	write(w, hdrText, p.text, p.textLen, false)
}

// write sends body with its Content-Length value.
func write(w http.ResponseWriter, ct []string, body []byte, bodyLen []string, gzipped bool) {
	h := w.Header()
	h["Content-Type"] = ct
	if len(h["Vary"]) == 0 {
		h["Vary"] = hdrVary
	} else {
		h.Add("Vary", "Accept-Encoding")
	}
	if gzipped {
		h["Content-Encoding"] = hdrGzip
	}
	h["Content-Length"] = bodyLen
	_, _ = w.Write(body)
}

// containsFold reports whether s contains sub (lower-case ASCII) in any
// case. Only an Accept header naming OpenMetrics needs full negotiation.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header admits gzip
// (a "gzip;q=0" refuses it).
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q := strings.TrimSpace(params)
		if v, ok := strings.CutPrefix(q, "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// Text returns the text page.
func (p *Page) Text() []byte { return p.text }

// Families returns the families the page was encoded from.
func (p *Page) Families() []exposition.Family { return p.fams }
