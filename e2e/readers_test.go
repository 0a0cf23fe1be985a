package e2e

import (
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// TestSlowReaderCutOff: a reader that asks for a large page and then stops
// reading is cut off after --web.write-timeout instead of holding its
// connection, goroutine and page for ever.
func TestSlowReaderCutOff(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): waits out --web.write-timeout on a 100k-series page")
	}
	up := newSwitchable(static(floodPage(100_000)))
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, up)
	p := testbin.Start(t, sidecarArgs("http://"+ln.Addr().String()+"/metrics", time.Second, 900*time.Millisecond,
		"--vllm.sample-limit=0", "--vllm.max-body-bytes=32MiB", "--web.write-timeout=1s")...)
	var full int64
	waitFor(t, settle, "vllm_up 1", func() bool {
		q, _ := quick(t, p)
		return q["vllm_up"] == 1
	})
	// The page's size from its Content-Length, without reading it: on a
	// busy machine this test's own read of 100k series may take longer
	// than the 1 s write timeout, and be cut off as it should.
	full = pageLength(t, p.URL+"/metrics")

	// A tiny receive buffer, so the kernel cannot swallow the page for us.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: sidecar\r\nAccept-Encoding: identity\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // three write timeouts without reading a byte
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection was still open 3 s after the write timeout (read %d bytes)", got)
	}
	if got >= full {
		t.Errorf("the stalled reader still got the whole page (%d bytes of %d): it was never cut off", got, full)
	}
	t.Logf("stalled reader got %d of %d bytes before the cut (%v)", got, full, err)
}

// TestMaxConnections: with --web.max-connections=2, two idle connections
// keep a third client waiting; closing one lets it in.
func TestMaxConnections(t *testing.T) {
	up := newSwitchable(static(v1Page(1, 1)))
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, up)
	p := testbin.Start(t, sidecarArgs("http://"+ln.Addr().String()+"/metrics", fastInterval, fastTimeout, "--web.max-connections=2")...)
	oneShot := &http.Client{Timeout: 700 * time.Millisecond, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	if _, err := get(oneShot, p.URL+"/-/healthy", nil); err != nil {
		t.Fatalf("no answer with no other connection open: %v", err)
	}
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	time.Sleep(100 * time.Millisecond) // let the sidecar accept both
	if r, err := get(oneShot, p.URL+"/-/healthy", nil); err == nil {
		t.Fatalf("a third connection was served (status %d) while two were held open", r.status)
	}
	_ = held[0].Close()
	waitFor(t, settle, "an answer once a held connection closed", func() bool {
		_, err := get(oneShot, p.URL+"/-/healthy", nil)
		return err == nil
	})
}

// pageLength is the Content-Length of an identity GET of url; the body is
// not read.
func pageLength(t *testing.T, url string) int64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ContentLength <= 0 {
		t.Fatalf("GET %s: status %d, Content-Length %d; want 200 with a length", url, resp.StatusCode, resp.ContentLength)
	}
	return resp.ContentLength
}
