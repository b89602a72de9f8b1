package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/template"
)

// parityTemplate has what makes calls end differently: a sequence that
// refuses calls out of order, a step that a tool moves to, tools that
// wait for approval everywhere or in one step (which a call of the same
// answer may leave or enter), and budgets that refuse calls over them and
// end turns that keep calling tools.
const parityTemplate = `{"agentId": "parity", "name": "Parity", "nodes": ["llm.openai", "a", "b", "c", "d"],
  "options": {"requireApproval": ["d"], "maxToolCalls": 3, "maxSteps": 3},
  "orchestration": {"steps": [
    {"name": "AfterC", "conditions": [{"type": "tool_used", "value": "c"}, {"type": "not_recently_used", "value": "a", "window": 2}],
     "availableTools": {"allowed": ["a", "b", "d"]}, "requireApproval": ["b"]},
    {"name": "Seq", "conditions": [{"type": "message_contains", "value": "seq"}],
     "sequence": ["a", "b", ["c", "d"]], "availableTools": {"allowed": ["a", "b", "c", "d"]}, "requireApproval": ["a"]},
    {"name": "Chat", "isDefault": true}
  ]}}`

// parityTools runs a call as its arguments say: {"do": "ok"} succeeds,
// "fail" runs and fails, "invalid" is refused before the tool runs (as
// arguments a schema rejects are), "hold" runs until the turn is stopped.
type parityTools struct {
	countingTools // its names and specs
	holding       chan struct{}
}

func (p *parityTools) Execute(ctx context.Context, call chat.ToolCall) chat.ToolResult {
	var args struct{ Do string }
	_ = json.Unmarshal(call.Arguments, &args)
	switch args.Do {
	case "fail":
		return chat.ToolResult{Content: "the backend is down", IsError: true}
	case "invalid":
		return chat.ToolResult{Content: "invalid arguments for " + call.Name, IsError: true, NotRun: true}
	case "hold":
		select {
		case p.holding <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return chat.ToolResult{Content: "interrupted", IsError: true}
	}
	return chat.ToolResult{Content: "result of " + call.Name}
}

// conversationGen writes random conversations: each turn a user message
// (or a regenerated answer, or answers to held calls) and the model's
// answers, each with random calls of random kinds.
type conversationGen struct {
	rng *rand.Rand
	ids int
}

func (g *conversationGen) answers(stopAllowed bool) [][]chat.Event {
	var out [][]chat.Event
	for range g.rng.IntN(4) {
		var evs []chat.Event
		for range 1 + g.rng.IntN(4) {
			g.ids++
			call := &chat.ToolCall{ID: fmt.Sprintf("call-%d", g.ids), Name: string(rune('a' + g.rng.IntN(4)))}
			do := []string{"ok", "ok", "ok", "fail", "invalid", "model-invalid", "hold"}[g.rng.IntN(7)]
			if do == "hold" && !stopAllowed {
				do = "ok"
			}
			call.Arguments = json.RawMessage(`{"do":"` + do + `"}`)
			if do == "model-invalid" {
				// A call the provider reports as invalid (arguments that
				// are not a JSON object).
				evs = append(evs, chat.Event{Kind: chat.KindError, ToolCall: call, Error: &chat.Error{Code: "invalid_tool_call", Message: "the arguments of " + call.Name + " are not a JSON object"}})
				continue
			}
			evs = append(evs, chat.Event{Kind: chat.KindToolCall, ToolCall: call})
		}
		out = append(out, evs)
	}
	return out
}

// parityRig plays generated conversations live through an agent over one
// store.
type parityRig struct {
	t     *testing.T
	store session.Store
	node  *agent.Agent
	model *scriptedModel
	tools *parityTools
	kinds map[string]int
}

func newParityRig(t *testing.T, store session.Store) *parityRig {
	a, ds := template.Load("parity.json", []byte(parityTemplate), template.Config{})
	if a == nil {
		t.Fatal(ds.Err())
	}
	r := &parityRig{t: t, store: store, model: &scriptedModel{}, tools: &parityTools{countingTools: countingTools{names: []string{"a", "b", "c", "d"}}, holding: make(chan struct{}, 1)}, kinds: map[string]int{}}
	agents, err := agent.NewSet(agent.Options{Store: store, ToolsFor: toolbox(r.tools), Models: func(*template.Template) (llmorch.Model, error) { return r.model, nil }}, []*template.Loaded{a})
	if err != nil {
		t.Fatal(err)
	}
	r.node = agents.List()[0]
	return r
}

// play runs one turn (start) with the model's answers script, stopping
// it when a tool holds, and notes the kinds of its calls.
func (r *parityRig) play(script [][]chat.Event, start func(ctx context.Context) iter2) {
	r.model.mu.Lock()
	r.model.script = script
	r.model.mu.Unlock()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-r.tools.holding:
			cancel(chat.StoppedByUser)
		case <-done:
		}
	}()
	events, err := agent.Started(start(ctx))
	if err != nil {
		close(done)
		wg.Wait()
		r.t.Fatalf("the turn did not start: %v", err)
	}
	for ev := range events {
		switch ev.Kind {
		case chat.KindApproval:
			r.kinds["held"]++
		case chat.KindToolResult:
			res := ev.ToolResult
			switch {
			case res.Denied:
				r.kinds["denied"]++
			case res.Type == "refused":
				r.kinds["refused"]++
			case res.Type == "invalid_tool_call" || strings.HasPrefix(res.Content, chat.NotRunPrefix+"invalid arguments"):
				r.kinds["invalid"]++
			case res.Type == "cancelled" || res.NotRun:
				r.kinds["stopped"]++
			case res.IsError:
				r.kinds["failed"]++
			default:
				r.kinds["run"]++
			}
		case chat.KindError:
			r.t.Fatalf("the turn failed: %+v", ev.Error)
		}
	}
	close(done)
	wg.Wait()
	// A stop signal the turn did not wait for is not left for the next.
	select {
	case <-r.tools.holding:
	default:
	}
}

