package agent

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/spend"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// DefaultFallbackWait is Options.FallbackWait's default: a rate limit
// that asks a model with a fallback to wait longer goes to the fallback.
const DefaultFallbackWait = 5 * time.Second

// models builds an agent's models, one per llm.* key of its template
// (its own, its steps', its summarizer's): each from Options.Models, with
// its fallbacks (llmorch.Fallbacks) and its calls charged to the turn's
// owner (meter). A key's model is built once per agent.
type models struct {
	cfg   Options
	t     *template.Template
	base  map[string]llmorch.Model
	built map[string]llmorch.Model
	meter *meter
}

func newModels(cfg Options, t *template.Template, m *meter) *models {
	return &models{cfg: cfg, t: t, base: map[string]llmorch.Model{}, built: map[string]llmorch.Model{}, meter: m}
}

// of returns the model of key (the agent's own for its llm.* node or
// ""), with its fallbacks and metered.
func (b *models) of(key string) (llmorch.Model, error) {
	if key == "" {
		key = b.t.ModelNode()
	}
	if m, ok := b.built[key]; ok {
		return m, nil
	}
	primary, err := b.make(key)
	if err != nil {
		return nil, err
	}
	nc := b.t.NodeConfigurations[key]
	chain := []llmorch.Candidate{{Model: primary, Config: key, ContextWindow: nc.ContextWindow}}
	if nc.Fallbacks == nil {
		chain = append(chain, b.cfg.Fallbacks...)
	}
	for _, f := range nc.Fallbacks {
		fm, err := b.make(f)
		if err != nil {
			return nil, fmt.Errorf("fallback %q: %w", f, err)
		}
		chain = append(chain, llmorch.Candidate{Model: fm, Config: f, ContextWindow: b.t.NodeConfigurations[f].ContextWindow})
	}
	m := b.meter.wrap(llmorch.Fallbacks(b.cfg.FallbackWait, chain...), key)
	b.built[key] = m
	return m, nil
}

// make is key's model alone, as the factory makes it: the agent's own
// from the template, another from the template naming that node alone.
func (b *models) make(key string) (llmorch.Model, error) {
	if m, ok := b.base[key]; ok {
		return m, nil
	}
	t := b.t
	if key != t.ModelNode() {
		node := *t
		node.Nodes = []string{key}
		t = &node
	}
	m, err := b.cfg.Models(t)
	if err != nil {
		return nil, err
	}
	b.base[key] = m
	return m, nil
}

// steps returns the models of the steps that name one other than the
// agent's own, by step name.
func (b *models) steps() (map[string]llmorch.StepModel, error) {
	out := map[string]llmorch.StepModel{}
	for _, s := range b.t.Steps() {
		if s.Model == "" || s.Model == b.t.ModelNode() {
			continue
		}
		m, err := b.of(s.Model)
		if err != nil {
			return nil, fmt.Errorf("step %q: model %q: %w", s.Name, s.Model, err)
		}
		nc := b.t.NodeConfigurations[s.Model]
		out[s.Name] = llmorch.StepModel{Model: m, Config: s.Model, Temperature: nc.Temperature, MaxTokens: nc.MaxTokens}
	}
	return out, nil
}

// meter charges every model call's usage to the turn's owner: it gives
// the usage its cost (Options.Spend's prices) and adds what the call spent
// to the owner's counts in the store (session.Ledger), so that budgets
// and GET /api/usage see every model call, the summarizer's and a
// fallback's included. A nil *meter charges nothing.
type meter struct {
	ledger session.Ledger
	prices spend.Prices
	log    *slog.Logger
}

// spendWrite bounds the write of a call's spending, which is made also
// when the turn was cancelled (its last call was spent all the same).
const spendWrite = 5 * time.Second

func newMeter(cfg Options) *meter {
	ledger, _ := cfg.Store.(session.Ledger)
	var prices spend.Prices
	if cfg.Spend != nil {
		prices = cfg.Spend.Prices
	}
	if ledger == nil && len(prices) == 0 {
		return nil
	}
	return &meter{ledger: ledger, prices: prices, log: cfg.Logger}
}

func (m *meter) wrap(model llmorch.Model, config string) llmorch.Model {
	if m == nil {
		return model
	}
	return &meteredModel{Model: model, config: config, m: m}
}

type meteredModel struct {
	llmorch.Model
	config string
	m      *meter
}

// CountTokens counts as the model does (llmorch.TokenCounter), or
// estimates.
func (mm *meteredModel) CountTokens(text string) int {
	if c, ok := mm.Model.(llmorch.TokenCounter); ok {
		return c.CountTokens(text)
	}
	return llmorch.EstimateTokens(text)
}

func (mm *meteredModel) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		info := mm.Model.Info()
		answered := chat.ModelRef{Config: mm.config, Provider: info.Provider, Model: info.Model}
		for ev, err := range mm.Model.Stream(ctx, req) {
			if err == nil {
				switch {
				case ev.Kind == chat.KindFallback && ev.Fallback != nil:
					answered = ev.Fallback.To
				case ev.Kind == chat.KindUsage && ev.Usage != nil:
					u := *ev.Usage
					u.Cost = mm.m.charge(ctx, answered, u)
					ev.Usage = &u
				}
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

// charge adds what a call of model spent, u, to the owner of the turn
// ctx runs (tools.CallFrom names it), and returns its cost.
func (m *meter) charge(ctx context.Context, model chat.ModelRef, u chat.Usage) float64 {
	s := m.prices.Charge(model.Provider, model.Model, u)
	if m.ledger == nil {
		return s.Cost
	}
	c, _ := tools.CallFrom(ctx)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), spendWrite)
	defer cancel()
	if err := m.ledger.Spend(wctx, c.Owner, time.Now(), s); err != nil {
		m.log.WarnContext(ctx, "counting what a model call spent failed; the key's budget does not see it", "tokens", s.Tokens, "err", err)
	}
	return s.Cost
}

// checkBudget refuses a turn of owner that would start past one of its
// budgets (Options.Spend): a *spend.ExceededError.
func (n *Agent) checkBudget(ctx context.Context, owner string) error {
	p := n.cfg.Spend
	if !p.Bounded() {
		return nil
	}
	now := time.Now()
	day, month, err := n.cfg.Store.(session.Ledger).Spent(ctx, owner, now)
	if err != nil {
		return fmt.Errorf("reading what this key spent: %w", err)
	}
	return p.Check(owner, now, day, month)
}

// Usage reports what owner spent on models today and this month (UTC),
// with its budgets (Options.Spend). It fails when the store keeps no
// spending (session.Ledger).
func (a *Set) Usage(ctx context.Context, owner string) (spend.Report, error) {
	ledger, ok := a.cfg.Store.(session.Ledger)
	if !ok {
		return spend.Report{}, fmt.Errorf("agent: the session store (%T) keeps no spending", a.cfg.Store)
	}
	now := time.Now()
	day, month, err := ledger.Spent(ctx, owner, now)
	if err != nil {
		return spend.Report{}, err
	}
	return a.cfg.Spend.Report(owner, now, day, month), nil
}
