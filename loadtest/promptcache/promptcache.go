// Package promptcache measures what a provider's prompt cache makes of the
// runtime's requests. It plays a fixed conversation with the shipped
// Cognitive Reasoner, ten turns each in another mode and each following
// its mode's sequence (three tool calls, then the answer), through the
// real agent, the real provider over HTTP (the OpenAI wire, restricting
// tools with allowed_tools) and the real tools, against a mock model with
// a prefix cache (mockllm.WithPrefixCache), once per tool filtering mode
// (template.ToolFilteringStable, template.ToolFilteringFilter). RunRouted
// plays it with some modes on another model (a step's "model"), and
// Result.ByModel splits the figures by model, since each has a cache of
// its own.
//
// The figures are bytes and tokens, not times: a run is deterministic, and
// the same on any machine. They back the acceptance test of the stable
// request prefix and `make bench-cache` (BENCHMARKS.md, "Prompt cache").
package promptcache

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/templates"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/search"
)

// Turn is one user message of the conversation, the mode it puts the
// Cognitive Reasoner in and that mode's sequence, which the scripted model
// follows.
type Turn struct {
	Message  string
	Mode     string
	Sequence []string
}

// Conversation is the fixed conversation: every turn in another mode than
// the one before, every mode's sequence followed.
var Conversation = []Turn{
	{"Critique the argument that remote work improves productivity", "EvaluationMode", []string{"critique", "debate", "reflect"}},
	{"Compare solar and wind power for a family home", "ComparisonMode", []string{"search", "compare", "reflect"}},
	{"Debate whether cities should ban cars from their centres", "DebateMode", []string{"search", "debate", "reflect"}},
	{"Brainstorm ways a small bakery could waste less bread", "IdeationMode", []string{"think", "brainstorm", "critique"}},
	{"Research the history of electric cars", "ResearchMode", []string{"search", "think", "reflect"}},
	{"How can a team of five cut its meeting time in half?", "ProblemSolvingMode", []string{"think", "brainstorm", "compare"}},
	{"Evaluate the claim that a four-day week raises output", "EvaluationMode", []string{"critique", "debate", "reflect"}},
	{"Compare trains and planes for a trip from Paris to Berlin", "ComparisonMode", []string{"search", "compare", "reflect"}},
	{"Argue both sides of teaching programming in primary school", "DebateMode", []string{"search", "debate", "reflect"}},
	{"Give me creative ideas for a rainy-day school fair", "IdeationMode", []string{"think", "brainstorm", "critique"}},
}

// Result is one run of the conversation.
type Result struct {
	// Wire and Filtering are the run's provider wire format
	// (provider.OpenAI, provider.Anthropic) and tool filtering mode.
	Wire, Filtering string
	// Cheap are the modes whose calls went to llm.cheap (RunRouted).
	Cheap []string
	// Requests are the model requests the mock received, in order, each
	// with its Prefix.
	Requests []mockllm.Request
	// Offered is, per model call, the tools the orchestration offered
	// (the runtime's data-orchestration snapshot at the call).
	Offered [][]string
	// Session is the session's usage as the runtime stored it.
	Session chat.Usage
	// Refused counts the tool results that were refusals.
	Refused int
}

// Totals sums the requests' prefixes: the bytes shared from the start
// with the previous request and the bytes that could have been, and the
// input tokens sent and cached.
func (r Result) Totals() (shared, shareable, input, cached int) {
	for _, q := range r.Requests {
		p := q.Prefix
		shared += min(p.Shared, p.Shareable)
		shareable += p.Shareable
		input += p.InputTokens
		cached += p.CachedTokens
	}
	return shared, shareable, input, cached
}

// ByModel splits the run by the model its requests named, in the order
// each was first called: each model has a prompt cache of its own.
func (r Result) ByModel() []Result {
	var out []Result
	for _, q := range r.Requests {
		i := slices.IndexFunc(out, func(m Result) bool { return m.Requests[0].Model == q.Model })
		if i < 0 {
			out = append(out, Result{Wire: r.Wire, Filtering: r.Filtering})
			i = len(out) - 1
		}
		out[i].Requests = append(out[i].Requests, q)
	}
	return out
}

