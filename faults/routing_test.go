package faults

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// The cost-control tests (issue 60): a step's model, a model's fallbacks,
// and token budgets per API key, each through the real binary.

// byModel answers each model request by the model it names: a model
// with queued scripts takes the next, any other answers with its name
// and the given usage, after delay.
type byModel struct {
	srv *mockllm.Server
	mu  sync.Mutex
	q   map[string][]mockllm.Script
}

func newByModel(t *testing.T, usage *mockllm.Usage, delay time.Duration) *byModel {
	b := &byModel{q: map[string][]mockllm.Script{}}
	b.srv = newModel(t, mockllm.WithResponder(func(r mockllm.Request) mockllm.Script {
		b.mu.Lock()
		defer b.mu.Unlock()
		if q := b.q[r.Model]; len(q) > 0 {
			b.q[r.Model] = q[1:]
			return q[0]
		}
		return mockllm.Script{Text: []string{"answer from ", r.Model}, Usage: usage, TimeToFirstToken: delay}
	}))
	return b
}

func (b *byModel) queue(model string, s ...mockllm.Script) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.q[model] = append(b.q[model], s...)
}

func (b *byModel) models() []string {
	var out []string
	for _, r := range b.srv.Requests() {
		out = append(out, r.Model)
	}
	return out
}

