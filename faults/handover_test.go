package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	adchat "github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// The tests of this file run replicas with the default configuration
// (SESSION_LOCK_TTL, HEARTBEAT, SHUTDOWN_TIMEOUT) on one redis-server, and
// the durable agent of killturns_test.go: two counted searches, then an
// answer streamed word by word.

// defaultsEnv is the environment of a replica with the defaults: the
// harness's short SHUTDOWN_TIMEOUT put back to the default.
func defaultsEnv(t *testing.T, m *mockllm.Server, search string) []string {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "durable"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "durable", "template.json"), []byte(durableTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := redistest.Start(t)
	return append(modelEnv(m), "SESSION_STORE="+rs.URL(), "TEMPLATES_DIR="+dir, "SEARXNG_URL="+search, "SHUTDOWN_TIMEOUT=25s")
}

// words is an answer of n words (" w0 w1 ...").
func words(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(" w%d", i)
	}
	return out
}

// term sends p SIGTERM and waits for it to exit (at most SHUTDOWN_TIMEOUT
// and a margin, then it is killed and the test fails); it returns how long
// the exit took.
func term(t *testing.T, p *serverProc) time.Duration {
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(40 * time.Second):
		p.Kill()
		t.Errorf("the replica on %s did not exit within 40 s of SIGTERM", p.addr)
	}
	return time.Since(start)
}

// TestSIGTERMHandsTurnOver: replica A of two is SIGTERMed while a turn
// runs on it and its client reads it there: during the turn's first
// search, or while its answer streams. The client's stream on A ends
// without finish; the client resumes on B with its Last-Event-ID and gets
// the rest, with no gap and no duplicate: the turn finishes stop within
// 15 s of the SIGTERM, the saved answer is whole and equals what the
// client shows, and each search ran once. The test prints how long A took
// to exit, the client's wait between its last frame from A and its first
// from B, and the time from the SIGTERM to the finish.
func TestSIGTERMHandsTurnOver(t *testing.T) {
	for _, tc := range []struct {
		name string
		// during is the search whose call SIGTERMs A ("" after five text
		// deltas of the answer).
		during string
	}{
		{name: "during a tool call", during: "-a"},
		{name: "during the answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counter := &searchCounter{runs: map[string]int{}, interrupted: map[string]int{}}
			var victim atomic.Pointer[serverProc]
			termed := make(chan time.Time, 1)
			signal := func() {
				if p := victim.Swap(nil); p != nil {
					termed <- time.Now()
					_ = p.cmd.Process.Signal(syscall.SIGTERM)
				}
			}
			search := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if q := r.URL.Query().Get("q"); tc.during != "" && strings.HasSuffix(q, tc.during) {
					signal()
				}
				counter.ServeHTTP(w, r)
			}))
			defer search.Close()
			m := newModel(t, mockllm.WithResponder(durableAnswer(words(60))), mockllm.WithMaxRecorded(-1))
			env := defaultsEnv(t, m, search.URL)
			a, b := startServer(t, env...), startServer(t, env...)
			victim.Store(a)

			sid := session.NewID()
			s := chat(t, a.URL(), "durable", sid, "turn 1")
			var onA []frame
			for deltas := 0; ; {
				f, err := s.Next(30 * time.Second)
				if err != nil {
					break
				}
				onA = append(onA, f)
				if f.Type() == "finish" {
					t.Fatalf("the turn finished on A: %s", dataOf(onA))
				}
				if f.Type() == "text-delta" {
					if deltas++; deltas == 5 && tc.during == "" {
						signal()
					}
				}
			}
			var at time.Time
			select {
			case at = <-termed:
			default:
				t.Fatalf("A's stream ended before the SIGTERM: %s", dataOf(onA))
			}
			lastOnA := time.Now()
			if n := len(onA); n > 0 {
				lastOnA = onA[n-1].At
			}
			exit := make(chan time.Duration, 1)
			go func() {
				<-a.exited
				exit <- time.Since(at)
			}()
			if end := requireEndOrEmpty(onA); end != "" || onA[len(onA)-1].Data == "[DONE]" {
				t.Fatalf("A's stream ended with a finish: %s", dataOf(onA[max(0, len(onA)-4):]))
			}
			last := onA[len(onA)-1].ID
			r := resume(t, b.URL(), sid, last)
			if r.Status != http.StatusOK {
				t.Fatalf("resuming on B after %s: %d %s", last, r.Status, r.Body)
			}
			onB := r.All(30 * time.Second)
			if len(onB) == 0 {
				t.Fatal("B's stream is empty")
			}
			finished := onB[len(onB)-1].At
			frames := append(slices.Clone(onA), onB...)
			if end := requireEnd(t, frames); end != "stop" || len(errorTexts(frames)) > 0 {
				t.Fatalf("the turn ended %q %q; B's frames: %s", end, errorTexts(frames), dataOf(onB))
			}
			for i, f := range frames[1:] {
				if seqOf(f.ID) != seqOf(frames[i].ID)+1 {
					t.Fatalf("frame %d (%s) follows %s: a gap or a duplicate; the client's frames: %s", i+1, f.ID, frames[i].ID, dataOf(frames))
				}
			}
			view := requireConsistent(t, b.URL(), sid)
			saved := ""
			for _, msg := range view.Messages {
				if msg.Role == adchat.RoleAssistant {
					saved += msg.Content
				}
			}
			shown := answerOf(frames)
			if saved != shown || !strings.HasSuffix(saved, strings.Join(words(60), "")) {
				t.Errorf("saved %q, the client shows %q", saved, shown)
			}
			counter.mu.Lock()
			for q, n := range counter.runs {
				if n != 1 {
					t.Errorf("search %q ran %d times", q, n)
				}
			}
			searches := len(counter.runs)
			counter.mu.Unlock()
			if searches != 2 {
				t.Errorf("%d searches ran, want 2", searches)
			}
			took := finished.Sub(at)
			t.Logf("SIGTERM %s: A exited %v after it; the client waited %v between its last frame from A and its first from B (%d frames on A, %d on B); the turn finished stop %v after the SIGTERM",
				tc.name, (<-exit).Round(time.Millisecond), onB[0].At.Sub(lastOnA).Round(time.Millisecond), len(onA), len(onB), took.Round(time.Millisecond))
			if took > 15*time.Second {
				t.Errorf("the turn finished %v after the SIGTERM, want within 15 s", took)
			}
		})
	}
}

