// Package session keeps the per-session data of a running agent: the
// orchestration state, the conversation history and the turn lease that lets
// one turn at a time run on a session.
//
// A Store applies each orchestration event as one atomic update, so that
// concurrent tool and usage updates never lose one another, and refuses the
// writes of a turn whose lease was taken over (fencing). The memory store
// (NewMemory) serves one process; the Redis store, in package
// session/redisstore, serves replicas, and is a package of its own so that
// a program that keeps its sessions in memory does not link a Redis client.
// Another store is any type that implements Store and passes the
// conformance suite in session/sessiontest; WriteOptions is how it reads a
// write's options. Store has the six methods a turn needs; Update,
// AppendMessages and Lock are helpers over them, and what only some stores
// can do is an optional interface that callers ask for with a type
// assertion (Pinger, Lister, Queuer, Starter, Appender).
//
// # Failures
//
// Errors wrap ErrUnavailable when the backing store cannot be reached and
// ErrCorrupt when a stored value cannot be decoded; the stored value is then
// left untouched. A write that may have been applied although it failed
// wraps ErrMaybeApplied too.
package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
)

// Errors a Store returns. Callers test them with errors.Is.
var (
	// ErrNotFound: the session does not exist (or expired).
	ErrNotFound = errors.New("session not found")
	// ErrBusy: another turn holds the session's lease.
	ErrBusy = errors.New("session busy: another turn is running on it")
	// ErrFenced: the caller's lease expired and was taken by a newer turn;
	// its write was not applied.
	ErrFenced = errors.New("session lease lost: the write was rejected because a newer turn holds the session")
	// ErrUnavailable wraps failures to reach the backing store.
	ErrUnavailable = errors.New("session store unavailable")
	// ErrMaybeApplied is wrapped, with ErrUnavailable, by a failed write
	// that may still have been applied: the store stopped answering after
	// the write may have reached it, and did not answer again in time.
	ErrMaybeApplied = errors.New("the write may have been applied")
	// ErrNotReplicated is wrapped by a write that was made but that fewer
	// replicas acknowledged than the store waits for (a Redis store's
	// WAIT timed out): the write returns its result with it, and a
	// failover before the replicas catch up may lose the write.
	ErrNotReplicated = errors.New("the write was made but not acknowledged by a replica in time")
	// ErrCorrupt: a stored value could not be decoded. The value is left as
	// it is; it is never replaced by an empty state.
	ErrCorrupt = errors.New("session data corrupt")
	// ErrForeign: Claim found the session owned by another caller or bound
	// to another agent, and took no lease.
	ErrForeign = errors.New("the session belongs to another owner or agent")
	// ErrQuota: the write would have created a session for an owner at one
	// of its quotas (Config.SessionsPerOwner, Config.BytesPerOwner); it was
	// not applied. The error is a *QuotaError, which says which.
	ErrQuota = errors.New("owner quota reached")
)

// Session is a session's state with its bookkeeping.
type Session struct {
	ID    string              `json:"id"`
	State orchestration.State `json:"state"`
	// Owner identifies the caller (an API key's fingerprint) that created
	// the session; empty when the server runs without keys.
	Owner string `json:"owner,omitempty"`
	// Agent is the ID of the agent the session belongs to; a session is
	// bound to the agent of its first turn.
	Agent        string    `json:"agent,omitempty"`
	CreatedAt    time.Time `json:"createdAt"`
	LastAccessed time.Time `json:"lastAccessed"`
	// Turn is the ID of the turn that is writing the session, set by its
	// first write and cleared by its last (WithTurn). Found set by the
	// next turn, it names a turn that ended without its last write (its
	// replica died, or the store stopped answering), whose partial answer
	// may be recovered from the streams it left (see agent).
	Turn string `json:"turn,omitempty"`
	// Version increases with every write; stores use it for optimistic
	// concurrency.
	Version int64 `json:"version"`
	// Title is the name a person gave the session (WithTitle); empty until
	// then, when lists show its first user message (see Lister).
	Title string `json:"title,omitempty"`
	// Approvals are the tool calls of the session that wait (or waited)
	// for a person's approval, oldest first. They live and expire with the
	// session, so any replica can answer them; writes change them with
	// WithApprovals.
	Approvals []Approval `json:"approvals,omitempty"`
	// SummarizerUsage is what the summaries of the session's history cost
	// (context compaction, AddSummarizerUsage): it is spent apart from the
	// agent's model calls, whose usage the state counts.
	SummarizerUsage chat.Usage `json:"summarizerUsage,omitzero"`
	// Requests are the idempotency keys of the session's turns (a client's
	// Idempotency-Key, the AI SDK's message ID), oldest first, at most
	// MaxRequests: each names the turn that its first write started
	// (WithRequest), so that a request sent again finds that turn instead
	// of starting another.
	Requests []Request `json:"requests,omitempty"`
	// Journal is what the turn writing the session (Turn) has done so
	// far, when that turn keeps one (WithJournal): another replica takes
	// the turn over from it when the one running it dies. Nil otherwise.
	Journal *Journal `json:"journal,omitempty"`
}

