package redisstore

import "github.com/redis/go-redis/v9"

// The Redis store keeps three keys per session, all in one Cluster slot
// thanks to the {id} hash tag:
//
//	PREFIX:{id}:state     hash: version, data (session.Session JSON), write, appended
//	PREFIX:{id}:messages  list of chat.Message JSON, oldest first
//	PREFIX:{id}:lease     string: the token of the turn holding the session
//
// Every script below receives KEYS in that order (state, messages, lease) so
// that each mutation is one atomic server-side step. The "write" and
// "appended" fields hold the random nonce of the last write and append: when
// go-redis retries a script whose reply was lost on a broken connection, the
// script recognises its own earlier success instead of applying it twice.

// luaTrimTurns is trimTurns in Lua, for the scripts that append: it keeps
// the list KEYS[2] within maxn messages by dropping whole turns from the
// front. A message is a user message when its JSON starts with
// {"role":"user" (chat.Message's first field). appendTurns appends
// ARGV[from] onwards, then trims.
const luaTrimTurns = `
local function isUser(v)
  return string.sub(v, 1, 14) == '{"role":"user"'
end
local function trimTurns(key, maxn)
  local len = redis.call('LLEN', key)
  if len <= maxn then
    return
  end
  local start = len - maxn
  local i = start
  while i < len do
    local batch = redis.call('LRANGE', key, i, i + 63)
    for j = 1, #batch do
      if isUser(batch[j]) then
        redis.call('LTRIM', key, i + j - 1, -1)
        return
      end
    end
    i = i + 64
  end
  i = start - 1
  while i >= 0 do
    local lo = math.max(i - 63, 0)
    local batch = redis.call('LRANGE', key, lo, i)
    for j = #batch, 1, -1 do
      if isUser(batch[j]) then
        redis.call('LTRIM', key, lo + j - 1, -1)
        return
      end
    end
    i = lo - 1
  end
  redis.call('LTRIM', key, start, -1)
end
local function appendTurns(key, from, maxn)
  local n = #ARGV
  local i = from
  while i <= n do
    -- unpack takes a bounded number of values: 1,000 at a time.
    local j = math.min(i + 999, n)
    redis.call('RPUSH', key, unpack(ARGV, i, j))
    i = j + 1
  end
  trimTurns(key, maxn)
end
`

// luaDropAnswer is dropAnswer in Lua: it drops the messages after the last
// user message of the list KEYS[2], and that message too when turn is set
// (isUser comes from luaTrimTurns).
const luaDropAnswer = `
local function dropAnswer(key, turn)
  local len = redis.call('LLEN', key)
  local i = len - 1
  while i >= 0 do
    local lo = math.max(i - 63, 0)
    local batch = redis.call('LRANGE', key, lo, i)
    for j = #batch, 1, -1 do
      if isUser(batch[j]) then
        local last = lo + j - 1
        if turn then
          last = last - 1
        end
        if last < 0 then
          redis.call('DEL', key)
        elseif last < len - 1 then
          redis.call('LTRIM', key, 0, last)
        end
        return
      end
    end
    i = lo - 1
  end
end
`

// scriptUpdate compares the stored version (and the lease token when one is
// given) and sets the new state.
//
// ARGV: expected version ("" = absent), new version, data, nonce, ttl ms,
// lease token ("" = none), release ("1": delete the lease with the write).
// Reply: {"ok"} | {"fenced"} | {"conflict", current data or nil}.
//
// A write that released its lease and is sent again (go-redis retries a
// script whose reply was lost) finds the lease gone: its nonce tells it
// was applied.
var scriptUpdate = newScript(luaWake + `
local lease = ARGV[6]
if lease ~= '' and redis.call('GET', KEYS[3]) ~= lease then
  if redis.call('HGET', KEYS[1], 'write') == ARGV[4] then
    return {'ok'}
  end
  return {'fenced'}
end
local cur = redis.call('HGET', KEYS[1], 'version')
if (cur or '') ~= ARGV[1] then
  if cur and redis.call('HGET', KEYS[1], 'write') == ARGV[4] then
    return {'ok'}
  end
  return {'conflict', redis.call('HGET', KEYS[1], 'data')}
end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'data', ARGV[3], 'write', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
if lease ~= '' and ARGV[7] == '1' then
  redis.call('DEL', KEYS[3])
  wake(KEYS[4])
end
return {'ok'}
`)

