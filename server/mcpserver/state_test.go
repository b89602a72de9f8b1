package mcpserver

import (
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
