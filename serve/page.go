package serve

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/common/expfmt"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// Page is one page, encoded once, on its first use, and served as is: a
// page nobody reads costs no encoding, and the scrape cycle that publishes
// it never waits for an encoder or a compressor. Every later request for
// the same page writes the same bytes. The gzip variant is compressed
// on the first request that accepts gzip, the plain text on the first
// that does not, the OpenMetrics variant on the first that asks for it
// (none of the known consumers does). The gzip variant is compressed from
// the text as it is encoded, a chunk at a time, unless the text is
// already kept: as nearly every reader asks for gzip, most pages never
// hold their text whole.
type Page struct {
	base   []exposition.Family
	finish func([]exposition.Family) []exposition.Family
	enc    *Encoder

	famsOnce sync.Once
	fams     []exposition.Family

	textOnce sync.Once
	textDone atomic.Bool // text is set
	text     []byte
	textLen  []string // the Content-Length header value of text

	gzOnce    sync.Once
	textGz    []byte
	textGzLen []string

	omOnce         sync.Once
	om, omGz       []byte
	omLen, omGzLen []string
}

// Encoder holds what encoding pages reuses from one to the next: the size
// of the last text and gzip, so that each new buffer is allocated once at
// about the right size instead of grown by doubling. The output buffers
// themselves are fresh or, after KeepLines, the last page's unchanged gzip,
// never written to again: a page's bytes may still be written to a slow
// client while the next page is encoded. An Encoder's pages may be
// encoded concurrently.
type Encoder struct {
	textHint, gzHint atomic.Int64
	// lines, after KeepLines, is what the last page's encoding kept, taken
	// by one encoding at a time (nil while taken: a page encoded beside it
	// encodes in full).
	lines atomic.Pointer[kept]
}

// kept is what an Encoder keeps of its last page for the next: its text
// but the values, and its compressed bytes.
type kept struct {
	lines exposition.TextCache
	// gz is the gzip page of the text lines holds (lines.Same), with its
	// Content-Length; nil when not known. A page whose text is that one's
	// is served these bytes without being encoded or compressed.
	gz    []byte
	gzLen []string
}

// KeepLines makes e keep its pages' lines but their values from one page
// to the next, for pages built from the same label sets every scrape (the
// views): their text is then mostly copied, and a page whose text is the
// last one's is served the last one's gzip bytes. It costs about the text
// of a page of memory; a page read seldom gains nothing from it.
func (e *Encoder) KeepLines() {
	e.lines.Store(new(kept))
}

// appendText is exposition.AppendTextUntil, through k's lines when k is
// not nil.
func appendText(k *kept, b []byte, fams []exposition.Family, at exposition.TextPos, limit int) ([]byte, exposition.TextPos) {
	if k == nil {
		return exposition.AppendTextUntil(b, fams, at, limit)
	}
	return k.lines.AppendTextUntil(b, fams, at, limit)
}

// takeLines takes what e keeps, nil when it keeps nothing or another
// encoding holds it; putLines gives it back.
func (e *Encoder) takeLines() *kept { return e.lines.Swap(nil) }

func (e *Encoder) putLines(k *kept) {
	if k != nil {
		e.lines.Store(k)
	}
}

// compressor is an idle gzip writer (its state is ~0.8 MB to allocate
// and set up) with the chunk the text is encoded into on its way to it.
type compressor struct {
	gz    *gzip.Writer
	chunk []byte
	// stateless: built for a page read after gzIdleFor without one, and
	// not kept (below).
	stateless bool
}

// Idle compressors, shared by every Encoder: pages are compressed one at
// a time but for bursts, so one is nearly always enough. Not a sync.Pool:
// a pool is emptied by every other GC, which at one compression per scrape
// meant building a compressor again every few scrapes (a sixth of all the
// bytes a scrape allocated). Nor kept forever: one idle for gzIdleFor is
// dropped, so that a page read every 15 s does not hold 0.8 MB live, which
// the GC's goal doubles in RSS; and no more are kept than were in use at
// once over the last gzIdleFor, so that two reads that met once do not
// keep a second compressor for as long as pages are read.
var (
	gzMu    sync.Mutex
	gzIdle  []*compressor
	gzTimer *time.Timer // drops the idle compressors; nil when none is idle
	gzUsed  time.Time   // when a compressor was last put back
	gzBusy  int         // compressors in use
	gzPeak  int         // the most in use at once since the timer last looked
)

// maxIdleGzip bounds gzIdle after a burst of concurrent first reads.
const maxIdleGzip = 2

