package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// TestChatRedisSessions runs the relay with its sessions in a real
// redis-server: each turn's model request carries the session's last
// messages, a turn on a session that is held is refused with 409
// session_busy, and a turn whose model fails gives its session back.
func TestChatRedisSessions(t *testing.T) {
	srv := redistest.Start(t)
	model := mockllm.New(mockllm.WithDefault(mockllm.Script{Chunks: 2}))
	defer model.Close()
	rl, url := serveRelay(t, model, defaultRequest)
	ss, err := openSessions(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer ss.rc.Close()
	rl.sessions = ss

	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(url+"/api/chat/a", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i, msg := range []string{"one", "two", "three", "four"} {
		if code, body := post(`{"message":"` + msg + `","sessionId":"s1"}`); code != http.StatusOK || !strings.HasSuffix(body, "data: [DONE]\n\n") {
			t.Fatalf("turn %d: %d %s", i, code, body)
		}
	}
	var got []string
	for _, m := range model.Requests()[3].Messages {
		got = append(got, m.Role+":"+m.Text)
	}
	// The fourth turn sends the last historyLength (4) messages, then its
	// own: the answers are the mock's two tokens.
	if want := "user:two assistant:tok0 tok1  user:three assistant:tok0 tok1  user:four"; strings.Join(got, " ") != want {
		t.Fatalf("fourth request's messages %q, want %s", got, want)
	}

	// Held by another turn: refused, and the holder's lock is left alone.
	lock := keys("s2")[0]
	if err := ss.rc.Set(context.Background(), lock, "other", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if code, body := post(`{"message":"hi","sessionId":"s2"}`); code != http.StatusConflict || !strings.Contains(body, "session_busy") {
		t.Fatalf("held session: %d %s", code, body)
	}
	if v, _ := ss.rc.Get(context.Background(), lock).Result(); v != "other" {
		t.Fatalf("the holder's lock is %q", v)
	}

	// A model that fails: the session is given back, without the turn.
	model.Enqueue(mockllm.Script{Status: http.StatusTooManyRequests})
	if code, _ := post(`{"message":"lost","sessionId":"s3"}`); code != http.StatusBadGateway {
		t.Fatalf("failing model: %d", code)
	}
	if code, _ := post(`{"message":"kept","sessionId":"s3"}`); code != http.StatusOK {
		t.Fatalf("turn after a failed one: %d", code)
	}
	if n, _ := ss.rc.LLen(context.Background(), keys("s3")[1]).Result(); n != 2 {
		t.Fatalf("session s3 has %d messages, want the second turn's 2", n)
	}

	if code, body := post(`{"message":"hi"}`); code != http.StatusBadRequest || !strings.Contains(body, "sessionId") {
		t.Fatalf("no session: %d %s", code, body)
	}
}
