package responses

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Memory is a Store in process memory. Records expire Config.TTL after
// their Put and are dropped then, oldest first, as later Puts come; at most
// Config.MaxRecords are kept. It starts no goroutine.
type Memory struct {
	cfg Config

	mu    sync.Mutex
	byKey map[string]*list.Element // of *memRecord
	order *list.List               // by expiry, soonest first (TTL is fixed)
}

type memRecord struct {
	key     string
	rec     Record
	expires time.Time
}

// NewMemory returns a memory store; it fails only for a negative Config.
func NewMemory(cfg Config) (*Memory, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	return &Memory{cfg: cfg, byKey: map[string]*list.Element{}, order: list.New()}, nil
}

// Put implements Store.
func (m *Memory) Put(_ context.Context, key string, r Record) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := r.Validate(); err != nil {
		return err
	}
	r.Response = append([]byte(nil), r.Response...)
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.byKey[key]; ok {
		m.order.Remove(el)
	}
	m.byKey[key] = m.order.PushBack(&memRecord{key: key, rec: r, expires: now.Add(m.cfg.TTL)})
	for el := m.order.Front(); el != nil; el = m.order.Front() {
		mr := el.Value.(*memRecord)
		if now.Before(mr.expires) && m.order.Len() <= m.cfg.MaxRecords {
			break
		}
		m.order.Remove(el)
		delete(m.byKey, mr.key)
	}
	return nil
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, key string) (Record, error) {
	if err := CheckKey(key); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.byKey[key]
	if !ok {
		return Record{}, ErrNotFound
	}
	mr := el.Value.(*memRecord)
	if !m.cfg.Now().Before(mr.expires) {
		m.order.Remove(el)
		delete(m.byKey, key)
		return Record{}, ErrNotFound
	}
	r := mr.rec
	r.Response = append([]byte(nil), r.Response...)
	return r, nil
}

// Len returns how many records the store holds, expired ones not yet
// dropped included.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.order.Len()
}
