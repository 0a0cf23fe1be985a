package closedport

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestAddrRefusesAndStaysHeld: dialing the address is refused, and no
// listener can take its port while the test runs (on unix), so a server
// started beside the test cannot make the dead upstream answer.
func TestAddrRefusesAndStaysHeld(t *testing.T) {
	addr := Addr(t)
	for range 3 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			c.Close()
			t.Fatalf("dialing %s connected, want it refused", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dialing %s: %v, want connection refused", addr, err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		ln.Close()
		if held {
			t.Fatalf("a listener took %s while the test holds it", addr)
		}
	}
}
