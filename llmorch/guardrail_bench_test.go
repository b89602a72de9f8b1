package llmorch_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/session"
)

// streamedAnswer is a model's answer of about 4 KB of markdown (prose, a
// table, code, numbers, an email, a phone and a card number) cut into
// chunks of 1 to 8 bytes, as a tokenizer would.
func streamedAnswer() []string {
	para := "## Findings\n\nThe heat pump kept the house at 21 °C through January, using 3.2 kWh per day on average " +
		"(see the table). Contact the installer at service@example.com or +44 20 7946 0958 if the defrost cycle " +
		"runs more than twice an hour. Payment went through on card 4111 1111 1111 1111, reference INV-2024-0117.\n\n" +
		"| month | kWh | cost |\n|---|---|---|\n| Jan | 99 | €31.40 |\n| Feb | 87 | €27.10 |\n\n" +
		"```go\nfor _, r := range readings {\n\ttotal += r.KWh\n}\n```\n\n" +
		"Überraschend: die Wärmepumpe lief auch bei −15 °C effizient. In short, it works; the 2019 model did not.\n\n"
	text := strings.Repeat(para, 6)
	var chunks []string
	for i, n := 0, 0; i < len(text); n++ {
		size := 1 + (n*7)%8
		chunks = append(chunks, text[i:min(i+size, len(text))])
		i += size
	}
	return chunks
}

// builtinGuardrails declares every built-in check on output.
const builtinGuardrails = `[
  {"name": "pii", "on": "output", "check": "pii", "action": "redact"},
  {"name": "secrets", "on": "output", "check": "secrets", "action": "redact"},
  {"name": "deny", "on": "output", "check": "deny", "action": "redact", "words": ["forbidden fruit", "confidential", "internal only",
    "do not share", "password", "ΟΔΟΣ", "café", "secret sauce", "project falcon", "layoffs", "acquisition", "merger", "lawsuit",
    "salary", "bonus", "ssn", "passport", "visa", "diagnosis", "hiv"]},
  {"name": "injection", "on": "output", "check": "regex", "pattern": "(?i)ignore (all )?previous instructions", "action": "block"},
  {"name": "length", "on": "output", "check": "max_length", "maxLength": 100000, "action": "redact"}
]`

// BenchmarkTurnGuardrails runs the same streamed answer through a turn of
// the service without guardrails and with every built-in check on output:
// ns/chunk is the turn's time per model chunk (the difference between the
// two is what the checks add), first-text-chunks how many of the model's
// chunks were read before the client got its first text (the hold-back's
// cost to the time to first token).
func BenchmarkTurnGuardrails(b *testing.B) {
	chunks := streamedAnswer()
	for _, tc := range []struct{ name, guardrails string }{{"none", "[]"}, {"builtins", builtinGuardrails}} {
		b.Run(tc.name, func(b *testing.B) {
			model := &playback{}
			tmpl := `{"agentId":"g","name":"G","nodes":["llm.openai"],"options":{"guardrails":` + tc.guardrails + `}}`
			f, _ := newService(b, tmpl, llmorch.ServiceConfig{Model: model})
			first := 0
			for b.Loop() {
				model.mu.Lock()
				model.reqs, model.replies, model.yielded = nil, []reply{{text: chunks}}, 0
				model.mu.Unlock()
				f.id = session.NewID()
				seen := false
				for ev := range f.svc.StreamWithOrchestration(context.Background(), f.start(b, "hi")) {
					if ev.Kind == chat.KindTextDelta && !seen {
						seen = true
						model.mu.Lock()
						first = max(first, model.yielded)
						model.mu.Unlock()
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(chunks)), "ns/chunk")
			b.ReportMetric(float64(first), "first-text-chunks")
		})
	}
}
