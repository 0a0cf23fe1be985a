package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// At the cap, the connection idle longest makes room for a new one; a
// connection that has sent nothing yet is not idle and is not closed.
func TestConnLimiterClosesIdleFirst(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ConnState: trackIdle,
	}
	go func() { _ = srv.Serve(newConnLimiter(2).Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	request := func(c net.Conn) error {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	idle := dial()
	if err := request(idle); err != nil {
		t.Fatal(err)
	}
	fresh := dial() // open, nothing sent: not idle
	time.Sleep(50 * time.Millisecond)
	third := dial()
	if err := request(third); err != nil {
		t.Fatalf("a new connection at the cap, with one idle: %v", err)
	}
	_ = idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err == nil {
		t.Error("the idle connection was not closed to make room")
	}
	if err := request(fresh); err != nil {
		t.Errorf("the connection that had sent nothing was closed instead: %v", err)
	}
}

func TestIdleTimeoutNoLongerThanWriteTimeout(t *testing.T) {
	for _, c := range []struct{ write, want time.Duration }{
		{10 * time.Second, 10 * time.Second},
		{time.Second, time.Second},
		{5 * time.Minute, 2 * time.Minute},
	} {
		if got := idleTimeout(c.write); got != c.want {
			t.Errorf("idleTimeout(%v) = %v, want %v", c.write, got, c.want)
		}
	}
}