// Request is one idempotency key of a session and the turn it started.
type Request struct {
	Key  string `json:"key"`
	Turn string `json:"turn"`
	// UserMessages is the session's count of user messages once the turn's
	// message was recorded (orchestration.State.UserMessages): its answer
	// follows that user message in the history.
	UserMessages int `json:"userMessages"`
	// Digest identifies what the request asked (its message, attachments
	// and the rest; see agent.Input.Key), so that the key sent again
	// with another request is told apart from a retry. Empty for a key
	// recorded without one, which matches any request.
	Digest string `json:"digest,omitempty"`
}

// MaxRequests bounds Session.Requests: the oldest key is forgotten when a
// turn records one more. A session keeps the keys of its latest 256 turns,
// which covers any client's retries.
const MaxRequests = 256

// RequestOf returns the request that started a turn under key, if the
// session still keeps it.
func (s Session) RequestOf(key string) (Request, bool) {
	for i := len(s.Requests) - 1; i >= 0; i-- {
		if s.Requests[i].Key == key {
			return s.Requests[i], true
		}
	}
	return Request{}, false
}

// Journal is a running turn's progress, kept in its session by the turn's
// writes (WithJournal) so that the turn outlives the process running it:
// another takes it over from the last completed step, with the results of
// the tool calls that completed since, instead of running them again. A
// turn keeps one when its session store is shared by replicas; the turn's
// last write drops it with the turn marker.
type Journal struct {
	// Writes counts the turn's writes. A write that finds fewer than the
	// turn made was preceded by a store that lost some (a failover to a
	// replica that had not received them), and is refused: the turn says
	// what is lost instead of saving a history with a hole.
	Writes int `json:"writes"`
	// Frame is the seq of the last frame of the turn's stream whose
	// content (its text, tool calls and results) the history holds: what
	// the stream shows after it, the history lacks.
	Frame int64 `json:"frame,omitempty"`
	// Steps counts the turn's model calls whose step the history holds;
	// Output is the bytes of text and tool arguments the model streamed
	// in them, and Usage their token usage: the turn's budgets and totals
	// so far.
	Steps  int        `json:"steps,omitempty"`
	Output int        `json:"output,omitempty"`
	Usage  chat.Usage `json:"usage,omitzero"`
	// Step is the step whose tool calls run, nil while none does.
	Step *JournalStep `json:"step,omitempty"`
}

// JournalStep is a step of a running turn whose tool calls run: the
// model's answer that made them, and the results of those that
// completed. A call without a result was running when the turn stopped,
// or had not started.
type JournalStep struct {
	// Text and Calls are the model's answer; Invalid maps the ID of a
	// call that cannot run (an unknown tool, arguments that are not an
	// object) to why.
	Text    string            `json:"text,omitempty"`
	Calls   []chat.ToolCall   `json:"calls,omitempty"`
	Invalid map[string]string `json:"invalid,omitempty"`
	// Offer is what the model call was offered, which its calls are
	// checked against; Final: it was the turn's last model call, offered
	// nothing.
	Offer orchestration.Offer `json:"offer"`
	Final bool                `json:"final,omitempty"`
	// Usage and Output are the model call's token usage and streamed
	// bytes, counted in Journal's once the step is saved.
	Usage  chat.Usage `json:"usage,omitzero"`
	Output int        `json:"output,omitempty"`
	// Answers: the calls are those a person approved (the turn carries
	// out the answers before its first model call); Text is empty, and
	// Offers holds, call by call, what the model call that made it was
	// offered (Approval.Offer; nil where the approval kept none).
	Answers bool                   `json:"answers,omitempty"`
	Offers  []*orchestration.Offer `json:"offers,omitempty"`
	// Decisions are the person's answers that the calls carry to the
	// agents they asked (Approval.Agent), by call ID.
	Decisions map[string][]chat.Decision `json:"decisions,omitempty"`
	// Results are the results of the calls that ran and completed, in
	// the order they did. The orchestration has recorded each of them.
	Results []chat.ToolResult `json:"results,omitempty"`
}

// clone is a copy of j that a write may change without touching j.
func (j *Journal) clone() *Journal {
	if j == nil {
		return &Journal{}
	}
	c := *j
	if j.Step != nil {
		st := *j.Step
		st.Calls = slices.Clone(st.Calls)
		st.Results = slices.Clone(st.Results)
		st.Offers = slices.Clone(st.Offers)
		c.Step = &st
	}
	return &c
}

