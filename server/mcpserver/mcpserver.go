// Package mcpserver serves the server's agents as MCP tools, so that an MCP
// client (Claude Desktop, Cursor, VS Code, another agent) can call them:
// over streamable HTTP at /mcp as a door.Door, and over stdio (Stdio, the
// `agentdock mcp serve` command). It is built on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), which negotiates the protocol
// revisions it speaks (2025-11-25 and 2026-07-28 among them) and protects a
// server on a loopback address from DNS rebinding.
//
// Each agent is a tool named by its ID: a message in, the answer out. The
// turn runs in the agent session the sessionId argument names, else one
// kept per MCP session (a new one per call when the client has no MCP
// session). While the turn runs, a client that sent a progress token gets
// progress notifications: each model call, tool call and result, and the
// answer's growth. A tool call held for approval is asked of the person
// through elicitation when the client supports it (from 2026-07-28 as an
// input-required result, which the client answers by calling again, and
// before it by elicitation/create); otherwise the result says what waits,
// and a call with the approvals argument answers it.
// API keys and owners apply: an MCP session belongs to the key that opened
// it, and sessions are in that key's keyspace.
//
// docs/mcp-server.md is the reference.
package mcpserver

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turns"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config configures the MCP edge.
type Config struct {
	// Name and Version are the server's implementation info (defaults
	// "agentdock", "1").
	Name, Version string
	// Stateless serves every HTTP request on its own, without MCP
	// sessions: no elicitation then (approvals come back in the result).
	Stateless bool
	// MaxSessions bounds the MCP sessions held at once (default
	// DefaultMaxSessions); SessionsPerOwner bounds those of one owner, an
	// API key, or a client address for the anonymous owner (default
	// DefaultSessionsPerOwner). An initialize past either is refused with
	// a JSON-RPC error (HTTP 503 or 429). Negative: no bound.
	MaxSessions, SessionsPerOwner int
	// SessionIdle is how long an MCP session without a request is kept
	// (default DefaultSessionIdle): a client that never ends its session
	// does not hold its place for long. Its agent session stays (for its
	// own TTL), and a new MCP session continues it by sessionId.
	SessionIdle time.Duration
	// Logger is the SDK's logger (default: none).
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultMaxSessions      = 10000
	DefaultSessionsPerOwner = 100
	DefaultSessionIdle      = 5 * time.Minute
)

// Edge serves the agents over MCP.
type Edge struct {
	cfg Config
	rt  *turns.Runtime
	// process names the agent sessions of a stdio server, whose one MCP
	// session has no ID: "" over HTTP.
	process string
}

// New returns the door, for server.Config.Doors.
func New(cfg Config) *Edge {
	if cfg.Name == "" {
		cfg.Name = "agentdock"
	}
	if cfg.Version == "" {
		cfg.Version = "1"
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.SessionsPerOwner == 0 {
		cfg.SessionsPerOwner = DefaultSessionsPerOwner
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	return &Edge{cfg: cfg}
}

// Routes implements door.Door: streamable HTTP at /mcp.
//
// One MCP server, its tools and their schemas built once, serves every
// session and every sessionless request: the agents are fixed for the
// server's life, and a call reads its owner from its context (ownerKey),
// which the SDK carries from the HTTP request that opened the session (or,
// sessionless, that made the call). An MCP session costs what the SDK
// keeps of its connection, no more.
func (e *Edge) Routes(rt *turns.Runtime) []door.Route {
	e.rt = rt
	srv := e.newServer()
	getServer := func(*http.Request) *mcp.Server { return srv }
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: e.cfg.Stateless, Logger: e.cfg.Logger, SessionTimeout: e.cfg.SessionIdle})
	// The SDK serves the sessionless revisions (2026-07-28 on) only
	// stateless, and the earlier ones with sessions: a request goes to the
	// handler of the revision its Mcp-Protocol-Version header names.
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: true, Logger: e.cfg.Logger})
	list := renderList(stateless, sessionless)
	sessions := newSessionTable(e.cfg.MaxSessions, e.cfg.SessionsPerOwner, func(yield func(string) bool) {
		for ss := range srv.Sessions() {
			if !yield(ss.ID()) {
				return
			}
		}
	})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner := door.Owner(r)
		r = r.WithContext(context.WithValue(r.Context(), ownerKey{}, owner))
		rw := &rpcErrors{ResponseWriter: w}
		defer rw.finish()
		if r.Header.Get("Mcp-Protocol-Version") >= sessionless || e.cfg.Stateless {
			if list.serve(w, r) {
				return
			}
			stateless.ServeHTTP(rw, r)
			return
		}
		// An MCP session belongs to the owner that opened it: another
		// owner's request for it is answered as for no session.
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			if o, ok := sessions.ownerOf(id); !ok || o != owner {
				writeError(w, http.StatusNotFound, nil, codeSessionNotFound, "session not found: it ended (idle for "+e.cfg.SessionIdle.String()+", or closed), or it is not this key's; initialize a new one")
				return
			}
			rw.id = peekID(r)
			stateful.ServeHTTP(rw, r)
			if r.Method == http.MethodDelete && rw.status == http.StatusNoContent {
				sessions.drop(id)
			}
			return
		}
		msg := peek(r)
		rw.id = msg.id
		if r.Method != http.MethodPost || !msg.initialize {
			stateful.ServeHTTP(rw, r)
			return
		}
		holder := owner
		if owner == "" {
			holder = "addr:" + clientAddr(r) // anonymous callers are counted by address
		}
		if err := sessions.reserve(holder); err != nil {
			status := http.StatusTooManyRequests
			if err.total {
				status = http.StatusServiceUnavailable
			}
			w.Header().Set("Retry-After", "60")
			writeError(w, status, msg.id, codeTooManySessions, err.message(e.cfg.SessionIdle))
			return
		}
		// The session is bound as its answer's head is written, before the
		// client can send its next request on it.
		bound := false
		rw.onHead = func(status int) {
			if id := rw.Header().Get("Mcp-Session-Id"); status == http.StatusOK && id != "" {
				bound = sessions.bind(holder, owner, id)
			}
		}
		stateful.ServeHTTP(rw, r)
		if !bound {
			sessions.release(holder)
		}
	})
	return []door.Route{{Method: "*", Path: "/mcp", Handler: h}}
}

