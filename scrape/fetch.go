package scrape

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/fos-study/vllm-normalizer/internal/setting"
)

// Reasons a scrape fails, the values of
// vllm_normalizer_scrape_failures_total{reason}.
const (
	ReasonRefused      = "refused"        // nothing listens: vLLM not started or crashed
	ReasonNetwork      = "network"        // other connection errors (DNS, reset, unreachable)
	ReasonTimeout      = "timeout"        // no complete answer within the scrape timeout
	ReasonHTTPStatus   = "http_status"    // an answer other than 200
	ReasonBodyTooLarge = "body_too_large" // more than the body size limit after decompression
	ReasonEmpty        = "empty"          // 200 with an empty page
	ReasonParse        = "parse"          // not a valid exposition page
	ReasonSampleLimit  = "sample_limit"   // more samples than the sample limit
	ReasonTruncated    = "truncated"      // the body ended before its end: short of Content-Length, no last chunk, no gzip trailer, reset, OpenMetrics without # EOF
	// Prometheus's per-scrape label limits, named as its configuration
	// names them.
	ReasonLabelLimit            = "label_limit"
	ReasonLabelNameLengthLimit  = "label_name_length_limit"
	ReasonLabelValueLengthLimit = "label_value_length_limit"
)

// FailureReasons lists every reason, so that each counter series exists
// from the start and rate() sees its first increase.
var FailureReasons = []string{ReasonRefused, ReasonNetwork, ReasonTimeout, ReasonHTTPStatus, ReasonBodyTooLarge, ReasonEmpty, ReasonParse, ReasonSampleLimit,
	ReasonTruncated, ReasonLabelLimit, ReasonLabelNameLengthLimit, ReasonLabelValueLengthLimit}

// acceptHeader asks for text format 0.0.4 first. OpenMetrics is accepted
// as a second choice; the parser follows whatever Content-Type comes back.
const acceptHeader = "text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1"

// Error is a failed fetch or parse with the reason it is counted under.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Fetcher reads the upstream page into buffers reused across scrapes.
type Fetcher struct {
	client   *http.Client
	uri      string
	redacted string // the URI with any password masked, for logs and errors
	host     string // the URI's host (and port), the only one redirects may go to
	maxBody  int64
	chunks   [][]byte // what the body is read into: the first sized to the last page, the rest readChunk bytes each
	page     []byte   // the page, joined, when it spans more than one chunk
	lastN    int64    // size of the last page, to shrink buffers after a spike
	// askGzip asks the upstream for a gzip body; gz decodes gzip bodies,
	// asked for or not, and is reused across scrapes.
	askGzip bool
	gz      *gzip.Reader
	gzIn    *bufio.Reader // what gz reads the body through
}

// readChunk is the size of the Fetcher's read buffers but the first.
const readChunk = 256 << 10

// firstChunk is the size of the first read buffer for a last page of n
// bytes: the page and a quarter, so that a page that grows a little still
// fits, at most readChunk. Kept for good, a readChunk buffer under a 58 KB
// page was 200 KB of live heap that was never written, which the GC's
// goal doubles in RSS.
func firstChunk(n int64) int {
	const least = 16 << 10
	return int(min(max(n+n/4+4<<10, least), readChunk)+4<<10-1) &^ (4<<10 - 1)
}

// NewFetcher returns a Fetcher of uri (http or https, with a host: see
// setting.ScrapeURL) that accepts pages up to maxBody bytes.
func NewFetcher(client *http.Client, uri string, maxBody int64) (*Fetcher, error) {
	u, err := setting.ScrapeURL("scrape.NewFetcher.uri", uri)
	if err != nil {
		return nil, err
	}
	return &Fetcher{client: client, uri: uri, redacted: u.Redacted(), host: u.Host, maxBody: maxBody}, nil
}

// AskGzip sets whether the upstream is asked for a gzip body (Prometheus's
// enable_compression). On loopback it only costs CPU on both sides: vLLM's
// Python client compresses at level 9 on every request, about a third on
// top of what rendering the page costs it. A gzip body is read either way.
func (f *Fetcher) AskGzip(on bool) { f.askGzip = on }

