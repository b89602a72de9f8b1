package redisstore

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// TestRedisRetriedScriptsApplyOnce replays a write script with the same
// arguments, as go-redis does when a connection breaks after Redis ran the
// script but before its reply arrived: the replay must not apply it again.
func TestRedisRetriedScriptsApplyOnce(t *testing.T) {
	srv := redistest.Start(t)
	r, err := New(Config{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := t.Context()
	id := session.NewID()
	keys := r.keys(id)

	s := session.Session{ID: id, Version: 1}
	s.State.RecentlyUsedTools = orchestration.NewHistory("search")
	args := []any{"", "1", encode(s), session.NewID(), r.ttlMillis(), "", "0"}
	for attempt := range 2 {
		reply, err := scriptUpdate.Run(ctx, r.client, keys, args...).Slice()
		if err != nil || reply[0] != "ok" {
			t.Fatalf("update attempt %d: %v %v, want ok both times", attempt, reply, err)
		}
	}
	// A different writer with the same stale expectation conflicts.
	other := []any{"", "1", encode(s), session.NewID(), r.ttlMillis(), "", "0"}
	if reply, err := scriptUpdate.Run(ctx, r.client, keys, other...).Slice(); err != nil || reply[0] != "conflict" {
		t.Fatalf("a stale write from another writer: %v %v, want conflict", reply, err)
	}
	if got, err := r.Get(ctx, id); err != nil || got.Version != 1 {
		t.Fatalf("after the replay: %+v %v, want version 1", got, err)
	}

	msg, _ := json.Marshal(chat.Message{Role: chat.RoleUser, Content: "once"})
	appArgs := []any{r.ttlMillis(), strconv.Itoa(r.cfg.MaxMessages), "", session.NewID(), encode(session.Session{ID: id}), string(msg)}
	for attempt := range 2 {
		if status, err := scriptAppend.Run(ctx, r.client, keys, appArgs...).Text(); err != nil || status != "ok" {
			t.Fatalf("append attempt %d: %q %v", attempt, status, err)
		}
	}
	if msgs, err := r.Messages(ctx, id, 0); err != nil || len(msgs) != 1 {
		t.Fatalf("history after a replayed append: %+v %v, want one message", msgs, err)
	}

	// UpdateAppend: the replay neither writes nor appends again, and
	// answers with the same window (the history before its append).
	s.Version = 2
	second, _ := json.Marshal(chat.Message{Role: chat.RoleAssistant, Content: "twice?"})
	uaArgs := []any{"1", "2", encode(s), session.NewID(), r.ttlMillis(), "", -1, r.cfg.MaxMessages, "0", "0", string(second)}
	for attempt := range 2 {
		reply, err := scriptUpdateAppend.Run(ctx, r.client, keys, uaArgs...).Slice()
		if err != nil || reply[0] != "ok" {
			t.Fatalf("update-append attempt %d: %v %v, want ok both times", attempt, reply, err)
		}
		if hist, _ := reply[1].([]any); len(hist) != 1 || hist[0] != string(msg) {
			t.Fatalf("update-append attempt %d returned the window %q, want only the message before it", attempt, hist)
		}
	}
	if msgs, err := r.Messages(ctx, id, 0); err != nil || len(msgs) != 2 {
		t.Fatalf("history after a replayed update-append: %+v %v, want two messages", msgs, err)
	}
	if got, err := r.Get(ctx, id); err != nil || got.Version != 2 {
		t.Fatalf("after the replayed update-append: %+v %v, want version 2", got, err)
	}

	// A write that released its lease, replayed: the lease is gone, but
	// its nonce shows the write applied, so the replay answers ok and
	// appends nothing.
	token := session.NewID()
	if err := r.client.Set(ctx, keys[2], token, 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Version = 3
	third, _ := json.Marshal(chat.Message{Role: chat.RoleAssistant, Content: "released"})
	relArgs := []any{"2", "3", encode(s), session.NewID(), r.ttlMillis(), token, -1, r.cfg.MaxMessages, "0", "1", string(third)}
	for attempt := range 2 {
		reply, err := scriptUpdateAppend.Run(ctx, r.client, keys, relArgs...).Slice()
		if err != nil || reply[0] != "ok" {
			t.Fatalf("releasing update-append attempt %d: %v %v, want ok both times", attempt, reply, err)
		}
	}
	if n, err := r.client.Exists(ctx, keys[2]).Result(); err != nil || n != 0 {
		t.Fatalf("lease key after a releasing write: exists=%d %v, want gone", n, err)
	}
	if msgs, err := r.Messages(ctx, id, 0); err != nil || len(msgs) != 3 {
		t.Fatalf("history after a replayed releasing update-append: %+v %v, want three messages", msgs, err)
	}
	// Another writer fenced by the same (gone) lease is refused.
	stale := []any{"3", "4", encode(s), session.NewID(), r.ttlMillis(), token, "1"}
	if reply, err := scriptUpdate.Run(ctx, r.client, keys, stale...).Slice(); err != nil || reply[0] != "fenced" {
		t.Fatalf("a write fenced by a released lease: %v %v, want fenced", reply, err)
	}

	// Claim: the replay recognises the session it created and the lease
	// it took; another caller's claim is busy.
	fresh := session.NewID()
	claimArgs := []any{r.ttlMillis(), encode(session.Session{ID: fresh}), session.NewID(), "", "", session.NewID(), r.lockMillis()}
	for attempt := range 2 {
		reply, err := scriptClaim.Run(ctx, r.client, r.keys(fresh), claimArgs...).Slice()
		if err != nil || reply[0] != "ok" || reply[2] != int64(1) {
			t.Fatalf("claim attempt %d: %v %v, want ok and created both times", attempt, reply, err)
		}
	}
	otherClaim := []any{r.ttlMillis(), encode(session.Session{ID: fresh}), session.NewID(), "", "", session.NewID(), r.lockMillis()}
	if reply, err := scriptClaim.Run(ctx, r.client, r.keys(fresh), otherClaim...).Slice(); err != nil || reply[0] != "busy" || reply[2] != int64(0) {
		t.Fatalf("another claim: %v %v, want busy and not created", reply, err)
	}

	// ClaimStart: the replay recognises the lease it took and the write it
	// made; it answers with the same window and appends nothing again.
	started := session.NewID()
	ns := session.Session{ID: started, Version: 1}
	nonce, token2 := session.NewID(), session.NewID()
	csArgs := []any{r.ttlMillis(), encode(session.Session{ID: started}), nonce, "", "", token2, r.lockMillis(), nonce}
	csArgs = r.updateAppendArgs(csArgs, "0", ns.Version, encode(ns), session.NewID(), token2, &appendArgs{window: -1, msgs: []any{string(msg)}}, false)
	for attempt := range 2 {
		reply, err := scriptClaimStart.Run(ctx, r.client, r.keys(started), csArgs...).Slice()
		if err != nil || len(reply) != 5 || reply[0] != "ok" || reply[3] != "ok" {
			t.Fatalf("claim-start attempt %d: %v %v, want the claim and the write both times", attempt, reply, err)
		}
		if hist, _ := reply[4].([]any); len(hist) != 0 {
			t.Fatalf("claim-start attempt %d returned the window %q, want none (the session is new)", attempt, hist)
		}
	}
	if msgs, err := r.Messages(ctx, started, 0); err != nil || len(msgs) != 1 {
		t.Fatalf("history after a replayed claim-start: %+v %v, want one message", msgs, err)
	}
	if got, err := r.Get(ctx, started); err != nil || got.Version != 1 {
		t.Fatalf("after the replayed claim-start: %+v %v, want version 1", got, err)
	}
	// Expecting a write the session has not had: the claim alone.
	if err := r.client.Del(ctx, r.keys(started)[2]).Err(); err != nil {
		t.Fatal(err)
	}
	stale2 := []any{r.ttlMillis(), encode(session.Session{ID: started}), session.NewID(), "", "", session.NewID(), r.lockMillis(), session.NewID()}
	stale2 = r.updateAppendArgs(stale2, "1", 2, encode(session.Session{ID: started, Version: 2}), session.NewID(), stale2[5].(string), &appendArgs{window: -1, msgs: []any{string(msg)}}, false)
	if reply, err := scriptClaimStart.Run(ctx, r.client, r.keys(started), stale2...).Slice(); err != nil || len(reply) != 4 || reply[0] != "ok" || reply[3] != "conflict" {
		t.Fatalf("claim-start expecting another write: %v %v, want the claim and a conflict", reply, err)
	}
	if got, err := r.Get(ctx, started); err != nil || got.Version != 1 {
		t.Fatalf("after a claim-start that expected another write: %+v %v, want version 1", got, err)
	}
}

// TestReplicasIn: a primary's INFO replication gives the number of its
// connected replicas and their addresses.
func TestReplicasIn(t *testing.T) {
	for _, tc := range []struct {
		info  string
		n     int
		addrs []string
	}{
		{info: "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_repl_offset:0\r\n"},
		{info: "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1,port=6380,state=online,offset=42,lag=0\r\nslave1:ip=10.0.0.7,port=7001,state=wait_bgsave,offset=0,lag=0\r\nmaster_failover_state:no-failover\r\n",
			n: 2, addrs: []string{"127.0.0.1:6380", "10.0.0.7:7001"}},
		{info: "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nslave_repl_offset:3\r\nslave_priority:100\r\nconnected_slaves:0\r\n"},
		{info: "garbage"},
	} {
		n, addrs := replicasIn(tc.info)
		if n != tc.n || !slices.Equal(addrs, tc.addrs) {
			t.Errorf("replicasIn(%q) = %d, %v; want %d, %v", tc.info, n, addrs, tc.n, tc.addrs)
		}
	}
}
