package filestore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/examples/filestore"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/sessiontest"
)

// TestConformance: the suite, with the quotas the store does not enforce
// (see the package documentation).
func TestConformance(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T, cfg session.Config) session.Store {
		s, err := filestore.Open(t.TempDir(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, sessiontest.NoQuotas())
}

func open(t *testing.T, dir string, cfg session.Config) *filestore.Store {
	t.Helper()
	s, err := filestore.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func useTools(names ...string) func(*orchestration.State) error {
	return func(st *orchestration.State) error {
		for _, n := range names {
			st.RecentlyUsedTools = st.RecentlyUsedTools.Append(n, 100)
		}
		return nil
	}
}

// Reopen: everything a session holds is read back by a new store on the
// same directory, and a lease does not outlive its store.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	key := session.Key("alice", "conversation-1")
	first := open(t, dir, session.Config{})
	_, l, err := first.Claim(ctx, key, session.WithOwner("alice"), session.WithAgent("planner"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{
		{Role: chat.RoleUser, Content: "search for go"},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "search", Arguments: []byte(`{"q":"go"}`)}}},
		{Role: chat.RoleTool, ToolCallID: "c1", ToolName: "search", Content: "found"},
	}
	approval := session.Approval{ID: "a1", Status: session.ApprovalPending, Call: chat.ToolCall{ID: "c2", Name: "fetch", Arguments: []byte(`{}`)}}
	wrote, _, err := first.UpdateAppend(ctx, key, useTools("search"), msgs, 0, session.WithLease(l), session.WithTurn("turn-1"),
		session.WithApprovals(func([]session.Approval) ([]session.Approval, error) { return []session.Approval{approval}, nil }))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := open(t, dir, session.Config{})
	got, err := second.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get after reopening: %v", err)
	}
	if got.Owner != "alice" || got.Agent != "planner" || got.Version != wrote.Version || got.Turn != "turn-1" ||
		!got.State.RecentlyUsedTools.Equal("search") || !got.CreatedAt.Equal(wrote.CreatedAt) ||
		len(got.Approvals) != 1 || got.Approvals[0].Call.Name != "fetch" {
		t.Fatalf("after reopening: %+v\nwant what was written: %+v", got, wrote)
	}
	hist, err := second.Messages(ctx, key, 0)
	if err != nil || len(hist) != len(msgs) || string(hist[1].ToolCalls[0].Arguments) != `{"q":"go"}` || hist[2].ToolCallID != "c1" {
		t.Fatalf("history after reopening: %+v, %v", hist, err)
	}
	// The first store's turn died with it: its lease does not hold the
	// session in the second store, whose own leases fence it.
	_, l2, err := second.Claim(ctx, key, session.WithOwner("alice"), session.WithAgent("planner"))
	if err != nil {
		t.Fatalf("Claim after reopening (the old lease must be gone): %v", err)
	}
	if _, err := session.Update(ctx, second, key, useTools("fetch"), session.WithLease(l)); !errors.Is(err, session.ErrFenced) {
		t.Fatalf("a write with the closed store's lease: %v, want ErrFenced", err)
	}
	l2.Release(ctx)
}

// The directory belongs to one store at a time, and is free again after
// Close.
func TestOneStorePerDirectory(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, session.Config{})
	_, err := filestore.Open(dir, session.Config{})
	if !errors.Is(err, filestore.ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Open of %s: %v, want ErrLocked naming the directory", dir, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := filestore.Open(dir, session.Config{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	again.Close()
}

