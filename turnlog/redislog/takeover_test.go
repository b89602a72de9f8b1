package redislog_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/agentdock-go/agentdock/turnlog/redislog"
)

// lostReply makes the next write of a turn's frames go wrong the way a
// paused or unreachable Redis makes it go wrong, while the write itself
// reaches Redis: late (it is sent again after a pause, as a write stuck in
// a socket is read once Redis runs again) or applied with its reply lost.
// The caller sees a failure in both cases.
type lostReply struct {
	mode    atomic.Int32 // 0 off, 1 late, 2 applied with the reply lost
	pending sync.WaitGroup
}

const (
	replyLate = iota + 1
	replyLost
)

func (h *lostReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *lostReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *lostReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		frames := cmd.Name() == "evalsha" && len(args) > 3 && strings.HasSuffix(args[3].(string), ":frames") && len(args) > 8
		if !frames {
			return next(ctx, cmd)
		}
		failed := errors.New("i/o timeout (simulated)")
		switch h.mode.Swap(0) {
		case replyLate:
			late := redis.NewCmd(context.Background(), args...)
			h.pending.Go(func() {
				time.Sleep(300 * time.Millisecond)
				_ = next(context.Background(), late)
			})
			cmd.SetErr(failed)
			return failed
		case replyLost:
			_ = next(ctx, cmd)
			cmd.SetErr(failed)
			return failed
		}
		return next(ctx, cmd)
	}
}

// TestRedisLateWrites: a batch of frames whose write failed without saying
// whether it went in is sent again with the frames that came after it.
// Whether the first attempt went in before the second (its reply was
// lost) or arrives after it (stuck while Redis was paused), the stream
// keeps every frame once, in order: the shared log never shows a client a
// stretch of the answer twice.
func TestRedisLateWrites(t *testing.T) {
	srv := redistest.Start(t)
	client := newClient(t, srv, false)
	hook := &lostReply{}
	client.AddHook(hook)
	l := openRedis(t, client, redislog.Config{Prefix: "late"})
	ctx := context.Background()
	ref := turnlog.Ref{Session: session.NewID(), Turn: session.NewID()}
	if err := l.Open(turnlog.Meta{Ref: ref, Owner: "o"}); err != nil {
		t.Fatal(err)
	}
	batch := func(from, to int64) [][]byte {
		var out [][]byte
		for i := from; i <= to; i++ {
			out = append(out, frameData(i))
		}
		return out
	}
	if last, err := l.Append(ctx, ref, batch(1, 2)...); err != nil || last != 2 {
		t.Fatalf("Append 1..2 = %d, %v", last, err)
	}
	// Late: 3..5 fails and arrives after 3..7, which the writer sends next.
	hook.mode.Store(replyLate)
	if _, err := l.Append(ctx, ref, batch(3, 5)...); err == nil {
		t.Fatal("the late write reported success")
	}
	if last, err := l.Append(ctx, ref, batch(3, 7)...); err != nil || last != 7 {
		t.Fatalf("Append 3..7 after a failed 3..5 = %d, %v", last, err)
	}
	hook.pending.Wait()
	// Lost reply: 8..9 goes in, the writer hears a failure and sends
	// 8..10.
	hook.mode.Store(replyLost)
	if _, err := l.Append(ctx, ref, batch(8, 9)...); err == nil {
		t.Fatal("the write whose reply was lost reported success")
	}
	if last, err := l.Append(ctx, ref, batch(8, 10)...); err != nil || last != 10 {
		t.Fatalf("Append 8..10 after 8..9 went in unheard = %d, %v", last, err)
	}
	// The same for the turn's end, whose frames went in unheard.
	hook.mode.Store(replyLost)
	if err := l.Finish(ctx, ref, batch(11, 12)...); err == nil {
		t.Fatal("the Finish whose reply was lost reported success")
	}
	if err := l.Finish(ctx, ref, batch(11, 12)...); err != nil {
		t.Fatalf("Finish sent again: %v", err)
	}
	b, err := l.Read(ctx, ref, 0)
	if err != nil || !b.Done {
		t.Fatalf("Read: %+v, %v", b, err)
	}
	checkSeqs(t, "the stream after late and repeated writes", b.Frames, 1, 12)
}

