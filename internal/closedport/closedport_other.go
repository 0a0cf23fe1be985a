//go:build !unix

package closedport

import (
	"net"
	"testing"
)

// held: the port is only freed, not held.
const held = false

// Addr is a 127.0.0.1:port nothing listens on when it returns. Without
// the unix sockets API the port is only freed, not held: another server
// may take it later.
func Addr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("closedport: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
