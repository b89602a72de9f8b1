package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
)

// TestCompactionOverHTTP: a conversation past its agent's context budget
// is compacted by the offline summarizer: the stream says so in a
// data-compaction frame (the turns replaced, the summary, what it saved),
// and the session shows the summary entry among its messages, every
// message it replaces still there, and what the summaries cost apart from
// the agent's usage.
func TestCompactionOverHTTP(t *testing.T) {
	e := newEnv(t, envOptions{templates: "testdata/compact"})
	id := "compact-" + session.NewID()
	var frame map[string]any
	turns := 0
	for turns < 20 && frame == nil {
		turns++
		msg := fmt.Sprintf("[offline:echo] Turn %d: %s", turns, strings.Repeat("the harbour was busy today, ", 12))
		_, evs := e.streamChat("long", jsonBody(map[string]string{"message": msg, "sessionId": id}))
		for _, ev := range evs {
			var c struct {
				Type string         `json:"type"`
				Data map[string]any `json:"data"`
			}
			if json.Unmarshal([]byte(ev.Data), &c) == nil && c.Type == "data-compaction" {
				frame = c.Data
			}
		}
	}
	if frame == nil {
		t.Fatalf("no data-compaction frame in %d turns", turns)
	}
	if frame["from"] != 1.0 || frame["kept"] != 1.0 || frame["through"] != float64(turns-1) ||
		!strings.Contains(frame["summary"].(string), "Turn 1: the harbour") || frame["inputAfter"].(float64) >= frame["inputBefore"].(float64) {
		t.Fatalf("data-compaction %v after %d turns", frame, turns)
	}
	var v struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
			Summary *struct {
				From, Through, Kept int
			} `json:"summary"`
		} `json:"messages"`
		Usage struct {
			Prompt     int64           `json:"prompt"`
			Summarizer *map[string]any `json:"summarizer"`
		} `json:"usage"`
	}
	getJSON(t, e.do(http.MethodGet, "/api/sessions/"+id, ""), http.StatusOK, &v)
	users, summaries := 0, 0
	for _, m := range v.Messages {
		switch m.Role {
		case "user":
			users++
		case "summary":
			summaries++
			if m.Summary == nil || m.Summary.Through != turns-1 || m.Content != frame["summary"] {
				t.Errorf("summary entry %+v", m)
			}
		}
	}
	if users != turns || summaries != 1 || v.Usage.Summarizer == nil {
		t.Fatalf("the session shows %d user messages of %d, %d summaries, summarizer usage %v", users, turns, summaries, v.Usage.Summarizer)
	}
}

// TestResponsesCompactSummarizes: POST /v1/responses/compact compacts with
// the agent's own context machinery: the turns beyond the kept one become
// the compaction item, whose summary (the offline summarizer's) keeps what
// the user said in them, and the kept turn comes back as items; a
// conversation of one turn has nothing to compact.
func TestResponsesCompactSummarizes(t *testing.T) {
	e := newEnv(t, envOptions{templates: "testdata/compact", cfg: func(c *Config) { c.CompactionSecret = "compaction-test-secret" }})
	var input []map[string]any
	for i := 1; i <= 3; i++ {
		input = append(input,
			map[string]any{"role": "user", "content": fmt.Sprintf("Fact %d: the harbour master is called Ines %d.", i, i)},
			map[string]any{"role": "assistant", "content": fmt.Sprintf("Noted, fact %d.", i)})
	}
	compact := func(in []map[string]any) (items []map[string]any) {
		t.Helper()
		var out struct {
			Object string           `json:"object"`
			Output []map[string]any `json:"output"`
		}
		getJSON(t, e.do(http.MethodPost, "/v1/responses/compact", jsonBody(map[string]any{"model": "long", "input": in})), http.StatusOK, &out)
		if out.Object != "response.compaction" || len(out.Output) == 0 || out.Output[0]["type"] != "compaction" {
			t.Fatalf("compaction %+v", out)
		}
		return out.Output
	}
	items := compact(input)
	c, err := wire.DecodeCompaction(items[0]["encrypted_content"].(string), wire.CompactionKey("compaction-test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Messages) != 4 || !strings.Contains(c.Summary, "Fact 1: the harbour master is called Ines 1.") || !strings.Contains(c.Summary, "Fact 2") {
		t.Fatalf("the compaction drops %d messages, summary %q; want the first two turns summarized", len(c.Messages), c.Summary)
	}
	if kept := items[1:]; len(kept) != 2 || !strings.Contains(fmt.Sprint(kept[0]), "Fact 3") {
		t.Fatalf("kept items %v; want the last turn", kept)
	}
	items = compact(input[:2])
	if c, err = wire.DecodeCompaction(items[0]["encrypted_content"].(string), wire.CompactionKey("compaction-test-secret")); err != nil || len(c.Messages) != 0 || c.Summary != "" || len(items) != 3 {
		t.Fatalf("one turn compacted: %+v, %v, %d items; want nothing dropped", c, err, len(items))
	}
}

// A compaction item the server did not sign is refused with 400 before
// it is unpacked, and reaches no model; one it signed continues the
// conversation. A compaction holds whatever summary a client puts in it,
// so a forged one could carry megabytes to the model past every budget.
func TestForgedCompactionRefused(t *testing.T) {
	e := newEnv(t, envOptions{templates: "testdata/compact"})
	forged, err := wire.EncodeCompaction(wire.Compaction{Summary: strings.Repeat("forged summary ", 100_000)}, wire.CompactionKey("not the server's"))
	if err != nil {
		t.Fatal(err)
	}
	res := e.do(http.MethodPost, "/v1/responses", jsonBody(map[string]any{"model": "long", "input": []any{
		map[string]any{"type": "compaction", "encrypted_content": forged},
		map[string]any{"role": "user", "content": "go on"},
	}}))
	var out struct {
		Error struct {
			Code, Param, Message string
		} `json:"error"`
	}
	getJSON(t, res, http.StatusBadRequest, &out)
	if out.Error.Param != "input[0].encrypted_content" || !strings.Contains(out.Error.Message, "not a compaction this server made") {
		t.Fatalf("a forged compaction: %+v", out.Error)
	}

	var comp struct{ Output []map[string]any }
	getJSON(t, e.do(http.MethodPost, "/v1/responses/compact", jsonBody(map[string]any{"model": "long", "input": []any{
		map[string]any{"role": "user", "content": "Fact: the harbour master is Ines."},
		map[string]any{"role": "assistant", "content": "Noted."},
	}})), http.StatusOK, &comp)
	var resp struct{ Status string }
	getJSON(t, e.do(http.MethodPost, "/v1/responses", jsonBody(map[string]any{"model": "long", "input": append(comp.Output, map[string]any{"role": "user", "content": "[offline:echo] go on"})})), http.StatusOK, &resp)
	if resp.Status != "completed" {
		t.Fatalf("a signed compaction: status %q", resp.Status)
	}
}
