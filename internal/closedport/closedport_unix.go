//go:build unix

package closedport

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// held: the port stays bound until the test ends.
const held = true

// Addr is a 127.0.0.1:port that refuses connections until t ends: a TCP
// socket bound to it without listening holds the port (it sets no
// SO_REUSEADDR, so no listener can share it) and the kernel answers a
// connection attempt with a reset.
func Addr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("closedport: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("closedport: bind 127.0.0.1:0: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("closedport: getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("closedport: bound to %T, want an IPv4 address", sa)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port))
}
