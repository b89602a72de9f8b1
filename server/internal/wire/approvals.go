package wire

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
)

// ApprovalRequest is what a chat request body says about tool calls that
// wait for a person's approval, in either of its two shapes:
//
//   - the plain one: {"sessionId": "...", "approvals": [{"id", "approved", "reason"}]};
//   - the AI SDK's, after addToolApprovalResponse: the last message is the
//     assistant's, and its tool parts in state "approval-responded" carry
//     {"approval": {"id", "approved", "reason"}}.
//
// It is decoded from the same body as ChatRequest.
type ApprovalRequest struct {
	Approvals []ApprovalAnswer  `json:"approvals"`
	Messages  []approvalMessage `json:"messages"`
	Message   *string           `json:"message"`
	// ToolsParam is the client's own tools (OpenAI function tools, or
	// {name, description, parameters}), which it runs itself.
	ToolsParam json.RawMessage `json:"tools"`
}

// Tools returns the client's tools: OpenAI's function tools, or plain
// {name, description, parameters} objects.
func (r *ApprovalRequest) Tools() ([]chat.ToolSpec, *ParamError) {
	var list []map[string]json.RawMessage
	if json.Unmarshal(r.ToolsParam, &list) == nil {
		// A plain tool has no type: give it the function type.
		for i, t := range list {
			if _, typed := t["type"]; !typed {
				list[i]["type"] = json.RawMessage(`"function"`)
			}
		}
		raw, _ := json.Marshal(list)
		return clientTools(raw, "tools")
	}
	return clientTools(r.ToolsParam, "tools")
}

// Results returns the results of calls of the client's tools (named) in
// the last message when it is the assistant's (the AI SDK's Chat after
// addToolOutput): its parts "tool-<name>" in state "output-available"
// (the output, a string or JSON) or "output-error" (the error text). The
// message's ID is the one the turn that carries them goes on in.
func (r *ApprovalRequest) Results(names []string) (results []chat.ToolResult, messageID string) {
	if len(r.Messages) == 0 || r.Message != nil || len(names) == 0 {
		return nil, ""
	}
	m := r.Messages[len(r.Messages)-1]
	if m.Role != "assistant" {
		return nil, ""
	}
	for _, p := range m.Parts {
		name, ok := strings.CutPrefix(p.Type, "tool-")
		if !ok || !slices.Contains(names, name) || p.ToolCallID == "" {
			continue
		}
		switch p.State {
		case "output-available":
			var s string
			content := string(p.Output)
			if json.Unmarshal(p.Output, &s) == nil {
				content = s
			}
			results = append(results, chat.ToolResult{CallID: p.ToolCallID, Content: content})
		case "output-error":
			results = append(results, chat.ToolResult{CallID: p.ToolCallID, Content: p.ErrorText, IsError: true})
		}
	}
	return results, m.ID
}

// ApprovalAnswer is one answer of the plain shape.
type ApprovalAnswer struct {
	ID       string `json:"id"`
	Approved *bool  `json:"approved"`
	Reason   string `json:"reason"`
}

type approvalMessage struct {
	ID    string         `json:"id"`
	Role  string         `json:"role"`
	Parts []approvalPart `json:"parts"`
}

type approvalPart struct {
	Type       string          `json:"type"`
	ToolCallID string          `json:"toolCallId"`
	State      string          `json:"state"`
	Approval   *ApprovalAnswer `json:"approval"`
	Output     json.RawMessage `json:"output"`
	ErrorText  string          `json:"errorText"`
}

// Answer is one decision, whichever shape it came in.
type Answer struct {
	ID       string
	Approved bool
	Reason   string
}

// AnswerError locates a malformed answer by its JSON path.
type AnswerError struct {
	Param  string
	Reason string
}

func (e *AnswerError) Error() string { return e.Param + ": " + e.Reason }

// Answers returns the body's answers, none when the body is an ordinary
// message. For the AI SDK's shape, messageID is the assistant message the
// answers belong to: the turn that carries them out continues it.
func (r *ApprovalRequest) Answers() (answers []Answer, messageID string, err error) {
	if r.Approvals != nil {
		if r.Message != nil {
			return nil, "", &AnswerError{Param: "approvals", Reason: `send either "message" or "approvals", not both: a new message denies the calls that wait`}
		}
		if len(r.Approvals) == 0 {
			return nil, "", &AnswerError{Param: "approvals", Reason: "the list is empty; answer each call that waits with {\"id\", \"approved\"}"}
		}
		for i, a := range r.Approvals {
			if err := a.check(fmt.Sprintf("approvals[%d]", i)); err != nil {
				return nil, "", err
			}
			answers = append(answers, Answer{ID: a.ID, Approved: *a.Approved, Reason: a.Reason})
		}
		return answers, "", nil
	}
	if len(r.Messages) == 0 || r.Message != nil {
		return nil, "", nil
	}
	last := len(r.Messages) - 1
	m := r.Messages[last]
	if m.Role != "assistant" {
		return nil, "", nil
	}
	for i, p := range m.Parts {
		if p.State != "approval-responded" {
			continue
		}
		where := fmt.Sprintf("messages[%d].parts[%d].approval", last, i)
		if p.Approval == nil {
			return nil, "", &AnswerError{Param: where, Reason: `a part in state "approval-responded" needs its approval {"id", "approved"}`}
		}
		if err := p.Approval.check(where); err != nil {
			return nil, "", err
		}
		answers = append(answers, Answer{ID: p.Approval.ID, Approved: *p.Approval.Approved, Reason: p.Approval.Reason})
	}
	if answers == nil {
		return nil, "", nil
	}
	return answers, m.ID, nil
}

func (a ApprovalAnswer) check(where string) error {
	switch {
	case a.ID == "":
		return &AnswerError{Param: where + ".id", Reason: "the approval's id is missing"}
	case len(a.ID) > 256:
		return &AnswerError{Param: where + ".id", Reason: "the approval's id is longer than 256 bytes"}
	case a.Approved == nil:
		return &AnswerError{Param: where + ".approved", Reason: "approved (true or false) is missing"}
	}
	return nil
}
