package provider

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestStreamEndKeepsConnection: a provider whose response ends a moment
// after its [DONE] (the chunked encoding's end in a write of its own, as
// net/http sends it when the handler returns) keeps its connection for the
// next call, and one that never ends its response after [DONE] costs a
// call at most drainWait and its connection. Before drainEnd, each of the
// late-ending responses below was cut at [DONE] and the next call dialled
// again.
func TestStreamEndKeepsConnection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration // the wait between [DONE] and the response's end
		conns int64         // connections for three calls
	}{
		{name: "ends after DONE", after: 5 * time.Millisecond, conns: 1},
		{name: "never ends", after: time.Hour, conns: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dials atomic.Int64
			release := make(chan struct{})
			defer close(release)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				f := w.(http.Flusher)
				_, _ = w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n"))
				_, _ = w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"))
				_, _ = w.Write([]byte("data: [DONE]\n\n"))
				f.Flush()
				select {
				case <-time.After(tc.after):
				case <-release:
				case <-r.Context().Done():
				}
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					dials.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			m, err := newModel(Config{Provider: OpenAI, Model: "m", APIKey: secretKey, BaseURL: srv.URL + "/v1"})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				evs, err := collect(t, m, t.Context(), userReq("hi"))
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if got := textOf(evs); got != "hi" {
					t.Fatalf("call %d: text %q", i, got)
				}
			}
			if got := dials.Load(); got != tc.conns {
				t.Fatalf("%d connections for three calls, want %d", got, tc.conns)
			}
		})
	}
}
