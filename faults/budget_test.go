package faults

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// What a client sends must not grow a model request past the context
// budget (issue 55): a forged compaction item, images turn after turn.

// maxRequest is the largest model request body the mock received after
// the first skip requests, and how many there were.
func maxRequest(m *mockllm.Server, skip int) (largest, n int) {
	for _, r := range m.Requests()[skip:] {
		largest = max(largest, len(r.Body))
		n++
	}
	return largest, n
}

// TestForgedCompaction: a compaction item the server did not make, its
// summary 16 MB of text gzipped into a small POST, is refused with 400
// and reaches no model, signed or not; the server's own item continues
// the conversation in a model request within the context budget.
func TestForgedCompaction(t *testing.T) {
	m := newModel(t)
	srv := startServer(t, modelEnv(m)...)
	var packed bytes.Buffer
	zw := gzip.NewWriter(&packed)
	_ = json.NewEncoder(zw).Encode(map[string]any{"v": 1, "messages": []any{}, "summary": strings.Repeat("a forged summary ", 1_000_000)})
	_ = zw.Close()
	sig := make([]byte, 32)
	_, _ = rand.Read(sig)
	for name, content := range map[string]string{
		"unsigned (the old format)": base64.RawURLEncoding.EncodeToString(packed.Bytes()),
		"a signature of its own":    base64.RawURLEncoding.EncodeToString(append(sig, packed.Bytes()...)),
	} {
		body := map[string]any{"model": agentID, "input": []any{
			map[string]any{"type": "compaction", "encrypted_content": content},
			map[string]any{"role": "user", "content": "go on"},
		}}
		raw, _ := json.Marshal(body)
		before := len(m.Requests())
		st, resp := postJSON(t, srv.URL(), "/v1/responses", body)
		t.Logf("%s: a %d KB POST standing for a 16 MB summary: %d %s", name, len(raw)>>10, st, clip(resp, 200))
		if st != http.StatusBadRequest || !strings.Contains(resp, "encrypted_content") {
			t.Errorf("%s: %d %s; want 400 naming encrypted_content", name, st, resp)
		}
		if n := len(m.Requests()) - before; n != 0 {
			t.Errorf("%s: the model got %d requests", name, n)
		}
	}

	// The server's own item goes on: six turns, of which the two beyond
	// CONTEXT_KEEP_TURNS (4) are summarized into it.
	m.Enqueue(mockllm.TextScript("The user told facts about the harbour."))
	var input []any
	for _, fact := range []string{"the harbour master is Ines", "the ferry leaves at nine", "the pier is red", "gulls nest there", "the cafe shuts at six", "the tide is high at noon"} {
		input = append(input, map[string]any{"role": "user", "content": "Fact: " + fact + "."}, map[string]any{"role": "assistant", "content": "Noted."})
	}
	st, resp := postJSON(t, srv.URL(), "/v1/responses/compact", map[string]any{"model": agentID, "input": input})
	if st != http.StatusOK {
		t.Fatalf("compact: %d %s", st, resp)
	}
	var comp struct{ Output []any }
	if err := json.Unmarshal([]byte(resp), &comp); err != nil || len(comp.Output) == 0 {
		t.Fatalf("compact: %v %s", err, resp)
	}
	before := len(m.Requests())
	m.Enqueue(mockllm.TextScript("Ines, at nine."))
	st, resp = postJSON(t, srv.URL(), "/v1/responses", map[string]any{"model": agentID, "input": append(comp.Output, map[string]any{"role": "user", "content": "who and when?"})})
	if st != http.StatusOK || !strings.Contains(resp, "Ines, at nine.") {
		t.Fatalf("continuing from the compaction: %d %s", st, resp)
	}
	largest, n := maxRequest(m, before)
	t.Logf("continued from the server's compaction: %d model request(s), the largest %d bytes (the context budget: 32000 tokens)", n, largest)
	if n == 0 || largest > 4*32000 {
		t.Errorf("the model got %d requests, the largest %d bytes; want some, each within the budget's 128 KB", n, largest)
	}
}

// clip shortens s for a log line.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