// ownerKey carries a request's owner to the tool calls the SDK serves
// for it.
type ownerKey struct{}

// ownerOf is the owner of a tool call: the one of the HTTP request that
// opened its session (or made it, sessionless); "" over stdio.
func ownerOf(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

// sessionless is the first protocol revision without sessions over HTTP.
const sessionless = "2026-07-28"

// Stdio serves the agents of rt over stdin and stdout until ctx ends or
// the client closes its end, as the anonymous owner "" (the process's
// user).
func Stdio(ctx context.Context, rt *turns.Runtime, cfg Config) error {
	e := New(cfg)
	e.rt = rt
	e.process = rand.Text()
	return e.newServer().Run(ctx, &mcp.StdioTransport{})
}

// newServer is the MCP server of every session and request: a call's
// owner is read from its context.
func (e *Edge) newServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: e.cfg.Name, Version: e.cfg.Version}, &mcp.ServerOptions{
		Instructions: "Each tool is an agent with its own orchestration: send it a message, get its answer. Pass sessionId to continue a conversation.",
		// The SDK answers prompts/list, resources/list, resources/read and
		// resources/templates/list whether or not a server has any, so the
		// server declares the capabilities it answers for (MCP: a server
		// that supports prompts MUST declare them), though it has neither
		// prompts nor resources: its agents are its tools. The agents are
		// fixed for the server's life, so the tool list never changes and
		// no list_changed notification is promised.
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{}, Prompts: &mcp.PromptCapabilities{}, Resources: &mcp.ResourceCapabilities{}},
		Logger:       e.cfg.Logger,
	})
	in, out := schemas()
	for _, n := range e.rt.Agents().List() {
		t := n.Template()
		desc := strings.TrimSpace(t.Description)
		if desc == "" {
			desc = t.Name
		}
		mcp.AddTool(srv, &mcp.Tool{Name: n.ID(), Title: t.Name, Description: desc + " (an agent: send it a message, get its answer)", InputSchema: in, OutputSchema: out},
			func(ctx context.Context, req *mcp.CallToolRequest, in Input) (*mcp.CallToolResult, Output, error) {
				return e.call(ctx, req, ownerOf(ctx), n.ID(), in)
			})
	}
	return srv
}

// schemas are the JSON of Input's and Output's schemas, every tool's,
// inferred once and given to the SDK as JSON: a tools/list then copies
// them rather than marshalling a jsonschema.Schema per tool per request.
var schemas = sync.OnceValues(func() (in, out json.RawMessage) {
	marshal := func(s *jsonschema.Schema, err error) json.RawMessage {
		if err != nil {
			panic(fmt.Sprintf("mcpserver: the schema of a tool's %v", err)) // fixed types: cannot fail
		}
		raw, err := json.Marshal(s)
		if err != nil {
			panic(fmt.Sprintf("mcpserver: the schema of a tool: %v", err))
		}
		return raw
	}
	return marshal(jsonschema.For[Input](nil)), marshal(jsonschema.For[Output](nil))
})

