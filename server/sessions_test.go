package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/session"
)

// TestConversationList: GET /api/sessions lists the caller's sessions,
// newest first, titled by their first message, page by page; PATCH renames
// one (and "" gives the name back); another owner sees none of them and
// gets 404 for each; bad limits, cursors and titles are 400s saying what
// is wrong.
func TestConversationList(t *testing.T) {
	e := newEnv(t, envOptions{cfg: func(c *Config) {
		c.Owner = func(r *http.Request) (string, error) { return r.Header.Get("X-Who"), nil }
	}})
	alice, bob := []string{"X-Who", "alice"}, []string{"X-Who", "bob"}
	var ids []string
	for i := range 3 {
		id := fmt.Sprintf("conversation-%d", i)
		e.streamChat("plain", fmt.Sprintf(`{"message":"[offline:echo] question %d","sessionId":"%s"}`, i, id), alice...)
		e.waitIdle(session.Key("alice", id))
		ids = append(ids, id)
	}
	e.streamChat("plain", `{"message":"[offline:echo] bob's","sessionId":"conversation-b"}`, bob...)

	var page conversationList
	getJSON(t, e.do(http.MethodGet, "/api/sessions?limit=2", "", alice...), http.StatusOK, &page)
	if len(page.Sessions) != 2 || page.Next == "" || page.Sessions[0].ID != ids[2] || page.Sessions[1].ID != ids[1] ||
		page.Sessions[0].Title != "[offline:echo] question 2" || page.Sessions[0].Agent != "plain" || page.Sessions[0].UpdatedAt.IsZero() {
		t.Fatalf("first page %+v", page)
	}
	var rest conversationList
	getJSON(t, e.do(http.MethodGet, "/api/sessions?limit=2&cursor="+page.Next, "", alice...), http.StatusOK, &rest)
	if len(rest.Sessions) != 1 || rest.Sessions[0].ID != ids[0] || rest.Next != "" {
		t.Fatalf("second page %+v", rest)
	}
	getJSON(t, e.do(http.MethodGet, "/api/sessions", "", bob...), http.StatusOK, &page)
	if len(page.Sessions) != 1 || page.Sessions[0].ID != "conversation-b" {
		t.Fatalf("bob's list %+v", page)
	}

	var renamed conversationView
	getJSON(t, e.do(http.MethodPatch, "/api/sessions/"+ids[0], `{"title":"  Offsite\n plan "}`, alice...), http.StatusOK, &renamed)
	if renamed.Title != "Offsite plan" || renamed.ID != ids[0] {
		t.Fatalf("renamed %+v", renamed)
	}
	getJSON(t, e.do(http.MethodGet, "/api/sessions", "", alice...), http.StatusOK, &page)
	if page.Sessions[0].ID != ids[0] || page.Sessions[0].Title != "Offsite plan" {
		t.Fatalf("after the rename %+v", page.Sessions)
	}
	var view sessionView
	getJSON(t, e.do(http.MethodGet, "/api/sessions/"+ids[0], "", alice...), http.StatusOK, &view)
	if view.Title != "Offsite plan" {
		t.Fatalf("the session's title %q", view.Title)
	}
	getJSON(t, e.do(http.MethodPatch, "/api/sessions/"+ids[0], `{"title":""}`, alice...), http.StatusOK, &renamed)
	if renamed.Title != "[offline:echo] question 0" {
		t.Fatalf("an empty title gives %q, want the first message", renamed.Title)
	}

	// Another owner's session is absent: not renamed, not deleted.
	var eb errBodyT
	getJSON(t, e.do(http.MethodPatch, "/api/sessions/"+ids[0], `{"title":"mine now"}`, bob...), http.StatusNotFound, &eb)
	getJSON(t, e.do(http.MethodDelete, "/api/sessions/"+ids[0], "", bob...), http.StatusNotFound, &eb)
	res := e.do(http.MethodDelete, "/api/sessions/"+ids[1], "", alice...)
	res.Body.Close()
	getJSON(t, e.do(http.MethodGet, "/api/sessions", "", alice...), http.StatusOK, &page)
	if len(page.Sessions) != 2 {
		t.Fatalf("after a delete %+v", page.Sessions)
	}

	for _, tc := range []struct {
		method, path, body, code, param string
	}{
		{http.MethodGet, "/api/sessions?limit=0", "", "invalid_limit", "limit"},
		{http.MethodGet, "/api/sessions?limit=101", "", "invalid_limit", "limit"},
		{http.MethodGet, "/api/sessions?cursor=nope!", "", "invalid_cursor", "not a cursor"},
		{http.MethodPatch, "/api/sessions/" + ids[0], `{}`, "invalid_title", "title"},
		{http.MethodPatch, "/api/sessions/" + ids[0], `{"title":"` + strings.Repeat("x", 201) + `"}`, "invalid_title", "title"},
		{http.MethodPatch, "/api/sessions/" + ids[0], `{"title":"a\u0007b"}`, "invalid_title", "control characters"},
	} {
		var eb errBodyT
		getJSON(t, e.do(tc.method, tc.path, tc.body, alice...), http.StatusBadRequest, &eb)
		if eb.Error.Code != tc.code || !strings.Contains(eb.Error.Message, tc.param) {
			t.Errorf("%s %s %s: %+v", tc.method, tc.path, tc.body, eb.Error)
		}
	}
}
