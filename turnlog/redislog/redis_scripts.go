package redislog

import "github.com/redis/go-redis/v9"

// The scripts run each write as one atomic step and one round trip.
//
// A stream entry holds the frames of one Append: its ID is "<last>-0",
// where last is the seq of its last frame; field f is the seq of its first
// and field d the frames joined by "\n" (a frame never contains a line
// break: turnlog.CheckFrames). The end marker of a turn whose last frame
// is n is "<n>-1". So the top entry tells both the last seq and whether
// the turn finished, and XRANGE "(<after>-0" returns exactly the entries
// that hold frames after `after` (the first may begin before it) and the
// marker, if any. One entry per Append instead of one per frame: a batch
// of frames costs Redis one XADD.
//
// The kept window (MaxFrames) is exact although entries hold several
// frames: the meta hash's field k is the seq of the oldest frame kept
// once frames were dropped, and entries that hold only older frames are
// trimmed (XTRIM MINID); readers skip the frames before k.
//
// Error replies start with TURNLOG_ so that Go can tell them apart.

// startScript: KEYS meta, latest, turns; ARGV turnID, owner, agent,
// startedMs, ttlMs, pruneBeforeMs, writer token.
// A retry of an applied Start (same started time and owner) succeeds.
var startScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 't')
if cur then
  if cur == ARGV[4] and redis.call('HGET', KEYS[1], 'o') == ARGV[2] then return 'OK' end
  return redis.error_reply('TURNLOG_EXISTS')
end
redis.call('HSET', KEYS[1], 'o', ARGV[2], 'a', ARGV[3], 't', ARGV[4], 'l', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[6])
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[3], ARGV[5]) end
return 'OK'
`)

// topScript is shared by appendScript and stopScript: it sets last to the
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

// fenceScript is part of appendScript: a write whose writer token
// (ARGV[15]) is not the turn's (meta field l) comes from a process that
// is no longer its writer, since another took the turn over
// (takeOverScript). A process that never wrote the turn sends none.
const fenceScript = `
if ARGV[15] ~= '' then
  local l = redis.call('HGET', KEYS[2], 'l')
  if l and l ~= ARGV[15] then return redis.error_reply('TURNLOG_FENCED') end
end
`

// openScript starts appendScript: for the first write of a turn opened
// without Start (ARGV[10] "1"; ARGV owner, agent, startedMs,
// pruneBeforeMs follow) it registers the turn as startScript does, the
// keys' expiries then being set by the write (its ttlMs). A resent first
// write finds the turn registered with the same start and owner. A turn
// another process took over before this first write (meta field r) is
// left to fenceScript, as any write to a taken-over turn: the taker
// registered it with a start of its own, which tells nothing.
const openScript = `
if ARGV[10] == '1' then
  local cur = redis.call('HGET', KEYS[2], 't')
  if cur then
    if redis.call('HEXISTS', KEYS[2], 'r') == 0 and (cur ~= ARGV[13] or redis.call('HGET', KEYS[2], 'o') ~= ARGV[11]) then
      return redis.error_reply('TURNLOG_EXISTS')
    end
  else
    redis.call('HSET', KEYS[2], 'o', ARGV[11], 'a', ARGV[12], 't', ARGV[13], 'l', ARGV[15])
    redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[3])
    redis.call('ZADD', KEYS[4], ARGV[13], ARGV[5])
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. ARGV[14])
  end
end
`

// appendScript is Append and Finish: KEYS stream, meta, latest, turns;
// ARGV first, maxFrames, ttlMs ("0": no refresh needed), nowMs, turnID,
// finish ("1": end the turn after the frames), retentionMs, n (the number
// of frames), data (the n frames joined by "\n"), then openScript's, then
// the writer token ("": none).
//
// first is the seq of the batch's first frame (0: whatever is next). The
// frames the stream already has (seq <= its last) are a write that went
// in although its writer did not learn it (a lost reply, Redis paused or
// a connection cut, then the write sent again, or the two arriving in
// either order): only the frames after the stream's last are added, so
// that no frame is ever kept twice; a batch that would leave a hole
// before its first frame is refused. Every call, with frames or without,
// records nowMs as the writer's sign of life (meta field w). The keys'
// expiries are set when the stream is created, refreshed when ttlMs says
// so, and set to the retention by the finishing call: a few times per
// turn, not per call.
var appendScript = redis.NewScript(openScript + topScript + `
local n = tonumber(ARGV[8])
local first = tonumber(ARGV[1])
local finish = ARGV[6] == '1'
local data = ARGV[9]
if fin then
  if finish and (n == 0 or (first > 0 and last >= first + n - 1)) then return last end
  return redis.error_reply('TURNLOG_FINISHED ' .. last)
