package main

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/server/a2a"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/agenttool"
	"github.com/agentdock-go/agentdock/turns"
)

// agentServer is a server of the agents of templates (agent ID -> its
// template's JSON) wired as serve wires them (the agent tools' runner
// over the server, the A2A edge), on the offline model (slow agents, by
// ID, speak a word every 20 ms), listening on ln.
type agentServer struct {
	url   string
	srv   *server.Server
	store session.Store
	logs  *syncBuffer
}

func startAgentServer(t *testing.T, ln net.Listener, templates map[string]string, slow ...string) *agentServer {
	t.Helper()
	dir := t.TempDir()
	for id, tmpl := range templates {
		if err := os.MkdirAll(filepath.Join(dir, id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id, "template.json"), []byte(tmpl), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	registry, err := tools.Builtin(tools.BuiltinConfig{})
	if err != nil {
		t.Fatal(err)
	}
	results, err := template.LoadPath(dir, template.Config{Provided: registry.Names()})
	if err != nil {
		t.Fatal(err)
	}
	var loaded []*template.Loaded
	for _, r := range results {
		if r.Loaded == nil {
			t.Fatalf("%s: %v", r.File, r.Diagnostics)
		}
		loaded = append(loaded, r.Loaded)
	}
	loaded = checkAgentTools(loaded, log)
	store := session.NewMemory(session.Config{})
	runner := &runtimeRunner{store: store}
	cfg := &serveConfig{AgentCallDepth: agenttool.DefaultMaxDepth, AgentCallTimeout: time.Minute}
	delegates := newAgentTools(cfg, runner, loaded, func(*template.Loaded) tools.Toolbox { return registry }, log)
	agents, err := agent.NewSet(agent.Config{
		Store: store, Tools: registry, ToolsFor: delegates.toolsFor, Logger: log,
		Models: func(tt *template.Template) (llmorch.Model, error) {
			if slices.Contains(slow, tt.AgentID) {
				return offline.New(offline.Config{Delay: 20 * time.Millisecond}), nil
			}
			return offline.New(offline.Config{}), nil
		},
	}, loaded)
	if err == nil {
		err = delegates.err
	}
	if err != nil {
		t.Fatal(err)
	}
	edge, err := a2a.New(a2a.Config{MaxCallDepth: cfg.AgentCallDepth, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := turns.New(turns.Config{Agents: agents, Store: store, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	runner.rt = rt
	srv, err := server.New(server.Config{Runtime: rt, Logger: log, Doors: []door.Door{edge}})
	if err != nil {
		t.Fatal(err)
	}
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: srv.Handler()}}
	hs.Start()
	t.Cleanup(hs.Close)
	return &agentServer{url: hs.URL, srv: srv, store: store, logs: logs}
}

// childOf is the probe's session of the lead's session sid: on the lead's
// server, or, remote, the context on the probe's.
func childOf(remote bool, sid string) string {
	if remote {
		return session.ChildID("", sid, "ask_probe", "")
	}
	return session.ChildID("", sid, "ask_probe", "probe")
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// chunk is one frame of a UI message stream.
type chunk struct {
	Type       string                    `json:"type"`
	Delta      string                    `json:"delta"`
	ToolCallID string                    `json:"toolCallId"`
	ToolName   string                    `json:"toolName"`
	ApprovalID string                    `json:"approvalId"`
	Output     *struct{ Content string } `json:"output"`
	ErrorText  string                    `json:"errorText"`
	Data       json.RawMessage           `json:"data"`
	Transient  bool                      `json:"transient"`
	Reason     string                    `json:"reason"`
}

// agentPart is a data-agent chunk's data.
type agentPart struct {
	ToolCallID string `json:"toolCallId"`
	Agent      string `json:"agent"`
	Event      struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ToolCall *struct {
			Name string `json:"name"`
		} `json:"toolCall"`
		ToolResult *struct {
			Content string `json:"content"`
		} `json:"toolResult"`
		Approval *struct {
			ID    string `json:"id"`
			Agent string `json:"agent"`
			Call  *struct {
				Name string `json:"name"`
			} `json:"call"`
		} `json:"approval"`
	} `json:"event"`
}

// chat posts body to the agent's chat endpoint and reads the stream,
// calling each (when set) for every chunk as it comes; it returns the
// chunks.
func chatStream(t *testing.T, base, agentID, body string, each func(chunk)) []chunk {
	t.Helper()
	res, err := http.Post(base+"/api/chat/"+agentID, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("POST /api/chat/%s: %d %s", agentID, res.StatusCode, b)
	}
	var out []chunk
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("frame %q: %v", data, err)
		}
		out = append(out, c)
		if each != nil {
			each(c)
		}
	}
	return out
}

// offers are the tools each data-orchestration chunk offers.
func offers(cs []chunk) [][]string {
	var out [][]string
	for _, c := range cs {
		if c.Type == "data-orchestration" {
			var d struct{ OfferedTools []string }
			_ = json.Unmarshal(c.Data, &d)
			out = append(out, d.OfferedTools)
		}
	}
	return out
}

func agentParts(cs []chunk) []agentPart {
	var out []agentPart
	for _, c := range cs {
		if c.Type == "data-agent" {
			var p agentPart
			_ = json.Unmarshal(c.Data, &p)
			out = append(out, p)
		}
	}
	return out
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// sessionView is what the tests read of GET /api/sessions/:id.
type sessionView struct {
	Agent    string
	Messages []struct {
		Role    string
		Content string
	}
	State struct {
		RecentlyUsedTools []string
	}
	Usage            struct{ Total int64 }
	Turn             *struct{ Running bool }
	PendingApprovals []struct {
		ApprovalID string
		ToolName   string
		AgentCall  *struct{ Agent, ToolName string }
	}
	Children []struct{ Tool, Agent, SessionID string }
}

const leadTemplate = `{"agentId": "lead", "name": "Lead", "description": "Asks the probe, then critiques.",
  "nodes": ["llm.openai", "critique", "ask_probe"],
  "agents": {"ask_probe": {"agent": "probe", "description": "Ask the probe to look into something."}},
  "orchestration": {"stepScope": "turn", "steps": [{"name": "Default", "isDefault": true, "sequence": ["ask_probe", "critique"]}]}}`

const probeTemplate = `{"agentId": "probe", "name": "Probe", "description": "Thinks about what it is asked.", "nodes": ["llm.openai", "think"]}`

// TestAgentToolLocal is the first acceptance item over HTTP: the lead's
// default step's sequence is [ask_probe, critique]; only ask_probe is
// offered first, the probe's answer is its result, critique is offered
// next, and the lead's chat stream shows the probe's text as it comes.
// The lead's session lists the probe's, which the owner reads, and the
// probe's usage is in the lead's.
func TestAgentToolLocal(t *testing.T) {
	s := startAgentServer(t, listen(t), map[string]string{"lead": leadTemplate, "probe": probeTemplate})
	cs := chatStream(t, s.url, "lead", `{"sessionId": "lead-session-1", "message": "Think about why tea cools faster in a wide cup"}`, nil)
	if got := offers(cs); len(got) < 3 || !slices.Equal(got[0], []string{"ask_probe"}) || !slices.Equal(got[1], []string{"critique"}) {
		t.Fatalf("offers %v: want [ask_probe] first, then [critique]", got)
	}
	var childText, result string
	for _, p := range agentParts(cs) {
		if p.Agent != "probe" || p.ToolCallID == "" {
			t.Fatalf("a data-agent part %+v: want the probe, under the call", p)
		}
		if p.Event.Type == "text-delta" {
			childText += p.Event.Text
		}
	}
	for _, c := range cs {
		if c.Type == "tool-output-available" && c.Output != nil && result == "" {
			result = c.Output.Content
		}
	}
	if childText == "" || result != childText {
		t.Fatalf("the ask_probe result %q; want the probe's text as streamed, %q", result, childText)
	}
	var lead sessionView
	getJSON(t, s.url+"/api/sessions/lead-session-1", &lead)
	if !slices.Equal(lead.State.RecentlyUsedTools, []string{"ask_probe", "critique"}) {
		t.Errorf("lead's recent tools %v", lead.State.RecentlyUsedTools)
	}
	if len(lead.Children) != 1 || lead.Children[0].Agent != "probe" || lead.Children[0].Tool != "ask_probe" {
		t.Fatalf("lead's children %+v", lead.Children)
	}
	var probe sessionView
	getJSON(t, s.url+"/api/sessions/"+lead.Children[0].SessionID, &probe)
	if probe.Agent != "probe" || len(probe.Messages) < 2 || probe.Messages[len(probe.Messages)-1].Content != childText {
		t.Fatalf("the probe's session: %+v", probe)
	}
	if probe.Usage.Total == 0 || lead.Usage.Total <= probe.Usage.Total {
		t.Errorf("usage: lead %d, probe %d; the lead's counts the probe's", lead.Usage.Total, probe.Usage.Total)
	}
}

// TestAgentToolRemote: an A2A agent on a second server answers as a tool:
// its answer is the lead's tool result, its text streams under the call,
// and a second call continues the same remote conversation (its
// contextId is the lead session's child).
func TestAgentToolRemote(t *testing.T) {
	b := startAgentServer(t, listen(t), map[string]string{"probe": probeTemplate})
	remote := strings.Replace(leadTemplate, `{"agent": "probe",`, `{"a2a": "`+b.url+`/a2a/probe",`, 1)
	a := startAgentServer(t, listen(t), map[string]string{"lead": remote})
	for i, msg := range []string{"Think about why tea cools faster in a wide cup", "Think about why coffee does too"} {
		cs := chatStream(t, a.url, "lead", `{"sessionId": "remote-lead-1", "message": "`+msg+`"}`, nil)
		var childText, result string
		for _, p := range agentParts(cs) {
			if p.Event.Type == "text-delta" {
				childText += p.Event.Text
			}
		}
		for _, c := range cs {
			if c.Type == "tool-output-available" && c.Output != nil && result == "" {
				result = c.Output.Content
			}
			if c.Type == "tool-output-error" {
				t.Fatalf("turn %d: the remote call failed: %s", i+1, c.ErrorText)
			}
		}
		if childText == "" || result != childText {
			t.Fatalf("turn %d: the result %q; want the remote agent's streamed text %q", i+1, result, childText)
		}
		if got := offers(cs); !slices.Equal(got[0], []string{"ask_probe"}) || !slices.Equal(got[1], []string{"critique"}) {
			t.Fatalf("turn %d: offers %v", i+1, got)
		}
	}
	var remoteCtx sessionView
	getJSON(t, b.url+"/api/sessions/"+session.ChildID("", "remote-lead-1", "ask_probe", ""), &remoteCtx)
	var users []string
	for _, m := range remoteCtx.Messages {
		if m.Role == "user" {
			users = append(users, m.Content)
		}
	}
	if len(users) != 2 || remoteCtx.Agent != "probe" {
		t.Fatalf("the remote context's user messages %q (agent %s); want both calls in one conversation", users, remoteCtx.Agent)
	}
}

// TestAgentToolStop: stopping the lead while the probe streams stops the
// probe: the lead's stream shows the probe's abort under the call, then
// ends stopped, and by then the probe's turn has ended and saved its
// partial answer (read from its session, not timed).
func TestAgentToolStop(t *testing.T) {
	s := startAgentServer(t, listen(t), map[string]string{"lead": leadTemplate, "probe": probeTemplate}, "probe")
	stopped := false
	var stopAt time.Time
	cs := chatStream(t, s.url, "lead", `{"sessionId": "stop-lead-1", "message": "Think about why tea cools faster in a wide cup"}`, func(c chunk) {
		if c.Type == "data-agent" && !stopped {
			var p agentPart
			_ = json.Unmarshal(c.Data, &p)
			if p.Event.Type != "text-delta" {
				return
			}
			stopped, stopAt = true, time.Now()
			res, err := http.Post(s.url+"/api/sessions/stop-lead-1/stop", "application/json", nil)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
		}
	})
	if !stopped {
		t.Fatal("the probe's text never streamed")
	}
	// For the record, not asserted: from the stop to the lead's last frame,
	// after the probe's turn ended.
	t.Logf("the stop's request to the lead's finish, the probe's turn ended before it: %s", time.Since(stopAt).Round(time.Millisecond))
	var aborts []string
	for _, p := range agentParts(cs) {
		if p.Event.Type == "abort" {
			aborts = append(aborts, p.Agent)
		}
	}
	last := cs[len(cs)-1]
	if !slices.Equal(aborts, []string{"probe"}) || last.Type != "finish" || !slices.ContainsFunc(cs, func(c chunk) bool { return c.Type == "abort" }) {
		t.Fatalf("the lead's stream: probe aborts %v, ends %+v; want the probe's abort, then the lead's", aborts, last)
	}
	var lead, probe sessionView
	getJSON(t, s.url+"/api/sessions/stop-lead-1", &lead)
	getJSON(t, s.url+"/api/sessions/"+lead.Children[0].SessionID, &probe)
	if probe.Turn == nil || probe.Turn.Running {
		t.Fatalf("the probe's turn %+v: want it ended when the lead's stream ended", probe.Turn)
	}
	if n := len(probe.Messages); n < 2 || probe.Messages[n-1].Role != "assistant" || probe.Messages[n-1].Content == "" {
		t.Fatalf("the probe's history %+v: want its partial answer saved", probe.Messages)
	}
	if len(lead.State.RecentlyUsedTools) != 0 {
		t.Errorf("the stopped call was recorded: %v", lead.State.RecentlyUsedTools)
	}
}

// TestAgentToolApproval: a call the probe holds for approval is asked of
// the lead's client (the approval names the probe and its call) and
// answered through the lead's chat endpoint; the probe goes on, and its
// answer is the lead's result. The probe is on the lead's server, or on
// another one over A2A.
func TestAgentToolApproval(t *testing.T) {
	asker := `{"agentId": "probe", "name": "Probe", "description": "Searches, with approval.", "nodes": ["llm.openai", "search", "think"], "options": {"requireApproval": ["search"]}}`
	for _, remote := range []bool{false, true} {
		name, who := "local", "probe"
		if remote {
			name, who = "remote", "Probe" // the remote agent's card names it
		}
		t.Run(name, func(t *testing.T) {
			s := startAgentServer(t, listen(t), map[string]string{"lead": leadTemplate, "probe": asker})
			child := s // the server of the probe's session
			if remote {
				s = startAgentServer(t, listen(t), map[string]string{"lead": strings.Replace(leadTemplate, `{"agent": "probe",`, `{"a2a": "`+child.url+`/a2a/probe",`, 1)})
			}
			cs := chatStream(t, s.url, "lead", `{"sessionId": "approve-lead-1", "message": "Search the web for green tea prices"}`, nil)
			var approval chunk
			for _, c := range cs {
				if c.Type == "tool-approval-request" {
					approval = c
				}
			}
			var asked []agentPart
			for _, p := range agentParts(cs) {
				if p.Event.Type == "approval" {
					asked = append(asked, p)
				}
			}
			if approval.ApprovalID == "" || len(asked) != 1 || asked[0].Event.Approval == nil || asked[0].Event.Approval.ID != approval.ApprovalID || asked[0].Event.ToolCall.Name != "search" {
				t.Fatalf("approval %+v, the probe's %+v: want one, for the probe's search", approval, asked)
			}
			var lead sessionView
			getJSON(t, s.url+"/api/sessions/approve-lead-1", &lead)
			if len(lead.PendingApprovals) != 1 || lead.PendingApprovals[0].ToolName != "ask_probe" || lead.PendingApprovals[0].AgentCall == nil ||
				lead.PendingApprovals[0].AgentCall.Agent != who || lead.PendingApprovals[0].AgentCall.ToolName != "search" {
				t.Fatalf("the lead's pending approvals %+v: want the probe's search under ask_probe", lead.PendingApprovals)
			}
			cs = chatStream(t, s.url, "lead", `{"sessionId": "approve-lead-1", "approvals": [{"id": "`+approval.ApprovalID+`", "approved": true}]}`, nil)
			var result string
			var searched bool
			for _, c := range cs {
				if c.Type == "tool-output-available" && c.ToolCallID == approval.ToolCallID && c.Output != nil {
					result = c.Output.Content
				}
			}
			for _, p := range agentParts(cs) {
				searched = searched || p.Event.Type == "tool-result" && p.Event.ToolResult != nil
			}
			if !searched || result == "" {
				t.Fatalf("after the approval: the probe searched %v, the lead's result %q", searched, result)
			}
			getJSON(t, s.url+"/api/sessions/approve-lead-1", &lead)
			var probe sessionView
			getJSON(t, child.url+"/api/sessions/"+childOf(remote, "approve-lead-1"), &probe)
			if len(lead.PendingApprovals) != 0 || len(probe.PendingApprovals) != 0 || !slices.Equal(probe.State.RecentlyUsedTools, []string{"search"}) ||
				!slices.Equal(lead.State.RecentlyUsedTools, []string{"ask_probe", "critique"}) {
				t.Fatalf("after: lead %+v, probe %+v", lead, probe)
			}
			if !strings.HasPrefix(result, probe.Messages[len(probe.Messages)-1].Content) {
				t.Errorf("the lead's result %q is not the probe's answer %q", result, probe.Messages[len(probe.Messages)-1].Content)
			}
		})
	}
}

// TestAgentToolCycleAtLoad: a template whose agent tool names itself does
// not load, nor do agents that ask one another in a circle; the error
// names the cycle, and the other agents are served.
func TestAgentToolCycleAtLoad(t *testing.T) {
	dir := t.TempDir()
	for id, tmpl := range map[string]string{
		"self": `{"agentId": "self", "name": "Self", "nodes": ["ask_me"], "agents": {"ask_me": {"agent": "self"}}}`,
		"a":    `{"agentId": "a", "name": "A", "nodes": ["ask_b"], "agents": {"ask_b": {"agent": "b"}}}`,
		"b":    `{"agentId": "b", "name": "B", "nodes": ["ask_a"], "agents": {"ask_a": {"agent": "a"}}}`,
		"c":    `{"agentId": "c", "name": "C", "nodes": ["ask_a"], "agents": {"ask_a": {"agent": "a"}}}`,
	} {
		_ = os.MkdirAll(filepath.Join(dir, id), 0o755)
		if err := os.WriteFile(filepath.Join(dir, id, "template.json"), []byte(tmpl), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncBuffer
	loaded, err := loadAgents(dir, tools.BuiltinNames(), nil, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range loaded {
		ids = append(ids, l.ID())
	}
	for _, gone := range []string{"self", "a", "b", "c"} {
		if slices.Contains(ids, gone) {
			t.Errorf("%s loaded: %v", gone, ids)
		}
	}
	if !slices.Contains(ids, "research-lead") {
		t.Errorf("the shipped agents are not all served: %v", ids)
	}
	out := logs.String()
	for _, want := range []string{`agents.ask_me.agent: the cycle self -> self`, `the cycle a -> b -> a`, `c/template.json: agents.ask_a.agent: no agent \"a\" is loaded`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	code, vout := run("validate", filepath.Join(dir, "self", "template.json"))
	if code != 1 || !strings.Contains(vout, "the cycle self -> self") {
		t.Errorf("validate of the self-naming template: exit %d\n%s", code, vout)
	}
	code, vout = run("validate", filepath.Join(dir, "a"), filepath.Join(dir, "b"))
	if code != 1 || !strings.Contains(vout, "agents.ask_b.agent: the cycle a -> b -> a") || !strings.Contains(vout, "agents.ask_a.agent: the cycle a -> b -> a") {
		t.Errorf("validate of a and b: exit %d\n%s", code, vout)
	}
	// A template asking a shipped agent validates alone.
	if code, vout = run("validate", filepath.Join(testenv.ModuleRoot(), "templates", "research-lead", "template.json")); code != 0 {
		t.Errorf("validate of research-lead alone: exit %d\n%s", code, vout)
	}
}

// TestAgentToolDepth: two servers whose agents ask each other over A2A
// stop at AGENT_CALL_DEPTH: the call that would be the fifth is refused,
// the refusal travels back up as the inner agents' results, and every
// turn ends; an A2A request that comes deeper than the limit is refused.
func TestAgentToolDepth(t *testing.T) {
	lnA, lnB := listen(t), listen(t)
	urlA, urlB := "http://"+lnA.Addr().String(), "http://"+lnB.Addr().String()
	ping := `{"agentId": "ping", "name": "Ping", "nodes": ["llm.openai", "ask_peer"], "agents": {"ask_peer": {"a2a": "` + urlB + `/a2a/pong"}},
	  "orchestration": {"stepScope": "turn", "steps": [{"name": "Default", "isDefault": true, "sequence": ["ask_peer"]}]}}`
	pong := strings.NewReplacer(`"ping"`, `"pong"`, `"Ping"`, `"Pong"`, urlB+"/a2a/pong", urlA+"/a2a/ping").Replace(ping)
	startAgentServer(t, lnA, map[string]string{"ping": ping})
	b := startAgentServer(t, lnB, map[string]string{"pong": pong})
	cs := chatStream(t, urlA, "ping", `{"sessionId": "depth-ping-1", "message": "Pass this on"}`, nil)
	if last := cs[len(cs)-1]; last.Type != "finish" {
		t.Fatalf("the first turn ends with %+v", last)
	}
	// The refusal is the result of the call that ping makes at depth 4
	// (on A, asked by pong at depth 3): it comes back up as progress
	// nested once per agent between, three times (the answers above it
	// quote it too).
	type nested struct {
		Type       string
		ToolResult *struct{ Content string }
		Progress   *struct{ Event *nested }
	}
	refusedAt := -1
	var walk func(ev *nested, level int)
	walk = func(ev *nested, level int) {
		switch {
		case ev == nil:
		case ev.Type == "tool-result" && ev.ToolResult != nil && strings.HasPrefix(ev.ToolResult.Content, "this call would be agent call 5"):
			refusedAt = level
		case ev.Type == "tool-progress" && ev.Progress != nil:
			walk(ev.Progress.Event, level+1)
		}
	}
	for _, c := range cs {
		if c.Type == "data-agent" {
			var d struct{ Event *nested }
			_ = json.Unmarshal(c.Data, &d)
			walk(d.Event, 0)
		}
	}
	if refusedAt != 3 {
		t.Errorf("the refusal came back nested %d times; want 3 (pong, ping, pong between)", refusedAt)
	}
	body := `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}`
	req, _ := http.NewRequest(http.MethodPost, b.url+"/a2a/pong", strings.NewReader(body))
	req.Header.Set(agenttool.DepthHeader, "5")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var rep struct {
		Error *struct {
			Code    int
			Message string
		}
	}
	_ = json.NewDecoder(res.Body).Decode(&rep)
	if rep.Error == nil || rep.Error.Code != -32600 || !strings.Contains(rep.Error.Message, "AGENT_CALL_DEPTH") {
		t.Fatalf("a request at depth 5: %+v", rep.Error)
	}
}
