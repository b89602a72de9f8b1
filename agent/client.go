package agent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/internal/netguard"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// What a request's client brings to a turn besides its message: its own
// tools (which it runs itself, under the agent's orchestration), the
// results of their calls, its tool_choice, the format of the answer, its
// own instructions and attachments: fields of Input.

// Errors of a client's request, before a turn starts.
var (
	// ErrClientTools: a client tool is invalid (no name, a name given
	// twice, the name of one of the agent's tools); a *ClientToolError
	// says which.
	ErrClientTools = errors.New("invalid client tools")
	// ErrToolChoice: the client's tool_choice requires a call the active
	// step does not offer, or names no tool of the request; a
	// *ChoiceError says why.
	ErrToolChoice = errors.New("tool_choice cannot be honoured")
	// ErrToolResults: the client's tool results do not answer the
	// session's calls of client tools (one missing, one for no such
	// call); a *ResultError says which.
	ErrToolResults = errors.New("invalid tool results")
	// ErrInstructions: the template refuses a client's own instructions
	// (options.clientInstructions "refuse").
	ErrInstructions = errors.New("the agent does not take a client's instructions")
	// ErrAttachment: an attachment the agent's model does not take, or
	// one over Config.MaxAttachmentBytes; an *AttachmentError says which.
	ErrAttachment = errors.New("attachment refused")
)

// ClientToolError locates an invalid client tool: Index is its position
// in Input.ClientTools.
type ClientToolError struct {
	Index int
	Msg   string
}

func (e *ClientToolError) Error() string { return e.Msg }
func (e *ClientToolError) Unwrap() error { return ErrClientTools }

// ChoiceError says why a tool_choice cannot be honoured.
type ChoiceError struct{ Msg string }

func (e *ChoiceError) Error() string { return e.Msg }
func (e *ChoiceError) Unwrap() error { return ErrToolChoice }

// ResultError says which tool result does not answer a call: Index is its
// position in Input.Results (-1 for a call left without one).
type ResultError struct {
	Index  int
	CallID string
	Msg    string
}

func (e *ResultError) Error() string { return e.Msg }
func (e *ResultError) Unwrap() error { return ErrToolResults }

// AttachmentError says which attachment is refused and why: Message is
// the message's position in the conversation (the history, then the
// turn's message), Index the attachment's in it.
type AttachmentError struct {
	Message, Index int
	Msg            string
}

func (e *AttachmentError) Error() string { return e.Msg }
func (e *AttachmentError) Unwrap() error { return ErrAttachment }

// handleConversation starts a turn that goes on from the conversation as
// it stands, without a new message: the client's conversation (History,
// which ends with the results of its tools' calls), on a Stateless
// session or added to the session's history.
func (n *Agent) handleConversation(ctx context.Context, sessionID string, o options) (iter.Seq[chat.Event], error) {
	if err := n.checkOptions(ctx, o); err != nil {
		return nil, err
	}
	return n.begin(ctx, sessionID, o, func(key string, sess session.Session) (turnStart, error) {
		return n.historyContinue(key, sess, o)
	})
}

// clientNames returns the names of o's client tools.
func (o options) clientNames() []string {
	names := make([]string, len(o.clientTools))
	for i, t := range o.clientTools {
		names[i] = t.Name
	}
	return names
}

// extend gives a turn what the client brought for it.
func (o options) extend(t llmorch.Turn) llmorch.Turn {
	t.ClientTools, t.Choice, t.Format, t.Instructions = o.clientTools, o.choice, o.format, o.instructions
	t.CallTrail = o.callTrail
	return t
}

// MaxClientTools bounds the client tools of one request.
const MaxClientTools = 128

