package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// Turns over a conversation the client holds (Input.History), stateless turns
// (Input.Stateless) and regenerated answers (Input.Regenerate). The rules of session
// turns (one lease per session, fenced writes, the history window) are the
// same for all of them: a stateless turn simply has a session no one else
// can reach.

// A HistoryError says which message of an Input.History is unusable
// and why. It wraps ErrInvalidMessage.
type HistoryError struct {
	// Index is the message's position in the history.
	Index int
	// Reason says what is wrong, without the message's content.
	Reason string
}

func (e *HistoryError) Error() string {
	return fmt.Sprintf("%s: history message %d: %s", ErrInvalidMessage, e.Index, e.Reason)
}

func (e *HistoryError) Unwrap() error { return ErrInvalidMessage }

// CheckHistory reports the first message of msgs that cannot stand in a
// conversation before a turn's message (a *HistoryError), or nil. Roles are
// user, assistant and tool; a user message is checked like a turn's
// message; an assistant message has text or tool calls; its tool calls
// have a name and an ID used once, and are followed by one tool message per
// call, answering it by its ID, before the next message of another role. A
// model provider refuses a conversation that breaks one of these.
//
// A call may name any tool: the agent's, one of client (the client tools
// of the request the conversation came with), or one that neither has (an
// earlier agent's in a handoff, a client tool an earlier request brought,
// a name the model made up and was refused). The replay counts the last
// kind as not run, like a refused call (orchestration.Engine.Replay), and
// the model reads them as the history they are: one such call must not
// make a conversation unusable.
func (n *Agent) CheckHistory(msgs []chat.Message, client []string) error {
	pending := map[string]bool{} // calls of the latest assistant message not answered yet
	seen := map[string]bool{}
	unanswered := func(at int) error {
		for i := at - 1; i >= 0; i-- {
			if msgs[i].Role == chat.RoleAssistant {
				for _, c := range msgs[i].ToolCalls {
					if pending[c.ID] {
						return &HistoryError{Index: i, Reason: fmt.Sprintf("tool call %q has no tool message with its result after it", clipID(c.ID))}
					}
				}
				break
			}
		}
		return nil
	}
	for i, m := range msgs {
		if m.Role != chat.RoleTool && len(pending) > 0 {
			if err := unanswered(i); err != nil {
				return err
			}
		}
		switch m.Role {
		case chat.RoleUser:
			if m.Content == "" && len(m.Attachments) > 0 {
				break // attachments alone
			}
			if err := n.checkMessage(m.Content); err != nil {
				return &HistoryError{Index: i, Reason: reason(err)}
			}
		case chat.RoleAssistant:
			if m.Content == "" && len(m.ToolCalls) == 0 {
				return &HistoryError{Index: i, Reason: "an assistant message needs text or tool calls"}
			}
			clear(pending)
			for _, c := range m.ToolCalls {
				switch {
				case c.ID == "":
					return &HistoryError{Index: i, Reason: "a tool call has no ID"}
				case seen[c.ID]:
					return &HistoryError{Index: i, Reason: fmt.Sprintf("tool call ID %q is used twice", clipID(c.ID))}
				case strings.TrimSpace(c.Name) == "":
					return &HistoryError{Index: i, Reason: fmt.Sprintf("tool call %q has no tool name", clipID(c.ID))}
				case len(c.Name) > maxToolName || !utf8.ValidString(c.Name):
					return &HistoryError{Index: i, Reason: fmt.Sprintf("tool call %q names a tool longer than %d bytes or not UTF-8", clipID(c.ID), maxToolName)}
				}
				seen[c.ID] = true
				pending[c.ID] = true
			}
		case chat.RoleTool:
			if !pending[m.ToolCallID] {
				return &HistoryError{Index: i, Reason: fmt.Sprintf("tool message for call %q does not follow the assistant message that made the call", clipID(m.ToolCallID))}
			}
			delete(pending, m.ToolCallID)
		default:
			return &HistoryError{Index: i, Reason: fmt.Sprintf("role %q cannot be in the conversation (want user, assistant or tool)", clipID(string(m.Role)))}
		}
	}
	return unanswered(len(msgs))
}

// maxToolName bounds the name of a tool a conversation's call names: the
// name goes back to the model, and no provider takes longer ones.
const maxToolName = 256

// reason is err's message without the ErrInvalidMessage prefix.
func reason(err error) string {
	msg := err.Error()
	prefix := ErrInvalidMessage.Error() + ": "
	if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
		return msg[len(prefix):]
	}
	return msg
}

// clipID shortens a client's string echoed in an error.
func clipID(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}

// Replay returns st after the orchestration followed msgs, a conversation
// that passed CheckHistory: the state a session that had that conversation
// holds, by the rules of orchestration.Engine.Replay (each call checked
// against the offer of the model call that made it; a tool message marked
// NotRun, a call that never ran, records nothing; a call that ran and
// failed is recorded). Token usage is not in a conversation and stays as
// it was. client names the client tools of the request the conversation
// came with (nil: none).
func (n *Agent) Replay(st orchestration.State, msgs []chat.Message, client []string) orchestration.State {
	return n.Engine().Replay(st, msgs, client)
}

var errOptions = errors.New("agent: Input.Regenerate and Input.Edit cannot be combined with History or Stateless")

func (n *Agent) checkOptions(ctx context.Context, o options) error {
	if o.regenerate && (o.stateless || len(o.history) > 0) {
		return errOptions
	}
	if err := n.CheckHistory(append(slices.Clone(o.compacted), o.history...), o.clientNames()); err != nil {
		return err
	}
	return n.checkClient(ctx, o)
}

// turnStore makes the store and service of a stateless turn: an in-memory
// store of its own, closed when the turn ends. It holds one session, so
// it is small, and nothing outlives the turn.
func (n *Agent) turnStore() (session.Store, *llmorch.Service, error) {
	store := session.NewMemory(session.Config{MaxSessions: 1})
	cfg := n.svcCfg
	cfg.Store = store
	svc, err := llmorch.NewService(cfg)
	if err != nil {
		store.Close()
		return nil, nil, fmt.Errorf("agent %q: %w", n.ID(), err)
	}
	return store, svc, nil
}

// Compact fits a conversation a client holds (msgs, which must pass
// CheckHistory) to the agent's context budget, as a turn does before a
// model call: when the request it would make passes the budget, its oldest
// whole turns beyond the kept ones are summarized (llmorch.ContextPolicy).
// prev is the summary entry the conversation starts with, one an earlier
// Compact returned, or nil. Nothing is stored and the orchestration is not
// involved: it is the machinery for a client that keeps its conversation
// itself (the Responses API's compact). It fails when the agent's budget
// is off, and returns the conversation as it was, with the error, when
// no summary can be made.
func (n *Agent) Compact(ctx context.Context, prev *chat.Message, msgs []chat.Message) (llmorch.Compacted, error) {
	if err := n.CheckHistory(msgs, nil); err != nil {
		return llmorch.Compacted{}, err
	}
	last := 0
	if prev != nil {
		if prev.Role != chat.RoleSummary || prev.Summary == nil {
			return llmorch.Compacted{}, fmt.Errorf("%w: the summary to start from is not a summary entry", ErrInvalidMessage)
		}
		last = prev.Summary.Through
	}
	for _, m := range msgs {
		if m.Role == chat.RoleUser {
			last++
		}
	}
	return n.service.Compact(ctx, prev, msgs, last)
}
