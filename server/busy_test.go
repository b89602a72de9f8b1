package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// slowAnswer is a scripted answer that streams for about a second.
func slowAnswer(words ...string) mockllm.Script {
	return mockllm.Script{Text: words, InterTokenDelay: 200 * time.Millisecond}
}

// busyPair is two servers of one deployment: the same server twice on
// the memory store, or two replicas on one redis-server.
func busyPair(t *testing.T, replicas bool, mock *mockllm.Server) (a, b *env) {
	t.Helper()
	model, err := provider.New(provider.Config{Provider: provider.OpenAI, Model: "scripted", BaseURL: mock.URL() + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if !replicas {
		a = newEnv(t, envOptions{model: model})
		return a, a
	}
	srv := redistest.Start(t)
	prefix := "busy-" + session.NewID()
	return replica(t, srv, prefix, envOptions{model: model}), replica(t, srv, prefix, envOptions{model: model})
}

// onBoth runs test on one server and on two replicas, each time with a
// new scripted model.
func onBoth(t *testing.T, test func(t *testing.T, a, b *env, mock *mockllm.Server)) {
	for _, replicas := range []bool{false, true} {
		name := "one server"
		if replicas {
			name = "two replicas"
		}
		t.Run(name, func(t *testing.T) {
			mock := mockllm.New()
			t.Cleanup(mock.Close)
			a, b := busyPair(t, replicas, mock)
			test(t, a, b, mock)
		})
	}
}

// history is the session's messages as "role: content" lines.
func history(t *testing.T, e *env, sid string) []string {
	t.Helper()
	var sv sessionView
	getJSON(t, e.do(http.MethodGet, "/api/sessions/"+sid, ""), http.StatusOK, &sv)
	var out []string
	for _, m := range sv.Messages {
		out = append(out, string(m.Role)+": "+m.Content)
	}
	return out
}

// TestBusyEnqueue: messages sent while a turn streams, to either server,
// wait in the session's queue (its length in the session view) and are
// answered after it, in the order they came; the stream of each starts
// when its turn does. With reject, the message is refused as before.
func TestBusyEnqueue(t *testing.T) {
	onBoth(t, func(t *testing.T, a, b *env, mock *mockllm.Server) {
		mock.Enqueue(slowAnswer("first ", "answer ", "streams ", "slowly ", "for ", "a ", "while."), mockllm.TextScript("second answer."), mockllm.TextScript("third answer."))
		sid := session.NewID()
		first := a.do(http.MethodPost, "/api/chat/plain", `{"sessionId":"`+sid+`","message":"one"}`)
		defer first.Body.Close()
		if first.StatusCode != http.StatusOK {
			t.Fatalf("first message: %d", first.StatusCode)
		}
		second := make(chan string, 1)
		go func() {
			_, evs := b.streamChat("plain", `{"sessionId":"`+sid+`","message":"two"}`)
			second <- streamTextOf(evs)
		}()
		// The second waits in the queue before the third is sent.
		waitQueued(t, a, sid, 1)
		var eb errBodyT
		getJSON(t, b.do(http.MethodPost, "/api/chat/plain", `{"sessionId":"`+sid+`","message":"refused","busy":"reject"}`), http.StatusConflict, &eb)
		if eb.Error.Code != "session_busy" {
			t.Fatalf("busy reject: %+v", eb.Error)
		}
		_, evs := a.streamChat("plain", `{"sessionId":"`+sid+`","message":"three"}`)
		if got := streamTextOf(evs); got != "third answer." {
			t.Fatalf("the third message's stream: %q", got)
		}
		if got := <-second; got != "second answer." {
			t.Fatalf("the second message's stream: %q", got)
		}
		want := []string{"user: one", "assistant: first answer streams slowly for a while.", "user: two", "assistant: second answer.", "user: three", "assistant: third answer."}
		if got := history(t, b, sid); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if n := len(mock.Requests()); n != 3 {
			t.Fatalf("%d model calls, want 3", n)
		}
	})
}

// TestBusyInterrupt: a message sent with busy interrupt, to either
// server, stops the running turn, whose partial answer is saved, and is
// answered at once.
func TestBusyInterrupt(t *testing.T) {
	onBoth(t, func(t *testing.T, a, b *env, mock *mockllm.Server) {
		words := make([]string, 50)
		for i := range words {
			words[i] = "w "
		}
		mock.Enqueue(slowAnswer(words...), mockllm.TextScript("the new answer."))
		sid := session.NewID()
		first := a.do(http.MethodPost, "/api/chat/plain", `{"sessionId":"`+sid+`","message":"a long one"}`)
		defer first.Body.Close()
		r := newSSEReader(first.Body)
		for {
			ev, ok := r.next()
			if !ok {
				t.Fatal("the first stream ended before its text")
			}
			if strings.Contains(ev.Data, `"text-delta"`) {
				break
			}
		}
		start := time.Now()
		_, evs := b.streamChat("plain", `{"sessionId":"`+sid+`","message":"stop that","busy":"interrupt"}`)
		if got := streamTextOf(evs); got != "the new answer." {
			t.Fatalf("the interrupting message's stream: %q", got)
		}
		if d := time.Since(start); d > 8*time.Second {
			t.Fatalf("the interrupting message waited %v (the first turn streams for 10 s)", d)
		}
		rest := r.all()
		if last := rest[len(rest)-1]; last.Data != "[DONE]" {
			t.Fatalf("the first stream ended with %q", last.Data)
		}
		h := history(t, b, sid)
		if len(h) != 4 || h[0] != "user: a long one" || !strings.HasPrefix(h[1], "assistant: w") || len(h[1]) >= len("assistant: ")+100 || h[2] != "user: stop that" || h[3] != "assistant: the new answer." {
			t.Fatalf("history: %q", h)
		}
	})
}

func streamTextOf(evs []sseEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		if i := strings.Index(ev.Data, `"delta":"`); i >= 0 && strings.Contains(ev.Data, `"text-delta"`) {
			d := ev.Data[i+len(`"delta":"`):]
			b.WriteString(d[:strings.Index(d, `"`)])
		}
	}
	return b.String()
}

// waitQueued waits until the session's view shows n queued messages.
func waitQueued(t *testing.T, e *env, sid string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var sv sessionView
		getJSON(t, e.do(http.MethodGet, "/api/sessions/"+sid, ""), http.StatusOK, &sv)
		if sv.Queued == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the session never showed %d queued messages", n)
}
