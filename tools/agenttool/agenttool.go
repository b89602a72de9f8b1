// Package agenttool makes agents tools of other agents: a template's
// "agents" entries (template.AgentTool), each a tool the model sees under
// its name, which asks another agent of the server or a remote A2A agent
// a question and answers with what the agent answered.
//
// The tool takes {"message": string}. Its result is the agent's final
// answer (its text, and a remote agent's structured data). To the
// orchestration it is a tool like any other: offered, refused,
// sequenced, held for approval, budgeted and recorded by the turn that
// calls it.
//
// A local agent (AgentTool.Agent) answers in a turn of its own, in a
// session of its own (session.ChildID of the caller's session and the
// tool, so that a second call goes on with the same conversation),
// through a Runner: the server's turn runtime, so that the child turn is
// durable, stoppable and followed from any replica like any turn. The
// child's events stream to the caller's client as the call's progress
// (chat.KindToolProgress); the call's context ending (the caller stopped)
// stops the child; the child's token usage is added to the caller's; and
// the approvals the child waits for hold the caller's call
// (chat.ToolResult.Pending), so that the caller's client answers them and
// the call goes on with the answers (tools.Call.Decisions). A call
// starts its child turn under an idempotency key made of the caller's
// turn and call, so that a caller taken over by another replica (its
// call run again: agent tools are idempotent) follows the child turn it
// started instead of starting another.
//
// A remote agent (AgentTool.A2A) is asked over A2A v1.0's JSON-RPC
// binding: its card is read and cached, its endpoint must be on the
// card's host (a redirect or an endpoint elsewhere is not followed), the
// answer streams when the card says the agent streams, the contextId is
// the child session's ID (a second call continues the same remote
// conversation), and its tool calls, results and input-required
// approvals are the caller's progress and approvals as for a local agent.
//
// Every call carries its depth in agent calls (WithDepth; over A2A the
// DepthHeader), and a call that would go deeper than Config.MaxDepth is
// refused: a circle of agents across servers ends there. Circles among
// one server's agents are found when the templates load
// (template.CheckAgents).
package agenttool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// Defaults of Config.
const (
	// DefaultMaxDepth is how deep agent calls may nest (AGENT_CALL_DEPTH).
	DefaultMaxDepth = 4
	// DefaultTimeout bounds one agent call (AGENT_CALL_TIMEOUT): the
	// default turn timeout, since the call is a turn.
	DefaultTimeout = 10 * time.Minute
	// MaxMessageBytes bounds the message a call sends.
	MaxMessageBytes = 32 << 10
)

// stopWait bounds how long a call whose context ended waits for the turn
// it stopped to end (and save its partial answer) before it returns.
const stopWait = 10 * time.Second

// Config is what the agent tools of a server share.
type Config struct {
	// Runner runs the turns of local agents. Nil: a template that names a
	// local agent is refused by New.
	Runner Runner
	// Agents describes the local agents by ID: their templates give a
	// tool without a description its agent's. Nil: none is known.
	Agents func(id string) (*template.Template, bool)
	// MaxDepth bounds how deep agent calls nest, counting every hop,
	// local or remote (default DefaultMaxDepth).
	MaxDepth int
	// Timeout bounds one call (default DefaultTimeout); the asked turn is
	// stopped past it.
	Timeout time.Duration
	// Client makes the remote calls; default: one that follows no
	// redirect and bounds dialing, TLS and reading a card.
	Client *http.Client
	// CardTTL is how long a remote agent's card is kept (default 5 min).
	CardTTL time.Duration
	// LookupEnv reads the ${VAR}s of a2a and headers (default
	// os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// Logger records failed remote calls; never the messages. Default
	// slog.Default().
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.MaxDepth <= 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.CardTTL <= 0 {
		c.CardTTL = 5 * time.Minute
	}
	if c.LookupEnv == nil {
		c.LookupEnv = os.LookupEnv
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Client == nil {
		c.Client = NewClient()
	}
}

// NewClient is the default Config.Client: it follows no redirect (an
// agent's URL is the operator's choice, not the agent's), and bounds
// dialing and the TLS handshake; a call's own deadline bounds the rest.
func NewClient() *http.Client {
	return &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			TLSHandshakeTimeout: 10 * time.Second,
			IdleConnTimeout:     90 * time.Second,
			MaxIdleConnsPerHost: 16,
		},
	}
}

// Toolbox is the agent tools of one template: a tools.Toolbox (join it
// with the agent's other tools: tools.Join). Every tool is idempotent: a
// call run again follows what its first run started.
type Toolbox struct {
	cfg   Config
	names []string
	tools map[string]*tool
}

