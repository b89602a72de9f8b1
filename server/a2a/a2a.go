// Package a2a serves the server's agents over the Agent2Agent protocol
// (A2A v1.0), in its JSON-RPC and HTTP+JSON bindings, as a door.Door:
//
//	GET  /.well-known/agent-card.json          the server's card: each agent a skill
//	POST /a2a                                  JSON-RPC; message.metadata.agent picks the agent
//	POST /a2a/{agent}                          JSON-RPC for one agent
//	GET  /a2a/{agent}/.well-known/agent-card.json   the agent's card: its steps as skills
//	     /a2a/{agent}/message:send, message:stream, tasks/{id}, tasks/{id}:cancel,
//	     tasks/{id}:subscribe, tasks/{id}/pushNotificationConfigs[/{configId}]   HTTP+JSON
//
// An A2A task is a session turn: the message's contextId names the session
// (a new one when absent), and the task lives as long as the turns it
// takes. A tool call held for approval leaves the task input-required; a
// message on the task whose data part answers the approvals continues it
// with the turn that carries them out. tasks/cancel stops the task's turn
// on whichever replica runs it, and a subscription follows the turn from
// any replica (turns.Runtime.Turn). Tasks are kept in Config.Tasks (the
// Responses API's store: on Redis, every replica's), under the caller's
// owner: another API key's task is not found.
//
// docs/a2a.md is the reference.
package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/internal/netguard"
	"github.com/agentdock-go/agentdock/responses"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/tools/agenttool"
	"github.com/agentdock-go/agentdock/turns"
)

// ProtocolVersion is the version of A2A served.
const ProtocolVersion = "1.0"

// Config configures the A2A edge.
type Config struct {
	// Tasks keeps the tasks for every replica; use the server's
	// Config.Responses (on Redis with replicas). Nil: a store of this
	// process.
	Tasks responses.Store
	// Index lists each owner's tasks for ListTasks; with replicas, share
	// one (package a2a/redistasks). Nil: an index of this process.
	Index Index
	// PushHosts are the hosts ("host" or "host:port"; a bare host allows
	// its scheme's default port only) that push notification webhooks
	// may be on. Empty: push notifications are not offered (the card says
	// so, and configs are refused).
	PushHosts []string
	// PushHostsOf, when set, gives an owner hosts of its own (its API
	// key's, from the keys file), which replace PushHosts for its tasks;
	// none: PushHosts.
	PushHostsOf func(owner string) []string
	// Client posts the push notifications (default: a 10 s timeout, no
	// redirects).
	Client *http.Client
	// DefaultAgent answers the messages sent to /a2a that name no agent
	// (message.metadata.agent); empty: such a message is refused. A
	// client that knows only the server's card (the A2A TCK) needs it.
	DefaultAgent string
	// MaxCallDepth refuses a request deeper in agent calls than this (its
	// agenttool.DepthHeader): agents of servers that ask one another end
	// there (default agenttool.DefaultMaxDepth; AGENT_CALL_DEPTH).
	MaxCallDepth int
	// Name, Description and Version describe the server on its card
	// (defaults: "agentdock", a sentence, "1").
	Name, Description, Version string
	// Logger logs failed notifications and task writes (default
	// slog.Default()).
	Logger *slog.Logger
}

// Edge serves A2A; New makes it.
type Edge struct {
	cfg   Config
	tasks taskStore
	rt    *turns.Runtime
	// watching counts the watchers still recording a task's end.
	watching sync.WaitGroup
}

// Close waits for the watchers of the tasks whose turns ended to record
// them (door.Closer), or for ctx.
func (e *Edge) Close(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		e.watching.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("a2a: tasks still being recorded: %w", ctx.Err())
	}
}

// New validates cfg and returns the door, for server.Config.Doors.
func New(cfg Config) (*Edge, error) {
	if cfg.Tasks == nil {
		m, err := responses.NewMemory(responses.Config{})
		if err != nil {
			return nil, fmt.Errorf("a2a: %w", err)
		}
		cfg.Tasks = m
	}
	for _, h := range cfg.PushHosts {
		if err := netguard.CheckHost(h); err != nil {
			return nil, fmt.Errorf("a2a: PushHosts: %w", err)
		}
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.Name == "" {
		cfg.Name = "agentdock"
	}
	if cfg.Description == "" {
		cfg.Description = "Agents with built-in orchestration; each agent is a skill, served at /a2a/{agent}."
	}
	if cfg.Version == "" {
		cfg.Version = "1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Index == nil {
		cfg.Index = NewMemoryIndex(0)
	}
	if cfg.MaxCallDepth <= 0 {
		cfg.MaxCallDepth = agenttool.DefaultMaxDepth
	}
	return &Edge{cfg: cfg, tasks: taskStore{s: cfg.Tasks, index: cfg.Index}}, nil
}

// Routes implements door.Door.
func (e *Edge) Routes(rt *turns.Runtime) []door.Route {
	e.rt = rt
	return []door.Route{
		{Method: http.MethodGet, Path: "/.well-known/agent-card.json", Handler: http.HandlerFunc(e.serverCard)},
		{Method: http.MethodPost, Path: "/a2a", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { e.jsonRPC(w, r, "") })},
		{Method: "*", Path: "/a2a/*rest", Handler: http.HandlerFunc(e.route)},
	}
}

