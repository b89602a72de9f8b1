package a2a_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/server/a2a"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/edgetest"
)

// TestGuardrailCard: a card number the model streams in four chunks never
// reaches an A2A client, streaming or not, nor the task kept for it, and
// the text around it does.
func TestGuardrailCard(t *testing.T) {
	e, err := a2a.New(a2a.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, mock := edgetest.StartGuarded(t, edgetest.Options{Doors: []door.Door{e}})

	mock.Enqueue(mockllm.Script{Text: edgetest.CardChunks})
	r := rpc(t, s.URL+"/a2a/guarded", "", "SendMessage", map[string]any{"message": message("what card do I have?", nil)})
	if edgetest.HasCardDigits(string(r.Result)) {
		t.Fatalf("the task holds the card's digits: %s", r.Result)
	}
	tk := task(t, r)
	if got := answerText(tk); got != edgetest.CardAnswer {
		t.Fatalf("SendMessage: %q", got)
	}
	kept := rpc(t, s.URL+"/a2a", "", "GetTask", map[string]any{"id": tk.ID})
	if edgetest.HasCardDigits(string(kept.Result)) || answerText(task(t, kept)) != edgetest.CardAnswer {
		t.Fatalf("GetTask: %s", kept.Result)
	}

	mock.Enqueue(mockllm.Script{Text: edgetest.CardChunks})
	res := post(t, s.URL+"/a2a/guarded", "", `{"jsonrpc":"2.0","id":"s1","method":"SendStreamingMessage","params":{"message":{"messageId":"m2","role":"ROLE_USER","parts":[{"text":"and again?"}]}}}`)
	var text strings.Builder
	for _, ev := range events(t, res, "s1") {
		b, _ := json.Marshal(ev)
		if edgetest.HasCardDigits(string(b)) {
			t.Fatalf("an event holds the card's digits: %s", b)
		}
		if u := ev.ArtifactUpdate; u != nil {
			text.WriteString(*u.Artifact.Parts[0].Text)
		}
	}
	if text.String() != edgetest.CardAnswer {
		t.Fatalf("SendStreamingMessage: %q", text.String())
	}
}