// Written sums the input tokens the requests wrote to the cache (Anthropic
// bills them above the input price; OpenAI reports none).
func (r Result) Written() int {
	n := 0
	for _, q := range r.Requests {
		n += q.Prefix.WriteTokens
	}
	return n
}

// Fraction is the conversation's shared-prefix fraction: the bytes shared
// from the start with the previous request, over those both held.
func (r Result) Fraction() float64 {
	shared, shareable, _, _ := r.Totals()
	if shareable == 0 {
		return 0
	}
	return float64(shared) / float64(shareable)
}

// Run plays Conversation over the OpenAI wire, its provider taking
// allowed_tools, with the given tool filtering mode, then the extra turns
// (whose scripted model calls their Sequence, offered or not, and
// answers).
func Run(ctx context.Context, filtering string, extra ...Turn) (Result, error) {
	return RunWire(ctx, provider.OpenAI, filtering, extra...)
}

// RunWire is Run over the given wire: provider.OpenAI (with
// allowed_tools) or provider.Anthropic (without, and with cache
// breakpoints in stable mode).
func RunWire(ctx context.Context, wire, filtering string, extra ...Turn) (Result, error) {
	return run(ctx, wire, filtering, nil, extra...)
}

// Cheap and Strong are the models of a routed run (RunRouted): llm.cheap's
// and the agent's own.
const (
	Cheap  = "gpt-4o-mini"
	Strong = "gpt-4o"
)

// RunRouted is Run with the calls of the modes in cheap made by another
// model, llm.cheap (its step's "model"), and the others by the agent's
// own: each model's prompt cache sees only its own requests.
func RunRouted(ctx context.Context, filtering string, cheap []string) (Result, error) {
	return run(ctx, provider.OpenAI, filtering, cheap)
}