// route serves /a2a/{agent}/...: the agent's JSON-RPC endpoint, its card
// and the HTTP+JSON binding.
func (e *Edge) route(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.PathValue("rest"), "/")
	if rest == ".well-known/agent-card.json" && r.Method == http.MethodGet {
		// The card beside the JSON-RPC endpoint too: clients that were
		// given /a2a as the agent's URL look for it there.
		e.serverCard(w, r)
		return
	}
	agentID, sub, _ := strings.Cut(rest, "/")
	if _, ok := e.rt.Agents().Get(agentID); !ok {
		restError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no agent %q; /.well-known/agent-card.json lists them", agentID))
		return
	}
	switch {
	case sub == "" && r.Method == http.MethodPost:
		e.jsonRPC(w, r, agentID)
	case sub == ".well-known/agent-card.json" && r.Method == http.MethodGet:
		e.agentCard(w, r, agentID)
	default:
		e.rest(w, r, agentID, sub)
	}
}

// base is the server's URL as the client reached it, with the prefix the
// server is mounted under.
func base(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	prefix := ""
	if p, _, _ := strings.Cut(r.RequestURI, "?"); strings.HasSuffix(p, r.URL.Path) {
		prefix = strings.TrimSuffix(p, r.URL.Path)
	}
	return scheme + "://" + r.Host + prefix
}

func (e *Edge) card(r *http.Request, name, desc, endpoint string, skills []AgentSkill) AgentCard {
	c := AgentCard{
		Name: name, Description: desc, Version: e.cfg.Version,
		SupportedInterfaces: []AgentInterface{{URL: endpoint, ProtocolBinding: "JSONRPC", ProtocolVersion: ProtocolVersion}},
		Capabilities:        AgentCapabilities{Streaming: true, PushNotifications: len(e.cfg.PushHosts) > 0 || e.cfg.PushHostsOf != nil},
		DefaultInputModes:   []string{"text/plain", "application/json"},
		DefaultOutputModes:  []string{"text/plain", "application/json"},
		Skills:              skills,
	}
	if door.Owner(r) != "" {
		// Only a server with API keys names an owner.
		c.SecuritySchemes = map[string]any{
			"bearer": map[string]any{"httpAuthSecurityScheme": map[string]any{"scheme": "Bearer", "description": "an API key of the server"}},
			"apiKey": map[string]any{"apiKeySecurityScheme": map[string]any{"location": "header", "name": "x-api-key"}},
		}
		c.SecurityRequirements = []map[string]any{{"schemes": map[string]any{"bearer": map[string]any{"list": []string{}}}}}
	}
	return c
}

// serverCard lists the agents as skills; its JSON-RPC endpoint takes the
// agent from message.metadata.agent.
func (e *Edge) serverCard(w http.ResponseWriter, r *http.Request) {
	b := base(r)
	var skills []AgentSkill
	for _, n := range e.rt.Agents().List() {
		t := n.Template()
		skills = append(skills, AgentSkill{ID: n.ID(), Name: t.Name, Description: describe(t.Description, t.Name),
			Tags: append([]string{"agent"}, t.Tags...), Examples: t.ChatSettings.ChatPrompts})
	}
	c := e.card(r, e.cfg.Name, e.cfg.Description, b+"/a2a", skills)
	if _, ok := e.rt.Agents().Get(e.cfg.DefaultAgent); ok {
		// The HTTP+JSON binding is per agent: the default agent's.
		c.SupportedInterfaces = append(c.SupportedInterfaces, AgentInterface{URL: b + "/a2a/" + url.PathEscape(e.cfg.DefaultAgent), ProtocolBinding: "HTTP+JSON", ProtocolVersion: ProtocolVersion})
	}
	writeJSON(w, http.StatusOK, c)
}

