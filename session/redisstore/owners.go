package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/session"
)

// The owners' quotas (session.Config.SessionsPerOwner, BytesPerOwner)
// count an index per owner, two keys in one Cluster slot:
//
//	PREFIX:owner:{D}:sessions  sorted set: the owner's session keys, scored
//	                           by when they expire (ms, Redis's clock)
//	PREFIX:owner:{D}:bytes     hash: each session's bytes ("KEY:d", its
//	                           state's JSON; "KEY:m", its messages' JSON),
//	                           and "total"
//
// where D is the digest of the owner's name that session.Key uses. A
// session's keys are in another slot, so its writes cannot update the
// index in their own script: a write that creates a session is admitted
// by one script on the index right after it (one more round trip, for a
// session's first write only; the session is deleted when refused), and
// the bytes of other writes wait in the process to be added by the
// owner's next admission, by Close, or when flushMax sessions wait.
// Entries whose session expired are dropped as the index is used. The
// index is the owner's list of sessions, most recently written last, for
// a later API that lists them.
//
// The index counts what was written, as this process learns it: messages
// a trim or a regenerated answer dropped keep counting until their
// session expires or is deleted; a session written only by a process that
// creates no session for its owner is counted late; one that is only read
// for a whole TTL leaves the index before it expires. Each errs on the
// side of the owner.

// flushMax is how many sessions' bytes wait at most before they are added
// to the index.
const flushMax = 4096

// ownerBooks are the bytes written to each owner's sessions that the index
// does not count yet, and each owner's total as the index last told it.
type ownerBooks struct {
	mu      sync.Mutex
	pending map[string]map[string]*written // owner -> session key
	n       int                            // sessions pending
	// bytes are each owner's pending bytes, about: a state written
	// counts whole, not by how much it grew.
	bytes map[string]int64
	// known are the owners' totals the index last answered.
	known map[string]knownTotal
}

// knownTotal is an owner's total in the index, and when it was read.
type knownTotal struct {
	total int64
	at    time.Time
}

// totalFresh is how long a total the index answered is taken as the
// owner's for a turn's claim (Charged) without asking again: an owner
// whose turns come closer than that costs no round trip for its quota,
// and one whose other replicas write is learned about that late.
const totalFresh = 5 * time.Second

// written is what was written to a session since its bytes were last
// added to the index: the length of its state's JSON as last written (-1:
// not written), and the bytes of the messages appended.
type written struct {
	data int
	msgs int64
}

// quotas reports whether the store keeps the owners' index.
func (r *Store) quotas() bool { return r.cfg.SessionsPerOwner > 0 || r.cfg.BytesPerOwner > 0 }

// digestOf is owner's digest, as session.Key puts it before the dot of
// its sessions' keys.
func digestOf(owner string) string {
	d := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(d[:12])
}

// digestKeys are the keys of the index of the owner whose digest, the
// part of its sessions' keys before the dot (session.Key), is digest.
func (r *Store) digestKeys(digest string) []string {
	tag := r.prefix + ":owner:{" + digest + "}:"
	return []string{tag + "sessions", tag + "bytes"}
}

// record notes what a write put in session id of owner: data, the length
// of the state's JSON (-1: not written), and msgs, the bytes of the
// messages appended.
func (r *Store) record(owner, id string, data int, msgs int64) {
	if owner == "" || !r.quotas() {
		return
	}
	r.recordDigest(digestOf(owner), id, data, msgs)
}

// recordDigest is record for the owner of digest.
func (r *Store) recordDigest(digest, id string, data int, msgs int64) {
	b := &r.books
	b.mu.Lock()
	if b.pending == nil {
		b.pending = map[string]map[string]*written{}
	}
	ws := b.pending[digest]
	if ws == nil {
		ws = map[string]*written{}
		b.pending[digest] = ws
	}
	w := ws[id]
	if w == nil {
		w = &written{data: -1}
		ws[id] = w
		b.n++
	}
	if data >= 0 {
		w.data = data
	}
	w.msgs += msgs
	if b.bytes == nil {
		b.bytes = map[string]int64{}
	}
	b.bytes[digest] += max(int64(data), 0) + msgs
	full := b.n >= flushMax
	// An owner that writes much is added to the index as it goes, so
	// that the other replicas see its bytes too.
	owner := !full && r.cfg.BytesPerOwner > 0 && b.bytes[digest] >= max(r.cfg.BytesPerOwner/64, 64<<10)
	b.mu.Unlock()
	if full || owner {
		ctx, cancel := context.WithTimeout(context.Background(), r.budget)
		defer cancel()
		if full {
			r.flush(ctx)
		} else {
			_, _ = r.flushOwner(ctx, digest)
		}
	}
}

// take removes and returns the pending writes of the owner of digest.
func (r *Store) take(digest string) map[string]*written {
	b := &r.books
	b.mu.Lock()
	defer b.mu.Unlock()
	ws := b.pending[digest]
	delete(b.pending, digest)
	delete(b.bytes, digest)
	b.n -= len(ws)
	return ws
}