// Input is a tool's arguments.
type Input struct {
	Message   string   `json:"message,omitempty" jsonschema:"the message to the agent (required unless approvals answers held calls)"`
	SessionID string   `json:"sessionId,omitempty" jsonschema:"the conversation to continue (8 to 128 letters, digits, '-' or '_'); default: one per MCP session"`
	Approvals []Answer `json:"approvals,omitempty" jsonschema:"answers to the tool calls the agent holds for approval (the pendingApprovals of the last result)"`
}

// Answer answers one held call.
type Answer struct {
	ID       string `json:"id" jsonschema:"the approval's id"`
	Approved bool   `json:"approved" jsonschema:"whether the call may run"`
	Reason   string `json:"reason,omitempty" jsonschema:"told to the model with a denial"`
}

// Output is a tool's structured result.
type Output struct {
	Answer       string `json:"answer"`
	SessionID    string `json:"sessionId"`
	FinishReason string `json:"finishReason"`
	// PendingApprovals are the calls that wait for approval when the turn
	// ended for them.
	PendingApprovals []Pending `json:"pendingApprovals,omitempty"`
}

// Pending is a call held for approval.
type Pending struct {
	ID       string `json:"id"`
	ToolName string `json:"toolName"`
	// Arguments are the call's arguments, a JSON object.
	Arguments any `json:"arguments"`
}

// sessionFor is the agent session of a call: its sessionId, else the one
// of the input-required result it answers (st), else the MCP session's
// (or the stdio process's), else a new one.
func (e *Edge) sessionFor(req *mcp.CallToolRequest, in Input, st requestState) (string, error) {
	if in.SessionID != "" {
		if !session.ValidID(in.SessionID) {
			return "", fmt.Errorf("sessionId %q is not a valid session ID: want 8 to 128 letters, digits, '-' or '_'", in.SessionID)
		}
		return in.SessionID, nil
	}
	if st.SessionID != "" {
		return st.SessionID, nil
	}
	if id := cmp.Or(req.Session.ID(), e.process); id != "" {
		d := sha256.Sum256([]byte(id))
		return "mcp-" + hex.EncodeToString(d[:16]), nil
	}
	return session.NewID(), nil
}

// call runs one tool call: the turn, and the turns its approvals lead to.
func (e *Edge) call(ctx context.Context, req *mcp.CallToolRequest, owner, agentID string, in Input) (*mcp.CallToolResult, Output, error) {
	// Arguments the tool cannot use are a tool execution error, not a
	// protocol error, so that the model that called it can correct them
	// (MCP 2025-11-25 on, SEP-1303).
	st, err := stateOf(req)
	if err != nil {
		return invalid(err.Error()), Output{}, nil
	}
	sid, err := e.sessionFor(req, in, st)
	if err != nil {
		return invalid(err.Error()), Output{}, nil
	}
	var turn *turns.Turn
	switch {
	case len(req.Params.InputResponses) > 0:
		// The person's answers to the approvals the last result asked
		// for; the call's other arguments are the first call's again.
		list, bad := answersTo(req.Params.InputResponses)
		if bad != nil {
			return invalid(bad.Error()), Output{SessionID: sid}, nil
		}
		turn, err = e.rt.Start(ctx, turns.Input{Input: agent.Input{Answers: list, Owner: owner}, Agent: agentID, Session: sid})
	case len(in.Approvals) > 0:
		list := make([]agent.ApprovalAnswer, len(in.Approvals))
		for i, a := range in.Approvals {
			list[i] = agent.ApprovalAnswer{ID: a.ID, Approved: a.Approved, Reason: a.Reason}
		}
		turn, err = e.rt.Start(ctx, turns.Input{Input: agent.Input{Answers: list, Owner: owner}, Agent: agentID, Session: sid})
	case strings.TrimSpace(in.Message) == "":
		return invalid("message is required (or approvals, to answer held calls)"), Output{}, nil
	default:
		turn, err = e.rt.Start(ctx, turns.Input{Input: agent.Input{Text: in.Message, Owner: owner}, Agent: agentID, Session: sid})
	}
	if err != nil {
		return errorResult(err), Output{SessionID: sid}, nil
	}
	p := &progress{ctx: ctx, req: req}
	out := Output{SessionID: sid}
	var text chat.AnswerText
	text.WriteString(st.Answer) // what the calls this one answers gave
	for {
		r := e.follow(ctx, turn, p, &text)
		out.FinishReason = r.finish
		if r.err != nil {
			res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: r.err.Error()}}}
			out.Answer = text.String()
			return res, out, nil
		}
		if r.finish != chat.FinishApproval || len(r.pending) == 0 {
			break
		}
		if answersInputRequests(req) {
			return inputRequired(r.pending, requestState{SessionID: sid, Answer: text.String()}), Output{}, nil
		}
		answers, asked := e.ask(ctx, req, r.pending)
		if !asked {
			out.PendingApprovals = r.pending
			break
		}
		if turn, err = e.rt.Start(ctx, turns.Input{Input: agent.Input{Answers: answers, Owner: owner}, Agent: agentID, Session: sid}); err != nil {
			return errorResult(err), out, nil
		}
	}
	out.Answer = text.String()
	msg := out.Answer
	if len(out.PendingApprovals) > 0 {
		var names []string
		for _, a := range out.PendingApprovals {
			names = append(names, fmt.Sprintf("%s %s (approval id %s)", a.ToolName, a.Arguments, a.ID))
		}
		msg = strings.TrimSpace(msg + "\n\nWaiting for approval: " + strings.Join(names, "; ") +
			". Call this tool again with sessionId " + sid + " and approvals [{\"id\": ..., \"approved\": true|false}] to go on.")
	}
	if msg == "" {
		msg = "(the agent gave no text; finish reason " + out.FinishReason + ")"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, out, nil
}

