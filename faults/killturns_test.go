package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	adchat "github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// The durable agent searches twice, then answers: each search is a side
// effect the test's search service counts.
const durableTemplate = `{
  "agentId": "durable",
  "name": "Durable",
  "personality": ["You answer briefly."],
  "nodes": ["llm.openai", "search"],
  "nodeConfigurations": {"llm.openai": {"model": "mock-model", "maxTokens": 256}},
  "options": {"maxSteps": 6}
}
`

// TestTurnsOutliveKilledReplicas: turns with two counted tool calls each
// run on three replicas while a random replica is SIGKILLed (and another
// started in its place) every few seconds. Clients whose stream breaks
// resume it on another replica with their Last-Event-ID. Every turn
// finishes stop (none turn_interrupted), with the answer its client
// shows saved whole; every search ran exactly once, except those a kill
// interrupted (search declares itself idempotent, so the replica that took
// the turn over ran them again); no user message is stored twice. The test
// prints the counts.
func TestTurnsOutliveKilledReplicas(t *testing.T) {
	killTurns(t, 24, 4, 1500*time.Millisecond)
}

// TestTurnsOutliveKilledReplicasLong is the acceptance run: 200 turns, a
// kill every 5 s.
func TestTurnsOutliveKilledReplicasLong(t *testing.T) {
	slow(t)
	killTurns(t, 200, 12, 5*time.Second)
}

// searchCounter is a SearXNG that counts the requests for each query and
// those whose client went away before the answer (a killed replica's). Each
// answer names its run ("found q (run n)"), so that the session's saved
// result says which run the runtime recorded: a run after the recorded one
// is a completed call that ran again; one before it was interrupted, before
// or after the service answered (a replica killed after the answer came but
// before it recorded it).
type searchCounter struct {
	mu          sync.Mutex
	runs        map[string]int
	interrupted map[string]int
}