// TestRedisTakeOver: another process takes over a running turn whose
// writer stopped; it appends after the last frame, hears the turn's stop
// requests, and the previous writer's writes are refused from then on,
// whether it is dead or only stalled.
func TestRedisTakeOver(t *testing.T) {
	srv := redistest.Start(t)
	cfg := redislog.Config{Prefix: "takeover", Poll: 50 * time.Millisecond}
	a := openRedis(t, newClient(t, srv, false), cfg)
	b := openRedis(t, newClient(t, srv, false), cfg)
	var _ turnlog.Taker = b
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	meta := turnlog.Meta{Ref: turnlog.Ref{Session: session.NewID(), Turn: session.NewID()}, Owner: "o", AgentID: "agent"}
	ref := meta.Ref
	if err := a.Open(meta); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, ref, frameData(1), frameData(2)); err != nil {
		t.Fatal(err)
	}
	st, err := b.TakeOver(ctx, meta)
	if err != nil || st.Last != 2 || st.Done || st.Stop || st.Owner != "o" || st.AgentID != "agent" || len(st.Restarts) != 1 || st.Restarts[0] != 3 {
		t.Fatalf("TakeOver = %+v, %v; want last 2, running, the turn's owner and agent, a restart at 3", st, err)
	}
	if _, err := a.Append(ctx, ref, frameData(3)); !errors.Is(err, turnlog.ErrFenced) {
		t.Fatalf("the previous writer's Append after the takeover: %v; want ErrFenced", err)
	}
	if last, err := b.Append(ctx, ref, frameData(3), frameData(4)); err != nil || last != 4 {
		t.Fatalf("the new writer's Append = %d, %v; want 4", last, err)
	}
	heardA, heardB := make(chan turnlog.Ref, 4), make(chan turnlog.Ref, 4)
	defer a.WatchStops(func(r turnlog.Ref) { heardA <- r })()
	defer b.WatchStops(func(r turnlog.Ref) { heardB <- r })()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if err := a.Stop(ctx, ref); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-heardB:
			if r != ref {
				t.Fatalf("the new writer heard %v", r)
			}
		case <-time.After(200 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the new writer never heard the stop")
			}
			continue
		}
		break
	}
	select {
	case r := <-heardA:
		t.Fatalf("the previous writer heard the stop of a turn it no longer writes: %v", r)
	case <-time.After(100 * time.Millisecond):
	}
	if st, err := a.Lookup(ctx, ref); err != nil || !st.Stop || st.Last != 4 || len(st.Restarts) != 1 || st.Restarts[0] != 3 {
		t.Fatalf("Lookup after the stop: %+v, %v", st, err)
	}
	if err := a.Finish(ctx, ref); !errors.Is(err, turnlog.ErrFenced) {
		t.Fatalf("the previous writer's Finish: %v; want ErrFenced", err)
	}
	if err := b.Finish(ctx, ref, frameData(5)); err != nil {
		t.Fatal(err)
	}
	got, err := followAll(ctx, a, ref, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, "the turn through both writers", got, 1, 5)
	if _, err := b.TakeOver(ctx, meta); !errors.Is(err, turnlog.ErrFinished) {
		t.Fatalf("TakeOver of a finished turn: %v; want ErrFinished", err)
	}

	// A turn whose writer died before its first write is registered by
	// the takeover, without frames, with a start of the taker's own (a
	// replica that takes a turn over does not know when it started).
	unlisted := turnlog.Meta{Ref: turnlog.Ref{Session: session.NewID(), Turn: session.NewID()}, Owner: "o2", AgentID: "agent"}
	opened := unlisted
	opened.Started = time.Now().Add(-time.Second)
	if err := a.Open(opened); err != nil {
		t.Fatal(err)
	}
	st, err = b.TakeOver(ctx, unlisted)
	if err != nil || st.Last != 0 || st.Owner != "o2" || len(st.Restarts) != 1 || st.Restarts[0] != 1 {
		t.Fatalf("TakeOver of a turn the log did not have: %+v, %v", st, err)
	}
	if latest, err := a.Latest(ctx, unlisted.Session); err != nil || latest.Turn != unlisted.Turn {
		t.Fatalf("Latest after the takeover registered the turn: %+v, %v", latest, err)
	}
	if _, err := a.Append(ctx, unlisted.Ref, frameData(1)); !errors.Is(err, turnlog.ErrFenced) {
		t.Fatalf("the first write of the writer that lost the turn before it: %v; want ErrFenced", err)
	}
	if err := b.Finish(ctx, unlisted.Ref, frameData(1)); err != nil {
		t.Fatal(err)
	}
}
