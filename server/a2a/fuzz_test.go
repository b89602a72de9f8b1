package a2a

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzRequest feeds arbitrary bodies to what reads a request: the JSON-RPC
// envelope, the params of each method, the approvals and file parts of a
// message, the list's page token and timestamp. Nothing panics, an error always says
// something, and a request read without error has a method and an ID.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"},{"data":{"approvals":[{"id":"a","approved":true}]}}]}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"aGk=","mediaType":"text/plain"},{"url":"https://example.com/a.png"},{"url":"http://x"}]}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"ListTasks","params":{"pageSize":2,"pageToken":"b2Zmc2V0OjI","statusTimestampAfter":"2026-01-01T00:00:00Z"}}`,
		`[{"jsonrpc":"2.0"}]`, `{"id":null}`, `{`, `{"jsonrpc":"2.0","id":-1,"method":"GetTask","params":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := parseRPC(data)
		if err != nil {
			if err.Message == "" || req.ID == nil {
				t.Fatalf("error without a message or an ID to answer: %+v", err)
			}
			return
		}
		if req.Method == "" || len(req.ID) == 0 {
			t.Fatalf("read without a method or ID: %+v", req)
		}
		var send SendMessageRequest
		if decodeParams(req.Params, &send) == nil && send.Message != nil {
			_ = messageText(send.Message)
			atts, aerr := attachments(send.Message)
			if aerr != nil && (aerr.Message == "" || aerr.Data["code"] == "") {
				t.Fatalf("an attachment refused without saying why: %+v", aerr)
			}
			for _, a := range atts {
				if !strings.HasPrefix(a.URL, "data:") && !strings.HasPrefix(a.URL, "https://") {
					t.Fatalf("an attachment by %q from %s", a.URL, req.Params)
				}
			}
			if list, aerr := answers(send.Message); aerr == nil {
				for _, a := range list {
					if a.ID == "" {
						t.Fatalf("an answer without an ID from %s", req.Params)
					}
				}
			}
		}
		var list listRequest
		if decodeParams(req.Params, &list) == nil {
			if off, perr := pageOffset(list.PageToken); perr == nil && off < 0 {
				t.Fatalf("negative offset from %q", list.PageToken)
			}
			_, _ = after(list.StatusTimestampAfter)
		}
		if _, err := json.Marshal(rpcResponse{JSONRPC: "2.0", ID: req.ID, Result: map[string]any{}}); err != nil {
			t.Fatalf("the ID %s cannot be answered: %v", req.ID, err)
		}
	})
}