// tool is one agent tool.
type tool struct {
	name string
	spec chat.ToolSpec
	// agent is a local agent's ID; remote is a remote agent's client.
	agent  string
	remote *remote
	cfg    *Config
}

// New returns the agent tools of t (none: an empty Toolbox). A local
// agent needs cfg.Runner; a2a URLs and headers are expanded from the
// environment, and a ${VAR} that is not set is an error naming the
// field.
func New(cfg Config, t *template.Template) (*Toolbox, error) {
	cfg.defaults()
	tb := &Toolbox{cfg: cfg, tools: map[string]*tool{}}
	var errs []error
	for _, name := range t.AgentTools() {
		a := t.Agents[name]
		at := "agents." + name
		tl := &tool{name: name, cfg: &tb.cfg}
		desc := a.Description
		switch {
		case a.Local():
			if cfg.Runner == nil {
				errs = append(errs, fmt.Errorf("%s: no runner for local agents (agenttool.Config.Runner)", at))
				continue
			}
			tl.agent = a.Agent
			if desc == "" && cfg.Agents != nil {
				if asked, ok := cfg.Agents(a.Agent); ok {
					desc = strings.TrimSpace(asked.Name + ": " + asked.Description)
				}
			}
			if desc == "" {
				desc = fmt.Sprintf("Ask the agent %s.", a.Agent)
			}
		default:
			r, err := newRemote(&tb.cfg, name, a)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", at, err))
				continue
			}
			tl.remote = r
			if desc == "" {
				desc = fmt.Sprintf("Ask the remote agent at %s (an A2A agent).", r.shown())
			}
		}
		tl.spec = chat.ToolSpec{Name: name, Description: desc, Parameters: parameters(tl.who())}
		tb.tools[name] = tl
		tb.names = append(tb.names, name)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return tb, nil
}

// parameters is every agent tool's schema.
func parameters(who string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"message": map[string]any{
				"type":        "string",
				"description": "What to ask " + who + ": the whole question or task, with what it needs to know. It does not see this conversation, only this message and what it was asked before.",
			},
		},
		"required":             []string{"message"},
		"additionalProperties": false,
	})
	return b
}

// who names the agent a tool asks, for people and models.
func (t *tool) who() string {
	if t.agent != "" {
		return t.agent
	}
	return "the remote agent"
}

// Names lists the tools, sorted.
func (tb *Toolbox) Names() []string { return slices.Clone(tb.names) }

// Specs describes the named tools in the order given, skipping the others.
func (tb *Toolbox) Specs(names []string) []chat.ToolSpec {
	var out []chat.ToolSpec
	for i, n := range names {
		if t, ok := tb.tools[n]; ok && !slices.Contains(names[:i], n) {
			s := t.spec
			s.Parameters = slices.Clone(s.Parameters)
			out = append(out, s)
		}
	}
	return out
}

// Idempotent implements tools.Idempotency: a call run again (its turn
// taken over by another replica) follows the turn its first run started.
func (tb *Toolbox) Idempotent(name string) bool {
	_, ok := tb.tools[name]
	return ok
}

// Execute runs one call: every failure is an error result the model can
// read (tools.Toolbox's contract).
func (tb *Toolbox) Execute(ctx context.Context, call chat.ToolCall) (res chat.ToolResult) {
	t, ok := tb.tools[call.Name]
	if !ok {
		return errorResult(call, fmt.Sprintf("unknown tool %q", clip(call.Name, 64)), true)
	}
	message, err := argument(call.Arguments)
	if err != nil {
		return errorResult(call, fmt.Sprintf("invalid arguments for %q: %s", call.Name, err), true)
	}
	defer func() {
		if p := recover(); p != nil {
			tb.cfg.Logger.ErrorContext(ctx, "agent tool panicked", "tool", call.Name, "stack", string(debug.Stack()))
			res = errorResult(call, fmt.Sprintf("tool %q failed with an internal error", call.Name), false)
		}
	}()
	c, _ := tools.CallFrom(ctx)
	depth := Depth(ctx) + 1
	if depth > tb.cfg.MaxDepth {
		return errorResult(call, fmt.Sprintf("this call would be agent call %d in a chain of agents asking agents, and at most %d may nest (AGENT_CALL_DEPTH): answer with what you have", depth, tb.cfg.MaxDepth), false)
	}
	if c.SessionID == "" || c.ToolCallID == "" {
		return errorResult(call, "an agent tool runs in a turn of a session", false)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, tb.cfg.Timeout, errTimeout)
	defer cancel()
	ctx = WithDepth(ctx, depth)
	var a answer
	if t.remote != nil {
		a = t.remote.ask(ctx, c, message)
	} else {
		a = t.askLocal(ctx, c, message)
	}
	return a.result(call, t, tools.ResultLimit(ctx))
}

