package a2a

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/session"
)

// Index lists each owner's tasks for ListTasks: the IDs of the tasks an
// owner wrote last, newest first. The tasks themselves are in Config.Tasks;
// an ID whose task expired there is skipped. Package a2a/redistasks has
// one on Redis, for replicas.
type Index interface {
	// Touch records that the owner's task id was written at t.
	Touch(ctx context.Context, owner, id string, t time.Time) error
	// Recent returns up to n of the owner's task IDs, the most recently
	// written first.
	Recent(ctx context.Context, owner string, n int) ([]string, error)
}

// MaxListed is how many of an owner's most recently written tasks
// ListTasks looks at; an index keeps no more per owner.
const MaxListed = 1000

// MemoryIndex is an Index of this process. Entries older than its TTL go.
type MemoryIndex struct {
	ttl time.Duration
	mu  sync.Mutex
	by  map[string]map[string]time.Time // owner's key -> task ID -> written
}

// NewMemoryIndex returns an index whose entries live ttl (0: a day, the
// tasks' default lifetime).
func NewMemoryIndex(ttl time.Duration) *MemoryIndex {
	if ttl <= 0 {
		ttl = session.DefaultTTL
	}
	return &MemoryIndex{ttl: ttl, by: map[string]map[string]time.Time{}}
}

func ownerKey(owner string) string { return session.Key(owner, "a2a_index") }

// Touch implements Index.
func (m *MemoryIndex) Touch(_ context.Context, owner, id string, t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := ownerKey(owner)
	ids := m.by[k]
	if ids == nil {
		ids = map[string]time.Time{}
		m.by[k] = ids
	}
	ids[id] = t
	cut := time.Now().Add(-m.ttl)
	for id, at := range ids {
		if at.Before(cut) {
			delete(ids, id)
		}
	}
	if len(ids) > MaxListed {
		for _, id := range m.sorted(ids)[MaxListed:] {
			delete(ids, id)
		}
	}
	return nil
}

// Recent implements Index.
func (m *MemoryIndex) Recent(_ context.Context, owner string, n int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.sorted(m.by[ownerKey(owner)])
	return out[:min(n, len(out))], nil
}

// sorted is the IDs of ids, newest first.
func (m *MemoryIndex) sorted(ids map[string]time.Time) []string {
	out := make([]string, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b string) int { return ids[b].Compare(ids[a]) })
	return out
}