// scriptGet returns the session's data and slides the TTL of its keys.
//
// ARGV: ttl ms. Reply: data | nil.
var scriptGet = newScript(`
local d = redis.call('HGET', KEYS[1], 'data')
if not d then
  return false
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return d
`)

// scriptAppend appends messages, trims the history by whole turns and slides the TTL; it
// creates the session when missing.
//
// ARGV: ttl ms, max messages, lease token ("" = none), nonce, data of a new
// session, messages...
// Reply: "ok" | "created" (the session was missing) | "fenced".
var scriptAppend = newScript(luaTrimTurns + `
if ARGV[3] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[3] then
  return 'fenced'
end
local reply = 'ok'
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'version', '0', 'data', ARGV[5])
  reply = 'created'
elseif redis.call('HGET', KEYS[1], 'appended') == ARGV[4] then
  return 'ok'
end
redis.call('HSET', KEYS[1], 'appended', ARGV[4])
appendTurns(KEYS[2], 6, tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return reply
`)

// scriptMessages returns the newest messages and slides the TTL.
//
// ARGV: ttl ms, limit (<= 0: all). Reply: list | nil when the session is
// missing.
var scriptMessages = newScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
local limit = tonumber(ARGV[2])
local start = 0
if limit > 0 then
  start = -limit
end
return redis.call('LRANGE', KEYS[2], start, -1)
`)

// scriptDelete removes the session's keys. Reply: 1 if the session existed.
var scriptDelete = newScript(`
local n = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2], KEYS[3])
return n
`)

// scriptExtend renews the lease if the token still holds it.
//
// ARGV: token, lock ttl ms. Reply: 1 | 0.
var scriptExtend = newScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// scriptRelease deletes the lease, KEYS[1], if the token still holds
// it, and wakes the session's queue, KEYS[2].
//
// ARGV: token. Reply: 1 | 0.
var scriptRelease = newScript(luaWake + `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  wake(KEYS[2])
  return 1
end
return 0
`)

// luaWake tells the replicas that the first ticket of a session's queue
// (session.Notifier), q, may start its turn: the session's lease was
// released. It publishes the ticket on the queue's key, when a ticket
// waits; q is nil for a caller that did not pass it.
const luaWake = `
local function wake(q)
  if q then
    local first = redis.call('ZRANGE', q, 0, 0)
    if first[1] then
      redis.call('PUBLISH', q, first[1])
    end
  end
end
`

// luaClaim is claim in Lua, for scriptClaim and scriptClaimStart: it gets
// or creates the session and, unless it belongs to another owner or
// agent, takes its lease, in one step. A lease that
// already holds this call's token is its own earlier attempt (a retry
// after a lost reply) and is taken again.
//
// ARGV: ttl ms, data of a new session, nonce, owner, agent, token, lock ttl
// ms. It returns {"ok"|"busy"|"foreign"|"corrupt", data, created 0|1}.
const luaClaim = `
local function claim()
  local d = redis.call('HGET', KEYS[1], 'data')
  local created = 0
  if d then
    redis.call('PEXPIRE', KEYS[1], ARGV[1])
    redis.call('PEXPIRE', KEYS[2], ARGV[1])
    if redis.call('HGET', KEYS[1], 'write') == ARGV[3] then
      created = 1
    end
    local ok, s = pcall(cjson.decode, d)
    if not ok or type(s) ~= 'table' then
      return {'corrupt', d, created}
    end
    local owner, agent = s.owner, s.agent
    if type(owner) ~= 'string' then owner = '' end
    if type(agent) ~= 'string' then agent = '' end
    if owner ~= ARGV[4] or (agent ~= '' and agent ~= ARGV[5]) then
      return {'foreign', d, created}
    end
  else
    redis.call('HSET', KEYS[1], 'version', '0', 'data', ARGV[2], 'write', ARGV[3])
    redis.call('PEXPIRE', KEYS[1], ARGV[1])
    d = ARGV[2]
    created = 1
  end
  local l = redis.call('GET', KEYS[3])
  if l and l ~= ARGV[6] then
    return {'busy', d, created}
  end
  redis.call('SET', KEYS[3], ARGV[6], 'PX', ARGV[7])
  return {'ok', d, created}