// errTimeout is the cause of a call that ran past Config.Timeout.
var errTimeout = errors.New("agent call timeout")

// argument reads the one argument, the message.
func argument(raw json.RawMessage) (string, error) {
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return "", errors.New(`the arguments must be an object {"message": "..."}`)
	}
	for k := range args {
		if k != "message" {
			return "", fmt.Errorf("unknown field %q; the only field is \"message\"", clip(k, 64))
		}
	}
	raw, ok := args["message"]
	if !ok {
		return "", errors.New(`"message" is required: what to ask`)
	}
	var m string
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", errors.New(`"message" must be a string`)
	}
	switch {
	case strings.TrimSpace(m) == "":
		return "", errors.New(`"message" is required: what to ask`)
	case len(m) > MaxMessageBytes:
		return "", fmt.Errorf(`"message" is %d bytes; the limit is %d`, len(m), MaxMessageBytes)
	}
	return m, nil
}

// requestKey is the idempotency key of the child turn a call starts: its
// caller's turn and call, so that the call run again by a replica that
// took the caller over finds the same child turn.
func requestKey(c tools.Call, decisions bool) string {
	kind := "ask"
	if decisions {
		kind = "answer"
	}
	d := sha256.Sum256([]byte(kind + "\x00" + c.SessionID + "\x00" + c.TurnID + "\x00" + c.ToolCallID))
	return "agent-call-" + hex.EncodeToString(d[:16])
}

// askLocal asks a local agent: a turn in the child session, or the turn
// that carries out the caller's decisions on the child's approvals.
func (t *tool) askLocal(ctx context.Context, c tools.Call, message string) answer {
	child := session.ChildID(c.Owner, c.SessionID, t.name, t.agent)
	req := Request{Owner: c.Owner, Agent: t.agent, Session: child, Message: message, Key: requestKey(c, c.Decisions != nil)}
	var (
		turn Turn
		err  error
	)
	if c.Decisions != nil {
		turn, err = t.cfg.Runner.Answer(ctx, req, c.Decisions)
	} else {
		turn, err = t.cfg.Runner.Start(ctx, req)
	}
	if err != nil {
		return answer{agent: t.agent, failure: fmt.Sprintf("%s could not start: %s", t.agent, err)}
	}
	return follow(ctx, t.agent, turn.Events, turn.Stop)
}

// answer is what a call's agent did: its answer, what it spent, the
// approvals it waits for, or why it failed.
type answer struct {
	agent   string
	text    chat.AnswerText
	data    []json.RawMessage
	usage   chat.Usage
	pending []chat.Approval
	finish  string
	failure string
	// stopped: the call's context ended (its caller stopped, or the
	// call's timeout), and the agent's turn was stopped.
	stopped error
}