// TestSIGKILLDefaults: with the default configuration, replica A of two is
// SIGKILLed while a turn's answer streams, after both its searches
// completed; its client resumes on B at once with its Last-Event-ID. B
// takes the turn over once A's lease expired and finishes it stop within
// 15 s of the kill; neither search runs again; the saved answer equals
// what the client shows. The test prints the time from the kill to the
// finish.
func TestSIGKILLDefaults(t *testing.T) {
	counter := &searchCounter{runs: map[string]int{}, interrupted: map[string]int{}}
	search := httptest.NewServer(counter)
	defer search.Close()
	m := newModel(t, mockllm.WithResponder(durableAnswer(words(60))), mockllm.WithMaxRecorded(-1))
	env := defaultsEnv(t, m, search.URL)
	a, b := startServer(t, env...), startServer(t, env...)
	sid := session.NewID()
	s := chat(t, a.URL(), "durable", sid, "turn 1")
	var onA []frame
	for deltas := 0; deltas < 5; {
		f, err := s.Next(30 * time.Second)
		if err != nil {
			t.Fatalf("A's stream: %v; frames: %s", err, dataOf(onA))
		}
		onA = append(onA, f)
		if f.Type() == "text-delta" {
			deltas++
		}
	}
	a.Kill()
	killed := time.Now()
	s.Close()
	r := resume(t, b.URL(), sid, onA[len(onA)-1].ID)
	if r.Status != http.StatusOK {
		t.Fatalf("resuming on B: %d %s", r.Status, r.Body)
	}
	onB := r.All(30 * time.Second)
	if len(onB) == 0 {
		t.Fatal("B's stream is empty")
	}
	took := onB[len(onB)-1].At.Sub(killed)
	frames := append(slices.Clone(onA), onB...)
	if end := requireEnd(t, frames); end != "stop" || len(errorTexts(frames)) > 0 {
		t.Fatalf("the turn ended %q %q; B's frames: %s", end, errorTexts(frames), dataOf(onB))
	}
	view := requireConsistent(t, b.URL(), sid)
	saved := ""
	for _, msg := range view.Messages {
		if msg.Role == adchat.RoleAssistant {
			saved += msg.Content
		}
	}
	if shown := answerOf(frames); saved != shown || !strings.HasSuffix(saved, strings.Join(words(60), "")) {
		t.Errorf("saved %q, the client shows %q", saved, shown)
	}
	counter.mu.Lock()
	runs := fmt.Sprint(counter.runs)
	for q, n := range counter.runs {
		if n != 1 {
			t.Errorf("search %q ran %d times: a completed call ran again", q, n)
		}
	}
	counter.mu.Unlock()
	t.Logf("SIGKILL with the defaults: B finished the turn stop %v after the kill (%d frames on A, %d on B); searches %s", took.Round(time.Millisecond), len(onA), len(onB), runs)
	if took > 15*time.Second {
		t.Errorf("the turn finished %v after the kill, want within 15 s", took)
	}
}