end
`

// scriptClaim is claim (luaClaim): the session, created when missing, and
// its lease. Reply: {"ok"|"busy"|"foreign"|"corrupt", data, created 0|1}.
var scriptClaim = newScript(luaClaim + `
return claim()
`)

// luaSinceSummary is session.VerbatimStart in Lua: where the model's view
// of the list KEYS[2] of len messages starts, for a window of -2 (a
// negative window with session.SinceSummary): the Kept-th user message
// before the latest summary entry (its JSON starts with
// {"role":"summary"), or 0. It reads back from the end to that entry and
// its kept turns, never the history before them.
const luaSinceSummary = `
local function isSummary(v)
  return string.sub(v, 1, 17) == '{"role":"summary"'
end
-- scanBack calls f on the messages before index at, newest first, in
-- batches, and returns the index of the first for which it is true, or -1.
local function scanBack(at, f)
  local i = at - 1
  while i >= 0 do
    local lo = math.max(i - 63, 0)
    local batch = redis.call('LRANGE', KEYS[2], lo, i)
    for j = #batch, 1, -1 do
      if f(batch[j]) then
        return lo + j - 1
      end
    end
    i = lo - 1
  end
  return -1
end
local function sinceSummary(len)
  local at = scanBack(len, isSummary)
  if at < 0 then
    return 0
  end
  local kept = 0
  local ok, m = pcall(cjson.decode, redis.call('LINDEX', KEYS[2], at))
  if ok and type(m) == 'table' and type(m.summary) == 'table' and type(m.summary.kept) == 'number' then
    kept = m.summary.kept
  end
  if kept <= 0 then
    return at
  end
  local start = scanBack(at, function(v)
    if isUser(v) then
      kept = kept - 1
    end
    return kept == 0
  end)
  return math.max(start, 0)
end
`

// luaUpdateAppend is updateAppend in Lua, for scriptUpdateAppend and
// scriptClaimStart: scriptUpdate and scriptAppend in one step, which
// returns the history window as it was before the append. A retry of a
// write that was applied (its nonce is stored) answers with the window
// without the messages it appended.
//
// With drop-answer "1" it first drops the messages after the last user
// message (DropLastAnswer), with "2" that message too (DropLastTurn); the
// window is read after that.
//
// Its arguments start after ARGV[o]: expected version ("" = absent), new
// version, data, nonce, ttl ms, lease token ("" = none), window (0 none,
// -2 since the latest summary (luaSinceSummary), < 0 all), max messages,
// drop-answer ("0", "1" or "2"), release ("1": delete
// the lease with the write), messages... It returns {"ok", window list} |
// {"fenced"} | {"conflict", data or nil}.
const luaUpdateAppend = luaTrimTurns + luaDropAnswer + luaSinceSummary + luaWake + `
local function updateAppend(o)
  local lease = ARGV[o+6]
  local fenced = lease ~= '' and redis.call('GET', KEYS[3]) ~= lease
  local window = tonumber(ARGV[o+7])
  local n = #ARGV - o
  local function hist(skip)
    if window == 0 then
      return {}
    end
    local len = redis.call('LLEN', KEYS[2]) - skip
    if len <= 0 then
      return {}
    end
    local start = 0
    if window > 0 and len > window then
      start = len - window
    elseif window == -2 then
      start = sinceSummary(len)
    end
    return redis.call('LRANGE', KEYS[2], start, len - 1)
  end
  if fenced then
    if redis.call('HGET', KEYS[1], 'write') == ARGV[o+4] then
      return {'ok', hist(n - 10)}
    end
    return {'fenced'}
  end
  local cur = redis.call('HGET', KEYS[1], 'version')
  if (cur or '') ~= ARGV[o+1] then
    if cur and redis.call('HGET', KEYS[1], 'write') == ARGV[o+4] then
      return {'ok', hist(n - 10)}
    end
    return {'conflict', redis.call('HGET', KEYS[1], 'data')}
  end
  if ARGV[o+9] ~= '0' then
    dropAnswer(KEYS[2], ARGV[o+9] == '2')
  end
  local h = hist(0)
  redis.call('HSET', KEYS[1], 'version', ARGV[o+2], 'data', ARGV[o+3], 'write', ARGV[o+4])
  if lease ~= '' and ARGV[o+10] == '1' then
    redis.call('DEL', KEYS[3])
    wake(KEYS[4])
  end
  appendTurns(KEYS[2], o + 11, tonumber(ARGV[o+8]))
  redis.call('PEXPIRE', KEYS[1], ARGV[o+5])
  redis.call('PEXPIRE', KEYS[2], ARGV[o+5])
  return {'ok', h}
