package mcpserver

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/session"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzRequestState: a requestState from a client is read without a panic,
// one that is read names a valid session, and the state this server gives
// reads back as it was.
func FuzzRequestState(f *testing.F) {
	f.Add("tea-session-1", "Let me think. ", "")
	f.Add("0e7c013541ebcc5ff343fe9129ddd9d2", "", "eyJzZXNzaW9uSWQiOiIuLi8ifQ")
	f.Add("", "\xff", "not base64!")
	f.Fuzz(func(t *testing.T, sessionID, answer, raw string) {
		st, err := stateOf(&mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{RequestState: raw}})
		if err == nil && raw != "" && !session.ValidID(st.SessionID) {
			t.Fatalf("state %q read as session %q", raw, st.SessionID)
		}
		if !session.ValidID(sessionID) {
			return
		}
		given := requestState{SessionID: sessionID, Answer: answer}
		res := inputRequired([]Pending{{ID: "approval-1", ToolName: "think", Arguments: map[string]any{}}}, given)
		back, err := stateOf(&mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{RequestState: res.RequestState}})
		if err != nil {
			t.Fatalf("the state given for %+v does not read back: %v", given, err)
		}
		// JSON carries invalid UTF-8 as U+FFFD: the answer comes back as
		// the client would show it.
		if back.SessionID != given.SessionID || (back.Answer != given.Answer && utf8.ValidString(given.Answer)) {
			t.Fatalf("state %+v read back as %+v", given, back)
		}
	})
}

// FuzzPlainToolsList: a body the edge answers from the rendered list is
// one tools/list request, of the rendered revision, with an ID the SDK
// would echo as it is; and nothing a client sends panics.
func FuzzPlainToolsList(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`)
	f.Add(`{"jsonrpc":"2.0","id":"x\u00e9","method":"tools/list","params":{"cursor":"c"}}`)
	f.Add(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`)
	l := &listAnswer{version: "2026-07-28", result: json.RawMessage(`{}`)}
	f.Fuzz(func(t *testing.T, body string) {
		if !l.plain([]byte(body)) {
			return
		}
		var req listRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil || req.Method != "tools/list" || !plainID(req.ID) {
			t.Fatalf("%q passed as a plain tools/list: %v %+v", body, err, req)
		}
		var id any
		if json.Unmarshal(req.ID, &id) != nil {
			t.Fatalf("the ID %s of %q is not JSON", req.ID, body)
		}
		again, _ := json.Marshal(id)
		if _, isString := id.(string); isString && string(again) != string(req.ID) {
			t.Fatalf("the ID %s would be echoed as %s", req.ID, again)
		}
	})
}