func (c *searchCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	c.mu.Lock()
	c.runs[q]++
	run := c.runs[q]
	c.mu.Unlock()
	select {
	case <-time.After(300 * time.Millisecond):
	case <-r.Context().Done():
		c.mu.Lock()
		c.interrupted[q]++
		c.mu.Unlock()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"results":[{"title":"result for %s","url":"https://example.com/%s","content":"found %s (run %d)"}]}`, q, q, q, run)
}

// recordedRun finds the search runs a saved tool result holds.
var recordedRun = regexp.MustCompile(`found (\S+) \(run (\d+)\)`)

// durableAnswer answers each turn by where it is: a search,
// a second search, then a text streamed for about 0.6 s.
func durableAnswer(words []string) func(mockllm.Request) mockllm.Script {
	return func(req mockllm.Request) mockllm.Script {
		// The turn's user message is the last "turn N" (the runtime may
		// add a note after it), and the results after it are its own.
		user, results := "", 0
		for _, m := range req.Messages {
			if first, _, _ := strings.Cut(m.Text, "\n"); m.Role == "user" && strings.HasPrefix(first, "turn ") {
				user, results = first, 0
			}
			results += len(m.ToolResults)
		}
		tag := strings.ReplaceAll(user, " ", "-")
		switch results {
		case 0:
			return mockllm.ToolScript(mockllm.ToolCall{ID: "call_" + tag + "_a", Name: "search", Arguments: fmt.Sprintf(`{"query":"%s-a"}`, tag)})
		case 1:
			return mockllm.ToolScript(mockllm.ToolCall{ID: "call_" + tag + "_b", Name: "search", Arguments: fmt.Sprintf(`{"query":"%s-b"}`, tag)})
		}
		return mockllm.Script{Text: append([]string{"Answer to " + user + ":"}, words...), InterTokenDelay: 20 * time.Millisecond}
	}
}

// replicaSet is the replicas running, one of which the killer replaces.
type replicaSet struct {
	mu    sync.Mutex
	procs []*serverProc
}

func (s *replicaSet) pick(not string) *serverProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range 10 {
		p := s.procs[rand.IntN(len(s.procs))]
		if p.URL() != not {
			return p
		}
	}
	return s.procs[0]
}

func killTurns(t *testing.T, turns, parallel int, every time.Duration) {
	counter := &searchCounter{runs: map[string]int{}, interrupted: map[string]int{}}
	search := httptest.NewServer(counter)
	defer search.Close()
	words := make([]string, 30)
	for i := range words {
		words[i] = fmt.Sprintf(" w%d", i)
	}
	m := newModel(t, mockllm.WithResponder(durableAnswer(words)), mockllm.WithMaxRecorded(-1))
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "durable"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "durable", "template.json"), []byte(durableTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := redistest.Start(t)
	env := append(modelEnv(m), "SESSION_STORE="+rs.URL(), "HEARTBEAT=250ms", "SESSION_LOCK_TTL=2s", "TEMPLATES_DIR="+dir, "SEARXNG_URL="+search.URL)
	set := &replicaSet{}
	for range 3 {
		set.procs = append(set.procs, startServer(t, env...))
	}

	stop := make(chan struct{})
	kills := 0
	var killer sync.WaitGroup
	killer.Add(1)
	go func() {
		defer killer.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(every):
			}
			set.mu.Lock()
			i := rand.IntN(len(set.procs))
			victim := set.procs[i]
			set.mu.Unlock()
			victim.Kill()
			kills++
			fresh := startServer(t, env...)
			set.mu.Lock()
			set.procs[i] = fresh
			set.mu.Unlock()
		}
	}()

	type outcome struct {
		sid, end, shown string
		errs            []string
		resumes         int
		trace           []string
		turn            string
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
		next     = make(chan int)
	)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				o := runDurableTurn(t, set, fmt.Sprintf("turn %d", i))
				mu.Lock()
				outcomes = append(outcomes, outcome{sid: o.sid, end: requireEndOrEmpty(o.frames), shown: answerOf(o.frames), errs: errorTexts(o.frames), resumes: o.resumes, trace: traceOf(o), turn: turnOf(o.frames)})
				mu.Unlock()
			}
		}()
	}
	for i := range turns {
		next <- i
	}
	close(next)
	wg.Wait()
	close(stop)
	killer.Wait()

	completed, reruns, interrupted, resumed := 0, 0, 0, 0
	recorded := map[string]int{} // query -> the run whose result the session saved
	checked := 0                 // sessions whose turn finished stop
	for _, o := range outcomes {
		resumed += o.resumes
		if o.end != "stop" || len(o.errs) > 0 {
			t.Errorf("session %s: the turn ended %q %q, want stop", o.sid, o.end, o.errs)
			continue
		}
		checked++
		view := requireConsistent(t, set.pick("").URL(), o.sid)
		if n := countRole(view.Messages, adchat.RoleUser); n != 1 {
			t.Errorf("session %s: the user message is stored %d times", o.sid, n)
		}
		saved := ""
		var calls []string
		for _, msg := range view.Messages {
			if msg.Role == adchat.RoleAssistant {
				saved += msg.Content
			}
			if msg.Role == adchat.RoleTool {
				for _, m := range recordedRun.FindAllStringSubmatch(msg.Content, -1) {
					recorded[m[1]], _ = strconv.Atoi(m[2])
				}
			}
			for _, c := range msg.ToolCalls {
				calls = append(calls, c.ID)
			}
		}
		if saved != o.shown {
			// The turn's whole stream, as the shared log has it.
			whole := durableTurn{opened: []opened{{url: "the shared log, from a replica that did not run the turn", lastID: o.turn + ":0"}}}
			if r := resumeQuiet(t, set.pick("").URL(), o.sid, o.turn+":0"); r != nil {
				whole.frames = readFor(r, 5*time.Second)
			}
			t.Errorf("session %s: saved %q, the client shows %q; the client's streams:\n%s\n%s", o.sid, saved, o.shown, strings.Join(o.trace, "\n"), strings.Join(traceOf(whole), "\n"))
		}
		if len(calls) != 2 {
			t.Errorf("session %s: %d tool calls saved, want 2: %v", o.sid, len(calls), calls)
		}
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	if len(recorded) != 2*checked {
		t.Errorf("%d search results found in %d saved turns, want two each", len(recorded), checked)
	}
	unrecorded := 0
	for q, n := range counter.runs {
		completed++
		interrupted += counter.interrupted[q]
		reruns += n - 1
		rec, ok := recorded[q]
		if !ok {
			continue // its turn failed, reported above
		}
		// The runs before the recorded one were interrupted: before the
		// service answered (counted by it) or after (their replica died
		// before recording the answer).
		unrecorded += rec - 1 - min(counter.interrupted[q], rec-1)
		if n != rec {
			t.Errorf("search %q ran %d times and the session saved run %d: a completed call ran again", q, n, rec)
		}
	}
	t.Logf("%d turns on 3 replicas, %d replicas killed, %d stream resumes: %d searches completed once each, %d ran again after a kill interrupted them (%d interrupted before the search service answered, %d answered but not yet recorded when their replica died)",
		len(outcomes), kills, resumed, completed, reruns, interrupted, unrecorded)
	if kills == 0 {
		t.Fatal("no replica was killed: the run proves nothing")
	}
}

type durableTurn struct {
	sid     string
	frames  []frame
	resumes int
	// opened are the client's streams: where each began in frames, on
	// which replica, after which Last-Event-ID.
	opened []opened
}

type opened struct {
	at          int
	url, lastID string
}

// turnOf is the turn of the frames' IDs.
func turnOf(frames []frame) string {
	for _, f := range frames {
		if id, _, ok := strings.Cut(f.ID, ":"); ok {
			return id
		}
	}
	return ""
}

// traceOf is what the client got, one line a frame, for a failure's
// message: which stream it came on, its ID and type, and the part or
// restart it is about.
func traceOf(d durableTurn) []string {
	var out []string
	for i, f := range d.frames {
		for _, o := range d.opened {
			if o.at == i {
				out = append(out, fmt.Sprintf("-- stream on %s after %q", o.url, o.lastID))
			}
		}
		line := fmt.Sprintf("%s %s", f.ID, f.Type())
		switch f.Type() {
		case "text-start", "text-end":
			line += " " + f.Field("id")
		case "text-delta":
			line += fmt.Sprintf(" %s %q", f.Field("id"), f.Field("delta"))
		case "data-restart", "error":
			line += " " + f.Data
		}
		out = append(out, line)
	}
	return out
}

// runDurableTurn posts message on a replica and reads the turn to its
// end, resuming on another replica with its Last-Event-ID whenever the
// stream breaks.
func runDurableTurn(t *testing.T, set *replicaSet, message string) durableTurn {
	d := durableTurn{sid: session.NewID()}
	p := set.pick("")
	var s *stream
	for attempt := 0; ; attempt++ {
		s = tryChatQuiet(t, p.URL(), "durable", d.sid, message)
		if s != nil && s.Status == http.StatusOK {
			break
		}
		if attempt > 20 {
			t.Errorf("%s: could not start the turn", message)
			return d
		}
		// The replica died before answering: the turn may have started
		// there; its stream says so.
		p = set.pick(p.URL())
		if r := resumeQuiet(t, p.URL(), d.sid, ""); r != nil && r.Status == http.StatusOK {
			s = r
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	d.opened = append(d.opened, opened{at: 0, url: p.URL()})
	deadline := time.Now().Add(120 * time.Second)
	for {
		d.frames = append(d.frames, readFor(s, 20*time.Second)...)
		if requireEndOrEmpty(d.frames) != "" || time.Now().After(deadline) {
			return d
		}
		last := ""
		for _, f := range d.frames {
			if f.ID != "" {
				last = f.ID
			}
		}
		for {
			p = set.pick(p.URL())
			r := resumeQuiet(t, p.URL(), d.sid, last)
			if r != nil && r.Status == http.StatusOK {
				s = r
				d.resumes++
				d.opened = append(d.opened, opened{at: len(d.frames), url: p.URL(), lastID: last})
				break
			}
			if time.Now().After(deadline) {
				return d
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// tryChatQuiet and resumeQuiet are tryChat and resume for a client's
// goroutine: nil when the replica did not answer (it was killed).
func tryChatQuiet(t *testing.T, base, agent, sessionID, message string) *stream {
	body, _ := json.Marshal(map[string]string{"message": message, "sessionId": sessionID})
	req, err := http.NewRequest(http.MethodPost, base+"/api/chat/"+agent, bytes.NewReader(body))
	if err != nil {
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	return openQuiet(t, req)
}

func resumeQuiet(t *testing.T, base, sessionID, lastEventID string) *stream {
	req, err := http.NewRequest(http.MethodGet, base+"/api/sessions/"+sessionID+"/stream", nil)
	if err != nil {
		return nil
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	return openQuiet(t, req)
}

func openQuiet(t *testing.T, req *http.Request) *stream {
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	return newStream(t, res)
}