// Fetch GETs the page. The returned slice is valid until the next fetch.
// The body is decompressed here, not by the transport, so that one gzip
// reader serves every scrape; the size limit applies to the decompressed
// bytes, so a gzip bomb stops at the limit.
func (f *Fetcher) Fetch(ctx context.Context) (body []byte, contentType string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.uri, nil)
	if err != nil {
		return nil, "", &Error{ReasonNetwork, err}
	}
	req.Header.Set("Accept", acceptHeader)
	// Set explicitly, the transport neither adds gzip nor decompresses.
	if f.askGzip {
		req.Header.Set("Accept-Encoding", "gzip")
	} else {
		req.Header.Set("Accept-Encoding", "identity")
	}
	req.Header.Set("User-Agent", "vllm-normalizer")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, "", f.classify(err)
	}
	defer func() {
		// Drain a little so the connection can be reused, never much.
		_, _ = io.CopyN(io.Discard, resp.Body, 4096)
		resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		if loc, err := resp.Location(); err == nil && redirects(resp.StatusCode) {
			return nil, "", &Error{ReasonHTTPStatus, f.redirectError(resp, loc)}
		}
		return nil, "", &Error{ReasonHTTPStatus, fmt.Errorf("GET %s answered %s; check that the scrape URI points at vLLM's /metrics", f.redacted, resp.Status)}
	}
	r, gzipped, err := f.decoder(resp)
	if err != nil {
		return nil, "", err
	}
	if !gzipped && resp.ContentLength > f.maxBody {
		return nil, "", f.tooLarge()
	}
	size := f.lastN
	if size == 0 && !gzipped {
		size = resp.ContentLength // the first page: its length, when known
	}
	page, n, err := f.read(r, size)
	// Remembered for failures too: while an upstream keeps sending pages
	// over the limit, the buffers are reused instead of allocated again.
	f.lastN = n
	if err != nil {
		return nil, "", f.classifyBody(err, n)
	}
	if n > f.maxBody {
		return nil, "", f.tooLarge()
	}
	if n == 0 {
		return nil, "", &Error{ReasonEmpty, fmt.Errorf("GET %s answered 200 with an empty body", f.redacted)}
	}
	if !gzipped && closeDelimited(resp) && page[len(page)-1] != '\n' {
		// A body delimited only by the close of the connection has no
		// end marker on the wire: a cut there shows only as a last line
		// without the line feed every exposition line ends with (a
		// counter cut mid-number would otherwise read as a reset).
		return nil, "", &Error{ReasonTruncated, fmt.Errorf("GET %s: the body, delimited by the connection's close, ends in the middle of a line after %d bytes", f.redacted, n)}
	}
	contentType = resp.Header.Get("Content-Type")
	if openMetrics(contentType) && !endsWithEOF(page) {
		// OpenMetrics ends every page with "# EOF": without it the page
		// was cut, even at a line end. A "# EOF" line followed by more is
		// no cut but a bad page, which the parser names.
		return nil, "", &Error{ReasonTruncated, fmt.Errorf("GET %s: the OpenMetrics body ends without its \"# EOF\" line after %d bytes, so it was cut; nothing of it is used", f.redacted, n)}
	}
	return page, contentType, nil
}

// openMetricsType is the media type the parser reads as OpenMetrics.
const openMetricsType = "application/openmetrics-text"

