package llmorch_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// sideEffects counts each call a tool ran, by call ID, and what the
// session's journal held when it ran.
type sideEffects struct {
	mu       sync.Mutex
	ran      map[string]int
	journals []*session.Journal
	// during, when set, is called with each call's ID while it runs.
	during func(callID string)
}

func (e *sideEffects) count(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ran[id]
}

const journaled = `{"agentId": "j", "name": "J", "nodes": ["llm.openai", "charge", "lookup"], "options": {"maxSteps": 4}}`

func init() {
	argsFor["charge"] = json.RawMessage(`{"amount":5}`)
	argsFor["lookup"] = json.RawMessage(`{"amount":1}`)
}

// journalFixture is a service whose tools are charge (not idempotent) and
// lookup (idempotent), each counting its runs and reading the journal the
// session holds while it runs; wrap, when set, wraps the store the
// service writes to.
func journalFixture(t *testing.T, model llmorch.Model, wrap func(session.Store) session.Store) (*fixture, *sideEffects) {
	t.Helper()
	fx := &sideEffects{ran: map[string]int{}}
	var store *session.Memory
	key := session.NewID()
	tool := func(name string, opts ...tools.Option) tools.Tool {
		return tools.MustNew(name, "A tool with an effect to count.", func(ctx context.Context, in struct {
			Amount int `json:"amount"`
		}) (string, error) {
			call, _ := tools.CallFrom(ctx)
			sess, err := store.Get(ctx, key)
			if err != nil {
				return "", err
			}
			fx.mu.Lock()
			fx.ran[call.ToolCallID]++
			fx.journals = append(fx.journals, sess.Journal)
			during := fx.during
			fx.mu.Unlock()
			if during != nil {
				during(call.ToolCallID)
			}
			return name + " done", nil
		}, opts...)
	}
	reg, err := tools.NewRegistry(tool("charge"), tool("lookup", tools.DeclareIdempotent()))
	if err != nil {
		t.Fatal(err)
	}
	a, ds := template.Load("j.json", []byte(journaled), template.Config{Provided: reg.Names()})
	if a == nil {
		t.Fatal(ds.Err())
	}
	store = session.NewMemory(session.Config{})
	t.Cleanup(func() { store.Close() })
	var wrapped session.Store = store
	if wrap != nil {
		wrapped = wrap(store)
	}
	svc, err := llmorch.NewService(llmorch.ServiceConfig{Template: a.Template, Engine: a.Engine, Store: wrapped, Model: model, Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{svc: svc, store: store, wrapped: wrapped, eng: a.Engine, id: key}
	f.model, _ = model.(*scripted)
	return f, fx
}

// startJournaled makes a journaled turn's first write, as the agent does.
func (f *fixture) startJournaled(t *testing.T, msg string, frames *int64) llmorch.Turn {
	t.Helper()
	ctx := context.Background()
	_, lease, err := f.store.Claim(ctx, f.id)
	if err != nil {
		t.Fatal(err)
	}
	f.lease = lease
	user := chat.Message{Role: chat.RoleUser, Content: msg}
	sess, _, err := f.store.UpdateAppend(ctx, f.id, func(s *orchestration.State) error {
		*s, _ = f.eng.Apply(*s, orchestration.UserMessage(msg))
		return nil
	}, []chat.Message{user}, 0, session.WithLease(lease), session.WithTurn("turn-0001"),
		session.WithJournal(func(j *session.Journal) error { j.Writes = 1; return nil }))
	if err != nil {
		t.Fatal(err)
	}
	return llmorch.Turn{ID: "turn-0001", SessionID: f.id, Lease: lease, State: sess.State, History: []chat.Message{user},
		Journal: true, Position: func() int64 { return *frames }}
}

// TestJournalKeepsTheTurnsProgress: a turn that keeps a journal records a
// step's calls before the first one runs, each result as its call
// completes, and the saved step with how far the stream's content is
// saved; its last write drops the journal with the turn marker.
func TestJournalKeepsTheTurnsProgress(t *testing.T) {
	f, fx := journalFixture(t, &scripted{replies: [][]string{{"charge", "lookup"}, nil}}, nil)
	var frames int64
	turn := f.startJournaled(t, "pay", &frames)
	var evs []chat.Event
	for ev := range f.svc.StreamWithOrchestration(context.Background(), turn) {
		frames++ // one frame per event, say
		evs = append(evs, ev)
	}
	if last := evs[len(evs)-1]; last.Kind != chat.KindDone || last.FinishReason != chat.FinishStop {
		t.Fatalf("the turn ended %+v", last)
	}
	if len(fx.journals) != 2 {
		t.Fatalf("the tools ran %d times, want 2", len(fx.journals))
	}
	first, second := fx.journals[0], fx.journals[1]
	if first == nil || first.Step == nil || first.Step.Text != "step " || len(first.Step.Calls) != 2 || len(first.Step.Results) != 0 ||
		!slices.Equal(first.Step.Offer.Tools, []string{"charge", "lookup"}) || first.Writes != 2 {
		t.Fatalf("the journal while the first call ran: %+v", first)
	}
	if second == nil || second.Step == nil || len(second.Step.Results) != 1 || second.Step.Results[0].CallID != "c00" ||
		second.Step.Results[0].Content != "charge done" || second.Writes != 3 {
		t.Fatalf("the journal while the second call ran: %+v", second)
	}
	sess, err := f.store.Get(context.Background(), f.id)
	if err != nil || sess.Journal != nil || sess.Turn != "" {
		t.Fatalf("after the turn: %+v, %v; want neither marker nor journal", sess, err)
	}
}

// TestJournalFrameAndSteps: between steps the journal says how many are
// saved, what they cost and the stream's position at the write.
func TestJournalFrameAndSteps(t *testing.T) {
	model := &scripted{replies: [][]string{{"lookup"}, nil}}
	f, _ := journalFixture(t, model, nil)
	var frames int64
	turn := f.startJournaled(t, "look", &frames)
	starts := 0
	var between *session.Journal
	for ev := range f.svc.StreamWithOrchestration(context.Background(), turn) {
		frames++
		// At the second model call's start the first step is saved.
		if ev.Kind == chat.KindStepStart {
			if starts++; starts == 2 {
				sess, _ := f.store.Get(context.Background(), f.id)
				between = sess.Journal
				if j := between; j == nil || j.Steps != 1 || j.Step != nil || j.Usage.Prompt != 10 || j.Output == 0 || j.Frame == 0 || j.Frame >= frames {
					t.Fatalf("the journal between steps (at frame %d): %+v", frames, j)
				}
			}
		}
	}
	if between == nil {
		t.Fatal("the turn had no second step")
	}
}

// losing wraps a store and loses one write: the nth write without
// messages (session.Update) is answered as applied but never reaches the
// store, as a write acknowledged by a primary that died before its
// replica got it.
type losing struct {
	session.Store
	n, updates int
}

func (l *losing) UpdateAppend(ctx context.Context, id string, fn func(*orchestration.State) error, msgs []chat.Message, window int, opts ...session.UpdateOption) (session.Session, []chat.Message, error) {
	if len(msgs) > 0 || window != 0 {
		return l.Store.UpdateAppend(ctx, id, fn, msgs, window, opts...)
	}
	if l.updates++; l.updates != l.n {
		return l.Store.UpdateAppend(ctx, id, fn, msgs, window, opts...)
	}
	s, err := l.Store.Get(ctx, id)
	if err != nil {
		return s, nil, err
	}
	st := s.State
	if err := fn(&st); err != nil {
		return s, nil, err
	}
	s.State = st
	o := session.Options(opts...)
	err = o.ApplyTurn(&s)
	return s, nil, err
}

// TestLostWritesStopTheTurn: when the store lost a write of the turn (a
// failover), the turn's next write is refused, and the turn ends with an
// error saying what the session keeps, rather than saving its next step
// over a hole and finishing as if nothing happened.
func TestLostWritesStopTheTurn(t *testing.T) {
	f, fx := journalFixture(t, &scripted{replies: [][]string{{"charge", "lookup"}, nil}}, func(s session.Store) session.Store {
		return &losing{Store: s, n: 1} // the record of the step's calls
	})
	var frames int64
	turn := f.startJournaled(t, "pay", &frames)
	evs := collect(f.svc.StreamWithOrchestration(context.Background(), turn))
	var errs []*chat.Error
	for _, ev := range evs {
		if ev.Kind == chat.KindError {
			errs = append(errs, ev.Error)
		}
	}
	last := evs[len(evs)-1]
	if len(errs) != 1 || errs[0].Code != llmorch.CodeLostWrites || !strings.Contains(errs[0].Message, "keeps your message but none of this answer") ||
		last.Kind != chat.KindDone || last.FinishReason != chat.FinishError {
		t.Fatalf("errors %+v, end %+v; want one %s saying the message is kept, then finish error", errs, last, llmorch.CodeLostWrites)
	}
	if fx.count("c01") != 0 {
		t.Fatal("the turn ran a call after the store had lost its writes")
	}
	msgs, _ := f.store.Messages(context.Background(), f.id, 0)
	if len(msgs) != 1 || msgs[0].Role != chat.RoleUser {
		t.Fatalf("history: %+v; want the user message alone", msgs)
	}
}

// TestResumeGoesOnFromTheJournal: a turn taken over from a replica that
// died (Turn.Resume) says so first, then goes on from its last saved
// step: with no step under way, it makes the model call again; with tool
// calls under way, a call that completed keeps its journaled result and
// does not run again, the call that was running runs again only when its
// tool is idempotent (else the model reads that it was interrupted), and
// the calls after it run. The step and the rest of the turn are saved as
// usual.
func TestResumeGoesOnFromTheJournal(t *testing.T) {
	for _, tc := range []struct {
		name string
		// calls of the step under way when the replica died (nil: it died
		// during the model call), and how many of them completed.
		calls     []string
		completed int
		// ran: how many times each call ran on the new replica; result:
		// the result type the model reads for each.
		ran    []int
		result []string
	}{
		{name: "during the model call"},
		{name: "during a call that is not idempotent", calls: []string{"lookup", "charge", "lookup"}, completed: 1,
			ran: []int{0, 0, 1}, result: []string{"", "interrupted", ""}},
		{name: "during an idempotent call", calls: []string{"charge", "lookup"}, completed: 1,
			ran: []int{0, 1}, result: []string{"", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The new replica's model answers the turn's next call.
			f, fx := journalFixture(t, &scripted{replies: [][]string{nil}}, nil)
			ctx := context.Background()
			var frames int64 = 40
			turn := f.startJournaled(t, "pay", &frames)
			// The dead replica's progress: the step's calls recorded, and
			// the first ones completed (recorded with their results).
			var ids []string
			if tc.calls != nil {
				step := &session.JournalStep{Text: "paying", Offer: orchestration.Offer{Tools: []string{"charge", "lookup"}}, Usage: chat.Usage{Prompt: 4}, Output: 30}
				for i, name := range tc.calls {
					id := "dead-" + string(rune('a'+i))
					ids = append(ids, id)
					step.Calls = append(step.Calls, chat.ToolCall{ID: id, Name: name, Arguments: argsFor[name]})
				}
				if _, err := session.Update(ctx, f.store, f.id, func(*orchestration.State) error { return nil }, session.WithLease(f.lease),
					session.WithJournal(func(j *session.Journal) error { j.Writes++; j.Frame = 7; j.Step = step; return nil })); err != nil {
					t.Fatal(err)
				}
				for i := range tc.completed {
					res := chat.ToolResult{CallID: ids[i], Name: tc.calls[i], Content: "done before the crash"}
					if _, err := session.Update(ctx, f.store, f.id, func(s *orchestration.State) error {
						*s, _ = f.eng.Apply(*s, orchestration.ToolUsed(tc.calls[i]))
						return nil
					}, session.WithLease(f.lease), session.WithJournal(func(j *session.Journal) error {
						j.Writes++
						j.Step.Results = append(j.Step.Results, res)
						return nil
					})); err != nil {
						t.Fatal(err)
					}
				}
			}
			// The replica died; its lease went, and another replica took
			// the session's lease and the turn.
			_ = f.lease.Release(ctx)
			_, lease, err := f.store.Claim(ctx, f.id)
			if err != nil {
				t.Fatal(err)
			}
			sess, _ := f.store.Get(ctx, f.id)
			hist, _ := f.store.Messages(ctx, f.id, 0)
			turn.Lease, turn.State, turn.History, turn.Resume = lease, sess.State, hist, sess.Journal
			evs := collect(f.svc.StreamWithOrchestration(ctx, turn))

			if evs[0].Kind != chat.KindRestart || evs[0].Restart.Step != 1 || evs[0].Restart.Since != sess.Journal.Frame {
				t.Fatalf("the first event is %+v; want restart at step 1 since frame %d", evs[0], sess.Journal.Frame)
			}
			if last := evs[len(evs)-1]; last.Kind != chat.KindDone || last.FinishReason != chat.FinishStop {
				t.Fatalf("the turn ended %+v", last)
			}
			results := map[string]chat.ToolResult{}
			for _, ev := range evs {
				if ev.Kind == chat.KindToolResult {
					results[ev.ToolResult.CallID] = *ev.ToolResult
				}
			}
			for i, id := range ids {
				if got := fx.count(id); got != tc.ran[i] {
					t.Errorf("call %d (%s) ran %d times on the new replica, want %d", i, tc.calls[i], got, tc.ran[i])
				}
				if r, ok := results[id]; !ok || (r.Type == "interrupted") != (tc.result[i] == "interrupted") {
					t.Errorf("call %d (%s): result %+v; want one that is %s", i, tc.calls[i], r, map[bool]string{true: "interrupted", false: "not interrupted"}[tc.result[i] == "interrupted"])
				}
			}
			if r := results[ids0(ids)]; tc.completed > 0 && r.Content != "done before the crash" {
				t.Errorf("the completed call's result is %+v; want the journaled one", r)
			}
			// Saved: the step (if any) and the answer, once each.
			msgs, _ := f.store.Messages(ctx, f.id, 0)
			wantLen := 2 // user, answer
			if tc.calls != nil {
				wantLen += 1 + len(tc.calls)
			}
			if len(msgs) != wantLen || msgs[len(msgs)-1].Content != "step done" {
				raw, _ := json.Marshal(msgs)
				t.Fatalf("history: %s", raw)
			}
			end, _ := f.store.Get(ctx, f.id)
			if end.Turn != "" || end.Journal != nil {
				t.Fatalf("after the taken-over turn: marker %q journal %+v", end.Turn, end.Journal)
			}
			if want := len(f.model.reqs); want != 1 {
				t.Fatalf("%d model calls on the new replica, want 1", want)
			}
		})
	}
}

func ids0(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}