// gzIdleFor is how long an idle compressor is kept: longer than a
// scrape interval, so that pages read every scrape keep theirs, shorter
// than Prometheus's usual 15 s between reads.
var gzIdleFor = 5 * time.Second

// chunkSize is how much text is encoded before it is handed to the
// compressor: large enough that a page is a few writes, small enough to
// stay in cache.
const chunkSize = 32 << 10

func getGzip() *compressor {
	gzMu.Lock()
	defer gzMu.Unlock()
	gzBusy++
	gzPeak = max(gzPeak, gzBusy)
	if n := len(gzIdle); n > 0 {
		c := gzIdle[n-1]
		gzIdle = gzIdle[:n-1]
		return c
	}
	if time.Since(gzUsed) > gzIdleFor {
		// A page read less often than gzIdleFor (Prometheus every 15 s)
		// is compressed without state: building a BestSpeed writer for
		// it took 0.35-0.39 ms and 0.8 MB a read, stateless took 78 us
		// where a kept writer takes 65 us, for 2 % more bytes (58 KB
		// page, klauspost v1.20.3, load ~1.5).
		gz, _ := gzip.NewWriterLevel(nil, gzip.StatelessCompression)
		return &compressor{gz: gz, chunk: make([]byte, 0, chunkSize+4<<10), stateless: true}
	}
	// klauspost's BestSpeed: the same size as the standard library's
	// BestSpeed in 2.5x less CPU on these pages (docs/performance.md).
	gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return &compressor{gz: gz, chunk: make([]byte, 0, chunkSize+4<<10)}
}

func putGzip(c *compressor) {
	gzMu.Lock()
	defer gzMu.Unlock()
	gzBusy--
	gzUsed = time.Now()
	if c.stateless {
		return // the next read within gzIdleFor builds a BestSpeed one
	}
	if len(gzIdle) < maxIdleGzip {
		gzIdle = append(gzIdle, c)
	}
	if gzTimer == nil {
		gzTimer = time.AfterFunc(gzIdleFor, dropIdleGzip)
	}
}

// dropIdleGzip drops the idle compressors if none was put back for
// gzIdleFor, else those beyond the most in use at once since it last
// looked, and looks again when gzIdleFor will have passed.
func dropIdleGzip() {
	gzMu.Lock()
	defer gzMu.Unlock()
	if wait := gzIdleFor - time.Since(gzUsed); wait > 0 {
		if len(gzIdle) > gzPeak {
			clear(gzIdle[gzPeak:])
			gzIdle = gzIdle[:gzPeak]
		}
		gzPeak = gzBusy
		gzTimer.Reset(wait)
		return
	}
	clear(gzIdle)
	gzIdle = gzIdle[:0]
	gzTimer = nil
}

// Prepare returns the page of fams. When finish is not nil, the page holds
// finish(fams) instead, called when the page is first used: for families
// that describe the moment of reading rather than of publishing.
func (e *Encoder) Prepare(fams []exposition.Family, finish func([]exposition.Family) []exposition.Family) *Page {
	return &Page{base: fams, finish: finish, enc: e}
}

// Families returns the families the page is encoded from.
func (p *Page) Families() []exposition.Family {
	p.famsOnce.Do(func() {
		p.fams = p.base
		if p.finish != nil {
			p.fams = p.finish(p.base)
		}
	})
	return p.fams
}

// encode encodes the text page now, if it is not yet.
func (p *Page) encode() {
	p.textOnce.Do(func() {
		k := p.enc.takeLines()
		defer p.enc.putLines(k)
		if k != nil {
			k.gz, k.gzLen = nil, nil // the lines are this page's now; Gzipped finds them the same
		}
		p.text, _ = appendText(k, make([]byte, 0, p.enc.textHint.Load()), p.Families(), exposition.TextPos{}, math.MaxInt)
		p.enc.textHint.Store(int64(len(p.text) + len(p.text)/16 + 512))
		p.textLen = []string{strconv.Itoa(len(p.text))}
		p.textDone.Store(true)
	})
}

// Text returns the text page, encoding it on first use.
func (p *Page) Text() []byte {
	p.encode()
	return p.text
}

