package llmorch_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// writeLog is a session store that notes each of a turn's writes in a log
// the test also notes the turn's events in, so that the order of the two
// shows; failWrites makes the next UpdateAppend calls fail.
type writeLog struct {
	session.Store
	mu         sync.Mutex
	log        []string
	failWrites int
}

func (w *writeLog) note(s string) {
	w.mu.Lock()
	w.log = append(w.log, s)
	w.mu.Unlock()
}

func (w *writeLog) UpdateAppend(ctx context.Context, id string, fn func(*orchestration.State) error, msgs []chat.Message, window int, opts ...session.UpdateOption) (session.Session, []chat.Message, error) {
	w.mu.Lock()
	fail := w.failWrites > 0
	if fail {
		w.failWrites--
	}
	w.mu.Unlock()
	if fail {
		w.note("write UpdateAppend failed")
		return session.Session{}, nil, session.ErrUnavailable
	}
	w.note("write UpdateAppend")
	return w.Store.UpdateAppend(ctx, id, fn, msgs, window, opts...)
}

// run plays the turn, noting its events in the write log.
func (w *writeLog) run(t *testing.T, f *fixture, msg string) []chat.Event {
	t.Helper()
	var evs []chat.Event
	for ev := range f.svc.StreamWithOrchestration(context.Background(), f.start(t, msg)) {
		switch ev.Kind {
		case chat.KindToolCall:
			w.note("tool-call " + ev.ToolCall.Name)
		case chat.KindToolResult:
			w.note("tool-result " + ev.ToolResult.Name)
		case chat.KindStepFinish:
			w.note("step-finish")
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestLastToolRecordedWithItsStep: a step's last call is recorded in the
// step's own write (its messages and usage), so a one-tool step costs the
// store one write, not two; the client hears its result only once that
// write holds it. Earlier calls of the step keep a write each, made before
// the next call starts.
func TestLastToolRecordedWithItsStep(t *testing.T) {
	model := &scripted{replies: [][]string{{"reflect", "think"}, nil}}
	f, _ := newServiceOver(t, model, func(s session.Store) session.Store { return &writeLog{Store: s} })
	w := f.wrapped.(*writeLog)
	w.run(t, f, "hello")
	want := []string{
		"tool-call reflect", "write UpdateAppend", "tool-result reflect",
		"tool-call think", "write UpdateAppend", "tool-result think", "step-finish",
		"write UpdateAppend", "step-finish",
	}
	if !slices.Equal(w.log, want) {
		t.Fatalf("writes and events:\n%q\nwant\n%q", w.log, want)
	}
	sess, err := f.store.Get(context.Background(), f.id)
	if err != nil {
		t.Fatal(err)
	}
	if !sess.State.RecentlyUsedTools.Equal("reflect", "think") || sess.State.ActiveStep != "After" {
		t.Fatalf("state %+v: want both tools recorded and think's step, After", sess.State)
	}
	if want := (chat.Usage{Prompt: 20, Completion: 4, Total: 24}); sess.State.TokenUsage != want {
		t.Fatalf("usage %+v, want %+v", sess.State.TokenUsage, want)
	}
}

// TestLastToolUnrecordedWhenItsStepIsNot: when the step's write fails, the
// call that ran last is not recorded either: the state and the history
// agree (neither has it), and the client is told the store failed instead
// of the call's result.
func TestLastToolUnrecordedWhenItsStepIsNot(t *testing.T) {
	model := &scripted{replies: [][]string{{"think"}, nil}}
	f, _ := newServiceOver(t, model, func(s session.Store) session.Store { return &writeLog{Store: s, failWrites: 1} })
	w := f.wrapped.(*writeLog)
	evs := w.run(t, f, "hello")
	if want := []string{"tool-call think", "write UpdateAppend failed"}; !slices.Equal(w.log, want) {
		t.Fatalf("writes and events %q, want %q", w.log, want)
	}
	var errEv *chat.Error
	for _, ev := range evs {
		if ev.Kind == chat.KindError {
			errEv = ev.Error
		}
	}
	if errEv == nil || errEv.Code != "store_unavailable" {
		t.Fatalf("no store_unavailable error in %+v", evs)
	}
	sess, err := f.store.Get(context.Background(), f.id)
	if err != nil {
		t.Fatal(err)
	}
	if sess.State.RecentlyUsedTools.Len() != 0 || sess.State.ActiveStep == "After" {
		t.Fatalf("state %+v: the call whose step was not saved is recorded", sess.State)
	}
	history, _ := f.store.Messages(context.Background(), f.id, 0)
	for _, m := range history {
		if len(m.ToolCalls) > 0 || m.Role == chat.RoleTool {
			t.Fatalf("history holds the unsaved step: %+v", history)
		}
	}
}

// TestApprovedCallRecordedWithItsResult: an approved call that runs is
// recorded in the same write as its result.
func TestApprovedCallRecordedWithItsResult(t *testing.T) {
	model := &scripted{replies: [][]string{nil}}
	f, _ := newServiceOver(t, model, func(s session.Store) session.Store { return &writeLog{Store: s} })
	w := f.wrapped.(*writeLog)
	turn := f.start(t, "hello")
	turn.Answers = []llmorch.Answer{{Call: chat.ToolCall{ID: "c1", Name: "think", Arguments: argsFor["think"]}, Approved: true}}
	for ev := range f.svc.StreamWithOrchestration(context.Background(), turn) {
		switch ev.Kind {
		case chat.KindToolResult:
			w.note("tool-result " + ev.ToolResult.Name)
		case chat.KindStepFinish:
			w.note("step-finish")
		}
	}
	want := []string{"write UpdateAppend", "tool-result think", "write UpdateAppend", "step-finish"}
	if !slices.Equal(w.log, want) {
		t.Fatalf("writes and events %q, want %q", w.log, want)
	}
	sess, err := f.store.Get(context.Background(), f.id)
	if err != nil {
		t.Fatal(err)
	}
	if !sess.State.RecentlyUsedTools.Equal("think") || sess.State.ActiveStep != "After" {
		t.Fatalf("state %+v: want think recorded and its step, After", sess.State)
	}
	history, _ := f.store.Messages(context.Background(), f.id, 0)
	if len(history) < 2 || history[0].Role != chat.RoleTool || history[0].ToolCallID != "c1" {
		t.Fatalf("history %+v: want the approved call's result first", history)
	}
}
