package agui

import "testing"

// FuzzInput feeds arbitrary bodies to parseInput: it never panics, refuses
// with a code and a message, and what it accepts starts a run (a thread
// that is a session ID and text, attachments or the results of the
// front-end tools' calls) or answers interrupts (each by ID).
func FuzzInput(f *testing.F) {
	for _, s := range []string{
		`{"threadId":"thread-0001","runId":"r","messages":[{"id":"u","role":"user","content":"hi"}]}`,
		`{"threadId":"thread-0001","runId":"r","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image"}]}]}`,
		`{"threadId":"thread-0001","runId":"r","messages":[],"resume":[{"interruptId":"a","status":"resolved","payload":{"approved":false,"reason":"no"}},{"interruptId":"b","status":"cancelled"}]}`,
		`{"threadId":"thread-0001","runId":"r","messages":[{"role":"user","content":[{"type":"image","source":{"type":"data","value":"aGk=","mimeType":"image/png"}}]}]}`,
		`{"threadId":"thread-0001","runId":"r","tools":[{"name":"lookup"}],"messages":[{"role":"user","content":"x"},{"role":"assistant","toolCalls":[{"id":"c1","function":{"name":"lookup"}}]},{"role":"tool","toolCallId":"c1","content":"found"}]}`,
		`{"threadId":"x"}`, `[]`, `{"runId":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, ai, p := parse(data)
		if p != nil {
			if p.Code == "" || p.Message == "" || p.Status != 400 {
				t.Fatalf("a refusal without status, code or message: %+v", p)
			}
			return
		}
		if in == nil || in.RunID == "" {
			t.Fatalf("accepted without a run: %s", data)
		}
		if ai.Answers == nil && ai.Text == "" && len(ai.Attachments) == 0 && len(ai.Results) == 0 {
			t.Fatalf("accepted with neither text, attachments, results nor answers: %s", data)
		}
		for _, a := range ai.Answers {
			if a.ID == "" {
				t.Fatalf("an answer without an ID: %s", data)
			}
		}
	})
}
