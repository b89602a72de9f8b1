package agui

import "testing"

// FuzzInput feeds arbitrary bodies to parseInput: it never panics, refuses
// with a code and a message, and what it accepts starts a run (a thread
// that is a session ID and text) or answers interrupts (each by ID).
func FuzzInput(f *testing.F) {
	for _, s := range []string{
		`{"threadId":"thread-0001","runId":"r","messages":[{"id":"u","role":"user","content":"hi"}]}`,
		`{"threadId":"thread-0001","runId":"r","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image"}]}]}`,
		`{"threadId":"thread-0001","runId":"r","messages":[],"resume":[{"interruptId":"a","status":"resolved","payload":{"approved":false,"reason":"no"}},{"interruptId":"b","status":"cancelled"}]}`,
		`{"threadId":"x"}`, `[]`, `{"runId":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, text, list, err := parseInput(data)
		if err != nil {
			if err.code == "" || err.msg == "" {
				t.Fatalf("a refusal without code or message: %+v", err)
			}
			return
		}
		if in == nil || in.RunID == "" {
			t.Fatalf("accepted without a run: %s", data)
		}
		if list == nil && text == "" {
			t.Fatalf("accepted with neither text nor answers: %s", data)
		}
		for _, a := range list {
			if a.ID == "" {
				t.Fatalf("an answer without an ID: %s", data)
			}
		}
	})
}
