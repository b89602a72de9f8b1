package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func TestCheckPprofAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:6060", true},
		{"[::1]:6060", true},
		{"localhost:6060", true},
		{"127.0.0.2:0", true},
		{"0.0.0.0:6060", false},
		{":6060", false},
		{"10.0.0.5:6060", false},
		{"example.com:6060", false},
		{"6060", false},
	} {
		if err := checkPprofAddr(tc.addr); (err == nil) != tc.ok {
			t.Errorf("checkPprofAddr(%q) = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
}

// TestServePprof: the profiles answer on the loopback listener, and stop
// with the context.
func TestServePprof(t *testing.T) {
	addr, err := servePprof(t.Context(), "127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), "goroutine profile:") {
		t.Fatalf("goroutine profile: %d %.200s", res.StatusCode, b)
	}
}
