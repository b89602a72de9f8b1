package agui_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/server/agui"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/edgetest"
)

// TestGuardrailCard: a card number the model streams in four chunks never
// reaches an AG-UI client, and the text around it does: the guardrails
// hold in the turn runtime, whatever the door.
func TestGuardrailCard(t *testing.T) {
	s, mock := edgetest.StartGuarded(t, edgetest.Options{Doors: []door.Door{agui.New()}})
	mock.Enqueue(mockllm.Script{Text: edgetest.CardChunks})
	_, evs := run(t, s, "", "guarded", `{"threadId":"thread-card-01","runId":"r1","messages":[{"id":"u1","role":"user","content":"what card do I have?"}]}`)
	wellFormed(t, evs)
	var text strings.Builder
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		if edgetest.HasCardDigits(string(b)) {
			t.Fatalf("an event holds the card's digits: %s", b)
		}
		if ev["type"] == "TEXT_MESSAGE_CONTENT" {
			text.WriteString(ev["delta"].(string))
		}
	}
	if text.String() != edgetest.CardAnswer {
		t.Fatalf("the client read %q", text.String())
	}
}
