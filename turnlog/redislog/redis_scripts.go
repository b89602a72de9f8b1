package redislog

import "github.com/redis/go-redis/v9"

// The scripts run each write as one atomic step and one round trip.
// Stream entry IDs are our seqs: frame n is "<n>-0" and the end marker of a
// turn whose last frame is n is "<n>-1", so the top entry tells both the
// last seq and whether the turn finished, and XRANGE "(<after>-0" returns
// exactly the frames after `after` (and the marker, if any).
//
// Error replies start with TURNLOG_ so that Go can tell them apart.

// startScript: KEYS meta, latest, turns; ARGV turnID, owner, agent,
// startedMs, ttlMs, pruneBeforeMs.
// A retry of an applied Start (same started time and owner) succeeds.
var startScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 't')
if cur then
  if cur == ARGV[4] and redis.call('HGET', KEYS[1], 'o') == ARGV[2] then return 'OK' end
  return redis.error_reply('TURNLOG_EXISTS')
end
redis.call('HSET', KEYS[1], 'o', ARGV[2], 'a', ARGV[3], 't', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[6])
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[3], ARGV[5]) end
return 'OK'
`)

// topScript is shared by appendScript and finishScript: it sets last to the
// seq of the top entry and fin to whether that entry is the end marker.
const topScript = `
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local last, fin = 0, false
if top[1] then
  local id = top[1][1]
  local dash = string.find(id, '-', 1, true)
  last = tonumber(string.sub(id, 1, dash - 1))
  fin = string.sub(id, dash + 1) ~= '0'
elseif redis.call('EXISTS', KEYS[2]) == 0 then
  return redis.error_reply('TURNLOG_NOTFOUND')
end
`

// appendScript: KEYS stream, meta, latest, turns; ARGV first, maxlen,
// ttlMs ("0": no refresh needed), nowMs, turnID, data...
// first is the seq the writer expects for its first frame (0: whatever is
// next). When the stream already ends with exactly this batch, the call is
// a retry of an applied Append and changes nothing. Every other call,
// with frames or without, records nowMs as the writer's sign of life (meta
// field w).
var appendScript = redis.NewScript(topScript + `
if fin then return redis.error_reply('TURNLOG_FINISHED ' .. last) end
local n = #ARGV - 5
local first = tonumber(ARGV[1])
if first > 0 and last ~= first - 1 then
  if last == first + n - 1 then return last end
  return redis.error_reply('TURNLOG_SEQ ' .. last)
end
redis.call('HSET', KEYS[2], 'w', ARGV[4])
local created = last == 0
for i = 6, #ARGV do
  last = last + 1
  redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[2], string.format('%d-0', last), 'd', ARGV[i])
end
if ARGV[3] ~= '0' or created then
  local ttl = ARGV[3]
  if ttl == '0' then ttl = redis.call('PTTL', KEYS[2]) end
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  if redis.call('GET', KEYS[3]) == ARGV[5] then redis.call('PEXPIRE', KEYS[3], ttl) end
  redis.call('ZADD', KEYS[4], 'XX', ARGV[4], ARGV[5])
  if redis.call('PTTL', KEYS[4]) < tonumber(ttl) then redis.call('PEXPIRE', KEYS[4], ttl) end
end
return last
`)

// finishScript: KEYS stream, meta, latest, turns; ARGV retentionMs,
// turnID, nowMs. Finishing a finished turn changes nothing.
var finishScript = redis.NewScript(topScript + `
if fin then return last end
redis.call('XADD', KEYS[1], string.format('%d-1', last), 'e', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
if redis.call('GET', KEYS[3]) == ARGV[2] then redis.call('PEXPIRE', KEYS[3], ARGV[1]) end
redis.call('ZADD', KEYS[4], 'XX', ARGV[3], ARGV[2])
if redis.call('PTTL', KEYS[4]) < tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[4], ARGV[1]) end
return last
`)

var allScripts = []*redis.Script{startScript, appendScript, finishScript, stopScript}

// stopScript: KEYS stream, meta; ARGV channel, payload, nowMs. It records
// the stop request on the running turn's meta (field x, which a writer
// whose subscription reconnects reads) and publishes it to the writers.
var stopScript = redis.NewScript(topScript + `
if fin then return redis.error_reply('TURNLOG_FINISHED ' .. last) end
if redis.call('EXISTS', KEYS[2]) == 0 then return redis.error_reply('TURNLOG_NOTFOUND') end
redis.call('HSET', KEYS[2], 'x', ARGV[3])
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 'OK'
`)