// learn notes the total the index answered for the owner of digest.
func (r *Store) learn(digest string, total int64) {
	b := &r.books
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.known == nil {
		b.known = map[string]knownTotal{}
	}
	if len(b.known) >= flushMax {
		clear(b.known) // old owners' totals: asked again when needed
	}
	b.known[digest] = knownTotal{total: total, at: time.Now()}
}

// flushOwner adds the pending writes of the owner of digest to its index
// and returns the owner's total there.
func (r *Store) flushOwner(ctx context.Context, digest string) (int64, error) {
	ws := r.take(digest)
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	total, err := scriptOwnerFlush.Run(rctx, r.client, r.digestKeys(digest), bookArgs([]any{r.ttlMillis()}, ws)...).Int64()
	if err != nil {
		r.putBack(digest, ws)
		return 0, err
	}
	r.learn(digest, total)
	return total, nil
}

// admitTurn refuses a turn's claim (session.Charged) of owner's session
// when its message would take the owner past its bytes quota: the total the index
// answered within totalFresh and the bytes pending here, else the
// index's total now (one round trip, which adds the pending bytes).
func (r *Store) admitTurn(ctx context.Context, owner string, brings int64) error {
	if owner == "" || r.cfg.BytesPerOwner <= 0 {
		return nil
	}
	digest := digestOf(owner)
	b := &r.books
	b.mu.Lock()
	k, ok := b.known[digest]
	pending := b.bytes[digest]
	b.mu.Unlock()
	if ok && time.Since(k.at) < totalFresh && k.total+pending+brings <= r.cfg.BytesPerOwner {
		return nil
	}
	total, err := r.flushOwner(ctx, digest)
	if err != nil {
		// The claim that follows meets the same Redis and says so; a
		// quota that cannot be read is not a reason to refuse.
		return nil
	}
	if err := r.cfg.AdmitTurn(owner, total, brings); err != nil {
		return fmt.Errorf("redis session store: %w", err)
	}
	return nil
}

// putBack returns writes that could not be flushed, to the next flush.
func (r *Store) putBack(digest string, ws map[string]*written) {
	for id, w := range ws {
		r.recordDigest(digest, id, w.data, w.msgs)
	}
}

// bookArgs appends the arguments of luaOwnerFlush for ws.
func bookArgs(args []any, ws map[string]*written) []any {
	for id, w := range ws {
		args = append(args, id, w.data, w.msgs)
	}
	return args
}

// flush adds every pending write to its owner's index, one script per
// owner in one pipeline. Writes that fail wait for the next flush.
func (r *Store) flush(ctx context.Context) {
	b := &r.books
	b.mu.Lock()
	all := b.pending
	b.pending, b.n, b.bytes = nil, 0, nil
	b.mu.Unlock()
	if len(all) == 0 {
		return
	}
	digests := make([]string, 0, len(all))
	cmds, _ := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for digest, ws := range all {
			digests = append(digests, digest)
			scriptOwnerFlush.Run(ctx, p, r.digestKeys(digest), bookArgs([]any{r.ttlMillis()}, ws)...)
		}
		return nil
	})
	for i, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			r.putBack(digests[i], all[digests[i]])
		}
	}
}

// admit asks owner's index to take session id, which a write just
// created, adding the owner's pending writes first. A session it refuses
// is deleted, and the *session.QuotaError returned. When the index cannot
// be reached the session is kept: the write that created it succeeded,
// and the next admission counts it.
func (r *Store) admit(ctx context.Context, owner, id string) error {
	if owner == "" || !r.quotas() {
		return nil
	}
	digest := digestOf(owner)
	ws := r.take(digest)
	args := bookArgs([]any{r.ttlMillis(), id, r.cfg.SessionsPerOwner, r.cfg.BytesPerOwner}, ws)
	rctx, cancel := r.roundTrip(ctx)
	reply, err := scriptOwnerAdmit.Run(rctx, r.client, r.digestKeys(digest), args...).Slice()
	cancel()
	if err != nil || len(reply) != 3 {
		r.putBack(digest, ws)
		return nil
	}
	used, _ := reply[1].(int64)
	if total, ok := reply[2].(int64); ok {
		r.learn(digest, total)
	}
	var qe *session.QuotaError
	switch reply[0] {
	case "ok":
		return nil
	case session.QuotaSessions:
		qe = &session.QuotaError{Limit: session.QuotaSessions, Max: int64(r.cfg.SessionsPerOwner), Used: used}
	case session.QuotaBytes:
		qe = &session.QuotaError{Limit: session.QuotaBytes, Max: r.cfg.BytesPerOwner, Used: used}
	default:
		return nil
	}
	r.recent.forget(id)
	r.forgetWrites(digest, id)
	rctx, cancel = r.roundTrip(ctx)
	defer cancel()
	if err := scriptDelete.Run(rctx, r.client, r.keys(id)).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("redis session store: session %s: undoing a session over its owner's quota: %w", id, r.fail(id, "delete", err))
	}
	return fmt.Errorf("redis session store: session %s: %w", id, qe)
}

