package testbin

import "testing"

// The sidecar refuses two listener flags on one address, and CI once drew
// the same just-closed port for two of them.
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		addr := FreeAddr(t)
		if seen[addr] {
			t.Fatalf("FreeAddr returned %s twice", addr)
		}
		seen[addr] = true
	}
}