// Approval is one tool call held for an answer: a person's decision on
// a call that asks first, or, with Client set, the result of a call of a
// client tool, which the request's client runs itself and sends with its
// next request.
type Approval struct {
	// ID names the request (the AI SDK's approvalId).
	ID string `json:"id"`
	// Call is the call as the model made it.
	Call chat.ToolCall `json:"call"`
	// Client marks a call of a client tool: it waits for the client's
	// result, not for a person. Answered, its Status is ApprovalApproved
	// when the client sent the result, ApprovalDenied when the client went
	// on without one.
	Client bool `json:"client,omitempty"`
	// Status is ApprovalPending until the call is answered.
	Status string `json:"status"`
	// Reason is the person's reason, for an answered call.
	Reason      string    `json:"reason,omitempty"`
	RequestedAt time.Time `json:"requestedAt"`
	// MessageID names the answer that asked for the call (the ID its
	// stream started under): the turn that carries the decision out goes on
	// under it, whichever replica or request shape answers.
	MessageID string `json:"messageId,omitempty"`
	// Offer is what the model call that made the call was offered (its
	// step and sequence position, and the call's tool): the call, carried
	// out later, is judged against it (orchestration.Engine.Judge), as the
	// other calls of its answer were. Nil in approvals saved before it was
	// kept: the call is judged against the state it runs in.
	Offer *orchestration.Offer `json:"offer,omitempty"`
	// Agent is set for a call that an agent the session's turn asked
	// made (chat.Approval.Agent): it names that agent, AgentCall is its
	// call, and Call is the session's call that asked it (an agent
	// tool's), which the answer runs again with the decisions. Several
	// approvals may share one Call.
	Agent     string         `json:"agent,omitempty"`
	AgentCall *chat.ToolCall `json:"agentCall,omitempty"`
}

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
)

// PendingApprovals returns the approvals of s that are not answered yet.
func (s Session) PendingApprovals() []Approval {
	var out []Approval
	for _, a := range s.Approvals {
		if a.Status == ApprovalPending {
			out = append(out, a)
		}
	}
	return out
}

// Store keeps sessions. Every method refreshes the session's sliding TTL.
// Implementations are safe for concurrent use.
//
// The other writes are helpers over it (Update, AppendMessages, Lock);
// optional interfaces add what only some stores can do (see the package
// doc).
type Store interface {
	// Get returns the session, or ErrNotFound.
	Get(ctx context.Context, id string) (Session, error)
	// Claim starts a turn: it gets the session, creating an empty one
	// owned by WithOwner's owner and bound to WithAgent's agent when there
	// is none, and takes its turn lease, in one step (one round trip with
	// Redis). When another turn holds the lease, Claim waits up to
	// Config.LockWait and then returns ErrBusy. A session whose owner is
	// not WithOwner's, or that is bound to an agent other than
	// WithAgent's, is not locked: Claim returns it with ErrForeign, so the
	// caller can say which without the rightful owner's turns ever seeing
	// the session busy.
	Claim(ctx context.Context, id string, opts ...UpdateOption) (Session, Lease, error)
	// UpdateAppend applies fn to the session's state and appends msgs to
	// its history, as one atomic write (one round trip with Redis while
	// the lease's view of the session is current), and returns the stored
	// session and the newest window messages of the history as it was
	// before the append: none for window 0, all for window < 0. A missing
	// session is created empty first (WithOwner, WithAgent). fn may run
	// more than once (optimistic retries) and must have no side effects;
	// an error from fn aborts the write and is returned as is. Beyond
	// Config.MaxMessages the oldest whole turns of the history are dropped
	// (TrimTurns). With DropLastAnswer, the answer to the last user
	// message is dropped first.
	UpdateAppend(ctx context.Context, id string, fn func(*orchestration.State) error, msgs []chat.Message, window int, opts ...UpdateOption) (Session, []chat.Message, error)
	// Messages returns the newest limit messages of the history, oldest
	// first (all when limit <= 0).
	Messages(ctx context.Context, id string, limit int) ([]chat.Message, error)
	// Delete removes the session, its history and its lease.
	Delete(ctx context.Context, id string) error
	// Close releases the store's resources.
	Close() error
}