// invalid is the result of a call whose arguments say what is wrong.
func invalid(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "invalid arguments: " + msg}}}
}

func errorResult(err error) *mcp.CallToolResult {
	p := turns.Describe(err)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: p.Code + ": " + p.Message}}}
}

// followed is how a turn ended.
type followed struct {
	finish  string
	pending []Pending
	err     error
}

// follow reads a turn to its end, writing its answer to text and its
// progress to the client. A client that cancels the call stops the turn.
func (e *Edge) follow(ctx context.Context, turn *turns.Turn, p *progress, text *chat.AnswerText) followed {
	var r followed
	var failure *chat.Error
	for ev, err := range turn.Events(ctx, 0) {
		if err != nil {
			if ctx.Err() != nil {
				turn.Stop(context.WithoutCancel(ctx))
			}
			r.err = err
			return r
		}
		switch ev.Kind {
		case chat.KindTextDelta:
			text.Add(ev)
			p.text(len(ev.Text))
		case chat.KindStepStart:
			text.Add(ev)
			p.note("the model is answering")
		case chat.KindRestart:
			text.Add(ev)
			p.note("another server took the turn over")
		case chat.KindToolCall:
			p.note("calling " + ev.ToolCall.Name)
		case chat.KindToolResult:
			p.note(ev.ToolResult.Name + " answered")
		case chat.KindOrchestration:
			if ev.Orchestration.Transition {
				p.note("step " + ev.Orchestration.ActiveStep)
			}
		case chat.KindApproval:
			call, who := ev.ToolCall, ""
			if c := ev.Approval.Call; c != nil {
				call, who = c, ev.Approval.Agent+": "
			}
			args := call.Arguments
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			r.pending = append(r.pending, Pending{ID: ev.Approval.ID, ToolName: call.Name, Arguments: args})
			p.note(who + call.Name + " waits for approval")
		case chat.KindToolProgress:
			p.agent(ev.Progress)
		case chat.KindError:
			failure = ev.Error
		case chat.KindDone:
			r.finish = ev.FinishReason
		}
	}
	if failure != nil {
		r.err = failure
	}
	return r
}

// answersInputRequests reports whether the client of req takes
// input-required results and can ask its user (MCP 2026-07-28 on, with
// elicitation); before 2026-07-28 a server asks by elicitation/create
// (ask).
func answersInputRequests(req *mcp.CallToolRequest) bool {
	ip := req.Session.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= sessionless && canElicit(req)
}

// canElicit reports whether the client of req declared elicitation.
func canElicit(req *mcp.CallToolRequest) bool {
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil
}

// requestState is what an input-required result asks the client to send
// back with its answers: the session, and the answer so far, which the
// result cannot carry. It names a session of the caller's owner only, as
// the sessionId argument does.
type requestState struct {
	SessionID string `json:"sessionId"`
	Answer    string `json:"answer,omitempty"`
}

