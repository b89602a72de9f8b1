package redisstore

import (
	"strconv"
	"testing"

	"github.com/agentdock-go/agentdock/session"
)

func TestRecentBounds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n, size   int
		wantLen   int
		wantBytes int
	}{
		{"few small sessions", 10, 1000, 10, 10_000},
		{"more sessions than the count", recentMax + 100, 100, recentMax, recentMax * 100},
		{"more bytes than the budget", 1000, 32 << 10, recentMaxBytes / (32 << 10), recentMaxBytes},
		{"each too large", 10, recentMaxOne + 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c recent
			for i := range tc.n {
				c.remember("s"+strconv.Itoa(i), &session.Session{Version: int64(i)}, "n"+strconv.Itoa(i), tc.size)
			}
			if len(c.m) != tc.wantLen || c.bytes != tc.wantBytes {
				t.Fatalf("%d sessions of %d bytes: kept %d, %d bytes; want %d, %d bytes", tc.n, tc.size, len(c.m), c.bytes, tc.wantLen, tc.wantBytes)
			}
			// The newest is kept (unless too large), with its nonce.
			last := "s" + strconv.Itoa(tc.n-1)
			s, nonce, ok := c.get(last)
			if ok != (tc.wantLen > 0) || ok && (s.Version != int64(tc.n-1) || nonce != "n"+strconv.Itoa(tc.n-1)) {
				t.Fatalf("the newest: %+v %q %v", s, nonce, ok)
			}
			c.forget(last)
			if _, _, ok := c.get(last); ok || c.bytes != max(tc.wantBytes-tc.size, 0) {
				t.Fatalf("after forget: still there %v, %d bytes", ok, c.bytes)
			}
		})
	}
	// A session written again replaces its entry.
	var c recent
	c.remember("a", &session.Session{Version: 1}, "n1", 100)
	c.remember("a", &session.Session{Version: 2}, "n2", 300)
	if s, nonce, _ := c.get("a"); len(c.m) != 1 || c.bytes != 300 || s.Version != 2 || nonce != "n2" {
		t.Fatalf("written twice: %d entries, %d bytes, %+v %q", len(c.m), c.bytes, s, nonce)
	}
}
