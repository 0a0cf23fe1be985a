package collector

import (
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
)

// Reasons a scrape fails, the values of
// vllm_normalizer_scrape_failures_total{reason}.
const (
	ReasonRefused      = "refused"        // nothing listens: vLLM not started or crashed
	ReasonNetwork      = "network"        // other connection errors (DNS, reset, unreachable)
	ReasonTimeout      = "timeout"        // no complete answer within --vllm.timeout
	ReasonHTTPStatus   = "http_status"    // an answer other than 200
	ReasonBodyTooLarge = "body_too_large" // more than --vllm.max-body-bytes after decompression
	ReasonEmpty        = "empty"          // 200 with an empty page
	ReasonParse        = "parse"          // not a valid exposition page
	ReasonSampleLimit  = "sample_limit"   // more samples than --vllm.sample-limit
)

// FailureReasons lists every reason, so that each counter series exists
// from the start and rate() sees its first increase.
var FailureReasons = []string{ReasonRefused, ReasonNetwork, ReasonTimeout, ReasonHTTPStatus, ReasonBodyTooLarge, ReasonEmpty, ReasonParse, ReasonSampleLimit}

// acceptHeader asks for text format 0.0.4 first. OpenMetrics is accepted
// as a second choice; the parser follows whatever Content-Type comes back.
const acceptHeader = "text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1"

// scrapeError is a failed fetch or parse with the reason it is counted under.
type scrapeError struct {
	reason string
	err    error
}

func (e *scrapeError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *scrapeError) Unwrap() error { return e.err }

// fetcher reads the upstream page into a buffer reused across scrapes.
type fetcher struct {
	client   *http.Client
	uri      string
	redacted string // the URI with any password masked, for logs and errors
	maxBody  int64
	buf      []byte
	lastN    int64 // size of the last page, to shrink buf after a spike
}

func newFetcher(client *http.Client, uri string, maxBody int64) (*fetcher, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("--vllm.scrape-uri %q is not a URL: %w", uri, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("--vllm.scrape-uri %q: scheme must be http or https, e.g. http://127.0.0.1:8000/metrics", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("--vllm.scrape-uri %q has no host, e.g. http://127.0.0.1:8000/metrics", u.Redacted())
	}
	return &fetcher{client: client, uri: uri, redacted: u.Redacted(), maxBody: maxBody}, nil
}

// fetch GETs the page. The returned slice is valid until the next fetch.
// Go's transport asks for gzip and decompresses transparently; the size
// limit applies to the decompressed bytes, so a gzip bomb stops at the limit.
func (f *fetcher) fetch(ctx context.Context) (body []byte, contentType string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.uri, nil)
	if err != nil {
		return nil, "", &scrapeError{ReasonNetwork, err}
	}
	req.Header.Set("Accept", acceptHeader)
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
		return nil, "", &scrapeError{ReasonHTTPStatus, fmt.Errorf("GET %s answered %s; check --vllm.scrape-uri points at vLLM's /metrics", f.redacted, resp.Status)}
	}
	tooLarge := &scrapeError{ReasonBodyTooLarge, fmt.Errorf("GET %s: the page is larger than --vllm.max-body-bytes=%d", f.redacted, f.maxBody)}
	if resp.ContentLength > f.maxBody {
		return nil, "", tooLarge
	}
	if cap(f.buf) > 1<<20 && int64(cap(f.buf)) > 4*f.lastN {
		// One huge page must not pin its buffer for good.
		f.buf = nil
	}
	f.buf, err = readAtMost(resp.Body, f.buf, f.maxBody)
	n := int64(len(f.buf))
	// Remembered for failures too: while an upstream keeps sending pages
	// over the limit, the buffer is reused instead of grown again each time.
	f.lastN = n
	if err != nil {
		return nil, "", f.classify(err)
	}
	if n > f.maxBody {
		return nil, "", tooLarge
	}
	if n == 0 {
		return nil, "", &scrapeError{ReasonEmpty, fmt.Errorf("GET %s answered 200 with an empty body", f.redacted)}
	}
	return f.buf, resp.Header.Get("Content-Type"), nil
}

// readAtMost reads r into buf's storage until EOF or until more than limit
// bytes are read, and returns what it read. The buffer doubles as it fills
// but never beyond limit+1 bytes: bytes.Buffer would grow to twice the
// limit and hold both the old and the new copy while growing, so a page
// over the limit cost several times the limit in memory.
func readAtMost(r io.Reader, buf []byte, limit int64) ([]byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return buf, nil
			}
			grown := make([]byte, len(buf), min(max(2*int64(cap(buf)), 64<<10), limit+1))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func (f *fetcher) classify(err error) error {
	// http.Client errors quote the URL; keep only the cause so a password
	// in --vllm.scrape-uri never reaches a log line.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var (
		ne      net.Error
		corrupt flate.CorruptInputError
	)
	switch {
	case errors.Is(err, gzip.ErrHeader), errors.Is(err, gzip.ErrChecksum), errors.As(err, &corrupt):
		return &scrapeError{ReasonParse, fmt.Errorf("GET %s: the gzip body is corrupt: %w", f.redacted, err)}
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return &scrapeError{ReasonTimeout, fmt.Errorf("GET %s: no complete answer within --vllm.timeout: %w", f.redacted, err)}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &scrapeError{ReasonRefused, fmt.Errorf("GET %s: connection refused; is vLLM running and listening there?", f.redacted)}
	}
	return &scrapeError{ReasonNetwork, fmt.Errorf("GET %s: %w", f.redacted, err)}
}