end
`

// scriptUpdateAppend is updateAppend (luaUpdateAppend) with its arguments
// from ARGV[1]. Reply: {"ok", window list} | {"fenced"} | {"conflict", data
// or nil}.
var scriptUpdateAppend = newScript(luaUpdateAppend + `
return updateAppend(0)
`)

// scriptClaimStart is claim and then, if the session is the one the
// caller expected, updateAppend under the new lease: a turn's start in one
// step (Store.ClaimStart). The session is the expected one when its last
// write is: the caller's nonce of its own last write, or this claim's
// nonce for a session the claim created. A retry after a lost reply finds
// its own write (updateAppend's nonce) and answers as the first attempt.
//
// ARGV: claim's 7 (luaClaim), the expected write nonce, updateAppend's
// from ARGV[9] (its lease token is claim's). Reply: claim's reply when it
// is not "ok"; {"ok", data, created, "conflict"} when the session was not
// the expected one (nothing written but the claim); {"ok", "", created,
// "ok", window list} when the write was made.
var scriptClaimStart = newScript(luaClaim + luaUpdateAppend + `
local c = claim()
if c[1] ~= 'ok' then
  return c
end
local w = redis.call('HGET', KEYS[1], 'write')
if w ~= ARGV[8] and w ~= ARGV[12] then
  return {'ok', c[2], c[3], 'conflict'}
end
local u = updateAppend(8)
if u[1] ~= 'ok' then
  return {'ok', c[2], c[3], u[1]}
end
return {'ok', '', c[3], 'ok', u[2]}
`)

// scriptSource is each script's source, for loading them all in one
// pipeline (preload): go-redis's Script.Load in a pipeline would set the
// script's hash to the empty reply it had not received yet.
var scriptSource = map[*redis.Script]string{}

func newScript(src string) *redis.Script {
	s := redis.NewScript(src)
	scriptSource[s] = src
	return s
}

var allScripts = []*redis.Script{
	scriptUpdate, scriptGet, scriptAppend,
	scriptMessages, scriptDelete, scriptExtend, scriptRelease,
	scriptClaim, scriptUpdateAppend, scriptClaimStart, scriptIndex,
	scriptQueue, scriptSpend,
}

// scriptIndex adds a session to its owner's list (list.go), KEYS[1], in one
// command: ARGV score (creation, Unix ms), session key, the most sessions
// kept (the oldest go), TTL ms.
var scriptIndex = newScript(`
redis.call('ZADD', KEYS[1], 'NX', ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -tonumber(ARGV[3]) - 1)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)