// TestRollingRestart: three replicas with the defaults are restarted one
// after the other (SIGTERM, wait for the exit, start a new one in its
// place, as a rolling deploy does) while 30 conversations run turns of two
// counted searches each, one turn after another, on any replica: a client
// whose stream ends without finish resumes on another replica with its
// Last-Event-ID, and a start refused (503 shutting_down, or no answer)
// is retried elsewhere with the same Idempotency-Key. Every turn finishes
// stop, each client's text (with its resumes) equals the answer the
// session saved for its turn, and no completed search ran twice. The test
// prints the counts and the figures a deploy is judged by: how long each
// replica took to exit, and how long a client waited between its last
// frame from the stopping replica and its first from another.
func TestRollingRestart(t *testing.T) {
	rollingRestart(t, 30, 1)
}

// TestRollingRestartLong is the slow variant: three rolling restarts in a
// row under 30 conversations.
func TestRollingRestartLong(t *testing.T) {
	slow(t)
	rollingRestart(t, 30, 3)
}

// convTurn is what a conversation's client saw of one turn.
type convTurn struct {
	message string
	frames  []frame
	resumes int
	// waits are the pauses between the last frame of a stream that ended
	// without finish and the first of its resumption.
	waits []time.Duration
	// retries counts the starts refused or unanswered.
	retries int
}

