package scrape

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/internal/pagetest"
)

// rawUpstream answers every connection on a loopback port by reading the
// request head and running answer on the raw connection, so a test can
// send what no well-behaved HTTP server would.
func rawUpstream(t *testing.T, answer func(c *net.TCPConn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				answer(c.(*net.TCPConn))
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/metrics"
}

func realPage(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", "13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

// chunk writes b as one HTTP/1.1 chunk.
func chunk(b []byte) string { return fmt.Sprintf("%x\r\n%s\r\n", len(b), b) }

const head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"

// TestFetchCutBodies: every way a body can end before its end is a failed
// fetch with reason truncated; the same bodies sent whole are read exactly.
func TestFetchCutBodies(t *testing.T) {
	page := realPage(t)
	half := page[:len(page)/2]
	// The cut falls inside a line, as a dying server cuts.
	if half[len(half)-1] == '\n' {
		half = half[:len(half)-1]
	}
	gz := gzipped(t, page)
	gzNoTrailer := gz[:len(gz)-8] // CRC-32 and size missing

	cases := []struct {
		name   string
		answer func(c *net.TCPConn)
		whole  bool   // the control: the body is complete and must be read
		want   []byte // what a whole body reads as; nil: page
	}{
		{"content-length whole", func(c *net.TCPConn) {
			fmt.Fprintf(c, "%sContent-Length: %d\r\n\r\n%s", head, len(page), page)
		}, true, nil},
		{"short of content-length", func(c *net.TCPConn) {
			fmt.Fprintf(c, "%sContent-Length: %d\r\n\r\n%s", head, len(page), half)
		}, false, nil},
		{"chunked whole", func(c *net.TCPConn) {
			fmt.Fprintf(c, "%sTransfer-Encoding: chunked\r\n\r\n%s%s0\r\n\r\n", head, chunk(page[:1000]), chunk(page[1000:]))
		}, true, nil},
		{"chunked without the last chunk", func(c *net.TCPConn) {
			fmt.Fprintf(c, "%sTransfer-Encoding: chunked\r\n\r\n%s%s", head, chunk(page[:1000]), chunk(page[1000:]))
		}, false, nil},
		{"chunked cut inside a chunk", func(c *net.TCPConn) {
			fmt.Fprintf(c, "%sTransfer-Encoding: chunked\r\n\r\n%x\r\n%s", head, len(page), half)
		}, false, nil},
		{"gzip whole", func(c *net.TCPConn) {
			fmt.Fprintf(c, "%sContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s", head, len(gz), gz)
		}, true, nil},
		{"gzip without trailer", func(c *net.TCPConn) {
			fmt.Fprintf(c, "%sContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s", head, len(gzNoTrailer), gzNoTrailer)
		}, false, nil},
		{"gzip chunked without trailer", func(c *net.TCPConn) {
			fmt.Fprintf(c, "%sContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n%s0\r\n\r\n", head, chunk(gzNoTrailer))
		}, false, nil},
		{"reset mid-body", func(c *net.TCPConn) {
			fmt.Fprintf(c, "%sContent-Length: %d\r\n\r\n%s", head, len(page), half)
			time.Sleep(50 * time.Millisecond)
			_ = c.SetLinger(0) // close with RST
		}, false, nil},
		{"close-delimited whole", func(c *net.TCPConn) {
			fmt.Fprintf(c, "%sConnection: close\r\n\r\n%s", head, page)
		}, true, nil},
		{"close-delimited cut mid-line", func(c *net.TCPConn) {
			fmt.Fprintf(c, "%sConnection: close\r\n\r\n%s", head, half)
		}, false, nil},
		// gzip's trailer proves the end: a page without a final line feed
		// (some exporters print one) is whole.
		{"close-delimited gzip without final line feed", func(c *net.TCPConn) {
			fmt.Fprintf(c, "%sContent-Encoding: gzip\r\nConnection: close\r\n\r\n%s", head, gzipped(t, page[:len(page)-1]))
		}, true, page[:len(page)-1]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			uri := rawUpstream(t, tc.answer)
			f, err := NewFetcher(&http.Client{Transport: &http.Transport{Proxy: nil}}, uri, 32<<20)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			body, _, err := f.Fetch(ctx)
			if tc.whole {
				want := page
				if tc.want != nil {
					want = tc.want
				}
				if err != nil || !bytes.Equal(body, want) {
					t.Fatalf("a whole body: err %v, %d bytes read of %d", err, len(body), len(want))
				}
				return
			}
			var se *Error
			if !errors.As(err, &se) || se.Reason != ReasonTruncated {
				t.Fatalf("want reason %s, got err %v (%d bytes returned)", ReasonTruncated, err, len(body))
			}
			if body != nil {
				t.Errorf("a cut body returned %d bytes", len(body))
			}
		})
	}
}

// TestFetchEncodings: the upstream is asked for gzip only when AskGzip
// says so; a gzip body is read whether asked for or not, by one reader
// reused across scrapes (pages of different sizes in turn, and a corrupt
// one between them); other encodings, an empty gzip body and a corrupt
// header are failures with their reasons.
func TestFetchEncodings(t *testing.T) {
	page := realPage(t)
	pages := [][]byte{page, page[:bytes.IndexByte(page[1000:], '\n')+1001], page}
	var asked []string
	var next []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		switch {
		case bytes.Equal(next, []byte("corrupt")):
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write([]byte("this is no gzip stream"))
		case strings.Contains(r.Header.Get("Accept-Encoding"), "gzip"):
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(gzipped(t, next))
		default:
			_, _ = w.Write(next)
		}
	}))
	defer srv.Close()
	for _, ask := range []bool{false, true} {
		f, err := NewFetcher(srv.Client(), srv.URL+"/metrics", 32<<20)
		if err != nil {
			t.Fatal(err)
		}
		f.AskGzip(ask)
		asked = nil
		for i, p := range append(pages[:2:2], []byte("corrupt"), pages[2]) {
			next = p
			body, _, err := f.Fetch(context.Background())
			if string(p) == "corrupt" {
				var se *Error
				if !errors.As(err, &se) || se.Reason != ReasonParse {
					t.Errorf("ask gzip %v: a corrupt gzip body: err %v, want reason %s", ask, err, ReasonParse)
				}
				continue
			}
			if err != nil || !bytes.Equal(body, p) {
				t.Fatalf("ask gzip %v, fetch %d: err %v, %d bytes read of %d", ask, i, err, len(body), len(p))
			}
		}
		want := "identity"
		if ask {
			want = "gzip"
		}
		for _, a := range asked {
			if a != want {
				t.Errorf("ask gzip %v: the upstream was asked for Accept-Encoding %q, want %q", ask, a, want)
			}
		}
	}

	for _, c := range []struct {
		name, answer, reason, msg string
	}{
		{"brotli", head + "Content-Encoding: br\r\nContent-Length: 4\r\n\r\nabcd", ReasonParse, `Content-Encoding "br"`},
		{"empty gzip", head + "Content-Encoding: gzip\r\nContent-Length: 0\r\n\r\n", ReasonEmpty, "empty body"},
		{"corrupt gzip header", head + "Content-Encoding: gzip\r\nContent-Length: 12\r\n\r\nnot gzip at all", ReasonParse, "gzip body is corrupt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			uri := rawUpstream(t, func(conn *net.TCPConn) { fmt.Fprint(conn, c.answer) })
			f, err := NewFetcher(&http.Client{Transport: &http.Transport{Proxy: nil}}, uri, 32<<20)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = f.Fetch(context.Background())
			var se *Error
			if !errors.As(err, &se) || se.Reason != c.reason || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("err %v, want reason %s and a message containing %q", err, c.reason, c.msg)
			}
		})
	}
}

