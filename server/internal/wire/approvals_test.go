package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestApprovalAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []Answer
		messageID  string
		err        string // a part of the error, with its param
	}{
		{"plain", `{"sessionId":"s1234567","approvals":[{"id":"a1","approved":true},{"id":"a2","approved":false,"reason":"no"}]}`,
			[]Answer{{ID: "a1", Approved: true}, {ID: "a2", Reason: "no"}}, "", ""},
		{"ai sdk", `{"id":"chat1234","messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]},
			{"id":"msg-9","role":"assistant","parts":[{"type":"step-start"},{"type":"tool-think","toolCallId":"c1","state":"output-available"},
			{"type":"tool-critique","toolCallId":"c2","state":"approval-responded","approval":{"id":"a7","approved":false,"reason":"later"}}]}]}`,
			[]Answer{{ID: "a7", Reason: "later"}}, "msg-9", ""},
		{"ordinary message", `{"message":"hi","sessionId":"s1234567"}`, nil, "", ""},
		{"ai sdk message", `{"messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]}`, nil, "", ""},
		{"assistant last without answers", `{"messages":[{"role":"assistant","parts":[{"type":"text","text":"x"}]}]}`, nil, "", ""},
		{"both shapes", `{"message":"hi","approvals":[{"id":"a","approved":true}]}`, nil, "", `approvals: send either "message" or "approvals"`},
		{"empty list", `{"approvals":[]}`, nil, "", "approvals: the list is empty"},
		{"no id", `{"approvals":[{"approved":true}]}`, nil, "", "approvals[0].id: the approval's id is missing"},
		{"no decision", `{"approvals":[{"id":"a"}]}`, nil, "", "approvals[0].approved: approved (true or false) is missing"},
		{"ai sdk part without approval", `{"messages":[{"role":"assistant","parts":[{"type":"tool-x","state":"approval-responded"}]}]}`, nil, "",
			"messages[0].parts[0].approval: a part in state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r ApprovalRequest
			if err := Unmarshal([]byte(tc.body), &r); err != nil {
				t.Fatal(err)
			}
			got, msgID, err := r.Answers()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || msgID != tc.messageID || len(got) != len(tc.want) {
				t.Fatalf("Answers() = %+v, %q, %v; want %+v, %q", got, msgID, err, tc.want, tc.messageID)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("answer %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// FuzzApprovalAnswers: no body makes the approval parsing panic; every
// answer it returns names an approval and came with a decision, and every
// refusal names where.
func FuzzApprovalAnswers(f *testing.F) {
	for _, s := range []string{
		`{"sessionId":"s1234567","approvals":[{"id":"a","approved":true,"reason":"r"}]}`,
		`{"messages":[{"id":"m","role":"assistant","parts":[{"type":"tool-x","toolCallId":"c","state":"approval-responded","approval":{"id":"a","approved":false}}]}]}`,
		`{"approvals":[]}`, `{"approvals":[{}]}`, `{"message":"x","approvals":[{"id":"a","approved":true}]}`,
		`{"messages":[{"role":"assistant","parts":[{"state":"approval-responded"}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r ApprovalRequest
		if Unmarshal(data, &r) != nil {
			return
		}
		answers, _, err := r.Answers()
		if err != nil {
			var ae *AnswerError
			if !errors.As(err, &ae) || ae.Param == "" || ae.Reason == "" || answers != nil {
				t.Fatalf("Answers() = %v, %v", answers, err)
			}
			return
		}
		for _, a := range answers {
			if a.ID == "" || len(a.ID) > 256 {
				t.Fatalf("an answer with the ID %q", a.ID)
			}
		}
	})
}