func rollingRestart(t *testing.T, conversations, rounds int) {
	counter := &searchCounter{runs: map[string]int{}, interrupted: map[string]int{}}
	search := httptest.NewServer(counter)
	defer search.Close()
	m := newModel(t, mockllm.WithResponder(durableAnswer(words(30))), mockllm.WithMaxRecorded(-1))
	env := defaultsEnv(t, m, search.URL)
	set := &replicaSet{}
	for range 3 {
		set.procs = append(set.procs, startServer(t, env...))
	}

	var (
		done   atomic.Bool
		mu     sync.Mutex
		turns  = map[string][]convTurn{} // by session
		wg     sync.WaitGroup
		starts atomic.Int64
	)
	for c := range conversations {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := session.NewID()
			for k := 0; k == 0 || !done.Load(); k++ {
				ct := runConvTurn(t, set, sid, fmt.Sprintf("turn c%d-k%d", c, k))
				starts.Add(1)
				mu.Lock()
				turns[sid] = append(turns[sid], ct)
				mu.Unlock()
				if requireEndOrEmpty(ct.frames) != "stop" {
					return // reported below; the session is not for more turns
				}
			}
		}()
	}

	// Let the conversations get going, then restart each replica in turn.
	time.Sleep(3 * time.Second)
	var exits []time.Duration
	for range rounds {
		for i := range 3 {
			set.mu.Lock()
			old := set.procs[i]
			set.mu.Unlock()
			exits = append(exits, term(t, old))
			fresh := startServer(t, env...)
			set.mu.Lock()
			set.procs[i] = fresh
			set.mu.Unlock()
			// A moment for the new replica to take traffic, as a
			// readiness probe's period gives it.
			time.Sleep(time.Second)
		}
	}
	done.Store(true)
	wg.Wait()

	var (
		total, resumes, retries int
		waits                   []time.Duration
	)
	recorded := map[string]int{}
	for sid, cts := range turns {
		view := requireConsistent(t, set.pick("").URL(), sid)
		// The saved answer of each turn: the assistant text after its
		// user message, up to the next one.
		saved, cur := map[string]string{}, ""
		for _, msg := range view.Messages {
			switch msg.Role {
			case adchat.RoleUser:
				cur, _, _ = strings.Cut(msg.Content, "\n")
				if _, dup := saved[cur]; dup {
					t.Errorf("session %s: the user message %q is stored twice", sid, cur)
				}
				saved[cur] = ""
			case adchat.RoleAssistant:
				saved[cur] += msg.Content
			case adchat.RoleTool:
				for _, m := range recordedRun.FindAllStringSubmatch(msg.Content, -1) {
					recorded[m[1]], _ = strconv.Atoi(m[2])
				}
			}
		}
		for _, ct := range cts {
			total++
			resumes += ct.resumes
			retries += ct.retries
			waits = append(waits, ct.waits...)
			end, errs := requireEndOrEmpty(ct.frames), errorTexts(ct.frames)
			if end != "stop" || len(errs) > 0 {
				t.Errorf("session %s, %s: the turn ended %q %q, want stop; last frames: %s", sid, ct.message, end, errs, dataOf(ct.frames[max(0, len(ct.frames)-4):]))
				continue
			}
			if shown := answerOf(ct.frames); saved[ct.message] != shown {
				t.Errorf("session %s, %s: saved %q, the client shows %q", sid, ct.message, saved[ct.message], shown)
			}
		}
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	completed, reruns, interrupted := 0, 0, 0
	for q, n := range counter.runs {
		completed++
		reruns += n - 1
		interrupted += counter.interrupted[q]
		if rec, ok := recorded[q]; ok && n != rec {
			t.Errorf("search %q ran %d times and the session saved run %d: a completed call ran again", q, n, rec)
		}
	}
	if len(recorded) != completed {
		t.Errorf("%d searches ran, %d are saved in the sessions", completed, len(recorded))
	}
	slices.Sort(waits)
	slices.Sort(exits)
	pct := func(p int) time.Duration {
		if len(waits) == 0 {
			return 0
		}
		return waits[min(len(waits)-1, len(waits)*p/100)].Round(time.Millisecond)
	}
	t.Logf("%d rolling restart(s) of 3 replicas under %d conversations: %d turns, all checked; %d stream resumes, %d starts retried; %d searches completed, %d ran again (%d interrupted); replicas exited %v to %v after SIGTERM; a client's wait between its last frame from a stopping replica and its first from another: median %v, p90 %v, max %v",
		rounds, conversations, total, resumes, retries, completed, reruns, interrupted, exits[0].Round(time.Millisecond), exits[len(exits)-1].Round(time.Millisecond), pct(50), pct(90), pct(100))
	if resumes == 0 {
		t.Error("no stream was handed over: the restarts met no running turn, and the run proves nothing")
	}
}

// runConvTurn posts message to the session on a replica with an
// Idempotency-Key and reads the turn to its end: a start refused or
// unanswered is posted again elsewhere with the same key (it gets the turn
// if it started); a stream that ends without finish is resumed elsewhere
// with its Last-Event-ID.
func runConvTurn(t *testing.T, set *replicaSet, sid, message string) convTurn {
	ct := convTurn{message: message}
	body, _ := json.Marshal(map[string]string{"message": message, "sessionId": sid})
	key := session.NewID()
	deadline := time.Now().Add(120 * time.Second)
	var (
		s   *stream
		url string
	)
	for {
		url = set.pick(url).URL()
		req, err := http.NewRequest(http.MethodPost, url+"/api/chat/durable", bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return ct
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		if s = openQuiet(t, req); s != nil && s.Status == http.StatusOK {
			break
		}
		ct.retries++
		if time.Now().After(deadline) {
			t.Errorf("%s: could not start the turn", message)
			return ct
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		ct.frames = append(ct.frames, readFor(s, 30*time.Second)...)
		if requireEndOrEmpty(ct.frames) != "" || time.Now().After(deadline) || len(ct.frames) == 0 {
			return ct
		}
		lastFrame := ct.frames[len(ct.frames)-1]
		s.Close()
		for {
			url = set.pick(url).URL()
			r := resumeQuiet(t, url, sid, lastFrame.ID)
			if r != nil && r.Status == http.StatusOK {
				s = r
				ct.resumes++
				break
			}
			if time.Now().After(deadline) {
				return ct
			}
			time.Sleep(100 * time.Millisecond)
		}
		if f, err := s.Next(30 * time.Second); err == nil {
			ct.waits = append(ct.waits, f.At.Sub(lastFrame.At))
			ct.frames = append(ct.frames, f)
		}
	}
}
