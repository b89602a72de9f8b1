package redisstore

import (
	"sync"

	"github.com/agentdock-go/agentdock/session"
)

// recent's bounds: enough for the sessions a replica serves turns of at
// once and their next turns. A session evicted, too large, or written by
// another replica costs its next turn one round trip more, nothing else.
const (
	recentMax      = 4096
	recentMaxBytes = 8 << 20 // of the sessions' encoded size
	recentMaxOne   = 64 << 10
)

// recent remembers, for the sessions this process wrote last, what it
// wrote and the write's nonce. It is ClaimStart's expectation of the
// session: the claim's script compares the nonce with the session's
// last write, so a session written since (by another replica, or deleted
// and created again) is never taken for the remembered one.
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
}

// remember keeps s, written with nonce, whose encoded size is size.
func (c *recent) remember(id string, s *session.Session, nonce string, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]recentWrite)
	}
	c.drop(id)
	if size > recentMaxOne {
		return
	}
	for k := range c.m {
		if len(c.m) < recentMax && c.bytes+size <= recentMaxBytes {
			break
		}
		// Any one goes: map order is random enough for a hint.
		c.drop(k)
	}
	c.m[id] = recentWrite{s: s, nonce: nonce, size: size}
	c.bytes += size
}

func (c *recent) drop(id string) {
	if w, ok := c.m[id]; ok {
		c.bytes -= w.size
		delete(c.m, id)
	}
}

func (c *recent) get(id string) (session.Session, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.m[id]
	if !ok {
		return session.Session{}, "", false
	}
	return *w.s, w.nonce, true
}

func (c *recent) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drop(id)
}
