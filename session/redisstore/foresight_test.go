package redisstore

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// The forecast a ClaimStart gives (session.WithForesight) is what it then
// returns, turn after turn: through appends, a turn's writes, a history
// trimmed by MaxMessages, and a regenerated answer, for every window. Once
// another replica writes the session, the forecast fails, and after a few
// such failures the store makes none.
func TestForesightForecastsTheClaim(t *testing.T) {
	srv := redistest.Start(t)
	for _, window := range []int{-1, 0, 3} {
		t.Run(fmt.Sprintf("window %d", window), func(t *testing.T) {
			r, err := New(Config{URL: srv.URL(), Config: session.Config{MaxMessages: 7}})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx := t.Context()
			id := session.NewID()
			noop := func(*orchestration.State) error { return nil }
			turn := func(r *Store, i int, regenerate bool) (forecast *session.Started, started *session.Started) {
				t.Helper()
				w := session.Write{Update: noop, Window: window, Options: []session.UpdateOption{session.WithTurn("t")}}
				if regenerate {
					w.Options = append(w.Options, session.DropLastAnswer())
				} else {
					w.Messages = []chat.Message{{Role: chat.RoleUser, Content: fmt.Sprint("question ", i)}}
				}
				_, lease, started, err := r.ClaimStart(ctx, id, func(session.Session) (session.Write, bool) { return w, true },
					session.WithForesight(func(s session.Started) { forecast = &s }))
				if err != nil {
					t.Fatalf("turn %d: %v", i, err)
				}
				if started == nil {
					// Not written with the claim: the caller's write.
					var hist []chat.Message
					if _, hist, err = r.UpdateAppend(ctx, id, noop, w.Messages, window, append(w.Options, session.WithLease(lease))...); err != nil {
						t.Fatal(err)
					}
					started = &session.Started{History: hist}
				}
				// The turn: a tool call and its result, then the answer
				// with the write that ends it.
				call := chat.ToolCall{ID: fmt.Sprint("c", i), Name: "search", Arguments: json.RawMessage(`{}`)}
				if err := r.AppendMessages(ctx, id, []chat.Message{{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{call}}, {Role: chat.RoleTool, ToolCallID: call.ID, Content: "found"}}, session.WithLease(lease)); err != nil {
					t.Fatal(err)
				}
				if _, _, err := r.UpdateAppend(ctx, id, noop, []chat.Message{{Role: chat.RoleAssistant, Content: fmt.Sprint("answer ", i)}}, 0,
					session.WithLease(lease), session.WithTurn(""), session.WithRelease()); err != nil {
					t.Fatal(err)
				}
				return forecast, started
			}
			for i := range 6 {
				forecast, started := turn(r, i, i == 4)
				if forecast == nil {
					t.Fatalf("turn %d: no forecast", i)
				}
				if !reflect.DeepEqual(forecast.History, started.History) || forecast.Session.Version != started.Session.Version {
					t.Fatalf("turn %d: forecast %+v (version %d), the claim returned %+v (version %d)", i, forecast.History, forecast.Session.Version, started.History, started.Session.Version)
				}
			}

			// Another replica's turns: this store's forecasts fail, then
			// stop.
			other, err := New(Config{URL: srv.URL(), Config: session.Config{MaxMessages: 7}})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			made := 0
			for i := range 8 {
				turn(other, 100+i, false)
				if forecast, _ := turn(r, 200+i, false); forecast != nil {
					made++
				}
			}
			if made == 0 || made > foresightMisses+1 {
				t.Fatalf("with another writer: %d forecasts in 8 turns, want 1 to %d", made, foresightMisses+1)
			}
		})
	}
}

func TestTailWindow(t *testing.T) {
	u := func(s string) string { return `{"role":"user","content":"` + s + `"}` }
	a := func(s string) string { return `{"role":"assistant","content":"` + s + `"}` }
	whole := tail{msgs: []string{u("1"), a("1"), u("2"), a("2")}, known: true, whole: true}
	part := tail{msgs: []string{a("1"), u("2"), a("2")}, known: true}
	for _, tc := range []struct {
		name   string
		t      tail
		w      int
		drop   bool
		want   []string
		wantOK bool
	}{
		{"none", tail{}, 0, false, nil, true},
		{"unknown", tail{}, 2, false, nil, false},
		{"all of a whole", whole, -1, false, whole.msgs, true},
		{"all of a part", part, -1, false, nil, false},
		{"the last two", part, 2, false, []string{u("2"), a("2")}, true},
		{"wider than a part", part, 5, false, nil, false},
		{"wider than a whole", whole, 9, false, whole.msgs, true},
		{"after the drop", part, 2, true, []string{a("1"), u("2")}, true},
		{"drop without a user message", tail{msgs: []string{a("x")}, known: true}, 1, true, nil, false},
	} {
		got, ok := tc.t.window(tc.w, tc.drop)
		if ok != tc.wantOK || ok && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}