// templatesDir writes templates (agent ID -> template.json) for
// TEMPLATES_DIR.
func templatesDir(t *testing.T, templates map[string]string) string {
	dir := t.TempDir()
	for id, body := range templates {
		if err := os.MkdirAll(filepath.Join(dir, id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id, "template.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fallbackTemplate is an agent whose model, mock-primary, has the
// fallback mock-backup, or none of its own when fallbacks is "".
func fallbackTemplate(id, fallbacks string) string {
	return `{"agentId": "` + id + `", "name": "` + id + `", "personality": "You answer briefly.",
  "nodes": ["llm.openai"],
  "nodeConfigurations": {
    "llm.openai": {"model": "mock-primary"` + fallbacks + `},
    "llm.backup": {"provider": "openai", "model": "mock-backup"}
  }}`
}

// TestFallbackAnswersAnOutage: a turn whose model answers 503 (after its
// retries) is answered by its fallback: the model calls go to the
// primary, then to the fallback, the stream says which model answered
// (a data-fallback chunk, the step's usage), and the session keeps the
// answer. The server's LLM_FALLBACK_* model is the fallback of a model
// whose template names none; a refused key is not an outage.
func TestFallbackAnswersAnOutage(t *testing.T) {
	b := newByModel(t, &mockllm.Usage{Input: 40, Output: 5}, 0)
	dir := templatesDir(t, map[string]string{
		"own":     fallbackTemplate("own", `, "fallbacks": ["llm.backup"]`),
		"default": fallbackTemplate("default", ""),
	})
	srv := startServer(t, "TEMPLATES_DIR="+dir, "OPENAI_API_KEY=k", "OPENAI_BASE_URL="+b.srv.URL()+"/v1",
		"LLM_FALLBACK_PROVIDER=openai", "LLM_FALLBACK_MODEL=mock-server-fallback", "LLM_FALLBACK_BASE_URL="+b.srv.URL()+"/v1", "LLM_FALLBACK_API_KEY=k")
	outage := slices.Repeat([]mockllm.Script{mockllm.ErrorScript(http.StatusServiceUnavailable, 0)}, 3)

	for _, tc := range []struct {
		agent, fallback, config string
	}{
		{"own", "mock-backup", "llm.backup"},
		{"default", "mock-server-fallback", ""},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			before := len(b.models())
			b.queue("mock-primary", outage...)
			sid := "fallback-" + tc.agent
			frames := chat(t, srv.URL(), tc.agent, sid, "hello").All(30 * time.Second)
			if reason := requireEnd(t, frames); reason != "stop" || len(errorTexts(frames)) > 0 {
				t.Fatalf("finish %q, errors %v", reason, errorTexts(frames))
			}
			if got := textOf(frames); got != "answer from "+tc.fallback {
				t.Fatalf("answer %q, want the fallback's", got)
			}
			calls := b.models()[before:]
			want := []string{"mock-primary", "mock-primary", "mock-primary", tc.fallback}
			if !slices.Equal(calls, want) {
				t.Fatalf("model calls %v, want %v (the primary with its retries, then the fallback)", calls, want)
			}
			t.Logf("model calls: %v", calls)
			var fb struct {
				Data struct {
					From, To struct{ Config, Model string }
					Error    struct{ Code string }
				}
			}
			var usage struct {
				Data struct {
					Model  *struct{ Config, Model string }
					Models []struct {
						Model string
						Calls int
					}
					Final bool
				}
			}
			var sawFallback, sawStepModel, sawModels bool
			for _, f := range frames {
				switch f.Type() {
				case "data-fallback":
					_ = json.Unmarshal([]byte(f.Data), &fb)
					sawFallback = fb.Data.From.Model == "mock-primary" && fb.Data.From.Config == "llm.openai" &&
						fb.Data.To.Model == tc.fallback && fb.Data.To.Config == tc.config && fb.Data.Error.Code == "provider_unavailable"
				case "data-usage":
					usage.Data.Model, usage.Data.Models = nil, nil
					_ = json.Unmarshal([]byte(f.Data), &usage)
					if m := usage.Data.Model; m != nil && m.Model == tc.fallback {
						sawStepModel = true
					}
					if usage.Data.Final && len(usage.Data.Models) == 1 && usage.Data.Models[0].Model == tc.fallback {
						sawModels = true
					}
				}
			}
			if !sawFallback || !sawStepModel || !sawModels {
				t.Errorf("the stream does not say the fallback answered: fallback chunk %v (%+v), step usage %v, turn usage by model %v\n%s",
					sawFallback, fb, sawStepModel, sawModels, dataOf(frames))
			}
			view := requireConsistent(t, srv.URL(), sid)
			if last := view.Messages[len(view.Messages)-1]; last.Content != "answer from "+tc.fallback {
				t.Errorf("the session keeps %q", last.Content)
			}
		})
	}

	t.Run("a refused key goes to no fallback", func(t *testing.T) {
		before := len(b.models())
		b.queue("mock-primary", mockllm.ErrorScript(http.StatusUnauthorized, 0))
		frames := chat(t, srv.URL(), "own", "fallback-auth", "hello").All(30 * time.Second)
		requireEnd(t, frames)
		if calls := b.models()[before:]; !slices.Equal(calls, []string{"mock-primary"}) || len(errorTexts(frames)) == 0 {
			t.Errorf("calls %v, errors %v; want the primary alone, and its error", calls, errorTexts(frames))
		}
	})
}

// TestStepModel: in a step that names "model": "llm.cheap", the model
// calls go to that configuration's model, with its temperature and max
// tokens; the other steps' calls go to the agent's own (the example
// briefing agent, examples/routing, through the real server).
func TestStepModel(t *testing.T) {
	tpl, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(), "examples", "routing", "template.json"))
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(t)
	srv := startServer(t, "TEMPLATES_DIR="+templatesDir(t, map[string]string{"briefing": string(tpl)}),
		"OPENAI_API_KEY=k", "OPENAI_BASE_URL="+m.URL()+"/v1", "ANTHROPIC_API_KEY=k", "ANTHROPIC_BASE_URL="+m.URL())
	m.Enqueue(
		mockllm.ToolScript(mockllm.ToolCall{ID: "s1", Name: "search", Arguments: `{"query":"heat pumps in cold climates"}`}),
		mockllm.ToolScript(mockllm.ToolCall{ID: "c1", Name: "critique", Arguments: `{"subject":"the sources","analysis":"thin"}`}),
		mockllm.TextScript("Heat pumps work in the cold."),
	)
	frames := chat(t, srv.URL(), "briefing", "step-model-1", "Brief me on heat pumps in cold climates").All(30 * time.Second)
	if reason := requireEnd(t, frames); reason != "stop" {
		t.Fatalf("finish %q: %s", reason, dataOf(frames))
	}
	reqs := m.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3", len(reqs))
	}
	type call struct {
		model       string
		temperature float64
		maxTokens   int
	}
	var got []call
	for _, r := range reqs {
		c := call{model: r.Model}
		if r.Temperature != nil {
			c.temperature = *r.Temperature
		}
		if r.MaxCompletionTokens != nil {
			c.maxTokens = *r.MaxCompletionTokens
		}
		got = append(got, c)
	}
	want := []call{{"gpt-4.1-mini", 0, 1024}, {"gpt-4.1", 0.4, 2048}, {"gpt-4.1", 0.4, 2048}}
	if !slices.Equal(got, want) {
		t.Fatalf("model calls %+v, want %+v (Gather on llm.cheap, Write on llm.openai)", got, want)
	}
	t.Logf("model calls: %+v", got)
}