// stateOf reads the requestState of req, if it has one.
func stateOf(req *mcp.CallToolRequest) (requestState, error) {
	var st requestState
	if req.Params.RequestState == "" {
		return st, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(req.Params.RequestState)
	if err != nil || json.Unmarshal(raw, &st) != nil || !session.ValidID(st.SessionID) {
		return requestState{}, errors.New("requestState is not one this server gave: call again with the requestState of the last result, or without it")
	}
	return st, nil
}

// inputRequired asks the client to ask its user about each held call,
// keyed by the approval's ID, and to call again with the answers and st.
func inputRequired(pending []Pending, st requestState) *mcp.CallToolResult {
	questions := make(mcp.InputRequestMap, len(pending))
	for _, p := range pending {
		questions[p.ID] = question(p)
	}
	raw, _ := json.Marshal(st) // strings only: cannot fail
	return &mcp.CallToolResult{InputRequests: questions, RequestState: base64.RawURLEncoding.EncodeToString(raw)}
}

// answersTo reads the answers of a call that answers an input-required
// result.
func answersTo(responses mcp.InputResponseMap) ([]agent.ApprovalAnswer, error) {
	list := make([]agent.ApprovalAnswer, 0, len(responses))
	for id, r := range responses {
		res, ok := r.(*mcp.ElicitResult)
		if !ok {
			return nil, fmt.Errorf("inputResponses[%q] is a %T; want the elicitation result the question asked for", id, r)
		}
		list = append(list, answerOf(id, res))
	}
	return list, nil
}

// question is the form that asks the person about a held call.
func question(p Pending) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: fmt.Sprintf("The agent wants to call %s with %s. Approve it?", p.ToolName, p.Arguments),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approved": map[string]any{"type": "boolean", "title": "Approve", "description": "let the call run"},
				"reason":   map[string]any{"type": "string", "title": "Reason", "description": "told to the model if you deny"},
			},
			"required": []string{"approved"},
		},
	}
}

// answerOf is the person's answer to the question about approval id.
func answerOf(id string, res *mcp.ElicitResult) agent.ApprovalAnswer {
	ans := agent.ApprovalAnswer{ID: id}
	if res.Action == "accept" {
		ans.Approved, _ = res.Content["approved"].(bool)
		ans.Reason, _ = res.Content["reason"].(string)
	} else {
		ans.Reason = "the user " + res.Action + "d the request"
	}
	return ans
}

// ask asks the person to approve each held call through
// elicitation/create (before 2026-07-28): false when the client cannot
// be asked.
func (e *Edge) ask(ctx context.Context, req *mcp.CallToolRequest, pending []Pending) ([]agent.ApprovalAnswer, bool) {
	if !canElicit(req) {
		return nil, false
	}
	var out []agent.ApprovalAnswer
	for _, a := range pending {
		res, err := req.Session.Elicit(ctx, question(a))
		if err != nil {
			// Refused, or not possible here (a stateless request): the
			// result says what waits instead.
			return nil, false
		}
		out = append(out, answerOf(a.ID, res))
	}
	return out, true
}

// progress sends the progress notifications of a call whose client asked
// for them (a progress token).
type progress struct {
	ctx   context.Context
	req   *mcp.CallToolRequest
	n     float64
	chars int
	sent  int
	// asked are the calls whose agent's answering was noted.
	asked map[string]bool
}

func (p *progress) note(msg string) {
	tok := p.req.Params.GetProgressToken()
	if tok == nil {
		return
	}
	p.n++
	_ = p.req.Session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p.n, Message: msg})
}

// agent notes the work of an agent a tool call asked: its tool calls,
// and that it answers.
func (p *progress) agent(pr *chat.Progress) {
	if pr == nil || pr.Event == nil {
		return
	}
	switch ev := pr.Event; ev.Kind {
	case chat.KindToolCall:
		p.note(pr.Agent + ": calling " + ev.ToolCall.Name)
	case chat.KindTextDelta:
		if !p.asked[pr.CallID] {
			if p.asked == nil {
				p.asked = map[string]bool{}
			}
			p.asked[pr.CallID] = true
			p.note(pr.Agent + " is answering")
		}
	}
}

// text notes the answer's growth, once per 200 bytes.
func (p *progress) text(n int) {
	p.chars += n
	if p.chars-p.sent >= 200 || p.sent == 0 {
		p.sent = p.chars
		p.note(fmt.Sprintf("answering (%d bytes)", p.chars))
	}
}