// ModelName reads the only model of an OpenAI-compatible /v1/models on
// the scrape URI's host, and says to use the flag when there is none or
// several, or no such endpoint.
func TestModelName(t *testing.T) {
	for _, tc := range []struct {
		status     int
		body, want string
		err        string
	}{
		{200, `{"object":"list","data":[{"id":"LFM2.5-1.2B-Instruct-Q4_K_M.gguf","object":"model","owned_by":"llamacpp"}]}`, "LFM2.5-1.2B-Instruct-Q4_K_M.gguf", ""},
		{200, `{"data":[{"id":"a"},{"id":"b"}]}`, "", "lists 2 models"},
		{200, "# TYPE x gauge\nx 1\n", "", "not an OpenAI model list"},
		{404, "", "", "answered 404"},
	} {
		var path string
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			path = r.URL.Path
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.body))
		}))
		f, err := NewFetcher(s.Client(), s.URL+"/metrics?x=1", 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.ModelName(context.Background())
		s.Close()
		if path != "/v1/models" {
			t.Errorf("asked %q, want /v1/models", path)
		}
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && (!strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--upstream.model-name")) {
			t.Errorf("%d %q: got %q, %v; want %q, error with %q", tc.status, tc.body, got, err, tc.want, tc.err)
		}
	}
}

