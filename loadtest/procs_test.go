package loadtest

import "testing"

// TestFreeAddrNeverRepeats: the addresses freeAddr hands out are all
// different, though each one's listener is closed before the next is
// asked for.
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 500 {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("freeAddr returned %s twice", addr)
		}
		seen[addr] = true
	}
}