type iter2 = func(func(chat.Event, error) bool)

// conversation plays one generated conversation on session id.
func (r *parityRig) conversation(g *conversationGen, id string) {
	ctx := context.Background()
	messages := []string{"seq please", "hello", "seq again", "what now"}
	for range 1 + g.rng.IntN(4) {
		sess, err := r.store.Get(ctx, id)
		pending := err == nil && len(sess.PendingApprovals()) > 0
		switch {
		case pending && g.rng.IntN(3) > 0:
			var answers []agent.ApprovalAnswer
			for _, a := range sess.PendingApprovals() {
				answers = append(answers, agent.ApprovalAnswer{ID: a.ID, Approved: g.rng.IntN(2) == 0, Reason: "not now"})
			}
			r.play(g.answers(true), func(ctx context.Context) iter2 { return r.node.Run(ctx, id, agent.Input{Answers: answers}) })
		case err == nil && sess.State.UserMessages > 0 && g.rng.IntN(5) == 0:
			msg := sess.State.LastUserMessage
			r.play(g.answers(true), func(ctx context.Context) iter2 { return r.node.Run(ctx, id, agent.Input{Text: msg, Regenerate: true}) })
			r.kinds["regenerated"]++
		default:
			msg := messages[g.rng.IntN(len(messages))]
			r.play(g.answers(true), func(ctx context.Context) iter2 { return r.node.Run(ctx, id, agent.Text(msg)) })
		}
	}
}

// sameState says how the replayed state differs from the live one, ""
// when it does not: everything but token usage, which a conversation does
// not carry.
func sameState(replayed, live orchestration.State) string {
	strip := func(s orchestration.State) string {
		s.TokenUsage, s.RegeneratedUsage = chat.Usage{}, chat.Usage{}
		if s.TurnStart != nil {
			ts := *s.TurnStart
			ts.TokenUsage = chat.Usage{}
			s.TurnStart = &ts
		}
		b, _ := json.Marshal(s)
		return string(b)
	}
	if a, b := strip(replayed), strip(live); a != b {
		return fmt.Sprintf("replayed %s\nlive     %s", a, b)
	}
	return ""
}

// TestReplayParity: for 1,000 generated conversations, each run live
// through the turn loop (calls that run, fail, are refused, held for
// approval and then approved, declined or overtaken, have invalid
// arguments, or are stopped; regenerated answers), the state replayed
// from the session's stored history equals the session's state, on the
// memory store and on Redis.
func TestReplayParity(t *testing.T) {
	const conversations = 1000
	for _, st := range memoryAndRedis() {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t)
			defer store.Close()
			r := newParityRig(t, store)
			g := &conversationGen{rng: rand.New(rand.NewPCG(36, 2026))}
			ctx := context.Background()
			for i := range conversations {
				id := session.NewID()
				r.conversation(g, id)
				sess, err := store.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				history, err := store.Messages(ctx, id, 0)
				if err != nil {
					t.Fatal(err)
				}
				if diff := sameState(r.node.Engine().Replay(orchestration.State{}, history, nil), sess.State); diff != "" {
					t.Fatalf("conversation %d: %s\nhistory %+v", i, diff, history)
				}
			}
			for _, k := range []string{"run", "failed", "refused", "held", "denied", "invalid", "stopped", "regenerated"} {
				if r.kinds[k] == 0 {
					t.Errorf("no call of kind %q in %d conversations: the generator does not cover it", k, conversations)
				}
			}
			t.Logf("replay parity on %s: %d conversations, calls by kind %v", st.name, conversations, r.kinds)
		})
	}
}

// memoryAndRedis are the stores a test runs on: a memory store and a
// store on a real redis-server of its own.
func memoryAndRedis() []struct {
	name string
	open func(t testing.TB) session.Store
} {
	return []struct {
		name string
		open func(t testing.TB) session.Store
	}{
		{"memory", func(testing.TB) session.Store { return session.NewMemory(session.Config{}) }},
		{"redis", func(t testing.TB) session.Store {
			srv := redistest.Start(t)
			s, err := redisstore.New(redisstore.Config{URL: srv.URL()})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	}
}