// checkClient checks what the client brought that does not depend on
// the session.
func (n *Agent) checkClient(ctx context.Context, o options) error {
	if len(o.clientTools) > MaxClientTools {
		return &ClientToolError{Index: MaxClientTools, Msg: fmt.Sprintf("%d client tools; at most %d are taken", len(o.clientTools), MaxClientTools)}
	}
	agentTools := n.Template().Tools()
	for i, t := range o.clientTools {
		switch {
		case strings.TrimSpace(t.Name) == "":
			return &ClientToolError{Index: i, Msg: "a client tool needs a name"}
		case len(t.Name) > 64 || !utf8.ValidString(t.Name):
			return &ClientToolError{Index: i, Msg: fmt.Sprintf("the client tool name %q is longer than 64 bytes", clipID(t.Name))}
		case slices.Contains(agentTools, t.Name):
			return &ClientToolError{Index: i, Msg: fmt.Sprintf("the client tool %q has the name of the agent's own tool %q; rename the client's", t.Name, t.Name)}
		}
		for j := range i {
			if o.clientTools[j].Name == t.Name {
				return &ClientToolError{Index: i, Msg: fmt.Sprintf("the client tool %q is given twice (tools[%d] and tools[%d])", clipID(t.Name), j, i)}
			}
		}
	}
	if o.choice.Only != nil {
		names := append(slices.Clone(n.Engine().Tools()), o.clientNames()...)
		for _, c := range o.choice.Only {
			if !slices.Contains(names, c) {
				return &ChoiceError{Msg: fmt.Sprintf("tool_choice names %q, which is neither one of the request's tools nor one of the agent's (%s)", clipID(c), strings.Join(names, ", "))}
			}
		}
	}
	if o.instructions != "" && n.Template().Options.ClientInstructions == template.ClientInstructionsRefuse {
		return fmt.Errorf("%w: agent %q answers with its template's instructions only (options.clientInstructions is %q); send the request without system or developer messages or instructions", ErrInstructions, n.ID(), template.ClientInstructionsRefuse)
	}
	history := o.history
	if o.attachments != nil {
		history = append(slices.Clone(history), chat.Message{Role: chat.RoleUser, Attachments: o.attachments})
	}
	info := n.model.Info()
	for i, m := range history {
		for k, a := range m.Attachments {
			switch {
			case !info.Takes(a.Kind):
				return &AttachmentError{Message: i, Index: k, Msg: fmt.Sprintf("the agent's model (%s %s) does not take %s attachments", info.Provider, info.Model, a.Kind)}
			case n.cfg.MaxAttachmentBytes > 0 && len(a.URL) > n.cfg.MaxAttachmentBytes:
				return &AttachmentError{Message: i, Index: k, Msg: fmt.Sprintf("the attachment is %d bytes as sent; the limit is %d (MAX_ATTACHMENT_BYTES)", len(a.URL), n.cfg.MaxAttachmentBytes)}
			case strings.HasPrefix(a.URL, "data:"):
			case n.cfg.AttachmentURLs == AttachmentURLsNone:
				return &AttachmentError{Message: i, Index: k, Msg: "attachments are taken as data: URLs only here (ATTACHMENT_URLS=none); send the content itself, base64 in a data: URL"}
			default:
				if err := netguard.CheckURL(ctx, n.resolver(), a.URL); err != nil {
					return &AttachmentError{Message: i, Index: k, Msg: "the attachment's URL is not one the model's provider may fetch: " + err.Error() + "; send an https URL of a public host, or the content as a data: URL"}
				}
			}
		}
	}
	return nil
}

// resolver resolves the hosts of attachment URLs.
func (n *Agent) resolver() netguard.Resolver {
	if n.cfg.Resolver != nil {
		return n.cfg.Resolver
	}
	return net.DefaultResolver
}

// checkChoice refuses a tool_choice that requires a call the step the
// turn starts in does not offer.
func (n *Agent) checkChoice(st orchestration.State, o options) error {
	if !o.choice.Required {
		return nil
	}
	e := n.Engine()
	if err := e.CheckChoice(e.OfferWith(st, nil, o.clientNames()), o.choice); err != nil {
		return &ChoiceError{Msg: err.Error()}
	}
	return nil
}

// NoResult is the result a call of a client tool gets when the client
// goes on without sending one.
const NoResult = chat.NotRunPrefix + "the client sent no result for this call."