// Gzipped returns the compressed text page, compressing it on first use:
// the last page's bytes, unchanged, when its Encoder keeps lines and the
// text is the last page's (a view between two scrapes of an unchanged
// upstream, or of an idle server).
func (p *Page) Gzipped() ([]byte, []string) {
	p.gzOnce.Do(func() {
		fams := p.Families()
		k := p.enc.takeLines()
		defer p.enc.putLines(k)
		if k != nil && k.gz != nil && k.lines.Same(fams) {
			p.textGz, p.textGzLen = k.gz, k.gzLen
			return
		}
		through := false // encoded through k's lines, which now hold this page
		p.textGz = compress(p.enc.gzHint.Load(), func(c *compressor) {
			if p.textDone.Load() {
				_, _ = c.gz.Write(p.text)
				return
			}
			p.gzText(c, k)
			through = k != nil
		})
		p.enc.gzHint.Store(int64(len(p.textGz) + len(p.textGz)/8 + 512))
		p.textGzLen = []string{strconv.Itoa(len(p.textGz))}
		if k != nil {
			k.gz, k.gzLen = nil, nil
			if through || k.lines.Same(fams) {
				k.gz, k.gzLen = p.textGz, p.textGzLen
			}
		}
	})
	return p.textGz, p.textGzLen
}

// gzText encodes the text page into c's chunk, chunkSize bytes at a
// time however large its families, through k's lines when k is not nil,
// handing each chunk to the compressor.
func (p *Page) gzText(c *compressor, k *kept) {
	fams, n := p.Families(), 0
	for at := (exposition.TextPos{}); !at.Done(fams); {
		c.chunk, at = appendText(k, c.chunk[:0], fams, at, chunkSize)
		_, _ = c.gz.Write(c.chunk)
		n += len(c.chunk)
	}
	c.chunk = c.chunk[:0]
	if cap(c.chunk) > 2*chunkSize {
		c.chunk = make([]byte, 0, chunkSize+4<<10) // a huge line's chunk is not kept
	}
	p.enc.textHint.Store(int64(n + n/16 + 512))
}

// OpenMetrics returns the OpenMetrics page and its gzip, encoding both on
// first use.
func (p *Page) OpenMetrics() ([]byte, []byte) {
	p.omOnce.Do(func() {
		p.om = exposition.AppendOpenMetrics(nil, p.Families())
		p.omGz = compress(int64(len(p.om)/6+512), func(c *compressor) { _, _ = c.gz.Write(p.om) })
		p.omLen, p.omGzLen = []string{strconv.Itoa(len(p.om))}, []string{strconv.Itoa(len(p.omGz))}
	})
	return p.om, p.omGz
}

// compress returns what write writes to an idle compressor, gzipped into
// a new slice of capacity hint (grown if short).
func compress(hint int64, write func(*compressor)) []byte {
	c := getGzip()
	defer putGzip(c)
	out := appendWriter(make([]byte, 0, hint))
	c.gz.Reset(&out)
	write(c)
	_ = c.gz.Close()
	c.gz.Reset(nil) // do not keep the page alive through an idle writer
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
	hdrVary        = []string{"Accept", "Accept-Encoding"} // the body depends on both
	hdrGzip        = []string{"gzip"}
)

// openMetricsAccepted are the formats an Accept header naming OpenMetrics
// is negotiated against: those the sidecar serves. A client preferring
// protobuf (Prometheus 3 with created-timestamp ingestion or native
// histograms) gets its next choice, OpenMetrics, rather than text.
var openMetricsAccepted = []expfmt.Format{expfmt.FmtOpenMetrics_1_0_0, expfmt.FmtOpenMetrics_0_0_1, expfmt.FmtText}

// Write answers r with p in the format and encoding r accepts.
func Write(w http.ResponseWriter, r *http.Request, p *Page) {
	gz := acceptsGzip(r.Header.Get("Accept-Encoding"))
	if accept := r.Header.Get("Accept"); containsFold(accept, "openmetrics") &&
		expfmt.NegotiateAccept(r.Header, openMetricsAccepted...).FormatType() == expfmt.TypeOpenMetrics {
		body, zipped := p.OpenMetrics()
		n := p.omLen
		if gz {
			body, n = zipped, p.omGzLen
		}
		write(w, hdrOpenMetrics, body, n, gz)
		return
	}
	if gz {
		body, n := p.Gzipped()
		write(w, hdrText, body, n, true)
		return
	}
	p.encode()
	write(w, hdrText, p.text, p.textLen, false)
}

// write sends body with its Content-Length value.
func write(w http.ResponseWriter, ct []string, body []byte, bodyLen []string, gzipped bool) {
	h := w.Header()
	h["Content-Type"] = ct
	if len(h["Vary"]) == 0 {
		h["Vary"] = hdrVary
	} else {
		h["Vary"] = append(h["Vary"], hdrVary...)
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