func run(ctx context.Context, wire, filtering string, cheap []string, extra ...Turn) (Result, error) {
	res := Result{Wire: wire, Filtering: filtering, Cheap: cheap}
	searx := httptest.NewServer(http.HandlerFunc(searxng))
	defer searx.Close()
	mock := mockllm.New(mockllm.WithPrefixCache())
	defer mock.Close()
	pc := provider.Config{Provider: provider.OpenAI, Model: "gpt-4o-mini", BaseURL: mock.URL() + "/v1", APIKey: "bench", RestrictsTools: true, MaxRetries: -1}
	if wire == provider.Anthropic {
		pc.Provider, pc.Model, pc.BaseURL, pc.RestrictsTools = provider.Anthropic, "claude-sonnet-4-5", mock.URL(), false
	}
	model, err := provider.New(pc)
	if err != nil {
		return res, err
	}
	models := agent.Model(model)
	if len(cheap) > 0 {
		// One provider model per configuration, by the model it names.
		models = func(t *template.Template) (llmorch.Model, error) {
			c := pc
			if _, nc := t.Provider(); nc.Model == Cheap {
				c.Model = Cheap
			} else {
				c.Model = Strong
			}
			return provider.New(c)
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	builtin := tools.BuiltinConfig{Search: search.Config{SearXNGURL: searx.URL}, Logger: quiet}
	reg, err := tools.Builtin(builtin)
	if err != nil {
		return res, err
	}
	data, err := templates.FS().Open("cognitive-reasoner/template.json")
	if err != nil {
		return res, err
	}
	var raw json.RawMessage
	if err := json.NewDecoder(data).Decode(&raw); err != nil {
		return res, err
	}
	_ = data.Close()
	a, diags := template.Load("cognitive-reasoner/template.json", raw, template.Config{Provided: reg.Names()})
	if a == nil {
		return res, diags.Err()
	}
	a.Template.Options.ToolFiltering = filtering
	if len(cheap) > 0 {
		a.Template.NodeConfigurations["llm.cheap"] = template.NodeConfig{Provider: provider.OpenAI, Model: Cheap}
		for i, s := range a.Template.Orchestration.Steps {
			if slices.Contains(cheap, s.Name) {
				a.Template.Orchestration.Steps[i].Model = "llm.cheap"
			}
		}
	}
	store := session.NewMemory(session.Config{})
	defer store.Close()
	set, err := agent.NewSet(agent.Options{Store: store, Builtin: builtin, Models: models, Logger: quiet}, []*template.Loaded{a})
	if err != nil {
		return res, err
	}
	reasoner, _ := set.Get(a.ID())
	sid := session.NewID()
	turns := append(slices.Clone(Conversation), extra...)
	for i, t := range turns {
		for j, tool := range t.Sequence {
			mock.Enqueue(mockllm.Script{ToolCalls: []mockllm.ToolCall{{
				ID: fmt.Sprintf("call_%d_%d", i+1, j+1), Name: tool, Arguments: arguments(tool, t.Message)}}})
		}
		mock.Enqueue(mockllm.Script{Text: []string{answer(t)}})
		var offered []string
		for ev, err := range reasoner.Run(ctx, sid, agent.Text(t.Message)) {
			if err != nil {
				return res, fmt.Errorf("turn %d (%s): %w", i+1, t.Mode, err)
			}
			switch ev.Kind {
			case chat.KindOrchestration:
				offered = ev.Orchestration.OfferedTools
				if ev.Orchestration.Transition && i < len(Conversation) && ev.Orchestration.ActiveStep != t.Mode {
					return res, fmt.Errorf("turn %d: the message put the agent in %s, not %s", i+1, ev.Orchestration.ActiveStep, t.Mode)
				}
			case chat.KindStepStart:
				res.Offered = append(res.Offered, slices.Clone(offered))
			case chat.KindToolResult:
				if ev.ToolResult.Type == "refused" {
					res.Refused++
				}
			case chat.KindError:
				return res, fmt.Errorf("turn %d (%s): %s", i+1, t.Mode, ev.Error.Message)
			}
		}
		if n := mock.Pending(); n > 0 {
			return res, fmt.Errorf("turn %d (%s): %d scripted answers left unused", i+1, t.Mode, n)
		}
	}
	sess, err := store.Get(ctx, sid)
	if err != nil {
		return res, err
	}
	res.Session = sess.State.TokenUsage
	res.Requests = mock.Requests()
	return res, nil
}

// arguments are a call's arguments: a heading and a body of prose as long
// as a model writes for such a tool, the same on every run.
func arguments(tool, message string) string {
	title := strings.TrimSuffix(message, "?")
	var args map[string]any
	body := prose(tool+message, 180)
	switch tool {
	case "search":
		args = map[string]any{"query": title, "limit": 5}
	case "think":
		args = map[string]any{"topic": title, "reasoning": body}
	case "reflect":
		args = map[string]any{"topic": title, "reflection": body}
	case "critique":
		args = map[string]any{"subject": title, "analysis": body}
	case "debate":
		args = map[string]any{"topic": title, "perspectives": body}
	case "brainstorm":
		args = map[string]any{"challenge": title, "ideas": body}
	case "compare":
		args = map[string]any{"topic": title, "comparison": body}
	default:
		args = map[string]any{}
	}
	b, _ := json.Marshal(args)
	return string(b)
}

// answer is a turn's final answer.
func answer(t Turn) string {
	return "## " + t.Mode + "\n\n" + prose("answer"+t.Message, 220)
}

// words are the vocabulary of prose.
var words = strings.Fields(`the a team cost evidence claim source result option trade-off risk benefit
measure study data plan step reason because therefore however although while since which
shows suggests weighs against for with without under over across between more less often
rarely usually clearly partly strongly weakly first second finally overall time money energy
people policy design test review choice criteria outcome assumption limit scale context`)

// prose is n words chosen from words by a generator seeded with seed: the
// same text for the same seed on every run.
func prose(seed string, n int) string {
	h := fnv.New64a()
	h.Write([]byte(seed))
	x := h.Sum64() | 1
	var b strings.Builder
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if i > 0 {
			if i%15 == 0 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(words[x%uint64(len(words))])
	}
	b.WriteByte('.')
	return b.String()
}

// searxng answers a SearXNG search with five results made from the query.
func searxng(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	type result struct {
		Title   string `json:"title"`
		URL     string `json:"url"`
		Content string `json:"content"`
	}
	var out struct {
		Results []result `json:"results"`
	}
	for i := 1; i <= 5; i++ {
		out.Results = append(out.Results, result{Title: fmt.Sprintf("%s, source %d", q, i),
			URL: fmt.Sprintf("https://example.org/%d", i), Content: prose(fmt.Sprint(q, i), 40)})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
