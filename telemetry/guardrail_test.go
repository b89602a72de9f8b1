package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
)

// TestGuardrailTelemetry: a guardrail's match is an event on the turn's
// span and a point of the guardrail-hits metric, which name the
// guardrail, the stage, the action and the kind, and never the text.
func TestGuardrailTelemetry(t *testing.T) {
	rec := setupRecorded(t, false)
	store := session.NewMemory(session.Config{})
	defer store.Close()
	l, ds := template.Load("g.json", []byte(`{"agentId":"guarded","name":"Guarded","nodes":["llm.openai"],
		"options":{"guardrails":[
			{"name":"seen","on":"input","check":"pii","kinds":["credit_card"],"action":"log"},
			{"name":"cards","on":"output","check":"pii","kinds":["credit_card"],"action":"redact"}]}}`), template.Config{})
	if l == nil {
		t.Fatal(ds)
	}
	agents, err := agent.NewSet(agent.Options{Store: store, Models: offlineModels, Telemetry: rec.tel}, []*template.Loaded{l})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := agents.Get("guarded")
	events, err := agent.Started(n.Run(context.Background(), session.NewID(), agent.Text("[offline:echo] my card is 4111 1111 1111 1111, thanks")))
	if err != nil {
		t.Fatal(err)
	}
	var answer strings.Builder
	for ev := range events {
		if ev.Kind == chat.KindTextDelta {
			answer.WriteString(ev.Text)
		}
	}
	if got := answer.String(); got != "my card is [redacted:credit_card], thanks" {
		t.Fatalf("answer %q", got)
	}

	ts := splitTurn(t, rec.spans.Ended())
	var seen []string
	for _, e := range ts.invoke.Events() {
		if e.Name != "agentdock.guardrail" {
			continue
		}
		a := map[string]string{}
		for _, kv := range e.Attributes {
			a[string(kv.Key)] = kv.Value.Emit()
		}
		seen = append(seen, a["agentdock.guardrail.name"]+"/"+a["agentdock.guardrail.stage"]+"/"+a["agentdock.guardrail.action"]+"/"+a["agentdock.guardrail.kind"])
	}
	if strings.Join(seen, " ") != "seen/input/log/credit_card cards/output/redact/credit_card" {
		t.Errorf("span events %v", seen)
	}
	for _, s := range rec.spans.Ended() {
		for where, v := range spanStrings(s) {
			if strings.Contains(strings.ReplaceAll(v, " ", ""), "41111111") {
				t.Errorf("%s: %s holds the card: %q", s.Name(), where, v)
			}
		}
	}
	m := rec.collect(t)
	for _, want := range []map[string]string{
		{"agentdock.guardrail.name": "seen", "agentdock.guardrail.stage": "input", "agentdock.guardrail.action": "log", "gen_ai.agent.id": "guarded"},
		{"agentdock.guardrail.name": "cards", "agentdock.guardrail.stage": "output", "agentdock.guardrail.action": "redact", "agentdock.guardrail.kind": "credit_card"},
	} {
		if got := sumPoints(t, m, "agentdock.guardrail.hits", want); got != 1 {
			t.Errorf("agentdock.guardrail.hits%v = %d, want 1", want, got)
		}
	}
}
