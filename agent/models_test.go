package agent_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"os"
	"sync"
	"testing"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/spend"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// down is a model whose provider is down: every call fails before its
// first token with an error retrying will not cure.
type down struct {
	name  string
	mu    sync.Mutex
	calls int
}

func (d *down) Info() llmorch.Info { return llmorch.Info{Provider: "test", Model: d.name} }

func (d *down) Stream(context.Context, llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		d.mu.Lock()
		d.calls++
		d.mu.Unlock()
		yield(chat.Event{}, fmt.Errorf("%w", errors.Join(&chat.Error{Code: "provider_unavailable", Message: d.name + ": HTTP 503"}, llmorch.ErrModelUnavailable)))
	}
}

// loadRouting loads the example briefing agent (examples/routing): its
// Gather step on llm.cheap, its Write step on llm.openai, both with the
// fallback llm.backup.
func loadRouting(t *testing.T) *template.Loaded {
	t.Helper()
	data, err := os.ReadFile("../examples/routing/template.json")
	if err != nil {
		t.Fatal(err)
	}
	l, ds := template.Load("routing/template.json", data, template.Config{Provided: tools.BuiltinNames()})
	if l == nil {
		t.Fatal(ds.Err())
	}
	return l
}

// TestStepModelsAndFallbacks: each step's calls go to its model, and a
// model that is down is answered by its fallback; the stream names the
// model that answered each call, the turn's usage is given by model.
func TestStepModelsAndFallbacks(t *testing.T) {
	primary := &down{name: "gpt-4.1"}
	var mu sync.Mutex
	made := map[string]int{}
	models := func(tpl *template.Template) (llmorch.Model, error) {
		_, nc := tpl.Provider()
		mu.Lock()
		made[tpl.ModelNode()]++
		mu.Unlock()
		if nc.Model == primary.name {
			return primary, nil
		}
		return offline.New(offline.Config{Name: nc.Model}), nil
	}
	store := session.NewMemory(session.Config{})
	defer store.Close()
	n, _ := newAgents(t, store, models, []*template.Loaded{loadRouting(t)}).Get("briefing")
	for key, times := range made {
		if times != 1 {
			t.Errorf("the model of %s was made %d times, want once", key, times)
		}
	}
	evs := turn(t, n, session.NewID(), "Brief me on heat pumps in cold climates")
	if done := evs[len(evs)-1]; done.FinishReason != chat.FinishStop {
		t.Fatalf("finish %q: %v", done.FinishReason, kinds(evs))
	}
	var (
		answered []string
		fbs      []chat.Fallback
		final    *chat.Event
	)
	for _, ev := range evs {
		switch {
		case ev.Kind == chat.KindFallback:
			fbs = append(fbs, *ev.Fallback)
		case ev.Kind == chat.KindUsage && ev.Final:
			final = &ev
		case ev.Kind == chat.KindUsage:
			answered = append(answered, ev.Model.Config+" "+ev.Model.Model)
		}
	}
	want := []string{"llm.cheap gpt-4.1-mini", "llm.backup claude-sonnet-4-5", "llm.backup claude-sonnet-4-5"}
	if fmt.Sprint(answered) != fmt.Sprint(want) {
		t.Errorf("the calls were answered by %v, want %v", answered, want)
	}
	if len(fbs) != 2 || fbs[0].From.Config != "llm.openai" || fbs[0].To.Config != "llm.backup" || fbs[0].Error.Code != "provider_unavailable" {
		t.Errorf("fallback events %+v", fbs)
	}
	if primary.calls != 2 {
		t.Errorf("the primary was called %d times, want once per call of the Write step (2)", primary.calls)
	}
	if final == nil || len(final.Models) != 2 || final.Models[0].Config != "llm.cheap" || final.Models[0].Calls != 1 ||
		final.Models[1].Config != "llm.backup" || final.Models[1].Calls != 2 ||
		final.Models[0].Usage.Add(final.Models[1].Usage) != *final.Usage {
		t.Errorf("the turn's usage by model: %+v", final)
	}
}

// fixedUsage answers every call with one word and the same usage.
type fixedUsage struct{ u chat.Usage }

func (f fixedUsage) Info() llmorch.Info { return llmorch.Info{Provider: "test", Model: "priced"} }

func (f fixedUsage) Stream(context.Context, llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		u := f.u
		if yield(chat.Event{Kind: chat.KindTextDelta, Text: "ok"}, nil) {
			yield(chat.Event{Kind: chat.KindUsage, Usage: &u}, nil)
		}
	}
}

// TestBudgetAndCost: every model call's usage is charged to the turn's
// owner, its cached input at its price's rate, and carries its cost; a
// turn that starts when its owner spent the budget is refused (a
// stateless one too), another owner's goes on, and Set.Usage reports it.
func TestBudgetAndCost(t *testing.T) {
	store := session.NewMemory(session.Config{})
	defer store.Close()
	// 20 fresh input tokens, 60 cached at a tenth of the price, 40 out:
	// 66 tokens for the budget, 106 micro-units of cost.
	model := fixedUsage{chat.Usage{Prompt: 80, CacheRead: 60, Completion: 40}}
	policy := &spend.Policy{Default: spend.Limits{PerDay: 100}, Prices: spend.Prices{"priced": {Input: 1, CachedInput: 0.1, Output: 2}}}
	set, err := agent.NewSet(agent.Options{Store: store, Models: agent.Model(model), Spend: policy}, shipped(t))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := set.Get("planner")
	run := func(owner string, stateless ...bool) ([]chat.Event, error) {
		events, err := agent.Started(n.Run(context.Background(), session.NewID(), agent.Input{Text: "hello", Owner: owner, Stateless: len(stateless) > 0}))
		if err != nil {
			return nil, err
		}
		var out []chat.Event
		for ev := range events {
			out = append(out, ev)
		}
		return out, nil
	}
	const cost = 106e-6
	evs, err := run("alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Kind == chat.KindUsage && math.Abs(ev.Usage.Cost-cost) > 1e-12 {
			t.Errorf("usage %+v, want cost %g", ev.Usage, cost)
		}
	}
	if _, err := run("alice"); err != nil {
		t.Fatalf("66 of 100 spent: %v", err)
	}
	_, err = run("alice")
	var ex *spend.ExceededError
	if !errors.As(err, &ex) || ex.Limit != spend.LimitDay || ex.Used != 132 || ex.Max != 100 {
		t.Fatalf("132 of 100 spent: %v", err)
	}
	if _, err := run("alice", true); !errors.As(err, &ex) {
		t.Errorf("a stateless turn past the budget: %v", err)
	}
	if _, err := run("bob"); err != nil {
		t.Errorf("another owner: %v", err)
	}
	r, err := set.Usage(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Day; d.Tokens != 132 || d.Calls != 2 || d.CachedInput != 120 || math.Abs(d.Cost-2*cost) > 1e-12 || d.Limit != 100 || d.LimitName != spend.LimitDay {
		t.Errorf("alice's usage %+v", r.Day)
	}
}
