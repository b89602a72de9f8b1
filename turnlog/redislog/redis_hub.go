package redislog

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// hub wakes the waiting readers of a Redis log. Turns this replica writes
// wake their readers directly (wake); for the others, one goroutine per
// group runs XREAD BLOCK over all their streams at once, in blocks of Poll,
// and wakes the readers of a stream that got an entry. A woken reader reads
// for itself: the XREAD only says that something arrived.
type hub struct {
	r  *Log
	wg sync.WaitGroup

	mu     sync.Mutex
	groups map[string]*group // by session on Cluster, else one group ""
	gens   map[string]uint64 // stream key -> count of local writes, while written here
}

type group struct {
	name    string
	running bool
	waits   map[string]map[*waiter]struct{} // stream key -> its waiters
}

type waiter struct {
	g     *group
	key   string
	after int64
	ch    chan struct{} // closed when woken
}

// generation returns the count of this replica's writes to the stream, so
// that a reader can tell whether one happened between its Read and its
// register.
func (h *hub) generation(key string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gens[key]
}

// wake wakes the readers of a stream after this replica wrote to it.
func (h *hub) wake(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gens == nil {
		h.gens = make(map[string]uint64)
	}
	if _, writing := h.r.writers.Load(key); writing {
		h.gens[key]++
	} else {
		// Finished or forgotten: nobody needs its generation any more
		// (a waiter that saw one sees 0 now and reads again).
		delete(h.gens, key)
	}
	for _, g := range h.groups {
		h.wakeLocked(g, key)
	}
}

func (h *hub) wakeLocked(g *group, key string) {
	for w := range g.waits[key] {
		close(w.ch)
	}
	delete(g.waits, key)
}

// register adds a reader waiting for entries after seq `after`. gen is the
// stream's generation that the reader saw before its Read: when it moved
// since, the waiter is woken at once.
func (h *hub) register(session, key string, after int64, gen uint64) *waiter {
	name := ""
	if h.r.cluster {
		name = session
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.groups[name]
	if g == nil {
		g = &group{name: name, waits: make(map[string]map[*waiter]struct{})}
		h.groups[name] = g
	}
	w := &waiter{g: g, key: key, after: after, ch: make(chan struct{})}
	if h.gens[key] != gen {
		close(w.ch)
		return w
	}
	if g.waits[key] == nil {
		g.waits[key] = make(map[*waiter]struct{})
	}
	g.waits[key][w] = struct{}{}
	if _, local := h.r.writers.Load(key); !local && !g.running && !h.r.isClosed() {
		g.running = true
		h.wg.Add(1)
		go h.follow(g)
	}
	return w
}

func (h *hub) unregister(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := w.g.waits[w.key]
	delete(ws, w)
	if len(ws) == 0 {
		delete(w.g.waits, w.key)
	}
}

// streams returns the XREAD arguments for the group's streams that are not
// written here, each from its earliest waiter's position; empty when the
// goroutine should stop (it is then marked stopped).
func (h *hub) streams(g *group) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var keys, ids []string
	if !h.r.isClosed() {
		for key, ws := range g.waits {
			if _, local := h.r.writers.Load(key); local {
				continue
			}
			first := int64(-1)
			for w := range ws {
				if first < 0 || w.after < first {
					first = w.after
				}
			}
			keys = append(keys, key)
			ids = append(ids, strconv.FormatInt(first, 10)+"-0")
		}
	}
	if len(keys) == 0 {
		g.running = false
		if len(g.waits) == 0 && h.groups[g.name] == g {
			delete(h.groups, g.name)
		}
		return nil
	}
	return append(keys, ids...)
}

// follow is the XREAD loop of a group. go-redis does not interrupt a
// blocked XREAD when its context ends, so the block is short (Poll) and the
// loop checks for work and for Close between blocks.
func (h *hub) follow(g *group) {
	defer h.wg.Done()
	for {
		streams := h.streams(g)
		if streams == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), h.r.cfg.Poll+h.r.cfg.Timeout)
		res, err := h.r.client.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: 1, Block: h.r.cfg.Poll}).Result()
		cancel()
		if errors.Is(err, redis.Nil) {
			continue
		}
		h.mu.Lock()
		if err != nil {
			// The readers read again and report the failure themselves.
			for key := range g.waits {
				h.wakeLocked(g, key)
			}
		}
		for _, s := range res {
			h.wakeLocked(g, s.Stream)
		}
		h.mu.Unlock()
	}
}