// A Starter is a Store that can start a turn in one step: Claim and the
// turn's first write (UpdateAppend under the new lease) together, one
// round trip with Redis instead of two, when it can tell the session
// before claiming it. The agent starts its turns this way when its store
// is a Starter.
type Starter interface {
	Store
	// ClaimStart claims the session like Claim. When the store can tell
	// what it will find (a session it is about to create, or one this
	// process wrote last), it calls plan with that session and, unless
	// plan reports false, makes plan's write under the new lease in the
	// same step, provided the session is still that one: Started is then
	// what UpdateAppend would have returned. Otherwise (plan not called,
	// declined, or the session had changed) Started is nil, and the
	// caller makes its write under the lease as after Claim. plan is
	// called at most once, must have no side effects, and gets a copy.
	ClaimStart(ctx context.Context, id string, plan func(Session) (Write, bool), opts ...UpdateOption) (Session, Lease, *Started, error)
}

// Write is an UpdateAppend that Starter.ClaimStart makes: its function,
// messages, window and options (the store adds WithLease).
type Write struct {
	Update   func(*orchestration.State) error
	Messages []chat.Message
	Window   int
	Options  []UpdateOption
}

// Started is what the write of a Starter.ClaimStart returned: the stored
// session and the history window, as from UpdateAppend.
type Started struct {
	Session Session
	History []chat.Message
}

// Lease is one turn's hold on a session. It expires after Config.LockTTL
// unless extended, so a holder that dies frees the session by itself.
type Lease interface {
	SessionID() string
	// Token is the lease's random token.
	Token() string
	// Extend renews the lease for another Config.LockTTL, or returns
	// ErrFenced when it was lost.
	Extend(ctx context.Context) error
	// Release frees the session if this lease still holds it. A lease that
	// no longer holds the session (expired, taken over, or released by a
	// write: WithRelease) is not an error.
	Release(ctx context.Context) error
	// Expiry is when the lease surely stops holding the session unless
	// Extend succeeds again: the start of the last successful Claim or
	// Extend plus Config.LockTTL, on the store's clock (Config.Now for the
	// memory store, the wall clock for Redis, whose server expires the
	// lease). A caller whose Release failed can stop retrying after it.
	Expiry() time.Time
}

// UpdateOption adjusts one write.
type UpdateOption func(*WriteOptions)

// WriteOptions are a write's options, as a Store reads them: Options
// collects them from the UpdateOptions a caller passed.
type WriteOptions struct {
	// Lease, when set, makes the write conditional on it still holding the
	// session (WithLease).
	Lease Lease
	// Owner and Agent are set on a session the write creates (WithOwner,
	// WithAgent); Claim refuses a session of another owner or agent.
	Owner, Agent string
	// Turn, when set, is the new Session.Turn (WithTurn).
	Turn *string
	// DropAnswer: UpdateAppend drops the answer to the history's last user
	// message before it appends (DropLastAnswer).
	DropAnswer bool
	// DropTurn: UpdateAppend drops the history's last user message and its
	// answer before it appends (DropLastTurn).
	DropTurn bool
	// Approvals, when set, replaces the session's approvals with what it
	// returns (WithApprovals); see ApplyApprovals.
	Approvals func([]Approval) ([]Approval, error)
	// Release: an Update or UpdateAppend fenced by Lease also releases it
	// (WithRelease).
	Release bool
	// Title, when set, is the new Session.Title (WithTitle).
	Title *string
	// SinceSummary: UpdateAppend's window starts at the verbatim turns of
	// the latest summary entry (SinceSummary).
	SinceSummary bool
	// SummarizerUsage is added to Session.SummarizerUsage
	// (AddSummarizerUsage).
	SummarizerUsage chat.Usage
	// Request, when its Key is set, is added to Session.Requests
	// (WithRequest).
	Request Request
	// Journal, when set, changes Session.Journal (WithJournal).
	Journal func(*Journal) error
	// Charged: a Claim starts a turn that adds to its owner's bytes,
	// Brings of them with its message, and is refused when they would
	// take the owner past its BytesPerOwner (Charged).
	Charged bool
	Brings  int64
}

// WithApprovals makes an Update or UpdateAppend replace the session's
// approvals with what fn returns, in the same atomic write as the state
// (and the messages). fn gets a copy of the stored approvals; like the
// update's own function it may run more than once and must have no side
// effects, and an error from it aborts the write and is returned as is.
// Other writes ignore it.
func WithApprovals(fn func([]Approval) ([]Approval, error)) UpdateOption {
	return func(o *WriteOptions) { o.Approvals = fn }
}

// ApplyApprovals runs the WithApprovals function on s, if there is one.
func (o WriteOptions) ApplyApprovals(s *Session) error {
	if o.Approvals == nil {
		return nil
	}
	next, err := o.Approvals(slices.Clone(s.Approvals))
	if err != nil {
		return err
	}
	s.Approvals = next
	return nil
}