// TestTokenBudget: with TOKENS_PER_OWNER_PER_DAY=3000, a key that spent
// it gets 429 budget_exceeded naming TOKENS_PER_OWNER_PER_DAY, what it
// spent and when it resets, on the chat API and on /v1, while another
// key goes on; a key with its own budget in API_KEYS_FILE is held to
// that; GET /api/usage tells each key what it spent.
func TestTokenBudget(t *testing.T) {
	b := newByModel(t, &mockllm.Usage{Input: 1000, Output: 500}, 0)
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("# keys\nkey-alice\nkey-bob\nkey-carol tokens_per_day=1000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, append(modelEnv(b.srv), "API_KEYS_FILE="+keys, "API_KEY_SECRET=budget-test", "TOKENS_PER_OWNER_PER_DAY=3000",
		"MODEL_PRICES=mock-model=2/0.5/8")...)
	turn := func(key, sid string) (int, string, http.Header) {
		return keyedRequest(t, http.MethodPost, srv.URL()+"/api/chat/"+agentID, key, `{"message":"hi","sessionId":"`+sid+`"}`)
	}
	for i := range 2 {
		if status, body, _ := turn("key-alice", fmt.Sprintf("budget-alice-%d", i)); status != http.StatusOK {
			t.Fatalf("alice's turn %d: %d %s", i+1, status, body)
		}
	}
	status, body, h := turn("key-alice", "budget-alice-3")
	if status != http.StatusTooManyRequests || !strings.Contains(body, `"budget_exceeded"`) || !strings.Contains(body, "TOKENS_PER_OWNER_PER_DAY") ||
		!strings.Contains(body, "3000 tokens today") || !strings.Contains(body, "resets at") {
		t.Fatalf("alice past her budget: %d %s", status, body)
	}
	if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 || ra > 86400 {
		t.Errorf("Retry-After %q, want the seconds until the day ends", h.Get("Retry-After"))
	}
	t.Logf("alice's third turn: %d %s", status, body)
	if status, body := completion(t, srv.URL(), "key-alice", "budget-alice-v1"); status != http.StatusTooManyRequests || !strings.Contains(body, "budget_exceeded") {
		t.Errorf("/v1 for alice: %d %s", status, body)
	}
	if status, body, _ := turn("key-bob", "budget-bob-1"); status != http.StatusOK {
		t.Errorf("bob, who spent nothing: %d %s", status, body)
	}
	// Carol's own budget, 1000 a day: her first turn (1500) passes it.
	if status, body, _ := turn("key-carol", "budget-carol-1"); status != http.StatusOK {
		t.Fatalf("carol's first turn: %d %s", status, body)
	}
	if status, body, _ := turn("key-carol", "budget-carol-2"); status != http.StatusTooManyRequests || !strings.Contains(body, "tokens_per_day of this API key (API_KEYS_FILE)") {
		t.Errorf("carol past her own budget: %d %s", status, body)
	}

	var usage struct {
		Day struct {
			Tokens, Input, Output, Calls, Limit int64
			Cost                                float64
			LimitName                           string
		}
	}
	status, body, _ = keyedRequest(t, http.MethodGet, srv.URL()+"/api/usage", "key-alice", "")
	if err := json.Unmarshal([]byte(body), &usage); status != http.StatusOK || err != nil {
		t.Fatalf("GET /api/usage: %d %s", status, body)
	}
	d := usage.Day
	if d.Tokens != 3000 || d.Input != 2000 || d.Output != 1000 || d.Calls != 2 || d.Limit != 3000 || d.LimitName != "TOKENS_PER_OWNER_PER_DAY" {
		t.Errorf("alice's usage: %s", body)
	}
	if want := (2000*2 + 1000*8) / 1e6; d.Cost < want*0.999 || d.Cost > want*1.001 {
		t.Errorf("alice's cost %v, want %v", d.Cost, want)
	}
	// The session's usage carries its cost too.
	_, raw, _ := keyedRequest(t, http.MethodGet, srv.URL()+"/api/sessions/budget-alice-0", "key-alice", "")
	if !strings.Contains(raw, `"cost":0.006`) {
		t.Errorf("the session's usage has no cost: %s", raw)
	}
}

