package agent_test

import (
	"context"
	"fmt"
	"iter"
	"syscall"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/llmorch/tokencount"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
)

// benchModel is an OpenAI-family model in the process: it counts tokens
// with o200k, as gpt-4o-mini's provider does, answers a turn's first call
// with a tool call and its second with text, and reports the input as a
// provider would (its bytes over four), so that the runtime's work is all
// that is measured.
type benchModel struct{ *tokencount.Counter }

func (benchModel) Info() llmorch.Info { return llmorch.Info{Provider: "openai", Model: "gpt-4o-mini"} }

func (benchModel) Stream(_ context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		in := len(req.System) + len(req.Note)
		for _, m := range req.Messages {
			in += len(m.Content) + 16
		}
		for _, t := range req.Tools {
			in += len(t.Description) + len(t.Parameters)
		}
		last := req.Messages[len(req.Messages)-1]
		if last.Role == chat.RoleUser && !yield(chat.Event{Kind: chat.KindToolCall, ToolCall: &chat.ToolCall{
			ID: fmt.Sprintf("call_%d", len(req.Messages)), Name: "think", Arguments: []byte(`{"topic":"the part"}`)}}, nil) {
			return
		}
		if last.Role != chat.RoleUser && !yield(chat.Event{Kind: chat.KindTextDelta, Text: "Done with this turn."}, nil) {
			return
		}
		yield(chat.Event{Kind: chat.KindUsage, Usage: &chat.Usage{Prompt: int64(in/4 + 1), Completion: 8}}, nil)
	}
}

// cpuTime is the process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCompactionTurn is the server's CPU per turn of a long
// conversation under a context budget (longTemplate: 3,000 tokens, three
// turns kept, the offline summarizer; a tool call every turn) at turn 10
// and at turn 300, on memory and on Redis: a turn reads the latest summary
// and the turns after it, never the whole history, so the two must be
// close. Each op plays twelve turns from the position on a copy of a
// session prepared up to it (a summary every eleven turns or so, so the
// summaries' cost is in the figure); cpu-µs/turn is the process's CPU
// time over those turns, redis-server's own CPU aside.
func BenchmarkCompactionTurn(b *testing.B) {
	const window = 12
	for _, st := range memoryAndRedis() {
		b.Run(st.name, func(b *testing.B) {
			store := st.open(b)
			defer store.Close()
			a, ds := template.Load("long.json", []byte(fmt.Sprintf(longTemplate,
				fmt.Sprintf(`{"maxInputTokens": %d, "keepTurns": 3, "summarizer": {"model": "llm.summary"}}`, longBudget))), template.Config{})
			if a == nil {
				b.Fatal(ds.Err())
			}
			o200k, _ := tokencount.ForModel("gpt-4o-mini")
			models := func(tm *template.Template) (llmorch.Model, error) {
				if tm.Nodes[0] == "llm.summary" {
					return offline.New(offline.Config{}), nil
				}
				return benchModel{o200k}, nil
			}
			set, err := agent.NewSet(agent.Options{Store: store, ToolsFor: toolbox(&longTools{countingTools{names: []string{"think", "reflect", "critique"}}}),
				Models: models, Logger: quietLogger()}, []*template.Loaded{a})
			if err != nil {
				b.Fatal(err)
			}
			n, _ := set.Get("long")
			play := func(id string, from, to int) {
				for i := from; i <= to; i++ {
					events, err := agent.Started(n.Run(context.Background(), id, agent.Text(longMessage(i))))
					if err != nil {
						b.Fatal(err)
					}
					for ev := range events {
						if ev.Kind == chat.KindError || ev.Kind == chat.KindWarning {
							b.Fatalf("turn %d: %+v %q", i, ev.Error, ev.Text)
						}
					}
				}
			}
			for _, at := range []int{10, 300} {
				b.Run(fmt.Sprintf("turn=%d", at), func(b *testing.B) {
					base := session.NewID()
					play(base, 1, at-1)
					sess, err := store.Get(context.Background(), base)
					if err != nil {
						b.Fatal(err)
					}
					hist, err := store.Messages(context.Background(), base, 0)
					if err != nil {
						b.Fatal(err)
					}
					var cpu time.Duration
					turns := 0
					for b.Loop() {
						b.StopTimer()
						id := session.NewID()
						state := sess.State
						if _, _, err := store.UpdateAppend(context.Background(), id, func(s *orchestration.State) error { *s = state; return nil },
							hist, 0, session.WithAgent("long")); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
						c0 := cpuTime()
						play(id, at, at+window-1)
						cpu += cpuTime() - c0
						turns += window
					}
					b.ReportMetric(float64(cpu.Microseconds())/float64(turns), "cpu-µs/turn")
					b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(turns), "µs/turn")
				})
			}
		})
	}
}