// Options collects a write's options.
func Options(opts ...UpdateOption) WriteOptions {
	var o WriteOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithTurn sets Session.Turn with an Update or UpdateAppend: the running
// turn's ID on its first write, "" on its last.
func WithTurn(id string) UpdateOption { return func(o *WriteOptions) { o.Turn = &id } }

// ApplyTurn applies WithTurn, WithJournal, WithTitle, AddSummarizerUsage
// and WithRequest to s (after the state's update): the fields of the
// Session itself that a write sets beside the state. An error from the
// WithJournal function is returned as is, with s unchanged: the store must
// not write.
func (o WriteOptions) ApplyTurn(s *Session) error {
	if o.Journal != nil {
		j := s.Journal.clone()
		if o.Turn != nil && *o.Turn != "" && *o.Turn != s.Turn {
			j = &Journal{} // another turn starts
		}
		if err := o.Journal(j); err != nil {
			return err
		}
		s.Journal = j
	}
	if o.Turn != nil {
		if *o.Turn == "" || *o.Turn != s.Turn && o.Journal == nil {
			s.Journal = nil
		}
		s.Turn = *o.Turn
	}
	if o.Title != nil {
		s.Title = *o.Title
	}
	if !o.SummarizerUsage.IsZero() {
		s.SummarizerUsage = s.SummarizerUsage.Add(o.SummarizerUsage)
	}
	if o.Request.Key != "" {
		r := o.Request
		r.UserMessages = s.State.UserMessages
		// A new array: a copy of the session handed out earlier keeps
		// its own.
		s.Requests = append(slices.Clip(s.Requests), r)
		if n := len(s.Requests) - MaxRequests; n > 0 {
			s.Requests = s.Requests[n:]
		}
	}
	return nil
}

// WithRequest records an idempotency key with an Update or UpdateAppend:
// the write that starts turn (a turn's first write, the same atomic write
// as its user message) adds it to Session.Requests, with the digest of
// the request it came with (Request.Digest), so that a retry of the
// request, on any replica, finds the turn it started.
func WithRequest(key, turn, digest string) UpdateOption {
	return func(o *WriteOptions) { o.Request = Request{Key: key, Turn: turn, Digest: digest} }
}

// WithJournal makes an Update or UpdateAppend change the running turn's
// journal (Session.Journal) with fn, in the same atomic write: fn gets a
// copy of the stored journal (a zero one when there is none, or when the
// write's WithTurn starts another turn) and changes it, or refuses the
// write with an error, which is returned as is. Like the update's own
// function it may run more than once and must have no side effects. A
// write that clears the turn marker (WithTurn("")) drops the journal
// after fn ran. Other writes ignore it.
func WithJournal(fn func(*Journal) error) UpdateOption {
	return func(o *WriteOptions) { o.Journal = fn }
}

// AddSummarizerUsage adds u to Session.SummarizerUsage with an Update or
// UpdateAppend: the write that stores a summary entry counts what the
// summary cost.
func AddSummarizerUsage(u chat.Usage) UpdateOption {
	return func(o *WriteOptions) { o.SummarizerUsage = u }
}

// SinceSummary makes UpdateAppend's window, when it is negative (the whole
// history), start where the model's view of the history starts: at the
// turns that the history's latest summary entry (chat.RoleSummary) keeps
// verbatim, its Summary.Kept user messages before it, or at the start of
// the history when it has no summary. A turn with context compaction reads
// that instead of the whole history, so that its cost does not grow with
// the session. A store that ignores the option returns the whole history,
// which the turn reads the same way. Other writes ignore it.
func SinceSummary() UpdateOption { return func(o *WriteOptions) { o.SinceSummary = true } }

// Window returns the part of msgs that UpdateAppend returns for window (0
// none, < 0 all) under o (SinceSummary); it shares msgs' array. The Redis
// store does the same in Lua.
func Window(msgs []chat.Message, window int, o WriteOptions) []chat.Message {
	switch {
	case window == 0:
		return nil
	case window > 0 && len(msgs) > window:
		return msgs[len(msgs)-window:]
	case window < 0 && o.SinceSummary:
		return msgs[VerbatimStart(msgs):]
	}
	return msgs
}

// VerbatimStart is where the model's view of msgs starts (SinceSummary):
// the Kept-th user message before the latest summary entry, or the entry
// itself when it keeps none, or 0 when msgs has no summary entry or fewer
// user messages before it than it keeps.
func VerbatimStart(msgs []chat.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != chat.RoleSummary {
			continue
		}
		kept := 0
		if msgs[i].Summary != nil {
			kept = msgs[i].Summary.Kept
		}
		if kept <= 0 {
			return i
		}
		for j := i - 1; j >= 0; j-- {
			if msgs[j].Role == chat.RoleUser {
				if kept--; kept == 0 {
					return j
				}
			}
		}
		return 0
	}
	return 0
}