// TestTokenBudgetAcrossReplicas: 50 concurrent turns of one key, on two
// replicas sharing Redis, overspend its budget by at most the turns that
// started before it was reached: every turn admitted started while the
// key's spend, counted atomically by both replicas, was under the
// budget, and none is cut; once it is reached, every turn is refused on
// either replica, while another key goes on. The test prints the figure.
func TestTokenBudgetAcrossReplicas(t *testing.T) {
	const (
		perTurn = 150 // one model call of 100 input and 50 output tokens
		budget  = 15 * perTurn
		turns   = 50
	)
	b := newByModel(t, &mockllm.Usage{Input: 100, Output: 50}, 100*time.Millisecond)
	rs := redistest.Start(t)
	env := append(modelEnv(b.srv), "SESSION_STORE="+rs.URL(), "API_KEYS=key-dave,key-erin", "API_KEY_SECRET=replicas-budget",
		"TOKENS_PER_OWNER_PER_DAY="+strconv.Itoa(budget))
	replicas := []*serverProc{startServer(t, env...), startServer(t, env...)}

	// The turns start 5 ms apart, alternating replicas, each answered 100
	// ms after its model call: about twenty run at once, and the spend
	// grows while turns start.
	var (
		wg                 sync.WaitGroup
		admitted, refused  atomic.Int64
		mu                 sync.Mutex
		other              []string
		start              = make(chan struct{})
		tick               = time.NewTicker(5 * time.Millisecond)
		firstRefusedReason string
	)
	defer tick.Stop()
	for i := range turns {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			status, body := completion(t, replicas[i%2].URL(), "key-dave", fmt.Sprintf("replicas-budget-%02d", i))
			switch {
			case status == http.StatusOK:
				admitted.Add(1)
			case status == http.StatusTooManyRequests && strings.Contains(body, "budget_exceeded"):
				refused.Add(1)
				mu.Lock()
				if firstRefusedReason == "" {
					firstRefusedReason = body
				}
				mu.Unlock()
			default:
				mu.Lock()
				other = append(other, fmt.Sprintf("turn %d: %d %s", i, status, body))
				mu.Unlock()
			}
		}()
		if i == 0 {
			close(start)
		}
	}
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("turns neither answered nor refused for the budget:\n%s", strings.Join(other, "\n"))
	}
	// What both replicas counted, read from either.
	var spent [2]int64
	for i, r := range replicas {
		var u struct{ Day struct{ Tokens, Calls int64 } }
		status, body, _ := keyedRequest(t, http.MethodGet, r.URL()+"/api/usage", "key-dave", "")
		if err := json.Unmarshal([]byte(body), &u); status != http.StatusOK || err != nil {
			t.Fatalf("GET /api/usage on replica %d: %d %s", i+1, status, body)
		}
		spent[i] = u.Day.Tokens
	}
	a, r := admitted.Load(), refused.Load()
	over := spent[0] - budget
	t.Logf("budget %d tokens (%d turns of %d); %d concurrent turns on 2 replicas: %d admitted, %d refused; spent %d tokens: overspend %d tokens = %d turns, each admitted while the key's spend was under the budget",
		budget, budget/perTurn, perTurn, turns, a, r, spent[0], over, over/perTurn)
	switch {
	case spent[0] != spent[1]:
		t.Errorf("the replicas read different spends: %v", spent)
	case spent[0] != a*perTurn:
		t.Errorf("spent %d tokens, but %d turns of %d ran: counts were lost or doubled across the replicas", spent[0], a, perTurn)
	case a < budget/perTurn:
		// A turn is refused only once the spend reached the budget, which
		// takes budget/perTurn finished turns.
		t.Errorf("only %d turns were admitted: turns were refused before the budget (%d turns) was reached", a, budget/perTurn)
	}
	// (How many of the 50 are refused depends on the machine's speed: on
	// one slow enough that no turn ends before the last starts, none is,
	// which the rule allows. The turns below start after it was reached.)
	// Reached: every new turn is refused, on either replica, naming the
	// limit; another key goes on.
	for i, rep := range replicas {
		status, body := completion(t, rep.URL(), "key-dave", fmt.Sprintf("replicas-after-%d", i))
		if status != http.StatusTooManyRequests || !strings.Contains(body, "TOKENS_PER_OWNER_PER_DAY") {
			t.Errorf("replica %d after the budget: %d %s", i+1, status, body)
		}
		if status, body := completion(t, rep.URL(), "key-erin", fmt.Sprintf("replicas-erin-%d", i)); status != http.StatusOK {
			t.Errorf("another key on replica %d: %d %s", i+1, status, body)
		}
	}
}