// TestFetchPageSizes: pages that grow past the read buffers, shrink and
// grow again, with and without a Content-Length, gzipped or not, are each
// read exactly; once pages are small again the Fetcher holds about one
// page, not the buffers of the largest.
func TestFetchPageSizes(t *testing.T) {
	fixture := realPage(t)
	page := func(n int) []byte {
		b := bytes.Repeat(fixture, n/len(fixture)+1)[:n]
		b[n-1] = '\n'
		return b
	}
	sizes := []int{58 << 10, 60 << 10, 100 << 10, 1 << 10, 300 << 10, 2 << 20, 58 << 10, 58 << 10, 16 << 10, 20 << 10, 58 << 10, 58 << 10}
	var serving []byte
	var chunked, gz bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		body := serving
		if gz {
			w.Header().Set("Content-Encoding", "gzip")
			body = gzipped(t, serving)
		}
		if !chunked {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		}
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	for _, mode := range []struct{ chunked, gz bool }{{false, false}, {true, false}, {false, true}} {
		chunked, gz = mode.chunked, mode.gz
		f, err := NewFetcher(srv.Client(), srv.URL+"/metrics", 4<<20)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range sizes {
			serving = page(n)
			got, _, err := f.Fetch(context.Background())
			if err != nil {
				t.Fatalf("%+v, page %d (%d bytes): %v", mode, i, n, err)
			}
			if !bytes.Equal(got, serving) {
				t.Fatalf("%+v, page %d (%d bytes): read %d bytes, not the page", mode, i, n, len(got))
			}
		}
		held := cap(f.page)
		for _, c := range f.chunks {
			held += cap(c)
		}
		// Two 58 KB pages after the spike: one buffer of the page and a quarter.
		if last := sizes[len(sizes)-1]; held > last+last/4+8<<10 {
			t.Errorf("%+v: after %d-byte pages the Fetcher holds %d bytes in %d chunks and a %d-byte page", mode, last, held, len(f.chunks), cap(f.page))
		}
	}
}