// forgetWrites drops the pending writes of a session that is gone.
func (r *Store) forgetWrites(digest, id string) {
	b := &r.books
	b.mu.Lock()
	defer b.mu.Unlock()
	if ws := b.pending[digest]; ws != nil {
		if _, ok := ws[id]; ok {
			delete(ws, id)
			b.n--
		}
	}
}

// forget removes the session key, being deleted, from its owner's index.
// The owner is read from the key (session.Key): a session whose key does
// not name its owner stays in the index until it would have expired.
func (r *Store) forget(ctx context.Context, key string) {
	digest, _, scoped := strings.Cut(key, ".")
	if !r.quotas() || !scoped {
		return
	}
	r.forgetWrites(digest, key)
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	// A failure leaves the entry until the session would have expired.
	_ = scriptOwnerForget.Run(rctx, r.client, r.digestKeys(digest), key).Err()
}

// messageBytes is the bytes of an append's messages.
func messageBytes(msgs []any) int64 {
	var n int64
	for _, m := range msgs {
		switch m := m.(type) {
		case []byte:
			n += int64(len(m))
		case string:
			n += int64(len(m))
		}
	}
	return n
}

// The index's scripts are loaded with the store's others.
func init() { allScripts = append(allScripts, scriptOwnerAdmit, scriptOwnerFlush, scriptOwnerForget) }

// luaOwners is what the owner index scripts share. KEYS are the index's
// (digestKeys); times are Redis's own (TIME), the clock its keys expire on.
const luaOwners = `
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function drop(id)
  local d = tonumber(redis.call('HGET', KEYS[2], id .. ':d') or '0')
  local m = tonumber(redis.call('HGET', KEYS[2], id .. ':m') or '0')
  redis.call('HDEL', KEYS[2], id .. ':d', id .. ':m')
  redis.call('HINCRBY', KEYS[2], 'total', -(d + m))
  redis.call('ZREM', KEYS[1], id)
end
local function prune(now)
  local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 256)
  for i = 1, #gone do
    drop(gone[i])
  end
end
-- flush adds ARGV[from..]: key, state length (-1: not written), message
-- bytes, ... and slides each session's expiry.
local function flush(from, expiry)
  for i = from, #ARGV, 3 do
    local id, d, m = ARGV[i], tonumber(ARGV[i+1]), tonumber(ARGV[i+2])
    local delta = m
    if d >= 0 then
      delta = delta + d - tonumber(redis.call('HGET', KEYS[2], id .. ':d') or '0')
      redis.call('HSET', KEYS[2], id .. ':d', d)
    end
    if m ~= 0 then
      redis.call('HINCRBY', KEYS[2], id .. ':m', m)
    end
    redis.call('HINCRBY', KEYS[2], 'total', delta)
    redis.call('ZADD', KEYS[1], expiry, id)
  end
end
local function keep(ttl)
  redis.call('PEXPIRE', KEYS[1], 2 * ttl)
  redis.call('PEXPIRE', KEYS[2], 2 * ttl)
end
`

// scriptOwnerAdmit flushes an owner's pending writes and admits a new
// session unless the owner is at a quota.
//
// ARGV: ttl ms, key, sessions quota (<= 0: none), bytes quota (<= 0:
// none), pending writes (flush's). Reply: {"ok", 0, total} | {"sessions",
// count, total} | {"bytes", total, total}, total the owner's bytes.
var scriptOwnerAdmit = newScript(luaOwners + `
local now, ttl = nowMs(), tonumber(ARGV[1])
prune(now)
flush(5, now + ttl)
local total = tonumber(redis.call('HGET', KEYS[2], 'total') or '0')
local reply = {'ok', 0, total}
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  local n = redis.call('ZCARD', KEYS[1])
  if tonumber(ARGV[3]) > 0 and n >= tonumber(ARGV[3]) then
    reply = {'sessions', n, total}
  elseif tonumber(ARGV[4]) > 0 and total >= tonumber(ARGV[4]) then
    reply = {'bytes', total, total}
  else
    redis.call('ZADD', KEYS[1], now + ttl, ARGV[2])
  end
end
keep(ttl)
return reply
`)

// scriptOwnerFlush adds an owner's pending writes to its index.
//
// ARGV: ttl ms, pending writes (flush's). Reply: the owner's total bytes.
var scriptOwnerFlush = newScript(luaOwners + `
local now, ttl = nowMs(), tonumber(ARGV[1])
prune(now)
flush(2, now + ttl)
keep(ttl)
return tonumber(redis.call('HGET', KEYS[2], 'total') or '0')
`)

// scriptOwnerForget removes a deleted session from its owner's index.
//
// ARGV: key. Reply: 1.
var scriptOwnerForget = newScript(luaOwners + `
drop(ARGV[1])
return 1
`)