// openMetrics reports whether the parser will read a page of contentType
// as OpenMetrics: the media type, as textparse reads it (a Content-Type
// that does not parse is read as text format).
func openMetrics(contentType string) bool {
	ct := strings.TrimLeft(contentType, " \t")
	if len(ct) < len(openMetricsType) || !strings.EqualFold(ct[:len(openMetricsType)], openMetricsType) {
		return false // text format, without the cost of parsing the header
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == openMetricsType
}

// endsWithEOF reports whether an OpenMetrics page holds its "# EOF" line:
// its last line (one final line feed allowed, as the parser allows), or
// an earlier one, when the page goes on after it.
func endsWithEOF(page []byte) bool {
	const eof = "# EOF"
	last := bytes.TrimSuffix(page, []byte{'\n'})
	if bytes.HasSuffix(last, []byte(eof)) && (len(last) == len(eof) || last[len(last)-len(eof)-1] == '\n') {
		return true
	}
	return bytes.HasPrefix(page, []byte(eof+"\n")) || bytes.Contains(page, []byte("\n"+eof+"\n"))
}

// decoder returns the reader of resp's page: the body itself, or the gzip
// reader over it (whose trailer proves the page's end: a cut gzip body is
// io.ErrUnexpectedEOF). Go's transport only decompresses when it asked for
// gzip itself, which Fetch never lets it do; a gzip answer it set aside is
// decoded here too.
func (f *Fetcher) decoder(resp *http.Response) (io.Reader, bool, error) {
	body := io.Reader(resp.Body)
	if resp.Uncompressed {
		return body, true, nil
	}
	switch enc := strings.TrimSpace(resp.Header.Get("Content-Encoding")); {
	case enc == "", strings.EqualFold(enc, "identity"):
		return body, false, nil
	case strings.EqualFold(enc, "gzip"), strings.EqualFold(enc, "x-gzip"):
	default:
		return nil, false, &Error{ReasonParse, fmt.Errorf("GET %s answered with Content-Encoding %q; the sidecar reads identity and gzip bodies only", f.redacted, enc)}
	}
	// gzip wraps a reader without ReadByte in a new bufio.Reader at every
	// Reset; this one is kept.
	if f.gzIn == nil {
		f.gzIn = bufio.NewReader(body)
	} else {
		f.gzIn.Reset(body)
	}
	var err error
	if f.gz == nil {
		f.gz, err = gzip.NewReader(f.gzIn)
	} else {
		err = f.gz.Reset(f.gzIn)
	}
	switch {
	case err == io.EOF:
		return strings.NewReader(""), true, nil // an empty body
	case err != nil:
		f.gz = nil // a failed Reset leaves the reader unusable
		return nil, true, f.classifyBody(err, 0)
	}
	return f.gz, true, nil
}

// closeDelimited reports whether nothing on the wire marks the end of
// resp's body: HTTP/1 without Content-Length or chunking.
func closeDelimited(resp *http.Response) bool {
	return resp.ProtoMajor == 1 && resp.ContentLength < 0 && len(resp.TransferEncoding) == 0
}

// classifyBody names an error met while reading the body: the answer had
// begun, so short of a timeout or corrupt gzip the page was cut short.
func (f *Fetcher) classifyBody(err error, n int64) error {
	var (
		ne      net.Error
		corrupt flate.CorruptInputError
	)
	switch {
	case errors.Is(err, gzip.ErrHeader), errors.Is(err, gzip.ErrChecksum), errors.As(err, &corrupt):
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
	default:
		return &Error{ReasonTruncated, fmt.Errorf("GET %s: the body ended early after %d bytes (%v); nothing of it is used", f.redacted, n, err)}
	}
	return f.classify(err)
}

// read reads r until io.EOF or until more than maxBody bytes have come,
// and returns the page and its size (n > maxBody: the page is too large, and
// nothing is returned), size being what it is expected to be (the last
// page's). The body is read into fixed-size chunks, so a page
// over the limit costs at most maxBody+readChunk bytes of memory: a buffer
// that doubles as it fills (bytes.Buffer) would reach twice the limit and
// hold the old and the new copy while growing, and a process with a 32 MiB
// limit peaked at 260 MiB on an endless body. A page that spans chunks is
// joined into one reused buffer for the parser.
func (f *Fetcher) read(r io.Reader, size int64) ([]byte, int64, error) {
	// One huge page must not pin its memory for good.
	if keep := int(size/readChunk) + 1; len(f.chunks) > 4 && len(f.chunks) > 4*keep {
		clear(f.chunks[keep:])
		f.chunks = f.chunks[:keep]
	}
	if cap(f.page) > 1<<20 && int64(cap(f.page)) > 4*size {
		f.page = nil
	}
	// The first chunk follows the page: regrown when the page outgrew it,
	// shrunk when it is four times the page; once it holds the page alone,
	// the others and the joined page are dropped.
	want := firstChunk(size)
	if len(f.chunks) == 0 {
		f.chunks = append(f.chunks, make([]byte, want))
	} else if n := len(f.chunks[0]); n < want && int64(n) < size || n > 4*want {
		f.chunks[0] = make([]byte, want)
	}
	if size <= int64(len(f.chunks[0])) && len(f.chunks) > 1 {
		clear(f.chunks[1:])
		f.chunks, f.page = f.chunks[:1], nil
	}
	var n int64
	for used := 1; ; used++ {
		if used > len(f.chunks) {
			f.chunks = append(f.chunks, make([]byte, readChunk))
		}
		k, err := fill(r, f.chunks[used-1])
		n += int64(k)
		if n > f.maxBody {
			return nil, n, nil
		}
		if err == io.EOF {
			return f.join(used, n), n, nil
		}
		if err != nil {
			return nil, n, err
		}
	}
}

// fill reads into buf until it is full or r fails. Unlike io.ReadFull it
// keeps r's own error: io.EOF is the body's proper end, and anything else,
// io.ErrUnexpectedEOF included (the transport's word for a body short of its
// Content-Length, a chunked body without its last chunk, a gzip stream
// without its trailer), means the body was cut.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// join returns the n bytes held by the first used chunks as one slice.
func (f *Fetcher) join(used int, n int64) []byte {
	if n <= int64(len(f.chunks[0])) {
		return f.chunks[0][:n]
	}
	if int64(cap(f.page)) < n {
		f.page = make([]byte, 0, n)
	}
	page := f.page[:0]
	for _, c := range f.chunks[:used] {
		page = append(page, c[:min(int64(len(c)), n-int64(len(page)))]...)
	}
	return page
}

// tooLarge is the failure of a page over the body size limit; built only
// when it happens, not on every scrape.
func (f *Fetcher) tooLarge() error {
	return &Error{ReasonBodyTooLarge, fmt.Errorf("GET %s: the page is larger than the body size limit of %d bytes", f.redacted, f.maxBody)}
}

// Redacted is the URI with any password masked, for logs and errors.
func (f *Fetcher) Redacted() string { return f.redacted }

func (f *Fetcher) classify(err error) error {
	// http.Client errors quote the URL; keep only the cause so a password
	// in the scrape URI never reaches a log line.
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	var (
		ne      net.Error
		corrupt flate.CorruptInputError
	)
	switch {
	case errors.Is(err, gzip.ErrHeader), errors.Is(err, gzip.ErrChecksum), errors.As(err, &corrupt):
		return &Error{ReasonParse, fmt.Errorf("GET %s: the gzip body is corrupt: %w", f.redacted, err)}
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return &Error{ReasonTimeout, fmt.Errorf("GET %s: no complete answer within the scrape timeout: %w", f.redacted, err)}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &Error{ReasonRefused, fmt.Errorf("GET %s: connection refused; is vLLM running and listening there?", f.redacted)}
	}
	return &Error{ReasonNetwork, fmt.Errorf("GET %s: %w", f.redacted, err)}
}

// redirects reports whether Go's client follows an answer of status code
// (CheckRedirect permitting).
func redirects(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// maxRedirects is how many redirects in a row SameHostRedirects follows.
const maxRedirects = 3

// SameHostRedirects follows a redirect (some servers send /metrics to
// /metrics/) only to the host of the original request, at most three times:
// the upstream is fixed by a flag, and a redirect must not make the sidecar
// fetch, or send credentials to, another host. A redirect it does not
// follow is the answer: Fetch fails it as http_status, saying why.
func SameHostRedirects(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects || req.URL.Host != via[0].URL.Host {
		return http.ErrUseLastResponse
	}
	return nil
}

// redirectError is the failure of an answer that redirects to loc, which
// the client did not follow: to another host, past maxRedirects, or none
// at all (follow_redirects: false).
func (f *Fetcher) redirectError(resp *http.Response, loc *url.URL) error {
	followed := 0
	for r := resp.Request; r != nil && r.Response != nil; r = r.Response.Request {
		followed++
	}
	why := "not followed: follow_redirects is false in --vllm.http-config.file"
	switch {
	case loc.Host != f.host:
		why = "not followed: it points at another host, and the sidecar scrapes only the host --vllm.scrape-uri names"
	case followed >= maxRedirects:
		why = fmt.Sprintf("not followed after %d redirects in a row", followed)
	}
	return fmt.Errorf("GET %s answered %s, a redirect to %s, %s; point --vllm.scrape-uri at the final address", f.redacted, resp.Status, loc.Redacted(), why)
}