// agentCard describes one agent: its orchestration's steps as skills.
func (e *Edge) agentCard(w http.ResponseWriter, r *http.Request, agentID string) {
	n, _ := e.rt.Agents().Get(agentID)
	t := n.Template()
	var skills []AgentSkill
	for _, st := range t.Steps() {
		skills = append(skills, AgentSkill{ID: st.Name, Name: st.Name, Description: describe(st.Description, "the step "+st.Name+" of "+t.Name), Tags: []string{"step"}})
	}
	if len(skills) == 0 {
		skills = []AgentSkill{{ID: n.ID(), Name: t.Name, Description: describe(t.Description, t.Name), Tags: []string{"agent"}, Examples: t.ChatSettings.ChatPrompts}}
	}
	endpoint := base(r) + "/a2a/" + url.PathEscape(agentID)
	c := e.card(r, t.Name, describe(t.Description, t.Name), endpoint, skills)
	c.SupportedInterfaces = append(c.SupportedInterfaces, AgentInterface{URL: endpoint, ProtocolBinding: "HTTP+JSON", ProtocolVersion: ProtocolVersion})
	writeJSON(w, http.StatusOK, c)
}

func describe(s, fallback string) string {
	if strings.TrimSpace(s) != "" {
		return s
	}
	return fallback
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Errors of the protocol (JSON-RPC codes; the HTTP+JSON binding maps them
// to statuses).
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeNoMethod       = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	codeTaskNotFound   = -32001
	codeNotCancelable  = -32002
	codeNoPush         = -32003
	codeUnsupported    = -32004
	codeNoExtendedCard = -32007
	codeVersion        = -32009
)

// rpcError is an error of a method: a code, a message saying what was
// wrong and where, and the server's own error code as data.
type rpcError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return e.Message }