// WithTitle sets Session.Title with an Update or UpdateAppend: a person
// renamed the conversation ("" gives it back its first message).
func WithTitle(title string) UpdateOption { return func(o *WriteOptions) { o.Title = &title } }

// WithLease makes the write conditional on the lease still holding the
// session; otherwise the write is not applied and ErrFenced is returned.
func WithLease(l Lease) UpdateOption { return func(o *WriteOptions) { o.Lease = l } }

// WithRelease makes an Update or UpdateAppend fenced by WithLease release
// that lease in the same atomic write: a turn's last write frees its
// session without a step of its own (a round trip with Redis). Once such
// a write succeeded, the lease's Release and Extend do nothing. Other
// writes, and writes without a lease, ignore it.
func WithRelease() UpdateOption { return func(o *WriteOptions) { o.Release = true } }

// WithOwner sets the owner of a session that the write creates.
func WithOwner(owner string) UpdateOption { return func(o *WriteOptions) { o.Owner = owner } }

// WithAgent sets the agent of a session that the write creates.
func WithAgent(id string) UpdateOption { return func(o *WriteOptions) { o.Agent = id } }

// Charged marks a Claim (or ClaimStart) that starts a turn, whose writes
// add to the owner's bytes, brings of them with its message (its
// MessageWeight): when the owner's sessions and that message would pass
// Config.BytesPerOwner, the claim fails with a *QuotaError and takes no
// lease, on an existing session as on a new one. A claim that only
// finishes what a turn left (recovering it) is not charged, and no write
// of a turn is ever refused midway: a turn started under the quota may
// pass it by its answer, which the turn budgets bound.
func Charged(brings int64) UpdateOption {
	return func(o *WriteOptions) { o.Charged, o.Brings = true, brings }
}

// DropLastAnswer makes UpdateAppend drop the answer to the history's last
// user message (every message after it) before it appends, in the same
// atomic write; the history it returns is what is left, which ends with
// that user message. A regenerated answer replaces the old one this way
// instead of following it. A history without a user message loses
// nothing. Other writes ignore it.
func DropLastAnswer() UpdateOption { return func(o *WriteOptions) { o.DropAnswer = true } }

// DropLastTurn makes UpdateAppend drop the history's last user message
// and its answer before it appends, in the same atomic write; the history
// it returns is what is left. An edited message replaces the one it edits
// this way. A history without a user message loses nothing. Other writes
// ignore it; with DropLastAnswer too, the turn is dropped.
func DropLastTurn() UpdateOption { return func(o *WriteOptions) { o.DropTurn = true } }

// Drop applies DropLastAnswer and DropLastTurn to msgs; the result shares
// msgs' array.
func (o WriteOptions) Drop(msgs []chat.Message) []chat.Message {
	switch {
	case o.DropTurn:
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == chat.RoleUser {
				return msgs[:i]
			}
		}
	case o.DropAnswer:
		return DropAnswer(msgs)
	}
	return msgs
}

// Foreign reports whether s may not be used by a caller with these
// options: another owner, or bound to another agent (an unbound session is
// anyone's of its owner).
func (o WriteOptions) Foreign(s Session) bool {
	return s.Owner != o.Owner || s.Agent != "" && s.Agent != o.Agent
}

// New returns the empty session id that these options create at now.
func (o WriteOptions) New(id string, now time.Time) Session {
	return Session{ID: id, Owner: o.Owner, Agent: o.Agent, CreatedAt: now, LastAccessed: now}
}

// Config is shared by the stores.
type Config struct {
	// TTL is the sliding lifetime of an untouched session (default 24 h).
	TTL time.Duration
	// LockTTL is how long a lease lives without Extend (default 10 s).
	LockTTL time.Duration
	// LockWait is how long Claim waits for a busy session before ErrBusy
	// (default 0: refuse at once).
	LockWait time.Duration
	// WriteRetry is how long the Redis store resends a write whose round
	// trip failed after it may have reached Redis, to learn whether it was
	// applied (default 15 s; see Redis). Ignored by the memory store.
	WriteRetry time.Duration
	// MaxMessages bounds each session's history (default 1000). Whole
	// turns are dropped, oldest first, to stay under it (see
	// AppendMessages); turn budgets keep one turn well under it.
	MaxMessages int
	// MaxSessions and MaxBytes bound the memory store (defaults 100000
	// sessions and 1 GiB, as Weight counts them); beyond either, sessions
	// are evicted, least recently used first, from the owner whose use is
	// the largest share of the store (see Memory). Ignored by Redis.
	MaxSessions int
	MaxBytes    int64
	// SessionsPerOwner and BytesPerOwner are each owner's quotas (defaults
	// 10000 sessions and 256 MiB, as Weight counts them; negative: none):
	// a write that would create a session for an owner that holds as many
	// sessions, or as many bytes, fails with a *QuotaError and creates
	// nothing; so does a turn's claim (Charged) of an existing session
	// once the owner holds its bytes. A quota is never checked in the
	// middle of a turn. The anonymous owner "" (a server without API keys)
	// has no quota.
	SessionsPerOwner int
	BytesPerOwner    int64
	// Now is the clock (default time.Now); tests replace it.
	Now func() time.Time
}

