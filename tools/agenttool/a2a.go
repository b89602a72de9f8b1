package agenttool

// The remote agents: A2A v1.0's JSON-RPC binding, as a client. The
// official Go SDK (github.com/a2aproject/a2a-go) speaks A2A 0.3 in its
// released versions (message/send, kind-tagged parts), not the 1.0 that
// this server serves and that the specification now is, so the few
// objects a client needs are written here.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// Bounds of what a remote agent may send.
const (
	// maxCardBytes bounds an agent card.
	maxCardBytes = 1 << 20
	// maxEventBytes bounds one event of a stream, or a whole answer that
	// does not stream.
	maxEventBytes = 4 << 20
	// maxStreamBytes bounds a whole stream: the answer the model reads is
	// cut to the turn's result limit anyway.
	maxStreamBytes = 64 << 20
	// cardTimeout bounds reading a card.
	cardTimeout = 20 * time.Second
)

// ProtocolVersion is the A2A version the client speaks.
const ProtocolVersion = "1.0"

// remote is a remote agent tool's client.
type remote struct {
	cfg     *Config
	name    string // the tool's
	base    *url.URL
	cardURL string
	headers map[string]string

	mu        sync.Mutex
	card      *card
	endpoint  string
	streaming bool
	read      time.Time
}

func newRemote(cfg *Config, name string, a template.AgentTool) (*remote, error) {
	s, ps := mcpconfig.Expand(name, mcpconfig.Server{URL: a.A2A, Headers: a.Headers}, cfg.LookupEnv)
	if len(ps) > 0 {
		// Expand names the fields as an MCP server's; they are this
		// entry's.
		var msgs []string
		for _, p := range ps {
			msgs = append(msgs, strings.TrimPrefix(p.Path, "mcpServers."+name+".")+": "+p.Message)
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("a2a: %q is not an http(s) URL without credentials", s.URL)
	}
	r := &remote{cfg: cfg, name: name, base: u, headers: s.Headers}
	if strings.HasSuffix(u.Path, "/.well-known/agent-card.json") || strings.HasSuffix(u.Path, "/.well-known/agent.json") {
		r.cardURL = u.String()
	} else {
		c := *u
		c.Path = strings.TrimSuffix(c.Path, "/") + "/.well-known/agent-card.json"
		c.RawPath = ""
		r.cardURL = c.String()
	}
	return r, nil
}

// shown is the agent's URL as a model or a person may read it: without
// its query, which may carry a credential.
func (r *remote) shown() string {
	u := url.URL{Scheme: r.base.Scheme, Host: r.base.Host, Path: r.base.Path}
	return u.String()
}

// card is the part of an agent card the client reads.
type card struct {
	Name                string `json:"name"`
	Description         string `json:"description"`
	SupportedInterfaces []struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"supportedInterfaces"`
	Capabilities struct {
		Streaming bool `json:"streaming"`
	} `json:"capabilities"`
	// A 0.3 card's fields, to say what it is.
	URL             string `json:"url"`
	ProtocolVersion string `json:"protocolVersion"`
}

// resolve returns the agent's JSON-RPC endpoint and whether it streams,
// from its card, read again once Config.CardTTL passed.
func (r *remote) resolve(ctx context.Context) (string, bool, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.card != nil && time.Since(r.read) < r.cfg.CardTTL {
		return r.endpoint, r.streaming, r.card.Name, nil
	}
	ctx, cancel := context.WithTimeout(ctx, cardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.cardURL, nil)
	if err != nil {
		return "", false, "", err
	}
	r.header(req, ctx)
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return "", false, "", fmt.Errorf("reading its card: %w", unwrapURL(err))
	}
	defer resp.Body.Close()
	if err := statusError(resp, "its card"); err != nil {
		return "", false, "", err
	}
	data, err := readLimited(resp.Body, maxCardBytes, "its card")
	if err != nil {
		return "", false, "", err
	}
	var c card
	if err := json.Unmarshal(data, &c); err != nil {
		return "", false, "", fmt.Errorf("its card at %s is not an agent card: %v", r.cardURL, err)
	}
	endpoint := ""
	for _, i := range c.SupportedInterfaces {
		if strings.EqualFold(i.ProtocolBinding, "JSONRPC") && (i.ProtocolVersion == "" || strings.HasPrefix(i.ProtocolVersion, "1")) {
			endpoint = i.URL
			break
		}
	}
	if endpoint == "" {
		if c.URL != "" && c.ProtocolVersion != "" {
			return "", false, "", fmt.Errorf("its card speaks A2A %s; this client speaks A2A %s's JSON-RPC binding", clip(c.ProtocolVersion, 20), ProtocolVersion)
		}
		return "", false, "", fmt.Errorf("its card names no JSON-RPC interface of A2A %s", ProtocolVersion)
	}
	eu, err := url.Parse(endpoint)
	if err != nil || !eu.IsAbs() {
		return "", false, "", fmt.Errorf("its card names the endpoint %q, which is not an absolute URL", clip(endpoint, 200))
	}
	if eu.Scheme != r.base.Scheme || eu.Host != r.base.Host {
		// The operator chose the agent's host; a card does not send its
		// messages (and their credentials) elsewhere.
		return "", false, "", fmt.Errorf("its card names the endpoint %s, on another host than %s; it is not followed", eu.Redacted(), r.base.Host)
	}
	r.card, r.endpoint, r.streaming, r.read = &c, eu.String(), c.Capabilities.Streaming, time.Now()
	return r.endpoint, r.streaming, c.Name, nil
}

// header sets a request's headers: the entry's, the protocol's, the depth.
func (r *remote) header(req *http.Request, ctx context.Context) {
	keys := make([]string, 0, len(r.headers))
	for k := range r.headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		req.Header.Set(k, r.headers[k])
	}
	req.Header.Set("A2A-Version", ProtocolVersion)
	req.Header.Set(DepthHeader, strconv.Itoa(Depth(ctx)))
}

// ask asks the remote agent: a message in the child context, or, with
// the caller's decisions, the answers to the approvals its task waits
// for.
func (r *remote) ask(ctx context.Context, c tools.Call, message string) answer {
	endpoint, streaming, name, err := r.resolve(ctx)
	who := r.name
	if name != "" {
		who = name
	}
	if err != nil {
		r.cfg.Logger.WarnContext(ctx, "remote agent unreachable", "tool", r.name, "err", err)
		return answer{agent: who, failure: fmt.Sprintf("the remote agent %s cannot be asked: %s", r.shown(), err)}
	}
	msg := map[string]any{
		"messageId": session.NewID(),
		"role":      "ROLE_USER",
		"contextId": session.ChildID(c.Owner, c.SessionID, r.name, ""),
		"parts":     []any{map[string]any{"text": message}},
	}
	if c.Decisions != nil {
		taskID, answers, err := splitDecisions(c.Decisions)
		if err != nil {
			return answer{agent: who, failure: err.Error()}
		}
		msg["taskId"] = taskID
		msg["parts"] = []any{map[string]any{"data": map[string]any{"approvals": answers}, "mediaType": "application/json"}}
	}
	method := "SendMessage"
	if streaming {
		method = "SendStreamingMessage"
	}
	x := &exchange{r: r, endpoint: endpoint, who: who}
	a := follow(ctx, who, func(ectx context.Context) iter.Seq2[chat.Event, error] {
		return x.send(ctx, ectx, method, map[string]any{"message": msg})
	}, func() { x.cancel() })
	a.data = x.data
	if a.failure != "" {
		r.cfg.Logger.WarnContext(ctx, "remote agent call failed", "tool", r.name)
	}
	return a
}

// exchange is one call's request to a remote agent and its task.
type exchange struct {
	r        *remote
	endpoint string
	who      string

	mu   sync.Mutex
	task string
	data []json.RawMessage
}

// taskPattern bounds the task IDs a remote gives: they come back in the
// approvals' IDs (splitDecisions).
var taskPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// send posts method and yields the task's events as chat.Events: its
// answer as text, its tool calls and results, its orchestration, its
// approvals (input required) and its end. ctx is the call's (its depth,
// and the headers' deadline); ectx bounds the reading.
func (x *exchange) send(ctx, ectx context.Context, method string, params any) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": session.NewID(), "method": method, "params": params})
		// The call's deadline bounds the request; the call's end does
		// not cut it (follow stops the task first), ectx does.
		rctx, cancel := context.WithCancel(ectx)
		defer cancel()
		if dl, ok := ctx.Deadline(); ok {
			var c2 context.CancelFunc
			rctx, c2 = context.WithDeadline(rctx, dl.Add(stopWait))
			defer c2()
		}
		req, err := http.NewRequestWithContext(rctx, http.MethodPost, x.endpoint, bytes.NewReader(body))
		if err != nil {
			yield(chat.Event{}, err)
			return
		}
		x.r.header(req, ctx)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream, application/json")
		resp, err := x.r.cfg.Client.Do(req)
		if err != nil {
			yield(chat.Event{}, unwrapURL(err))
			return
		}
		defer resp.Body.Close()
		if err := statusError(resp, "the message"); err != nil {
			yield(chat.Event{}, err)
			return
		}
		k := &taskReader{x: x}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			data, err := readLimited(resp.Body, maxEventBytes, "the answer")
			if err != nil {
				yield(chat.Event{}, err)
				return
			}
			for _, ev := range k.response(data) {
				if !yield(ev, nil) {
					return
				}
			}
			k.end(yield)
			return
		}
		sc := bufio.NewScanner(io.LimitReader(resp.Body, maxStreamBytes))
		sc.Buffer(make([]byte, 64<<10), maxEventBytes)
		var event bytes.Buffer
		for !k.over && sc.Scan() {
			line := sc.Bytes()
			if len(line) == 0 {
				if event.Len() > 0 {
					for _, ev := range k.response(event.Bytes()) {
						if !yield(ev, nil) {
							return
						}
					}
					event.Reset()
				}
				continue
			}
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				if event.Len() > 0 {
					event.WriteByte('\n')
				}
				event.Write(bytes.TrimPrefix(d, []byte(" ")))
			}
		}
		if err := sc.Err(); err != nil && ectx.Err() == nil && !k.over {
			if errors.Is(err, bufio.ErrTooLong) {
				err = fmt.Errorf("an event of its stream is over %s", tools.FormatBytes(maxEventBytes))
			}
			yield(chat.Event{}, fmt.Errorf("reading its stream: %w", err))
			return
		}
		k.end(yield)
	}
}

// cancel cancels the exchange's task on the remote agent (the caller
// stopped): bounded, and its failure only logged.
func (x *exchange) cancel() {
	x.mu.Lock()
	task := x.task
	x.mu.Unlock()
	if task == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": session.NewID(), "method": "CancelTask", "params": map[string]any{"id": task}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.endpoint, bytes.NewReader(body))
	if err != nil {
		return
	}
	x.r.header(req, ctx)
	req.Header.Set("Content-Type", "application/json")
	resp, err := x.r.cfg.Client.Do(req)
	if err != nil {
		x.r.cfg.Logger.Warn("cancelling a remote agent's task failed", "tool", x.r.name, "err", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// taskReader turns a task's stream into chat.Events.
type taskReader struct {
	x *exchange
	// over: the task reached a state that ends this exchange.
	over      bool
	finish    string
	failure   string
	approvals []chat.Event
	// began: a response was read (a task seen later is not the first).
	began bool
}

// The A2A objects the client reads (A2A v1.0 in JSON).
type (
	a2aPart struct {
		Text *string         `json:"text,omitempty"`
		Data json.RawMessage `json:"data,omitempty"`
	}
	a2aMessage struct {
		Parts []a2aPart `json:"parts"`
	}
	a2aStatus struct {
		State   string      `json:"state"`
		Message *a2aMessage `json:"message,omitempty"`
	}
	a2aArtifact struct {
		ArtifactID string    `json:"artifactId"`
		Parts      []a2aPart `json:"parts"`
	}
	a2aTask struct {
		ID        string         `json:"id"`
		Status    a2aStatus      `json:"status"`
		Artifacts []a2aArtifact  `json:"artifacts"`
		Metadata  map[string]any `json:"metadata"`
	}
	a2aStream struct {
		Task         *a2aTask    `json:"task"`
		Message      *a2aMessage `json:"message"`
		StatusUpdate *struct {
			TaskID   string          `json:"taskId"`
			Status   a2aStatus       `json:"status"`
			Metadata json.RawMessage `json:"metadata"`
		} `json:"statusUpdate"`
		ArtifactUpdate *struct {
			TaskID   string      `json:"taskId"`
			Artifact a2aArtifact `json:"artifact"`
		} `json:"artifactUpdate"`
	}
	rpcReply struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
)

// response reads one JSON-RPC response of the exchange: a stream's event
// or a whole answer.
func (k *taskReader) response(data []byte) []chat.Event {
	var rep rpcReply
	if err := json.Unmarshal(data, &rep); err != nil {
		k.fail("it answered something that is not a JSON-RPC response")
		return nil
	}
	if rep.Error != nil {
		k.fail(fmt.Sprintf("it answered error %d: %s", rep.Error.Code, clip(rep.Error.Message, 500)))
		return nil
	}
	var sr a2aStream
	if err := json.Unmarshal(rep.Result, &sr); err != nil {
		k.fail("its answer is not an A2A response")
		return nil
	}
	var out []chat.Event
	defer func() { k.began = true }()
	switch {
	case sr.Task != nil:
		k.setTask(sr.Task.ID)
		if !k.began {
			// A stream's first task holds what came before (the answer
			// of a task the call goes on with); a later one repeats
			// what the updates brought.
			for _, a := range sr.Task.Artifacts {
				out = append(out, k.artifact(a)...)
			}
		}
		out = append(out, k.status(sr.Task.Status, nil)...)
	case sr.Message != nil:
		// A direct answer without a task.
		out = append(out, k.artifact(a2aArtifact{Parts: sr.Message.Parts})...)
		k.finish, k.over = chat.FinishStop, true
	case sr.ArtifactUpdate != nil:
		k.setTask(sr.ArtifactUpdate.TaskID)
		out = append(out, k.artifact(sr.ArtifactUpdate.Artifact)...)
	case sr.StatusUpdate != nil:
		k.setTask(sr.StatusUpdate.TaskID)
		out = append(out, k.status(sr.StatusUpdate.Status, sr.StatusUpdate.Metadata)...)
	}
	return out
}

func (k *taskReader) fail(msg string) {
	k.failure, k.over = msg, true
}

func (k *taskReader) setTask(id string) {
	if id == "" {
		return
	}
	k.x.mu.Lock()
	defer k.x.mu.Unlock()
	k.x.task = id
}

// artifact reads an artifact's parts: text is the answer, data its
// structured output.
func (k *taskReader) artifact(a a2aArtifact) []chat.Event {
	var out []chat.Event
	for _, p := range a.Parts {
		switch {
		case p.Text != nil && *p.Text != "":
			out = append(out, chat.Event{Kind: chat.KindTextDelta, Text: *p.Text})
		case len(p.Data) > 0:
			k.x.mu.Lock()
			k.x.data = append(k.x.data, p.Data)
			k.x.mu.Unlock()
		}
	}
	return out
}

// status reads a task's status: its progress while it works, then how
// it ended.
func (k *taskReader) status(st a2aStatus, meta json.RawMessage) []chat.Event {
	var out []chat.Event
	if len(meta) > 0 {
		var m struct {
			Orchestration *chat.Snapshot `json:"orchestration"`
		}
		if json.Unmarshal(meta, &m) == nil && m.Orchestration != nil {
			out = append(out, chat.Event{Kind: chat.KindOrchestration, Orchestration: m.Orchestration})
		}
	}
	var texts []string
	if st.Message != nil {
		for _, p := range st.Message.Parts {
			if p.Text != nil && *p.Text != "" {
				texts = append(texts, *p.Text)
				continue
			}
			if len(p.Data) == 0 {
				continue
			}
			var d struct {
				ToolCall   *chat.ToolCall   `json:"toolCall"`
				ToolResult *chat.ToolResult `json:"toolResult"`
				Progress   *chat.Progress   `json:"progress"`
				Approvals  []struct {
					ID         string          `json:"id"`
					ToolCallID string          `json:"toolCallId"`
					ToolName   string          `json:"toolName"`
					Input      json.RawMessage `json:"input"`
					Agent      string          `json:"agent"`
				} `json:"approvals"`
			}
			if json.Unmarshal(p.Data, &d) != nil {
				continue
			}
			switch {
			case d.ToolCall != nil:
				out = append(out, chat.Event{Kind: chat.KindToolCall, ToolCall: d.ToolCall})
			case d.ToolResult != nil:
				out = append(out, chat.Event{Kind: chat.KindToolResult, ToolResult: d.ToolResult})
			case d.Progress != nil && d.Progress.Event != nil:
				// The work of an agent the remote agent asked.
				out = append(out, chat.Event{Kind: chat.KindToolProgress, Progress: d.Progress})
			case st.State == "TASK_STATE_INPUT_REQUIRED":
				for _, a := range d.Approvals {
					k.x.mu.Lock()
					task := k.x.task
					k.x.mu.Unlock()
					if !taskPattern.MatchString(task) || a.ID == "" || len(a.ID) > 120 {
						continue
					}
					call := &chat.ToolCall{ID: a.ToolCallID, Name: a.ToolName, Arguments: a.Input}
					ap := &chat.Approval{ID: task + "~" + a.ID, ToolCallID: a.ToolCallID, Agent: k.x.who, Call: call}
					if a.Agent != "" {
						ap.Agent = k.x.who + " / " + a.Agent
					}
					k.approvals = append(k.approvals, chat.Event{Kind: chat.KindApproval, ToolCall: call, Approval: ap})
				}
			}
		}
	}
	switch st.State {
	case "TASK_STATE_COMPLETED":
		k.finish, k.over = chat.FinishStop, true
	case "TASK_STATE_INPUT_REQUIRED":
		if len(k.approvals) == 0 {
			k.fail(fmt.Sprintf("it needs input this call cannot give: %s", clip(strings.Join(texts, " "), 500)))
			break
		}
		out = append(out, k.approvals...)
		k.finish, k.over = chat.FinishApproval, true
	case "TASK_STATE_FAILED", "TASK_STATE_REJECTED":
		k.fail(fmt.Sprintf("its task %s: %s", strings.ToLower(strings.TrimPrefix(st.State, "TASK_STATE_")), clip(strings.Join(texts, " "), 500)))
	case "TASK_STATE_CANCELED":
		k.finish, k.over = chat.FinishStopped, true
	case "TASK_STATE_AUTH_REQUIRED":
		k.fail("it asks for authentication; give its credentials in the agent tool's headers")
	default:
		for _, t := range texts {
			out = append(out, chat.Event{Kind: chat.KindWarning, Text: clip(t, 2000)})
		}
	}
	return out
}

// end yields how the exchange ended.
func (k *taskReader) end(yield func(chat.Event, error) bool) {
	switch {
	case k.failure != "":
		if !yield(chat.Event{Kind: chat.KindError, Error: &chat.Error{Code: "remote_agent_failed", Message: k.failure}}, nil) {
			return
		}
		yield(chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishError}, nil)
	case k.finish != "":
		yield(chat.Event{Kind: chat.KindDone, FinishReason: k.finish}, nil)
	default:
		yield(chat.Event{}, errors.New("its answer ended before its task did"))
	}
}

// splitDecisions reads back the task an approval ID names (the task's ID,
// "~", the remote approval's ID) and the remote's answers.
func splitDecisions(ds []chat.Decision) (string, []map[string]any, error) {
	task := ""
	var out []map[string]any
	for _, d := range ds {
		t, id, ok := strings.Cut(d.ID, "~")
		if !ok || (task != "" && t != task) {
			return "", nil, fmt.Errorf("approval %q is not one of this remote agent's task", clip(d.ID, 80))
		}
		task = t
		a := map[string]any{"id": id, "approved": d.Approved}
		if d.Reason != "" {
			a["reason"] = d.Reason
		}
		out = append(out, a)
	}
	return task, out, nil
}

// statusError is a response's HTTP failure, nil for a 2xx: a redirect is
// not followed, and a failure's body is not echoed.
func statusError(resp *http.Response, what string) error {
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return fmt.Errorf("%s was answered with a redirect (%d) to %q, which is not followed", what, resp.StatusCode, clip(resp.Header.Get("Location"), 200))
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s was refused (%d): check the agent tool's headers", what, resp.StatusCode)
	}
	return fmt.Errorf("%s was answered with HTTP %d", what, resp.StatusCode)
}

func readLimited(r io.Reader, limit int, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if len(data) > limit {
		return nil, fmt.Errorf("%s is over %s", what, tools.FormatBytes(limit))
	}
	return data, nil
}

// unwrapURL drops the URL a *url.Error repeats (the operator knows it; the
// model need not).
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