func errf(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// fromServer maps an error of the turn runtime.
func fromServer(err error) *rpcError {
	p := turns.Describe(err)
	status, code, msg := p.Status, p.Code, p.Message
	c := codeInternal
	switch {
	case status == http.StatusNotFound:
		c = codeTaskNotFound
	case status == http.StatusConflict:
		c = codeUnsupported
	case status >= 400 && status < 500:
		c = codeInvalidParams
	}
	return &rpcError{Code: c, Message: msg, Data: map[string]any{"code": code}}
}

// storeErr maps an error of the task store.
func (e *Edge) storeErr(err error, what string) *rpcError {
	if errors.Is(err, errTaskNotFound) {
		return errf(codeTaskNotFound, "no task %q", what)
	}
	e.cfg.Logger.Error("a2a: reading a task", "task", what, "err", err)
	return errf(codeInternal, "the task store is unavailable; try again shortly")
}

// call is one method call, whatever the binding.
type call struct {
	owner   string
	agentID string // from the URL; "" at /a2a
	method  string
	params  json.RawMessage
}

// The methods. A streaming method writes through emit; the others return
// their result.
func (e *Edge) invoke(ctx context.Context, c call, emit func(StreamResponse) bool) (any, *rpcError) {
	switch c.method {
	case "SendMessage", "SendStreamingMessage":
		var p SendMessageRequest
		if err := decodeParams(c.params, &p); err != nil {
			return nil, err
		}
		if p.Configuration != nil {
			if err := checkHistoryLength(p.Configuration.HistoryLength, "configuration.historyLength"); err != nil {
				return nil, err
			}
		}
		if c.method == "SendStreamingMessage" {
			return nil, e.sendStream(ctx, c, &p, emit)
		}
		return e.send(ctx, c, &p)
	case "GetTask":
		var p taskRequest
		if err := decodeParams(c.params, &p); err != nil {
			return nil, err
		}
		if err := checkHistoryLength(p.HistoryLength, "historyLength"); err != nil {
			return nil, err
		}
		return e.getTask(ctx, c.owner, p.ID, p.HistoryLength)
	case "CancelTask":
		var p taskRequest
		if err := decodeParams(c.params, &p); err != nil {
			return nil, err
		}
		return e.cancel(ctx, c.owner, p.ID)
	case "SubscribeToTask":
		var p taskRequest
		if err := decodeParams(c.params, &p); err != nil {
			return nil, err
		}
		return nil, e.subscribe(ctx, c.owner, p.ID, emit)
	case "CreateTaskPushNotificationConfig":
		var p TaskPushNotificationConfig
		if err := decodeParams(c.params, &p); err != nil {
			return nil, err
		}
		return e.createPush(ctx, c.owner, p)
	case "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig":
		var p pushConfigRequest
		if err := decodeParams(c.params, &p); err != nil {
			return nil, err
		}
		return e.pushConfig(ctx, c.owner, c.method, p)
	case "ListTasks":
		var p listRequest
		if len(c.params) > 0 && string(c.params) != "null" {
			if err := decodeParams(c.params, &p); err != nil {
				return nil, err
			}
		}
		return e.listTasks(ctx, c.owner, p)
	case "GetExtendedAgentCard":
		return nil, errf(codeNoExtendedCard, "this server has no extended agent card")
	}
	return nil, errf(codeNoMethod, "no method %q; the A2A v1.0 methods are SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask and the TaskPushNotificationConfig ones", c.method)
}

func decodeParams(raw json.RawMessage, v any) *rpcError {
	if len(raw) == 0 || string(raw) == "null" {
		return errf(codeInvalidParams, "params are required")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return errf(codeInvalidParams, "params: %s", err.Error())
	}
	return nil
}

// agentFor picks the agent of a message: the URL's, else
// message.metadata.agent (or params.metadata.agent).
func (e *Edge) agentFor(c call, p *SendMessageRequest) (*agent.Agent, *rpcError) {
	id := c.agentID
	if id == "" {
		for _, m := range []map[string]any{p.Message.Metadata, p.Metadata} {
			if s, ok := m["agent"].(string); ok && s != "" {
				id = s
				break
			}
		}
	}
	if id == "" {
		id = e.cfg.DefaultAgent
	}
	if id == "" {
		var ids []string
		for _, n := range e.rt.Agents().List() {
			ids = append(ids, n.ID())
		}
		return nil, errf(codeInvalidParams, "message.metadata.agent is required at /a2a (or post to /a2a/{agent}); the agents are %s", strings.Join(ids, ", "))
	}
	n, ok := e.rt.Agents().Get(id)
	if !ok {
		return nil, errf(codeInvalidParams, "message.metadata.agent: no agent %q", id)
	}
	return n, nil
}

// messageText is the user's text: the message's text parts, joined.
func messageText(m *Message) string {
	var parts []string
	for _, p := range m.Parts {
		if p.Text != nil && strings.TrimSpace(*p.Text) != "" {
			parts = append(parts, *p.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

// answers reads the approvals a message answers: a data part
// {"approvals": [{"id", "approved", "reason"}]}.
func answers(m *Message) ([]agent.ApprovalAnswer, *rpcError) {
	for i, p := range m.Parts {
		if len(p.Data) == 0 {
			continue
		}
		var d struct {
			Approvals []struct {
				ID       string `json:"id"`
				Approved *bool  `json:"approved"`
				Reason   string `json:"reason"`
			} `json:"approvals"`
		}
		if err := json.Unmarshal(p.Data, &d); err != nil || d.Approvals == nil {
			continue
		}
		out := make([]agent.ApprovalAnswer, len(d.Approvals))
		for j, a := range d.Approvals {
			if a.ID == "" || a.Approved == nil {
				return nil, errf(codeInvalidParams, "message.parts[%d].data.approvals[%d]: id and approved are required", i, j)
			}
			out[j] = agent.ApprovalAnswer{ID: a.ID, Approved: *a.Approved, Reason: a.Reason}
		}
		return out, nil
	}
	return nil, nil
}

// started is a task whose turn began: its record as first written, and
// the turn.
type started struct {
	rec  record
	turn *turns.Turn
	// done is closed once the watcher recorded the turn's end; final is
	// the task then.
	done  chan struct{}
	final Task
}

// begin starts the task a message asks for: a new task, or the next turn
// of an input-required one. Its watcher records the turn's end.
func (e *Edge) begin(ctx context.Context, c call, p *SendMessageRequest) (*started, *rpcError) {
	m := p.Message
	if m == nil {
		return nil, errf(codeInvalidParams, "params.message is required")
	}
	if m.Role != "" && m.Role != RoleUser {
		return nil, errf(codeInvalidParams, "message.role must be %s, not %q", RoleUser, m.Role)
	}
	if m.MessageID == "" {
		return nil, errf(codeInvalidParams, "message.messageId is required")
	}
	var (
		rec  record
		turn *turns.Turn
		err  error
	)
	if m.TaskID != "" {
		var rerr *rpcError
		if rec, rerr = e.continuable(ctx, c, m); rerr != nil {
			return nil, rerr
		}
		list, aerr := answers(m)
		if aerr != nil {
			return nil, aerr
		}
		if list == nil {
			return nil, errf(codeInvalidParams, "task %s waits for approvals: the message needs a data part {\"approvals\": [{\"id\", \"approved\", \"reason\"}]} (the ids are in the task's status message)", m.TaskID)
		}
		turn, err = e.rt.Start(ctx, turns.Input{Input: agent.Input{Answers: list, Owner: c.owner}, Agent: rec.Agent, Session: rec.Task.ContextID})
	} else {
		n, rerr := e.agentFor(c, p)
		if rerr != nil {
			return nil, rerr
		}
		text := messageText(m)
		if text == "" {
			return nil, errf(codeInvalidParams, "message.parts: the message has no text part; this server reads text")
		}
		contextID := m.ContextID
		if contextID == "" {
			contextID = session.NewID()
		} else if !session.ValidID(contextID) {
			return nil, errf(codeInvalidParams, "message.contextId %q is not a valid context: want 8 to 128 letters, digits, '-' or '_'", clip(contextID))
		}
		rec = record{Agent: n.ID(), Task: Task{ID: session.NewID(), ContextID: contextID}}
		turn, err = e.rt.Start(ctx, turns.Input{Input: agent.Input{Text: text, Owner: c.owner}, Agent: n.ID(), Session: contextID})
	}
	if err != nil {
		return nil, fromServer(err)
	}
	user := *m
	user.Role, user.TaskID, user.ContextID = RoleUser, rec.Task.ID, rec.Task.ContextID
	rec.Task.History = append(rec.Task.History, user)
	rec.Turn = turn.ID()
	rec.Task.Status = TaskStatus{State: StateWorking, Timestamp: timestamp(time.Now())}
	if rec.Task.Metadata == nil {
		rec.Task.Metadata = map[string]any{}
	}
	rec.Task.Metadata["agent"] = rec.Agent
	if err := e.tasks.put(ctx, c.owner, rec); err != nil {
		turn.Stop(context.WithoutCancel(ctx))
		e.cfg.Logger.Error("a2a: storing a task", "task", rec.Task.ID, "err", err)
		return nil, errf(codeInternal, "the task could not be stored; the turn was stopped")
	}
	st := &started{rec: rec, turn: turn, done: make(chan struct{})}
	if cfg := p.Configuration; cfg != nil && cfg.TaskPushNotificationConfig != nil {
		pc := *cfg.TaskPushNotificationConfig
		pc.TaskID = rec.Task.ID
		if _, perr := e.createPush(ctx, c.owner, pc); perr != nil {
			e.cfg.Logger.Warn("a2a: the message's push notification config was refused", "task", rec.Task.ID, "err", perr.Message)
		}
	}
	e.watching.Add(1)
	go e.watch(c.owner, st)
	return st, nil
}

// continuable reads the task a message continues; only an input-required
// task of the caller is.
func (e *Edge) continuable(ctx context.Context, c call, m *Message) (record, *rpcError) {
	rec, err := e.tasks.get(ctx, c.owner, m.TaskID)
	if err != nil {
		return rec, e.storeErr(err, m.TaskID)
	}
	switch {
	case m.ContextID != "" && m.ContextID != rec.Task.ContextID:
		return rec, errf(codeInvalidParams, "message.contextId %q is not the context of task %s", clip(m.ContextID), m.TaskID)
	case c.agentID != "" && c.agentID != rec.Agent:
		return rec, errf(codeTaskNotFound, "no task %q of agent %s", m.TaskID, c.agentID)
	case terminal(rec.Task.Status.State):
		return rec, errf(codeUnsupported, "task %s is %s and takes no more messages; send a message without taskId (contextId %s continues the conversation)", m.TaskID, rec.Task.Status.State, rec.Task.ContextID)
	case rec.Task.Status.State != StateInputRequired:
		return rec, errf(codeUnsupported, "task %s is still working; wait for it (GetTask, SubscribeToTask) or cancel it", m.TaskID)
	}
	return rec, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// watch follows the task's turn on the replica that runs it, records the
// task the turn left, and posts it to the task's webhooks.
func (e *Edge) watch(owner string, st *started) {
	defer e.watching.Done()
	defer close(st.done)
	k := newTracker(st.rec.Task)
	for ev, err := range st.turn.Events(context.Background(), 0) {
		if err != nil {
			k.failure = "the turn's events could not be read"
			k.done(chat.FinishError)
			break
		}
		k.add(ev)
	}
	st.final = k.task
	rec := st.rec
	rec.Task = k.task
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.tasks.put(ctx, owner, rec); err != nil {
		e.cfg.Logger.Error("a2a: recording a task's state", "task", rec.Task.ID, "err", err)
	}
	e.notify(ctx, owner, rec.Task)
}

// send serves SendMessage: the task once its turn ended or needs input,
// or, with configuration.returnImmediately, the working task at once while
// its turn runs on (GetTask, SubscribeToTask and CancelTask then see it).
func (e *Edge) send(ctx context.Context, c call, p *SendMessageRequest) (any, *rpcError) {
	st, err := e.begin(ctx, c, p)
	if err != nil {
		return nil, err
	}
	var limit *int
	if cfg := p.Configuration; cfg != nil {
		limit = cfg.HistoryLength
		if cfg.ReturnImmediately {
			return map[string]any{"task": trimHistory(st.rec.Task, limit)}, nil
		}
	}
	select {
	case <-st.done:
		return map[string]any{"task": trimHistory(st.final, limit)}, nil
	case <-ctx.Done():
		return nil, errf(codeInternal, "the client went away")
	}
}

// checkHistoryLength refuses a negative historyLength; field names it in
// the error.
func checkHistoryLength(n *int, field string) *rpcError {
	if n != nil && *n < 0 {
		return errf(codeInvalidParams, "%s must not be negative, not %d (0 asks for no history, absent for all of it)", field, *n)
	}
	return nil
}

// trimHistory keeps the limit most recent messages of t's history (all of
// them when limit is nil); the specification's historyLength: the server
// must not return more than asked, and 0 omits the history.
func trimHistory(t Task, limit *int) Task {
	if limit != nil && *limit >= 0 && len(t.History) > *limit {
		t.History = t.History[len(t.History)-*limit:]
	}
	return t
}

// sendStream serves SendStreamingMessage: the task, then its updates until
// the turn ends.
func (e *Edge) sendStream(ctx context.Context, c call, p *SendMessageRequest, emit func(StreamResponse) bool) *rpcError {
	st, err := e.begin(ctx, c, p)
	if err != nil {
		return err
	}
	task := st.rec.Task
	if !emit(StreamResponse{Task: &task}) {
		return nil
	}
	return relay(newTracker(st.rec.Task), st.turn.Events(ctx, 0), emit)
}

// relay streams the updates a turn's events make of a task, until the
// turn ends or the client goes away.
func relay(k *tracker, events iter.Seq2[chat.Event, error], emit func(StreamResponse) bool) *rpcError {
	for ev, err := range events {
		if err != nil {
			return errf(codeInternal, "the task's events could not be read: %s", err.Error())
		}
		for _, out := range k.add(ev) {
			if !emit(out) {
				return nil
			}
		}
	}
	return nil
}

// getTask serves GetTask: the task with at most historyLength messages of
// its history (nil: all).
func (e *Edge) getTask(ctx context.Context, owner, id string, historyLength *int) (any, *rpcError) {
	rec, err := e.tasks.get(ctx, owner, id)
	if err != nil {
		return nil, e.storeErr(err, id)
	}
	if rec.Task.Status.State == StateWorking {
		// Its turn may have just ended, before the watcher wrote it.
		if t, err := e.rt.Turn(ctx, owner, rec.Task.ContextID, rec.Turn); err == nil {
			if _, done, _, err := t.Last(ctx); err == nil && done {
				rec = e.settled(ctx, owner, rec, 2*time.Second)
			}
		}
	}
	return trimHistory(rec.Task, historyLength), nil
}

// settled reads the task again until it is no longer working, for up to
// wait.
func (e *Edge) settled(ctx context.Context, owner string, rec record, wait time.Duration) record {
	deadline := time.Now().Add(wait)
	for rec.Task.Status.State == StateWorking && time.Now().Before(deadline) {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return rec
		}
		if r, err := e.tasks.get(ctx, owner, rec.Task.ID); err == nil {
			rec = r
		}
	}
	return rec
}

// cancel serves CancelTask: the task's turn is stopped wherever it runs,
// and the task is answered once canceled. An input-required task is
// canceled at once: its calls stay unanswered, and the context's next
// message denies them.
func (e *Edge) cancel(ctx context.Context, owner, id string) (any, *rpcError) {
	rec, err := e.tasks.get(ctx, owner, id)
	if err != nil {
		return nil, e.storeErr(err, id)
	}
	switch rec.Task.Status.State {
	case StateInputRequired:
		rec.Task.Status = TaskStatus{State: StateCanceled, Timestamp: timestamp(time.Now())}
		if err := e.tasks.put(ctx, owner, rec); err != nil {
			return nil, e.storeErr(err, id)
		}
		e.notify(ctx, owner, rec.Task)
		return rec.Task, nil
	case StateWorking:
	default:
		return nil, errf(codeNotCancelable, "task %s is %s and cannot be canceled", id, rec.Task.Status.State)
	}
	if _, err := e.rt.Stop(ctx, owner, rec.Task.ContextID); err != nil {
		return nil, fromServer(err)
	}
	rec = e.settled(ctx, owner, rec, 10*time.Second)
	return rec.Task, nil
}

// subscribe serves SubscribeToTask: the task as it stands, then the
// updates of its running turn, read from whichever replica runs it.
func (e *Edge) subscribe(ctx context.Context, owner, id string, emit func(StreamResponse) bool) *rpcError {
	rec, err := e.tasks.get(ctx, owner, id)
	if err != nil {
		return e.storeErr(err, id)
	}
	if terminal(rec.Task.Status.State) {
		return errf(codeUnsupported, "task %s is %s: there is nothing to subscribe to; GetTask reads it", id, rec.Task.Status.State)
	}
	task := rec.Task
	if !emit(StreamResponse{Task: &task}) || rec.Task.Status.State != StateWorking {
		return nil
	}
	// The record is the task as its turn began; the turn's events from
	// its first bring the subscriber to the end. A turn on another
	// replica reaches the shared log within its first batch.
	var events iter.Seq2[chat.Event, error]
	for wait := time.Now().Add(time.Second); ; {
		t, ferr := e.rt.Turn(ctx, owner, rec.Task.ContextID, rec.Turn)
		if ferr == nil {
			events = t.Events(ctx, 0)
			break
		}
		if !errors.Is(ferr, turns.ErrTurnNotFound) || time.Now().After(wait) {
			// Gone (ended and no longer kept): the record has its end.
			rec = e.settled(ctx, owner, rec, 2*time.Second)
			t := rec.Task
			emit(StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{TaskID: t.ID, ContextID: t.ContextID, Status: t.Status}})
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return relay(newTracker(rec.Task), events, emit)
}

// createPush serves CreateTaskPushNotificationConfig.
func (e *Edge) createPush(ctx context.Context, owner string, p TaskPushNotificationConfig) (any, *rpcError) {
	if len(e.pushHosts(owner)) == 0 {
		return nil, errf(codeNoPush, "push notifications are not offered: the server allows no webhook hosts (A2A_PUSH_HOSTS, or the key's webhook-hosts)")
	}
	if _, err := e.tasks.get(ctx, owner, p.TaskID); err != nil {
		return nil, e.storeErr(err, p.TaskID)
	}
	if err := e.checkWebhook(owner, p.URL); err != nil {
		return nil, errf(codeInvalidParams, "url: %s", err.Error())
	}
	if err := checkPushAuth(p); err != nil {
		return nil, errf(codeInvalidParams, "%s", err.Error())
	}
	if p.ID == "" {
		p.ID = session.NewID()
	}
	list, err := e.tasks.pushConfigs(ctx, owner, p.TaskID)
	if err != nil {
		return nil, e.storeErr(err, p.TaskID)
	}
	list = slices.DeleteFunc(list, func(c TaskPushNotificationConfig) bool { return c.ID == p.ID })
	if len(list) >= maxPushConfigs {
		return nil, errf(codeInvalidParams, "task %s has %d push notification configs, the most it may have", p.TaskID, maxPushConfigs)
	}
	list = append(list, p)
	if err := e.tasks.putPushConfigs(ctx, owner, p.TaskID, list); err != nil {
		return nil, e.storeErr(err, p.TaskID)
	}
	return p, nil
}

const maxPushConfigs = 10

// pushConfig serves the get, list and delete of push configs.
func (e *Edge) pushConfig(ctx context.Context, owner, method string, p pushConfigRequest) (any, *rpcError) {
	if _, err := e.tasks.get(ctx, owner, p.TaskID); err != nil {
		return nil, e.storeErr(err, p.TaskID)
	}
	list, err := e.tasks.pushConfigs(ctx, owner, p.TaskID)
	if err != nil {
		return nil, e.storeErr(err, p.TaskID)
	}
	if method == "ListTaskPushNotificationConfigs" {
		if list == nil {
			list = []TaskPushNotificationConfig{}
		}
		return map[string]any{"configs": list}, nil
	}
	i := slices.IndexFunc(list, func(c TaskPushNotificationConfig) bool { return c.ID == p.ID })
	if i < 0 {
		return nil, errf(codeTaskNotFound, "task %s has no push notification config %q", p.TaskID, p.ID)
	}
	if method == "GetTaskPushNotificationConfig" {
		return list[i], nil
	}
	if err := e.tasks.putPushConfigs(ctx, owner, p.TaskID, slices.Delete(list, i, i+1)); err != nil {
		return nil, e.storeErr(err, p.TaskID)
	}
	return map[string]any{}, nil
}

// pushHosts are the hosts owner's push notifications may be posted to.
func (e *Edge) pushHosts(owner string) []string {
	if e.cfg.PushHostsOf != nil {
		if own := e.cfg.PushHostsOf(owner); len(own) > 0 {
			return own
		}
	}
	return e.cfg.PushHosts
}

// checkWebhook allows http(s) URLs on owner's allowed hosts and ports
// only.
func (e *Edge) checkWebhook(owner, raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "":
		return fmt.Errorf("%q is not an absolute URL", clip(raw))
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("the scheme must be http or https, not %q", u.Scheme)
	case u.User != nil:
		return errors.New("the URL must not carry credentials; use authentication")
	case !netguard.HostAllowed(u, e.pushHosts(owner)):
		return fmt.Errorf("the host and port %q are not ones the server posts to (A2A_PUSH_HOSTS, or the key's webhook-hosts; a bare host allows its default port only)", u.Host)
	}
	return nil
}

// pushSchemes are the HTTP authentication schemes of IANA's registry
// whose credentials are one token (token68, RFC 9110): what a push
// config's authentication may put in the Authorization header, as
// "<scheme> <credentials>" (A2A 1.0, 4.3.3). A scheme of parameters, or
// of a challenge and response, cannot be sent unasked.
var pushSchemes = []string{"Basic", "Bearer", "DPoP", "Negotiate", "PrivateToken"}

// Bounds of what a push config sends in its headers.
const (
	maxPushToken       = 1024
	maxPushCredentials = 4096
)

// checkPushAuth limits a push config's headers to what A2A defines: its
// token (X-A2A-Notification-Token) and its authentication (Authorization,
// a registered scheme and one token68 of credentials), each bounded, with
// no byte that would let it say more.
func checkPushAuth(p TaskPushNotificationConfig) error {
	if p.Token != "" && (len(p.Token) > maxPushToken || !visibleASCII(p.Token)) {
		return fmt.Errorf("token: at most %d printable ASCII characters, without spaces", maxPushToken)
	}
	a := p.Authentication
	if a == nil || a.Scheme == "" && a.Credentials == "" {
		return nil
	}
	i := slices.IndexFunc(pushSchemes, func(s string) bool { return strings.EqualFold(s, a.Scheme) })
	switch {
	case i < 0:
		return fmt.Errorf("authentication.scheme %q is not one of %s (HTTP authentication schemes whose credentials are one token)", clip(a.Scheme), strings.Join(pushSchemes, ", "))
	case a.Credentials == "":
		return errors.New("authentication.credentials is required with a scheme")
	case len(a.Credentials) > maxPushCredentials || !token68(a.Credentials):
		return fmt.Errorf("authentication.credentials must be one token68 (RFC 9110: letters, digits, -._~+/ and trailing =) of at most %d characters", maxPushCredentials)
	}
	return nil
}

// visibleASCII reports whether s is printable ASCII without spaces.
func visibleASCII(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// token68 reports whether s is a token68 of RFC 9110.
func token68(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := range len(body) {
		c := body[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}

// notify posts the task to its webhooks, once each; a failure is logged.
func (e *Edge) notify(ctx context.Context, owner string, task Task) {
	if len(e.cfg.PushHosts) == 0 && e.cfg.PushHostsOf == nil {
		return
	}
	list, err := e.tasks.pushConfigs(ctx, owner, task.ID)
	if err != nil {
		e.cfg.Logger.Warn("a2a: reading a task's push configs", "task", task.ID, "err", err)
		return
	}
	body, _ := json.Marshal(StreamResponse{Task: &task})
	for _, c := range list {
		if e.checkWebhook(owner, c.URL) != nil || checkPushAuth(c) != nil {
			continue // the allowed hosts or the rules changed since
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
		if err != nil {
			continue
		}
		req.Header.Set("Content-Type", "application/json")
		if c.Token != "" {
			req.Header.Set("X-A2A-Notification-Token", c.Token)
		}
		if a := c.Authentication; a != nil && a.Scheme != "" && a.Credentials != "" {
			req.Header.Set("Authorization", pushSchemes[slices.IndexFunc(pushSchemes, func(s string) bool { return strings.EqualFold(s, a.Scheme) })]+" "+a.Credentials)
		}
		resp, err := e.cfg.Client.Do(req)
		if err != nil {
			e.cfg.Logger.Warn("a2a: posting a push notification failed", "task", task.ID, "config", c.ID, "err", err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			e.cfg.Logger.Warn("a2a: a webhook refused a push notification", "task", task.ID, "config", c.ID, "status", resp.StatusCode)
		}
	}
}