end
` + fenceScript + `
if first > 0 and last ~= first - 1 then
  if last < first - 1 then return redis.error_reply('TURNLOG_SEQ ' .. last) end
  local skip = last - first + 1
  if skip >= n then
    n = 0
  else
    local pos = 0
    for _ = 1, skip do pos = string.find(data, '\n', pos + 1, true) end
    data = string.sub(data, pos + 1)
    n = n - skip
  end
end
redis.call('HSET', KEYS[2], 'w', ARGV[4])
local created = last == 0 and n > 0
if n > 0 then
  redis.call('XADD', KEYS[1], string.format('%d-0', last + n), 'f', last + 1, 'd', data)
  last = last + n
  local keep = tonumber(ARGV[2])
  if last > keep then
    local k = last - keep + 1
    redis.call('XTRIM', KEYS[1], 'MINID', string.format('%d-0', k))
    redis.call('HSET', KEYS[2], 'k', k)
  end
end
local ttl = ARGV[3]
if finish then
  redis.call('XADD', KEYS[1], string.format('%d-1', last), 'e', '1')
  ttl = ARGV[7]
elseif ttl == '0' then
  if created then
    local pttl = redis.call('PTTL', KEYS[2])
    if pttl > 0 then redis.call('PEXPIRE', KEYS[1], pttl) end
  end
  return last
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
if redis.call('GET', KEYS[3]) == ARGV[5] then redis.call('PEXPIRE', KEYS[3], ttl) end
redis.call('ZADD', KEYS[4], 'XX', ARGV[4], ARGV[5])
if redis.call('PTTL', KEYS[4]) < tonumber(ttl) then redis.call('PEXPIRE', KEYS[4], ttl) end
return last
`)

// readScript: KEYS stream, meta; ARGV after, count. It returns {k,
// entries} when there are entries after `after` (k: the oldest frame kept,
// 0 when none was dropped), else {k, {}, top entry or {}, whether the turn
// exists}: one round trip whatever the answer.
var readScript = redis.NewScript(`
local k = tonumber(redis.call('HGET', KEYS[2], 'k') or '0')
local msgs = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1] .. '-0', '+', 'COUNT', ARGV[2])
if #msgs > 0 then return {k, msgs} end
return {k, msgs, redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1), redis.call('EXISTS', KEYS[2])}
`)

var allScripts = []*redis.Script{startScript, appendScript, readScript, stopScript, takeOverScript, handOverScript}

// takeOverScript: KEYS stream, meta, latest, turns; ARGV writer token,
// turnID, owner, agent, startedMs, ttlMs, nowMs, pruneBeforeMs. It makes
// the token the turn's writer (meta field l, which appendScript checks),
// records a sign of life and the seq the new writer starts at (field r,
// a list), and clears the hand-over mark (field h); a turn the log does
// not have is registered as openScript registers one. It refuses a finished turn and returns
// {last, stop requested 0|1}.
var takeOverScript = redis.NewScript(`
if not redis.call('HGET', KEYS[2], 't') then
  redis.call('HSET', KEYS[2], 'o', ARGV[3], 'a', ARGV[4], 't', ARGV[5], 'w', ARGV[7], 'l', ARGV[1], 'r', '1')
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[6])
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[2])
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. ARGV[8])
  if redis.call('PTTL', KEYS[4]) < tonumber(ARGV[6]) then redis.call('PEXPIRE', KEYS[4], ARGV[6]) end
  return {0, 0}
end
` + topScript + `
if fin then return redis.error_reply('TURNLOG_FINISHED ' .. last) end
local r = redis.call('HGET', KEYS[2], 'r')
if r then r = r .. ',' .. (last + 1) else r = tostring(last + 1) end
redis.call('HSET', KEYS[2], 'l', ARGV[1], 'w', ARGV[7], 'r', r)
redis.call('HDEL', KEYS[2], 'h')
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
if redis.call('PTTL', KEYS[4]) < tonumber(ARGV[6]) then redis.call('PEXPIRE', KEYS[4], ARGV[6]) end
return {last, redis.call('HEXISTS', KEYS[2], 'x')}
`)

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

// handOverScript: KEYS stream, meta; ARGV writer token, nowMs, channel,
// payload. It marks the running turn handed over (meta field h, the
// time), if the token is still its writer's, and publishes it to the
// replicas (WatchHandOvers).
var handOverScript = redis.NewScript(topScript + `
if fin then return redis.error_reply('TURNLOG_FINISHED ' .. last) end
local l = redis.call('HGET', KEYS[2], 'l')
if not l then return redis.error_reply('TURNLOG_NOTFOUND') end
if l ~= ARGV[1] then return redis.error_reply('TURNLOG_FENCED') end
redis.call('HSET', KEYS[2], 'h', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 'OK'
`)