// TestSameHostRedirects: the policy alone. A redirect on the same host is
// followed up to three in a row; another host, or a fourth, stops at the
// redirect, whose answer Fetch fails naming why (TestRedirectsNotFollowed).
func TestSameHostRedirects(t *testing.T) {
	req := func(u string) *http.Request { r, _ := http.NewRequest(http.MethodGet, u, nil); return r }
	first := req("http://127.0.0.1:8000/metrics")
	three := []*http.Request{first, req("http://127.0.0.1:8000/a"), req("http://127.0.0.1:8000/b")}
	for name, c := range map[string]struct {
		next *http.Request
		via  []*http.Request
		want error
	}{
		"same host":     {req("http://127.0.0.1:8000/metrics/"), []*http.Request{first}, nil},
		"third":         {req("http://127.0.0.1:8000/c"), three, nil},
		"fourth":        {req("http://127.0.0.1:8000/d"), append(three, req("http://127.0.0.1:8000/c")), http.ErrUseLastResponse},
		"other host":    {req("http://10.0.0.1:8000/metrics"), []*http.Request{first}, http.ErrUseLastResponse},
		"other port":    {req("http://127.0.0.1:9000/metrics"), []*http.Request{first}, http.ErrUseLastResponse},
		"back and away": {req("http://10.0.0.1:8000/metrics"), three, http.ErrUseLastResponse},
	} {
		if err := SameHostRedirects(c.next, c.via); err != c.want {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

// TestOpenMetricsEOFRule: the "# EOF" rule applies exactly to the
// Content-Types the parser reads as OpenMetrics (a malformed one is read
// as text format, which has no end marker), and a page whose "# EOF" line
// is followed by more is left to the parser to refuse.
func TestOpenMetricsEOFRule(t *testing.T) {
	om, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", "30-vllm-v1-rust-frontend-openmetrics-constructed-from-13.om"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range []string{
		"application/openmetrics-text; version=1.0.0; charset=utf-8",
		"Application/OpenMetrics-Text;version=1.0.0",
		" application/openmetrics-text",
		"application/openmetrics-text; version", // malformed: read as text
		"application/openmetrics-textual",
		"text/plain; version=0.0.4",
		"",
	} {
		_, stats, err := exposition.Parse(om, ct, exposition.ParseOptions{})
		if err != nil {
			t.Fatalf("%q: the fixture does not parse: %v", ct, err)
		}
		if got := openMetrics(ct); got != stats.OpenMetrics {
			t.Errorf("Content-Type %q: the EOF rule applies %v, the parser reads OpenMetrics %v", ct, got, stats.OpenMetrics)
		}
	}
	noEOF := om[:len(om)-len("# EOF\n")]
	for _, c := range []struct {
		name string
		page []byte
		want bool
	}{
		{"whole", om, true},
		{"no final line feed", om[:len(om)-1], true},
		{"only # EOF", []byte("# EOF\n"), true},
		{"data after # EOF", append(slices.Clip(om), "x 1\n"...), true},
		{"cut at a line end", noEOF, false},
		{"cut inside # EOF", om[:len(om)-3], false},
		{"a label value ending in # EOF", append(slices.Clip(noEOF), "x{a=\"# EOF\"} 1\n"...), false},
	} {
		if got := endsWithEOF(c.page); got != c.want {
			t.Errorf("%s: endsWithEOF %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRedirectsNotFollowed: a redirect the sidecar does not follow (to
// another host, or past three in a row) fails the scrape as the answer it
// is, reason http_status, with an error that says where it pointed, that
// it was not followed and why, and the fix (the scrape URI's flag); the
// other host is never contacted. A same-host redirect is followed.
func TestRedirectsNotFollowed(t *testing.T) {
	page := realPage(t)
	rs := pagetest.ServeRedirects(t, page, http.StatusTemporaryRedirect)
	up, other := rs.Up, rs.Other
	otherHost := strings.TrimPrefix(other.URL, "http://")
	for _, c := range []struct {
		path string
		want []string // "" = the page is read
	}{
		{"/metrics", nil},
		{"/elsewhere", []string{"302 Found", otherHost, "another host", "not followed", "--vllm.scrape-uri", other.URL + "/metrics?x=1"}},
		{"/loop", []string{"302 Found", "/loopxxxx", "not followed", "3 redirects", "--vllm.scrape-uri"}},
	} {
		t.Run(c.path, func(t *testing.T) {
			f, err := NewFetcher(&http.Client{CheckRedirect: SameHostRedirects}, up.URL+c.path, 32<<20)
			if err != nil {
				t.Fatal(err)
			}
			body, _, err := f.Fetch(context.Background())
			if c.want == nil {
				if err != nil || !bytes.Equal(body, page) {
					t.Fatalf("same-host redirect: err %v, %d bytes", err, len(body))
				}
				return
			}
			var se *Error
			if !errors.As(err, &se) || se.Reason != ReasonHTTPStatus {
				t.Fatalf("err %v, want reason %s", err, ReasonHTTPStatus)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if rs.OtherHit() {
		t.Error("the other host was contacted")
	}
}
