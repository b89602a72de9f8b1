package redislog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/agentdock-go/agentdock/turnlog/redislog"
)

// TestRedisHandOver: a replica hands a running turn over with its last
// frames: the turn is marked handed over, not finished; the replicas that
// watch hand-overs hear of it at once, and one that starts watching later
// finds it waiting; the old writer's writes are refused; a takeover clears
// the mark, goes on after the last frame and takes the turn off the list
// of those waiting.
func TestRedisHandOver(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "standalone", true: "cluster"}[cluster], func(t *testing.T) {
			var opts []redistest.Option
			if cluster {
				opts = append(opts, redistest.Cluster())
			}
			srv := redistest.Start(t, opts...)
			var logs []*redislog.Log
			for range 3 {
				logs = append(logs, openRedis(t, newClient(t, srv, cluster), redislog.Config{Prefix: "handover"}))
			}
			a, b, c := logs[0], logs[1], logs[2]
			heard := make(chan turnlog.Ref, 8)
			defer b.WatchHandOvers(func(ref turnlog.Ref) { heard <- ref })()
			// A moment for the subscription: a hand-over published before
			// it is found by the next sweep only, 10 s later.
			time.Sleep(100 * time.Millisecond)

			ctx := context.Background()
			ref := turnlog.Ref{Session: session.NewID(), Turn: session.NewID()}
			if err := a.Open(turnlog.Meta{Ref: ref, Owner: "o", AgentID: "ag"}); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Append(ctx, ref, []byte(`"f1"`), []byte(`"f2"`)); err != nil {
				t.Fatal(err)
			}
			if err := a.HandOver(ctx, ref, []byte(`"f3"`)); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-heard:
				if got != ref {
					t.Fatalf("heard of %v, want %v", got, ref)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the watching replica did not hear of the hand-over")
			}
			st, err := b.Lookup(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if !st.HandedOver || st.Done || st.Last != 3 {
				t.Fatalf("after the hand-over: %+v; want handed over, running, last 3", st)
			}
			if _, err := a.Append(ctx, ref, []byte(`"late"`)); !errors.Is(err, turnlog.ErrFenced) {
				t.Fatalf("a write of the replica that handed the turn over: %v; want ErrFenced", err)
			}

			// A replica that starts watching now finds it waiting.
			late := make(chan turnlog.Ref, 8)
			defer c.WatchHandOvers(func(ref turnlog.Ref) { late <- ref })()
			select {
			case got := <-late:
				if got != ref {
					t.Fatalf("the sweep found %v, want %v", got, ref)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a replica that starts watching did not find the turn waiting")
			}

			st, err = b.TakeOver(ctx, turnlog.Meta{Ref: ref, Owner: "o", AgentID: "ag"})
			if err != nil {
				t.Fatal(err)
			}
			if st.HandedOver || st.Last != 3 {
				t.Fatalf("after the takeover: %+v; want not handed over, last 3", st)
			}
			if err := b.Finish(ctx, ref, []byte(`"f4"`)); err != nil {
				t.Fatal(err)
			}
			frames := readAll(t, c, ref)
			if len(frames) != 4 || string(frames[3].Data) != `"f4"` {
				t.Fatalf("the stream: %+v", frames)
			}
			if err := b.HandOver(ctx, ref); !errors.Is(err, turnlog.ErrFinished) {
				t.Fatalf("handing a finished turn over: %v; want ErrFinished", err)
			}
		})
	}
}

func readAll(t *testing.T, l *redislog.Log, ref turnlog.Ref) []turnlog.Frame {
	t.Helper()
	var out []turnlog.Frame
	for after := int64(0); ; {
		b, err := l.Read(context.Background(), ref, after)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b.Frames...)
		if b.Done || len(b.Frames) == 0 {
			return out
		}
		after = b.Frames[len(b.Frames)-1].Seq
	}
}
