package redisstore

import (
	"strings"
	"sync"

	"github.com/agentdock-go/agentdock/session"
)

// recent's bounds: enough for the sessions a replica serves turns of at
// once and their next turns. A session evicted, too large, or written by
// another replica costs its next turn one round trip more, nothing else.
const (
	recentMax      = 4096
	recentMaxBytes = 8 << 20 // of the sessions' encoded size and their tails
	recentMaxOne   = 64 << 10
	// tailMax bounds the messages remembered of a session's history; a
	// window wider than what is remembered is not foreseen.
	tailMax = 64
)

// recent remembers, for the sessions this process wrote last, what it
// wrote and the write's nonce. It is ClaimStart's expectation of the
// session: the claim's script compares the nonce with the session's
// last write, so a session written since (by another replica, or deleted
// and created again) is never taken for the remembered one.
//
// It also remembers the end of each session's history, as this process
// wrote it (the messages' JSON as stored), for ClaimStart's foresight
// (session.WithForesight). That is a forecast only: the claim's answer
// is compared with it (foresight).
type recent struct {
	mu    sync.Mutex
	m     map[string]recentWrite
	bytes int
}

type recentWrite struct {
	// s is shared with the lease and keyLock that saw the write: no one
	// changes a session through these pointers.
	s     *session.Session
	nonce string
	size  int
	tail  tail
}

// tail is the end of a session's history: its last messages (their JSON)
// and whether they are all of it. The zero tail is unknown.
type tail struct {
	msgs  []string
	known bool
	whole bool // msgs is the whole history
	bytes int
}

// emptyTail is a new session's history.
var emptyTail = tail{known: true, whole: true}

// isUser is luaTrimTurns' test: a user message's JSON starts so.
func isUser(m string) bool { return strings.HasPrefix(m, `{"role":"user"`) }

// appended is t with msgs appended and, like the scripts, trimmed to max
// messages by whole turns (dropAnswer first drops the messages after the
// last user message); unknown when t is.
func (t tail) appended(msgs []any, drop bool, max int) tail {
	if !t.known {
		return tail{}
	}
	out := make([]string, 0, len(t.msgs)+len(msgs))
	out = append(out, t.msgs...)
	whole := t.whole
	if drop {
		i := len(out) - 1
		for i >= 0 && !isUser(out[i]) {
			i--
		}
		switch {
		case i >= 0:
			out = out[:i+1]
		case !whole:
			return tail{} // the last user message is further back
		}
	}
	for _, m := range msgs {
		switch m := m.(type) {
		case []byte:
			out = append(out, string(m))
		case string:
			out = append(out, m)
		default:
			return tail{}
		}
	}
	if whole && len(out) > max {
		out = trimTurns(out, max)
	}
	if len(out) > tailMax {
		out, whole = out[len(out)-tailMax:], false
	}
	if !whole && len(out) >= max {
		// The scripts' trim may reach into what is remembered.
		return tail{}
	}
	n := 0
	for _, m := range out {
		n += len(m)
	}
	return tail{msgs: out, known: true, whole: whole, bytes: n}
}

// window is what updateAppend's hist(0) returns after the optional drop:
// the last w messages (all when w < 0, none when w is 0); false when that
// reaches further back than t knows.
func (t tail) window(w int, drop bool) ([]string, bool) {
	if w == 0 {
		return nil, true
	}
	if !t.known {
		return nil, false
	}
	msgs := t.msgs
	if drop {
		i := len(msgs) - 1
		for i >= 0 && !isUser(msgs[i]) {
			i--
		}
		switch {
		case i >= 0:
			msgs = msgs[:i+1]
		case !t.whole:
			return nil, false
		}
	}
	if w < 0 || w > len(msgs) {
		if !t.whole {
			return nil, false
		}
		return msgs, true
	}
	return msgs[len(msgs)-w:], true
}

// trimTurns is luaTrimTurns on a whole history.
func trimTurns(msgs []string, max int) []string {
	start := len(msgs) - max
	if start <= 0 {
		return msgs
	}
	cut := -1
	for i := start; i < len(msgs); i++ {
		if isUser(msgs[i]) {
			cut = i
			break
		}
	}
	for i := start - 1; cut < 0 && i >= 0; i-- {
		if isUser(msgs[i]) {
			cut = i
		}
	}
	if cut < 0 {
		cut = start
	}
	return append([]string(nil), msgs[cut:]...)
}

// remember keeps s, written with nonce, whose encoded size is size, and
// its history's tail.
func (c *recent) remember(id string, s *session.Session, nonce string, size int, t tail) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(id, recentWrite{s: s, nonce: nonce, size: size, tail: t})
}

// rememberWrite is remember for a write that changed the session from
// version prev and appended msgs to its history (drop: after dropping the
// last answer): the tail follows from the one remembered, when that was
// the session at prev.
func (c *recent) rememberWrite(id string, prev int64, s *session.Session, nonce string, size int, msgs []any, drop bool, max int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t tail
	if w, ok := c.m[id]; ok && w.s.Version == prev {
		t = w.tail
		if len(msgs) > 0 || drop {
			t = t.appended(msgs, drop, max)
		}
	}
	c.put(id, recentWrite{s: s, nonce: nonce, size: size, tail: t})
}

// appendedTo extends the remembered tail of id with msgs, appended
// without a new version of the session (AppendMessages).
func (c *recent) appendedTo(id string, msgs []any, max int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.m[id]
	if !ok {
		return
	}
	c.drop(id)
	w.tail = w.tail.appended(msgs, false, max)
	c.put(id, w)
}

func (c *recent) put(id string, w recentWrite) {
	if c.m == nil {
		c.m = make(map[string]recentWrite)
	}
	c.drop(id)
	if w.size+w.tail.bytes > recentMaxOne {
		w.tail = tail{}
	}
	if w.size > recentMaxOne {
		return
	}
	size := w.size + w.tail.bytes
	for k := range c.m {
		if len(c.m) < recentMax && c.bytes+size <= recentMaxBytes {
			break
		}
		// Any one goes: map order is random enough for a hint.
		c.drop(k)
	}
	c.m[id] = w
	c.bytes += size
}

func (c *recent) drop(id string) {
	if w, ok := c.m[id]; ok {
		c.bytes -= w.size + w.tail.bytes
		delete(c.m, id)
	}
}

func (c *recent) get(id string) (session.Session, string, tail, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.m[id]
	if !ok {
		return session.Session{}, "", tail{}, false
	}
	return *w.s, w.nonce, w.tail, true
}

func (c *recent) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drop(id)
}