// clientResults matches the client's results with the session's calls
// that wait for them. It returns the tool messages in the calls' order,
// the records they make, and which calls they answer (the call's ID ->
// whether the client sent its result). all: every waiting call must be
// answered; otherwise the ones left out get NoResult. Each result is cut
// to limit bytes (tools.LimitResult), as a built-in tool's would be: the
// client's output is stored and sent with every later model request too.
// guard, when set, passes each through the tool_result guardrails.
func clientResults(pending []session.Approval, answered []session.Approval, results []chat.ToolResult, all bool, limit int, guard func(chat.ToolCall, chat.ToolResult) chat.ToolResult) (msgs []chat.Message, records []session.Approval, decided map[string]bool, err error) {
	byID := map[string]int{}
	for i, r := range results {
		if _, dup := byID[r.CallID]; dup {
			return nil, nil, nil, &ResultError{Index: i, CallID: r.CallID, Msg: fmt.Sprintf("call %q is answered twice", clipID(r.CallID))}
		}
		byID[r.CallID] = i
	}
	for i, r := range results {
		waits := slices.ContainsFunc(pending, func(p session.Approval) bool { return p.Client && p.Call.ID == r.CallID })
		resent := slices.ContainsFunc(answered, func(a session.Approval) bool { return a.Client && a.Call.ID == r.CallID })
		if !waits && !resent {
			return nil, nil, nil, &ResultError{Index: i, CallID: r.CallID, Msg: fmt.Sprintf("no call %q of a client tool waits for a result in this session", clipID(r.CallID))}
		}
	}
	decided = map[string]bool{}
	for _, p := range pending {
		if !p.Client {
			continue
		}
		i, ok := byID[p.Call.ID]
		if !ok {
			if all {
				return nil, nil, nil, &ResultError{Index: -1, CallID: p.Call.ID, Msg: fmt.Sprintf("the call %q of the client tool %q waits for its result; send the result of every call the last answer made", clipID(p.Call.ID), clipID(p.Call.Name))}
			}
			msgs = append(msgs, llmorch.ToolMessage(chat.ToolResult{CallID: p.Call.ID, Name: p.Call.Name, Content: NoResult, Type: "no_result", IsError: true, NotRun: true}))
			decided[p.Call.ID] = false
			continue
		}
		r := results[i]
		r.Name = p.Call.Name
		r.Content = tools.LimitResult(r.Content, limit)
		r.NotRun = r.NotRun || chat.NotRunContent(r.Content)
		if r.NotRun {
			r.IsError = true
		}
		if guard != nil {
			r = guard(p.Call, r)
		}
		msgs = append(msgs, llmorch.ToolMessage(r))
		if !r.NotRun {
			records = append(records, p)
		}
		decided[p.Call.ID] = true
	}
	// The others are copies of results the session has.
	return msgs, records, decided, nil
}

// recordResults records calls of client tools whose results came: each
// as a tool that ran, judged against the offer of the model call that
// made it (the approval keeps its step and sequence position; the call's
// tool was offered, or it would not have been held), as the other calls of
// its answer were. An approval saved without its offer is judged against
// the state.
func recordResults(e *orchestration.Engine, s orchestration.State, calls []session.Approval) (orchestration.State, orchestration.Decision) {
	var last orchestration.Decision
	prev := s.ActiveStep
	for _, a := range calls {
		name := a.Call.Name
		offer := orchestration.Offer{Tools: []string{name}, Step: s.ActiveStep, SequenceIndex: s.SequenceIndex, StepChanges: s.StepChanges}
		if a.Offer != nil {
			offer = *a.Offer
			offer.Tools = []string{name}
		}
		s, last = e.Apply(s, orchestration.ToolUsedIn(name, offer))
	}
	last.PreviousStep, last.Transition = prev, s.ActiveStep != prev
	return s, last
}

// markClient marks the session's calls of client tools decided as
// answered (true: the client sent the result).
func markClient(cur []session.Approval, decided map[string]bool) []session.Approval {
	for i := range cur {
		ok, found := decided[cur[i].Call.ID]
		if !found || !cur[i].Client || cur[i].Status != session.ApprovalPending {
			continue
		}
		cur[i].Status = session.ApprovalDenied
		if ok {
			cur[i].Status = session.ApprovalApproved
		}
	}
	return cur
}

// historyContinue plans a turn that goes on from the client's
// conversation (o.history, which ends with its tools' results) without a
// new message: on a stateless session, or added to a stored one.
func (n *Agent) historyContinue(key string, sess session.Session, o options) (turnStart, error) {
	if len(o.history) == 0 {
		return turnStart{}, fmt.Errorf("%w: a turn without a message needs the conversation it goes on from", ErrInvalidMessage)
	}
	client := o.clientNames()
	update := func(s *orchestration.State) error {
		*s = n.Replay(*s, o.compacted, client)
		*s = n.Replay(*s, o.history, client)
		return nil
	}
	st := sess.State
	_ = update(&st)
	if err := n.checkChoice(st, o); err != nil {
		return turnStart{}, err
	}
	window := n.historyWindow()
	write := session.Write{Update: update, Messages: o.history, Window: window, Options: []session.UpdateOption{session.WithTurn(o.turnID)}}
	return turnStart{write: write, what: "recording the conversation", turn: func(stored session.Session, before []chat.Message, lease session.Lease) llmorch.Turn {
		// What the session had, then the client's conversation, within
		// the policy's window but never past the turn's user message.
		history := continuationWindow(append(before, o.history...), window)
		return o.extend(llmorch.Turn{ID: o.turnID, SessionID: key, Lease: lease, State: stored.State, PreviousStep: sess.State.ActiveStep, History: wellFormed(trimToUserStart(history), nil)})
	}}, nil
}