// A file that does not decode is an error naming it on every call, and is
// neither replaced by a new session nor removed.
func TestCorruptFile(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	s := open(t, dir, session.Config{})
	key := session.NewID()
	if _, err := session.Update(ctx, s, key, useTools("search")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, key+".json")
	damaged := []byte(`{"session": {"id": "` + key + `", "version": 3`) // cut short
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"Get":    func() error { _, err := s.Get(ctx, key); return err },
		"Update": func() error { _, err := session.Update(ctx, s, key, useTools("fetch")); return err },
		"Append": func() error {
			return session.AppendMessages(ctx, s, key, []chat.Message{{Role: chat.RoleUser, Content: "hi"}})
		},
		"Messages": func() error { _, err := s.Messages(ctx, key, 0); return err },
		"Claim":    func() error { _, _, err := s.Claim(ctx, key); return err },
		"Delete":   func() error { return s.Delete(ctx, key) },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, session.ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s on a corrupt file: %v, want ErrCorrupt naming %s", name, err, path)
		}
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != string(damaged) {
		t.Fatalf("the corrupt file was changed: %q, %v", b, err)
	}

	// A file that decodes but holds another session (copied by hand, or
	// two IDs that differ in case on a case-insensitive file system) is
	// refused the same way.
	other := session.NewID()
	if err := os.WriteFile(filepath.Join(dir, other+".json"), []byte(`{"session":{"id":"`+key+`"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, other); !errors.Is(err, session.ErrCorrupt) || !strings.Contains(err.Error(), other+".json") {
		t.Fatalf("Get of a file holding another session: %v", err)
	}
}

// Writes leave no temporary file behind, failed ones included, and Open
// removes those that a crash left.
func TestNoTempFiles(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	// A write that a crash interrupted before its rename.
	if err := os.WriteFile(filepath.Join(dir, ".tmp-123456"), []byte(`{"session":`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, session.Config{})
	var keys []string
	for i := range 5 {
		key := session.NewID()
		keys = append(keys, key+".json")
		_, l, err := s.Claim(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 4 {
			msgs := []chat.Message{{Role: chat.RoleUser, Content: "q"}, {Role: chat.RoleAssistant, Content: "a"}}
			if _, _, err := s.UpdateAppend(ctx, key, useTools("think"), msgs, -1, session.WithLease(l)); err != nil {
				t.Fatalf("session %d write %d: %v", i, j, err)
			}
		}
		// Refused writes: by the function, and by the fence.
		boom := errors.New("boom")
		if _, err := session.Update(ctx, s, key, func(*orchestration.State) error { return boom }); err != boom {
			t.Fatal(err)
		}
		l.Release(ctx)
		if _, err := session.Update(ctx, s, key, useTools("late"), session.WithLease(l)); !errors.Is(err, session.ErrFenced) {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, strings.TrimSuffix(keys[0], ".json")); err != nil {
		t.Fatal(err)
	}
	keys = keys[1:]
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := append(slices.Clone(keys), "LOCK")
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("the directory holds %v, want %v: the sessions' files and the lock, nothing else", names, want)
	}
}

// Expired sessions' files are removed by the sweep without any access, and
// by an access that finds them expired.
func TestExpiredFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	var offset time.Duration
	now := func() time.Time { return time.Now().Add(offset) }
	const ttl = time.Hour
	s := open(t, dir, session.Config{TTL: ttl, Now: now})
	stale, fresh := session.NewID(), session.NewID()
	for _, key := range []string{stale, fresh} {
		if err := session.AppendMessages(ctx, s, key, []chat.Message{{Role: chat.RoleUser, Content: "hi"}}); err != nil {
			t.Fatal(err)
		}
	}
	offset = ttl / 2
	if _, err := s.Get(ctx, fresh); err != nil { // a read slides the TTL
		t.Fatal(err)
	}
	offset = ttl + time.Minute
	if err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, stale+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the expired session's file after a sweep: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, fresh+".json")); err != nil {
		t.Fatalf("the session read within its TTL: %v", err)
	}
	offset = 2*ttl + time.Minute
	if _, err := s.Messages(ctx, fresh, 0); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Messages of an expired session: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, fresh+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the expired session's file after an access: %v", err)
	}
}

// Keys are checked: nothing outside the directory is reachable.
func TestInvalidKey(t *testing.T) {
	s := open(t, t.TempDir(), session.Config{})
	for _, key := range []string{"../../etc/passwd", "short", "a.b.c-session", ""} {
		if _, err := session.Update(context.Background(), s, key, useTools("x")); err == nil || !strings.Contains(err.Error(), "not a session key") {
			t.Errorf("Update(%q): %v, want a refused key", key, err)
		}
	}
}

// crashChild, when set, makes TestCrash the child process that writes
// until it is killed.
const crashChild = "FILESTORE_CRASH_DIR"

var crashKeys = []string{"session-a", "session-b", "session-c"}

// A process killed in the middle of its writes leaves every session whole:
// each file decodes, its state and history are from the same write, and the
// history is what was appended, in order; the next Open finds the directory
// unlocked and no temporary file. Five kills, each at a random moment.
func TestCrash(t *testing.T) {
	if dir := os.Getenv(crashChild); dir != "" {
		writeUntilKilled(dir)
		return
	}
	dir := t.TempDir()
	total := 0
	for round := range 5 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$")
		cmd.Env = append(os.Environ(), crashChild+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		if !lines.Scan() {
			t.Fatalf("round %d: the child wrote nothing", round)
		}
		go func() { // drain, so that the child never waits on its stdout
			for lines.Scan() {
			}
		}()
		time.Sleep(time.Duration(rand.IntN(30_000)) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()

		s, err := filestore.Open(dir, session.Config{})
		if err != nil {
			t.Fatalf("round %d: Open after the kill: %v", round, err)
		}
		n := checkCrashed(t, s, dir)
		if n <= total {
			t.Fatalf("round %d: %d messages in all, %d before the round: the child wrote nothing", round, n, total)
		}
		total = n
		s.Close()
	}
}

// checkCrashed checks the sessions TestCrash's child wrote, and returns how
// many messages they hold.
func checkCrashed(t *testing.T, s *filestore.Store, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") && e.Name() != "LOCK" {
			t.Errorf("after the crash and Open, the directory holds %s", e.Name())
		}
	}
	total := 0
	for _, key := range crashKeys {
		got, err := s.Get(t.Context(), key)
		if errors.Is(err, session.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("session %s after the crash: %v", key, err)
		}
		hist, err := s.Messages(t.Context(), key, 0)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(hist)) != got.Version {
			t.Fatalf("session %s: version %d but %d messages: state and history are not from one write", key, got.Version, len(hist))
		}
		for i, m := range hist {
			if m.Content != strconv.Itoa(i) {
				t.Fatalf("session %s: message %d is %q: the history is not what was appended", key, i, m.Content)
			}
		}
		total += len(hist)
	}
	return total
}

// writeUntilKilled appends numbered messages to TestCrash's sessions, one
// per write with the state's, and says so on stdout after each.
func writeUntilKilled(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s, err := filestore.Open(dir, session.Config{MaxMessages: 1 << 20})
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	next := make([]int, len(crashKeys))
	for i, key := range crashKeys {
		hist, err := s.Messages(ctx, key, 0)
		if err != nil && !errors.Is(err, session.ErrNotFound) {
			fail(err)
		}
		next[i] = len(hist)
	}
	for i := 0; ; i = (i + 1) % len(crashKeys) {
		msg := []chat.Message{{Role: chat.RoleUser, Content: strconv.Itoa(next[i])}}
		if _, _, err := s.UpdateAppend(ctx, crashKeys[i], useTools("x"), msg, 0); err != nil {
			fail(err)
		}
		next[i]++
		fmt.Println(next[i])
	}
}

// BenchmarkWrite is the cost of one durable write (a turn makes a few): an
// UpdateAppend of one message to a session of 100, with its two fsyncs.
// Parallel: writes to distinct sessions, whose fsyncs overlap.
func BenchmarkWrite(b *testing.B) {
	history := make([]chat.Message, 100)
	for i := range history {
		history[i] = chat.Message{Role: chat.RoleUser, Content: strings.Repeat("word ", 20)}
	}
	msg := []chat.Message{{Role: chat.RoleAssistant, Content: "answer"}}
	for _, parallel := range []bool{false, true} {
		name := "OneSession"
		if parallel {
			name = "Parallel"
		}
		b.Run(name, func(b *testing.B) {
			s, err := filestore.Open(b.TempDir(), session.Config{MaxMessages: 200})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			write := func(key string) {
				if _, _, err := s.UpdateAppend(context.Background(), key, useTools("x"), msg, 0); err != nil {
					b.Fatal(err)
				}
			}
			if !parallel {
				key := session.NewID()
				session.AppendMessages(b.Context(), s, key, history)
				for b.Loop() {
					write(key)
				}
				return
			}
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				key := session.NewID()
				session.AppendMessages(context.Background(), s, key, history)
				for pb.Next() {
					write(key)
				}
			})
		})
	}
}
