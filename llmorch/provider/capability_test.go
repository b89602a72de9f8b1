package provider

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"runtime/metrics"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// TestLangchaingoCapabilityTable pins the table of langchaingo v0.1.14 that
// capability.go takes over: an upgrade that changes it must be read again.
func TestLangchaingoCapabilityTable(t *testing.T) {
	want := []struct {
		pattern string
		system  bool
	}{{`(?i)^o[13](-mini|-preview)?$`, false}, {`(?i)^gpt-4`, true}, {`(?i)^gpt-3\.5`, true}}
	if len(capabilities) != len(want) {
		t.Fatalf("langchaingo's table has %d entries, want %d: read capability.go again", len(capabilities), len(want))
	}
	for i, w := range want {
		if c := capabilities[i]; c.pattern.String() != w.pattern || c.system != w.system {
			t.Errorf("entry %d = %s system %v, want %s system %v", i, c.pattern, c.system, w.pattern, w.system)
		}
	}
	if langchaingoCapabilities != nil {
		t.Errorf("langchaingo's table is still set: every model call compiles it again")
	}
}

func TestTakesSystem(t *testing.T) {
	for model, want := range map[string]bool{"o1": false, "O1-mini": false, "o3-mini": false, "o1-preview": false,
		"o3-pro": true, "gpt-4o": true, "gpt-3.5-turbo": true, "llama3.1": true, "": true} {
		if got := takesSystem(model); got != want {
			t.Errorf("takesSystem(%q) = %v, want %v", model, got, want)
		}
	}
}

// TestSystemFoldedOnTheWire: a model that takes no system messages gets the
// system text at the head of its first user message, in the body langchaingo
// sent before the table was taken over; the others keep a system message.
func TestSystemFoldedOnTheWire(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	req := llmorch.Request{System: "be brief", Messages: []chat.Message{
		{Role: chat.RoleUser, Content: "first"}, {Role: chat.RoleAssistant, Content: "ok"}, {Role: chat.RoleUser, Content: "second"}}}
	type part struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	for _, tc := range []struct {
		model string
		roles []string
		first []part
	}{
		{"o1-mini", []string{"user", "assistant", "user"}, []part{{"text", "be brief\n\n"}, {"text", "first"}}},
		{"gpt-4o", []string{"system", "user", "assistant", "user"}, nil},
	} {
		t.Run(tc.model, func(t *testing.T) {
			m, _ := testModel(t, srv, OpenAI, func(c *Config) { c.Model = tc.model })
			srv.Enqueue(mockllm.TextScript("ok"))
			if _, err := collect(t, m, t.Context(), req); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			var body struct {
				Messages []struct {
					Role    string          `json:"role"`
					Content json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(reqs[len(reqs)-1].Body, &body); err != nil {
				t.Fatal(err)
			}
			var roles []string
			for _, msg := range body.Messages {
				roles = append(roles, msg.Role)
			}
			if !slices.Equal(roles, tc.roles) {
				t.Fatalf("roles = %v, want %v", roles, tc.roles)
			}
			if tc.first == nil {
				return
			}
			var got []part
			if err := json.Unmarshal(body.Messages[0].Content, &got); err != nil || !slices.Equal(got, tc.first) {
				t.Errorf("first user message = %s, want %v", body.Messages[0].Content, tc.first)
			}
		})
	}
}

// BenchmarkModelCapabilities is what langchaingo's table cost per model
// call (regexp.MatchString of each pattern), against takesSystem.
func BenchmarkModelCapabilities(b *testing.B) {
	patterns := []string{`(?i)^o[13](-mini|-preview)?$`, `(?i)^gpt-4`, `(?i)^gpt-3\.5`}
	b.Run("langchaingo", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, p := range patterns {
				if ok, _ := regexp.MatchString(p, "mock-model"); ok {
					break
				}
			}
		}
	})
	b.Run("takesSystem", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			takesSystem("mock-model")
		}
	})
}

// TestNoGoroutinePerCall: langchaingo gets a stand-in answer for the
// stream the transport took (standInStatus), so it starts no parser
// goroutine of its own: a model call, on a kept connection, starts about
// one, the mock server's per-request reader (1.1-1.2, 1.6 under the race
// detector; with langchaingo's parser it was a whole one more).
func TestNoGoroutinePerCall(t *testing.T) {
	for _, wire := range []string{OpenAI, Anthropic} {
		t.Run(wire, func(t *testing.T) {
			srv := mockllm.New()
			defer srv.Close()
			m, _ := testModel(t, srv, wire)
			call := func() {
				srv.Enqueue(mockllm.TextScript("ok"))
				if _, err := collect(t, m, t.Context(), userReq("hi")); err != nil {
					t.Fatal(err)
				}
			}
			call() // the connection
			const calls = 50
			before := goroutinesCreated()
			for range calls {
				call()
			}
			per := float64(goroutinesCreated()-before) / calls
			t.Logf("goroutines started per model call: %.2f (the mock server's included)", per)
			if per >= 2 {
				t.Fatalf("%.2f goroutines started per model call, want about the mock server's 1", per)
			}
		})
	}
}

// TestStandInAnswer: the transport takes a request of this package's
// (one with a callState) without sending it and gives langchaingo
// standInStatus and an empty JSON object; send then makes the round trip
// and keeps the stream's body for the parser.
func TestStandInAnswer(t *testing.T) {
	var got atomic.Int32
	srv := mockllm.New()
	defer srv.Close()
	srv.Enqueue(mockllm.TextScript("ok"))
	counting := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})
	tr := &transport{base: counting, wire: OpenAI}
	st := &callState{}
	ctx := withState(t.Context(), st)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != standInStatus || string(body) != "{}" {
		t.Fatalf("langchaingo got %d %q", resp.StatusCode, body)
	}
	if st.req == nil || got.Load() != 0 {
		t.Fatalf("the transport sent the request itself (%d round trips) or kept none", got.Load())
	}
	st.send(ctx)
	if st.body == nil || st.status != http.StatusOK || got.Load() != 1 {
		t.Fatalf("send kept no stream (status %d, %d round trips)", st.status, got.Load())
	}
	defer st.body.Close()
	stream, _ := io.ReadAll(st.body)
	if !strings.Contains(string(stream), `"content":"ok"`) {
		t.Fatalf("the kept stream is %q", stream)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