// follow reads an agent's turn to its end, streaming its work as the
// call's progress, and stops it (stop) when ctx ends, waiting a while for
// its end: events gets a context that ends only when follow returns, so
// that the stopped turn's last events still come.
func follow(ctx context.Context, agent string, events func(context.Context) iter.Seq2[chat.Event, error], stop func()) answer {
	a := answer{agent: agent}
	type item struct {
		ev  chat.Event
		err error
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	items := make(chan item)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for ev, err := range events(rctx) {
			select {
			case items <- item{ev, err}:
			case <-rctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var deadline <-chan time.Time
	ctxDone := ctx.Done()
	for {
		select {
		case <-ctxDone:
			ctxDone = nil
			a.stopped = context.Cause(ctx)
			stop()
			deadline = time.After(stopWait)
		case <-deadline:
			a.failure = fmt.Sprintf("%s did not stop within %s", agent, stopWait)
			return a
		case <-ended:
			if a.finish == "" && a.failure == "" {
				a.failure = agent + "'s turn ended without finishing"
			}
			return a
		case it := <-items:
			if it.err != nil {
				a.failure = fmt.Sprintf("%s: %s", agent, it.err)
				return a
			}
			if a.add(ctx, it.ev) {
				return a
			}
		}
	}
}

// add folds one event of the agent's turn into a, and reports it as the
// call's progress; true at the turn's end.
func (a *answer) add(ctx context.Context, ev chat.Event) bool {
	switch ev.Kind {
	case chat.KindTextDelta, chat.KindStepStart, chat.KindRestart:
		a.text.Add(ev)
	case chat.KindUsage:
		if ev.Final && ev.Usage != nil {
			a.usage = *ev.Usage
		}
	case chat.KindApproval:
		if ev.Approval != nil {
			ap := *ev.Approval
			if ap.Agent == "" {
				ap.Agent, ap.Call = a.agent, ev.ToolCall
			}
			a.pending = append(a.pending, ap)
		}
	case chat.KindError:
		if ev.Error != nil {
			a.failure = fmt.Sprintf("%s failed: %s", a.agent, ev.Error.Message)
		}
	case chat.KindDone:
		a.finish = ev.FinishReason
		return true
	}
	if forwarded(ev.Kind) {
		e := ev
		e.Seq = 0 // the agent's stream's numbering, not the caller's
		tools.Report(ctx, chat.Progress{Agent: a.agent, Event: &e})
	}
	return false
}

// forwarded reports whether an event of an asked agent's turn is shown to
// the caller's client: what it says and does, not its bookkeeping.
func forwarded(k chat.Kind) bool {
	switch k {
	case chat.KindStepStart, chat.KindTextDelta, chat.KindToolCall, chat.KindToolResult, chat.KindOrchestration, chat.KindApproval,
		chat.KindWarning, chat.KindLimit, chat.KindError, chat.KindRestart, chat.KindToolProgress, chat.KindAbort:
		return true
	}
	return false
}

// result is the call's result: the agent's answer, the approvals it waits
// for, or why it has none. limit bounds the content (the turn's
// MaxToolResultBytes).
func (a answer) result(call chat.ToolCall, t *tool, limit int) chat.ToolResult {
	res := chat.ToolResult{CallID: call.ID, Name: call.Name, Type: "agent_answer"}
	if !a.usage.IsZero() {
		u := a.usage
		res.Usage = &u
	}
	text := a.text.String()
	switch {
	case a.stopped != nil:
		why := "the call was stopped"
		if errors.Is(a.stopped, errTimeout) {
			why = fmt.Sprintf("the call took longer than %s (AGENT_CALL_TIMEOUT)", t.cfg.Timeout)
		}
		res.Content, res.IsError, res.Type = fmt.Sprintf("%s was stopped: %s.", a.agent, why), true, tools.ErrorType
		if text != "" {
			res.Content += " What it said so far:\n\n" + text
		}
	case a.failure != "":
		res.Content, res.IsError, res.Type = a.failure, true, tools.ErrorType
		if text != "" {
			res.Content += "\n\nWhat it said before:\n\n" + text
		}
	case a.finish == chat.FinishApproval && len(a.pending) > 0:
		res.Pending = a.pending
		res.Content = text
	case a.finish == chat.FinishStopped:
		res.Content, res.IsError, res.Type = a.agent+"'s turn was stopped before it finished.", true, tools.ErrorType
		if text != "" {
			res.Content += " What it said so far:\n\n" + text
		}
	default:
		res.Content = text
		for _, d := range a.data {
			res.Content += "\n\n```json\n" + string(d) + "\n```"
		}
		if strings.TrimSpace(res.Content) == "" {
			res.Content = fmt.Sprintf("(%s gave no answer)", a.agent)
		}
		switch a.finish {
		case chat.FinishLength, chat.FinishMaxSteps, chat.FinishTimeout:
			res.Content += fmt.Sprintf("\n\n[%s's answer was cut short: it reached a budget of its turn (%s)]", a.agent, a.finish)
		}
	}
	res.Content = tools.LimitResult(res.Content, limit)
	if res.IsError {
		res.Content = tools.HidePaths(res.Content)
	}
	return res
}

func errorResult(call chat.ToolCall, msg string, notRun bool) chat.ToolResult {
	return chat.ToolResult{CallID: call.ID, Name: call.Name, Content: msg, Type: tools.ErrorType, IsError: true, NotRun: notRun}
}

// clip bounds a string echoed in a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

type depthKey struct{}

// DepthHeader carries a request's depth in agent calls between servers:
// the A2A requests of remote agent tools send it, and the A2A edge reads
// it (and refuses a request past its limit).
const DepthHeader = "X-Agent-Call-Depth"

// WithDepth returns ctx carrying the depth of the turn it runs, in agent
// calls: 0 for a person's turn, 1 for the turn of an agent it asked, and
// so on. A child turn's context carries its depth through the runner.
func WithDepth(ctx context.Context, depth int) context.Context {
	return context.WithValue(ctx, depthKey{}, depth)
}

// Depth is the depth ctx carries (WithDepth); 0 when none.
func Depth(ctx context.Context) int {
	d, _ := ctx.Value(depthKey{}).(int)
	return d
}

// ParseDepth reads a DepthHeader: a whole number, 0 when absent.
func ParseDepth(v string) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	n := 0
	for _, c := range []byte(v) {
		if c < '0' || c > '9' || n > 1000 {
			return 0, fmt.Errorf("%s %q: want a whole number", DepthHeader, clip(v, 20))
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}
