package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// Idempotent requests. A turn started with an idempotency key
// (Input.Key) records the key with its user message, in its first
// write, along with a digest of what the request asked. The key sent
// again with the same request finds the turn it started
// (*DuplicateError), whatever became of it: running on this replica or
// another, waiting to be taken over after its replica died, or ended.
// Sent with another request it is refused (*KeyReusedError). Either way
// no second turn starts.

var (
	// ErrKeyReused: the turn's idempotency key (Input.Key) started a
	// turn on the session for another request (another message, other
	// attachments...); a *KeyReusedError names that turn.
	ErrKeyReused = errors.New("this idempotency key was already used for another request on the session")
	// ErrTurnInterrupted: the turn a request started ended without its
	// answer (AnswerTo): its replica died, or it was stopped, before it
	// answered, and no replica went on with it.
	ErrTurnInterrupted = errors.New("the turn this request started ended without its answer")
	// ErrAnswerGone: the session's history no longer holds the user
	// message of the turn a request started (the oldest turns were
	// dropped, or the message was edited), so its answer cannot be told
	// apart from the rest (AnswerTo).
	ErrAnswerGone = errors.New("the session's history no longer holds the request's message")
)

// KeyReusedError is the ErrKeyReused of a turn whose idempotency key the
// session keeps for another request: Request is that request, with the
// turn it started.
type KeyReusedError struct{ Request session.Request }

func (e *KeyReusedError) Error() string {
	return fmt.Sprintf("%s: turn %s", ErrKeyReused, e.Request.Turn)
}

func (e *KeyReusedError) Unwrap() error { return ErrKeyReused }

// duplicate is what the session says of the turn's idempotency key: nil
// when the key is new (or the turn has none), a *DuplicateError naming
// the turn the same request started, a *KeyReusedError when another
// request used the key. A key recorded without a digest matches any
// request.
func (o options) duplicate(sess session.Session) error {
	if o.request == "" {
		return nil
	}
	r, ok := sess.RequestOf(o.request)
	switch {
	case !ok:
		return nil
	case r.Digest != "" && r.Digest != o.digest:
		return &KeyReusedError{Request: r}
	}
	return &DuplicateError{Request: r}
}

// requestDigest identifies what a turn's request asks: the message and
// every option that changes the turn (attachments, the conversation or
// results sent with it, regenerate or edit, the client's tools, tool
// choice, response format and instructions). The turn's ID, owner and
// stream position are not part of it: a retry differs in those.
func requestDigest(message string, answers []ApprovalAnswer, o options) string {
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(struct {
		Message      string                   `json:"m"`
		Attachments  []chat.Attachment        `json:"a,omitempty"`
		History      []chat.Message           `json:"h,omitempty"`
		Compacted    []chat.Message           `json:"c,omitempty"`
		Results      []chat.ToolResult        `json:"r,omitempty"`
		Regenerate   bool                     `json:"g,omitempty"`
		Edit         bool                     `json:"e,omitempty"`
		ClientTools  []chat.ToolSpec          `json:"t,omitempty"`
		Choice       orchestration.ToolChoice `json:"tc"`
		Format       *llmorch.Format          `json:"f,omitempty"`
		Instructions string                   `json:"i,omitempty"`
		Answers      []ApprovalAnswer         `json:"d,omitempty"`
	}{message, o.attachments, o.history, o.compacted, o.results, o.regenerate, o.edit, o.clientTools, o.choice, o.format, o.instructions, answers})
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// AnswerTo is the answer the session stored for the turn that request
// req started: the messages that follow the turn's user message in hist
// (the session's whole history), up to the next user message. The turn
// must have ended (sess.Turn no longer names it): a running turn's answer
// is in its stream. It returns ErrAnswerGone when hist no longer holds
// the turn's user message, and ErrTurnInterrupted, with what the turn
// saved, when it saved no answer after that message (its replica died, or
// it was stopped, before it answered) or has not ended: a retry is told
// so, never given an empty answer as if the turn had finished.
func AnswerTo(sess session.Session, hist []chat.Message, req session.Request) ([]chat.Message, error) {
	later := sess.State.UserMessages - req.UserMessages // user messages after the turn's
	at := -1
	for i := len(hist) - 1; i >= 0 && later >= 0; i-- {
		if hist[i].Role != chat.RoleUser {
			continue
		}
		if later == 0 {
			at = i
			break
		}
		later--
	}
	if at < 0 {
		return nil, ErrAnswerGone
	}
	var answer []chat.Message
	for _, m := range hist[at+1:] {
		if m.Role == chat.RoleUser {
			break
		}
		answer = append(answer, m)
	}
	answered := false
	for _, m := range answer {
		answered = answered || m.Role == chat.RoleAssistant
	}
	if !answered || sess.Turn == req.Turn {
		return answer, ErrTurnInterrupted
	}
	return answer, nil
}

// readTimeout bounds busyRequest's read of the session.
const readTimeout = 5 * time.Second

// busyRequest is the error of a turn whose session is busy (err): the
// request's *DuplicateError or *KeyReusedError when the session keeps
// its key (the turn running is, or was, the request's own), else err.
// It costs a read of the session, made only for a turn with a key.
func (n *Agent) busyRequest(ctx context.Context, store session.Store, key string, o options, err error) error {
	if o.request == "" {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	sess, gerr := store.Get(ctx, key)
	if gerr != nil || sess.Owner != o.owner {
		return err
	}
	if dup := o.duplicate(sess); dup != nil {
		return dup
	}
	return err
}
