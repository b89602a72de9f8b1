package server

import (
	"context"
	"encoding/json"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/session"
)

// childView is a session in which a session's agent asked another agent
// of the server (an agent tool): readable by the same owner at
// GET /api/sessions/:sessionId.
type childView struct {
	// Tool is the agent tool's name, Agent the agent it asks.
	Tool      string `json:"tool"`
	Agent     string `json:"agent"`
	SessionID string `json:"sessionId"`
}

// children lists the child sessions of the owner's session id, one per
// local agent tool of its agent that was called (session.ChildID).
func (s *Server) children(ctx context.Context, owner, id string, n *agent.Agent, served bool) []childView {
	out := []childView{}
	if !served {
		return out
	}
	t := n.Template()
	for _, name := range t.AgentTools() {
		a := t.Agents[name]
		if !a.Local() {
			continue
		}
		child := session.ChildID(owner, id, name)
		if _, err := s.cfg.Store.Get(ctx, session.Key(owner, child)); err == nil {
			out = append(out, childView{Tool: name, Agent: a.Agent, SessionID: child})
		}
	}
	return out
}

// agentCallView is the call of an agent that a session's call asked,
// waiting for approval.
type agentCallView struct {
	Agent      string          `json:"agent"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
}

func agentCallOf(a session.Approval) *agentCallView {
	if a.Agent == "" || a.AgentCall == nil {
		return nil
	}
	in := a.AgentCall.Arguments
	if len(in) == 0 {
		in = json.RawMessage("{}")
	}
	return &agentCallView{Agent: a.Agent, ToolCallID: a.AgentCall.ID, ToolName: a.AgentCall.Name, Input: in}
}