// Defaults.
const (
	DefaultTTL         = 24 * time.Hour
	DefaultLockTTL     = 10 * time.Second
	DefaultMaxMessages = 1000
	DefaultMaxSessions = 100000
	DefaultWriteRetry  = 15 * time.Second
)

// The defaults of the quotas and of the memory store's bytes.
const (
	DefaultMaxBytes         = 1 << 30
	DefaultSessionsPerOwner = 10000
	DefaultBytesPerOwner    = 256 << 20
)

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.LockTTL <= 0 {
		c.LockTTL = DefaultLockTTL
	}
	if c.MaxMessages <= 0 {
		c.MaxMessages = DefaultMaxMessages
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.SessionsPerOwner == 0 {
		c.SessionsPerOwner = DefaultSessionsPerOwner
	}
	if c.BytesPerOwner == 0 {
		c.BytesPerOwner = DefaultBytesPerOwner
	}
	if c.WriteRetry <= 0 {
		c.WriteRetry = DefaultWriteRetry
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// QuotaError is the error of a write refused because it would have created
// a session for an owner at one of its quotas. It wraps ErrQuota.
type QuotaError struct {
	// Limit is the quota reached: QuotaSessions or QuotaBytes.
	Limit string
	// Max is the quota; Used is what the owner held when refused, and
	// Adding what the refused turn's message would have added (0 for a
	// new session).
	Max, Used, Adding int64
}

// The quotas of QuotaError.Limit.
const (
	QuotaSessions = "sessions" // Config.SessionsPerOwner
	QuotaBytes    = "bytes"    // Config.BytesPerOwner
)

func (e *QuotaError) Error() string {
	if e.Limit == QuotaBytes && e.Adding > 0 && e.Used < e.Max {
		return fmt.Sprintf("owner quota reached: its sessions hold %d bytes and the turn's message %d more, past its quota of %d (Config.BytesPerOwner)", e.Used, e.Adding, e.Max)
	}
	if e.Limit == QuotaBytes {
		return fmt.Sprintf("owner quota reached: its sessions hold %d bytes, its quota is %d (Config.BytesPerOwner)", e.Used, e.Max)
	}
	return fmt.Sprintf("owner quota reached: it holds %d sessions, its quota is %d (Config.SessionsPerOwner)", e.Used, e.Max)
}

func (e *QuotaError) Unwrap() error { return ErrQuota }

// Admit says whether owner, holding sessions sessions that weigh bytes,
// may create another one under c's quotas: nil, or the *QuotaError. A
// store calls it before a write creates a session (c with its defaults).
func (c Config) Admit(owner string, sessions int, bytes int64) error {
	switch {
	case owner == "":
		return nil
	case c.SessionsPerOwner > 0 && sessions >= c.SessionsPerOwner:
		return &QuotaError{Limit: QuotaSessions, Max: int64(c.SessionsPerOwner), Used: int64(sessions)}
	case c.BytesPerOwner > 0 && bytes >= c.BytesPerOwner:
		return &QuotaError{Limit: QuotaBytes, Max: c.BytesPerOwner, Used: bytes}
	}
	return nil
}

// AdmitTurn says whether owner, whose sessions weigh bytes, may start a
// turn (a Charged claim) whose message brings more under c's bytes
// quota: nil, or the *QuotaError.
func (c Config) AdmitTurn(owner string, bytes, brings int64) error {
	if owner != "" && c.BytesPerOwner > 0 && (bytes >= c.BytesPerOwner || bytes+brings > c.BytesPerOwner) {
		return &QuotaError{Limit: QuotaBytes, Max: c.BytesPerOwner, Used: bytes, Adding: brings}
	}
	return nil
}

// Weight is about how many bytes a session's state and history take when
// stored: close to the length of their JSON, counted without encoding
// them. The quotas and the memory store's MaxBytes count it.
func Weight(s Session, msgs []chat.Message) int64 {
	n := StateWeight(s)
	for _, m := range msgs {
		n += MessageWeight(m)
	}
	return n
}

// StateWeight is Weight of the session without its history.
func StateWeight(s Session) int64 {
	n := 320 + len(s.ID) + len(s.Owner) + len(s.Agent) + len(s.Turn) +
		len(s.State.ActiveStep) + len(s.State.LastUserMessage)
	for name := range s.State.RecentlyUsedTools.All() {
		n += len(name) + 3
	}
	for _, a := range s.Approvals {
		n += 160 + len(a.ID) + len(a.Reason) + len(a.Call.ID) + len(a.Call.Name) + len(a.Call.Arguments)
	}
	return int64(n)
}

// MessageWeight is Weight of one message.
func MessageWeight(m chat.Message) int64 {
	n := 48 + len(m.Role) + len(m.Content) + len(m.ToolCallID) + len(m.ToolName)
	for _, c := range m.ToolCalls {
		n += 48 + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	for _, a := range m.Attachments {
		n += 48 + len(a.Kind) + len(a.URL) + len(a.MediaType) + len(a.Filename) + len(a.Detail)
	}
	return int64(n)
}

// TTLFromEnv returns SESSION_TTL_SECONDS as a duration, or DefaultTTL when it
// is unset; a value that is not a positive integer is an error.
func TTLFromEnv() (time.Duration, error) {
	v := os.Getenv("SESSION_TTL_SECONDS")
	if v == "" {
		return DefaultTTL, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, errors.New("SESSION_TTL_SECONDS: want a positive number of seconds, got " + strconv.Quote(v))
	}
	return time.Duration(n) * time.Second, nil
}

// TrimTurns keeps msgs within max messages by dropping whole turns from the
// front: the kept history starts at a user message, so that no tool result
// is kept without its call and no turn without its question. When the
// newest turn alone is longer than max it is kept whole. It is the rule of
// AppendMessages and UpdateAppend for Config.MaxMessages: a store that
// keeps its history in Go applies it to the history after each append (the
// Redis store does the same in Lua). msgs is returned as is when it fits;
// otherwise the result is a new slice, so that the dropped messages do not
// stay reachable through it.
func TrimTurns(msgs []chat.Message, max int) []chat.Message {
	start := len(msgs) - max
	if start <= 0 {
		return msgs
	}
	cut := -1
	for i := start; i < len(msgs); i++ {
		if msgs[i].Role == chat.RoleUser {
			cut = i
			break
		}
	}
	for i := start - 1; cut < 0 && i >= 0; i-- {
		if msgs[i].Role == chat.RoleUser {
			cut = i
		}
	}
	if cut < 0 {
		cut = start
	}
	// A new array: the dropped messages must not stay reachable.
	return append([]chat.Message(nil), msgs[cut:]...)
}

// DropAnswer returns msgs without the messages after the last user
// message (DropLastAnswer); the Redis store does the same in Lua.
func DropAnswer(msgs []chat.Message) []chat.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == chat.RoleUser {
			return msgs[:i+1]
		}
	}
	return msgs
}

// NewID returns a new session ID (or lease token, or nonce): 128 random
// bits, hex-encoded.
func NewID() string { return newToken() }

// Key is the store's name for the session that owner calls id. Each owner
// has a keyspace of its own: a client-chosen ID names a different session
// under another API key, so that a session's existence cannot be learnt
// (or its ID squatted) from another key, and "not yours" and "absent" are
// the same lookup. The anonymous owner "" (a server without keys) keys
// sessions by their IDs; any other owner's keys are a digest of the owner,
// a dot and the ID (a dot never appears in an ID, so no two owners' keys
// meet).
func Key(owner, id string) string {
	if owner == "" {
		return id
	}
	d := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(d[:12]) + "." + id
}

// ValidKey reports whether key is a Key of a valid ID.
func ValidKey(key string) bool {
	if prefix, id, scoped := strings.Cut(key, "."); scoped {
		if len(prefix) != 24 || strings.Trim(prefix, "0123456789abcdef") != "" {
			return false
		}
		key = id
	}
	return ValidID(key)
}

// ValidID reports whether id is acceptable as a session ID: 8 to 128
// characters from letters, digits, '-' and '_'. Client-chosen IDs are
// allowed (AI SDK chat IDs, for example) but nothing that could break a
// key, a header or a log line.
func ValidID(id string) bool {
	if len(id) < 8 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ChildID is the ID of the session in which the session that owner calls
// parentID asks agent (another agent of the server; "" for a remote
// agent, whose conversation this ID names on its server), through its
// tool named tool (an agent tool): one conversation per parent session,
// tool and agent, so that a second call continues what the first began,
// under the same owner. It is a digest, so that it says nothing of the
// parent's ID to whoever sees it (a remote agent's contextId), and the
// parent's session can always find its children again.
func ChildID(owner, parentID, tool, agent string) string {
	d := sha256.Sum256([]byte(Key(owner, parentID) + "\x00" + tool + "\x00" + agent))
	return "child-" + hex.EncodeToString(d[:16])
}
