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

func TestMemStatsInUse(t *testing.T) {
	for _, tc := range []struct {
		name        string
		text        string
		heap, stack float64
		ok          bool
	}{
		{"a heap profile's text", "heap profile: 1: 2 [3: 4] @ heap/1048576\n1: 2 [3: 4] @ 0x1\n\n# runtime.MemStats\n# Alloc = 10\n# HeapInuse = 3866624\n# HeapReleased = 5\n# Stack = 720896 / 720896\n# MSpan = 1 / 2\n", 3866624, 720896, true},
		{"no MemStats", "heap profile: 1: 2 [3: 4] @ heap/1048576\n", 0, 0, false},
		{"no stack line", "# HeapInuse = 12\n", 0, 0, false},
		{"a number that is not", "# HeapInuse = twelve\n# Stack = 1 / 2\n", 0, 0, false},
	} {
		heap, stack, err := memStatsInUse(tc.text)
		if (err == nil) != tc.ok || heap != tc.heap || stack != tc.stack {
			t.Errorf("%s: %v, %v, %v; want %v, %v, ok %v", tc.name, heap, stack, err, tc.heap, tc.stack, tc.ok)
		}
	}
}
