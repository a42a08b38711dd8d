"""The Lua scripts of the Redis store, one per operation, each touching only the keys it is
given (one hash slot), so they run on a Cluster too; a script that adds data is refused
whole when Redis is out of memory (ARCHITECTURE.md, "The Redis store").
"""

from __future__ import annotations

from typing import Final

_ADDS: Final = "#!lua\n"
_FREES: Final = "#!lua flags=allow-oom\n"

_CLOCK: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# Shared by the session scripts: KEYS = {s, l, r, o} of one session.
_SESSION: Final = (
    _CLOCK
    + """
local s, l, r, o = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local function expire_in(ms)
  redis.call('PEXPIRE', s, ms)
  redis.call('PEXPIRE', r, ms)
  redis.call('PEXPIRE', o, ms)
end
local function renew(ttl)
  redis.call('HSET', s, 'idle', now + ttl)
  local ms = ttl
  local left = redis.call('PTTL', l)
  if left > ms then ms = left end
  expire_in(ms)
end
-- The run's log: the turns appended since ``run`` was written whole, in the fields
-- 'log1'..'logN' of the session's hash ('logs': N); 'version' is the id of the run's last
-- write (unique, given by the store: compared as a string, for equality only).
local function clear_log()
  local logs = tonumber(redis.call('HGET', s, 'logs')) or 0
  for i = 1, logs do redis.call('HDEL', s, 'log' .. i) end
  redis.call('HSET', s, 'logs', 0)
end
local function write_run(run, state, ttl, version)
  if redis.call('EXISTS', s) == 0 then return 0 end
  clear_log()
  redis.call('HSET', s, 'run', run, 'state', state, 'version', version)
  renew(ttl)
  return 1
end
local function append_run(turn, state, ttl, version)
  if redis.call('EXISTS', s) == 0 then return 0 end
  local logs = (tonumber(redis.call('HGET', s, 'logs')) or 0) + 1
  redis.call('HSET', s, 'log' .. logs, turn, 'logs', logs, 'state', state,
    'version', version)
  renew(ttl)
  return 1
end
local function stored_run(found, seen)
  -- {meta, run, state} as HMGET found them, with the version and the appended turns;
  -- the run left out (empty) when its version is ``seen`` ('0': none)
  local version = redis.call('HGET', s, 'version') or '0'
  if seen ~= '0' and version == seen then return {found[1], '', found[3], version} end
  local stored = {found[1], found[2], found[3], version}
  local logs = tonumber(redis.call('HGET', s, 'logs')) or 0
  for first = 1, logs, 1000 do  -- (in batches: unpack has a limit)
    local fields = {}
    for i = first, math.min(first + 999, logs) do fields[#fields + 1] = 'log' .. i end
    for _, turn in ipairs(redis.call('HMGET', s, unpack(fields))) do
      stored[#stored + 1] = turn
    end
  end
  return stored
end
local function put_result(key, record, keep)
  local left = redis.call('PTTL', s)
  if left <= 0 then return 0 end
  redis.call('HSET', r, key, record)
  redis.call('LREM', o, 0, key)
  redis.call('RPUSH', o, key)
  while redis.call('LLEN', o) > keep do
    redis.call('HDEL', r, redis.call('LPOP', o))
  end
  redis.call('PEXPIRE', r, left)
  redis.call('PEXPIRE', o, left)
  return 1
end
local function settle(token)
  -- a holder that took the lease and never gave it back died mid-turn (or stalled past
  -- its lease): its key gets the turn-lost record it left, unless it has one
  if redis.call('EXISTS', l) == 1 then return end
  local h = redis.call('HMGET', s, 'holder', 'holder_key', 'holder_lost', 'holder_keep')
  if not h[1] or h[1] == token then return end
  if h[2] and h[3] and h[3] ~= '' and redis.call('HEXISTS', r, h[2]) == 0 then
    put_result(h[2], h[3], tonumber(h[4]))
  end
  redis.call('HDEL', s, 'holder', 'holder_key', 'holder_lost', 'holder_keep')
end
local function fenced(token)
  -- a token whose call was given up for lost (FENCE): it takes no lease, however late
  local list = redis.call('HGET', s, 'fenced')
  return list and string.find(' ' .. list .. ' ', ' ' .. token .. ' ', 1, true) ~= nil
end
local function take_lease(token, lease, ttl)
  if fenced(token) then return 'busy' end
  local holder = redis.call('GET', l)
  if holder and holder ~= token then return 'busy' end
  if not holder then settle(token) end
  redis.call('SET', l, token, 'PX', lease)
  redis.call('HSET', s, 'holder', token)
  renew(ttl)
  return 'acquired'
end
local function holds(token)
  -- the token took the lease and no other has since (its own may have lapsed)
  local lease = redis.call('GET', l)
  if lease and lease ~= token then return false end
  return redis.call('HGET', s, 'holder') == token
end
local function release(token)
  if not holds(token) then return 0 end
  redis.call('DEL', l)
  redis.call('HDEL', s, 'holder', 'holder_key', 'holder_lost', 'holder_keep')
  local idle = tonumber(redis.call('HGET', s, 'idle'))
  if idle then
    local ms = idle - now
    if ms < 1 then ms = 1 end
    expire_in(ms)
  end
  return 1
end
"""
)

# ARGV: meta, run, ttl, version. Returns 1 for a new session, 2 for one that existed (its meta and
# run replaced); the store then reserves a new one's place in the index (the cap).
CREATE: Final = (
    _ADDS
    + _SESSION
    + """
local existed = redis.call('EXISTS', s)
clear_log()
redis.call('HSET', s, 'meta', ARGV[1], 'run', ARGV[2], 'state', 'idle', 'version', ARGV[4])
renew(tonumber(ARGV[3]))
return existed + 1
"""
)

# ARGV: ttl (0: no renewal). Returns {meta, run, state, version, appended turns...}.
READ: Final = (
    _FREES
    + _SESSION
    + """
local ttl = tonumber(ARGV[1])
local found = redis.call('HMGET', s, 'meta', 'run', 'state')
if not found[1] then return false end
if ttl > 0 then renew(ttl) end
return stored_run(found, '0')
"""
)

# Returns 1 if the session existed; the store then records it as ended in the index.
DELETE: Final = (
    _FREES
    + _SESSION
    + """
local existed = redis.call('EXISTS', s)
redis.call('DEL', s, l, r, o)
return existed
"""
)

# ARGV: token, lease, ttl.
ACQUIRE: Final = (
    _FREES
    + _SESSION
    + """
if redis.call('EXISTS', s) == 0 then return 'missing' end
return take_lease(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))
"""
)

# ARGV: token, lease, ttl, with_key ('1' or '0'), key, lost, keep, seen. Returns
# {'missing'}, {'replay', record} (the key's record; no lease taken), {'suspended'} (no
# lease taken: the session waits for approvals), {'busy', same_key (1 or 0)} or
# {'acquired', meta, run, state, version, appended turns...} (the run and its turns
# left out when its version is ``seen``). Taking the lease records the token in the session's
# hash ('holder'), and for a keyed turn its key, the turn-lost record ``lost`` to store
# under that key if the holder never gives the lease back, and ``keep`` ('holder_key',
# 'holder_lost', 'holder_keep'); releasing clears them. A later call that finds the lease
# free and a holder still recorded stores that record first (``settle``), so a retry of
# the dead holder's key replays 409 turn-lost.
BEGIN_TURN: Final = (
    _ADDS
    + _SESSION
    + """
local token, lease, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local keyed, key = ARGV[4] == '1', ARGV[5]
local found = redis.call('HMGET', s, 'meta', 'run', 'state')
if not found[1] then return {'missing'} end
settle(token)
if keyed then
  local record = redis.call('HGET', r, key)
  if record then return {'replay', record} end
end
if found[3] == 'suspended' then return {'suspended'} end
local outcome = take_lease(token, lease, ttl)
if outcome ~= 'acquired' then
  if not keyed then return {outcome, 0} end
  local holder = redis.call('HMGET', s, 'holder', 'holder_key')
  if holder[2] == key and holder[1] == redis.call('GET', l) then return {outcome, 1} end
  return {outcome, 0}
end
if keyed then
  redis.call('HSET', s, 'holder_key', key, 'holder_lost', ARGV[6], 'holder_keep', ARGV[7])
end
local stored = stored_run(found, ARGV[8])
table.insert(stored, 1, outcome)
return stored
"""
)

# ARGV: token, append ('1': the run is the turn to append, '0': the whole run), run, state,
# ttl, with_key, key, record, keep, version (of the write), base (the version an appended
# turn was cut against). Only while the token holds the lease (or held it last): writes
# the run whole or appends the turn to its log, stores the record (if given), releases
# the lease and returns 'stored'; otherwise changes nothing and returns 'lost' (another
# turn took the session over: fencing). A turn to append on a run whose version is not
# ``base`` changes nothing, keeps the lease and returns 'stale'.
FINISH_TURN: Final = (
    _ADDS
    + _SESSION
    + """
local token = ARGV[1]
if not holds(token) then return 'lost' end
if ARGV[2] == '1' then
  if redis.call('HGET', s, 'version') ~= ARGV[11] then return 'stale' end
  if append_run(ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[10]) == 0 then return 'lost' end
elseif write_run(ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[10]) == 0 then
  return 'lost'
end
if ARGV[6] == '1' then put_result(ARGV[7], ARGV[8], tonumber(ARGV[9])) end
release(token)
return 'stored'
"""
)

# ARGV: token, lease. Returns 1 when the token held the lease, which now ends ``lease`` ms
# from now (the session's keys then expire at the later of that and the idle deadline);
# 0, changing nothing, when the lease expired or another token holds it.
RENEW: Final = (
    _FREES
    + _SESSION
    + """
local token, lease = ARGV[1], tonumber(ARGV[2])
if redis.call('GET', l) ~= token or redis.call('EXISTS', s) == 0 then return 0 end
redis.call('PEXPIRE', l, lease)
local ms = lease
local idle = tonumber(redis.call('HGET', s, 'idle'))
if idle and idle - now > ms then ms = idle - now end
expire_in(ms)
return 1
"""
)

# ARGV: token, whose begin (or acquire) failed on the store's side: the call may have
# run, or may still run once a stalled Redis resumes, for a request that is gone. Gives
# its lease back if it took one (recording no turn-lost: the turn never ran) and fences
# it, so that a call that lands later takes nothing (the session's last 8 such tokens).
FENCE: Final = (
    _FREES
    + _SESSION
    + """
if redis.call('EXISTS', s) == 0 then return 0 end
local released = release(ARGV[1])
local kept = {}
for t in string.gmatch(redis.call('HGET', s, 'fenced') or '', '%S+') do kept[#kept + 1] = t end
kept[#kept + 1] = ARGV[1]
while #kept > 8 do table.remove(kept, 1) end
redis.call('HSET', s, 'fenced', table.concat(kept, ' '))
return released
"""
)

# ARGV: token.
RELEASE: Final = (
    _FREES
    + _SESSION
    + """
return release(ARGV[1])
"""
)

# KEYS = {s, r}; ARGV: key.
GET_RESULT: Final = (
    _FREES
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
return redis.call('HGET', KEYS[2], ARGV[1])
"""
)

# -- the index: KEYS = {index, gone} ------------------------------------------------------

# ARGV: id, ttl, limit. Returns 1 if the id has (or now takes) a place under the cap.
RESERVE: Final = (
    _ADDS
    + _CLOCK
    + """
local index, id = KEYS[1], ARGV[1]
if redis.call('ZSCORE', index, id) then return 1 end
if redis.call('ZCARD', index) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', index, now + tonumber(ARGV[2]), id)
return 1
"""
)

# KEYS = {s}: how long a session the sweep found gone has left (``PTTL``), asked again
# through a script, which a replica refuses: a plain PTTL on a connection that reached an
# empty replica read a live session as gone, and the sweep closed its agent mid-turn.
LEFT: Final = _FREES + "return redis.call('PTTL', KEYS[1])\n"

# The ids whose index score is due (at most 1000): the store asks their keys' PTTL.
DUE: Final = (
    _FREES
    + _CLOCK
    + """
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1000)
"""
)

# ARGV: id, pttl, id, pttl, ... as the sweep found them. A live one is due again when its
# keys would expire; an expired one (or one whose keys are gone) leaves the index for
# ``gone``. Ids that left the index meanwhile (deleted) are left alone.
SWEPT: Final = (
    _FREES
    + _CLOCK
    + """
local index, gone = KEYS[1], KEYS[2]
for i = 1, #ARGV, 2 do
  local id, left = ARGV[i], tonumber(ARGV[i + 1])
  if left > 0 then
    redis.call('ZADD', index, 'XX', now + left, id)
  elseif redis.call('ZREM', index, id) == 1 then
    redis.call('ZADD', gone, now, id)
  end
end
return 1
"""
)

# ARGV: id, existed ('1' or '0'): a deleted session leaves the index (for ``gone``).
ENDED: Final = (
    _FREES
    + _CLOCK
    + """
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if removed == 1 or ARGV[2] == '1' then redis.call('ZADD', KEYS[2], now, ARGV[1]) end
return removed
"""
)

# ARGV: since (-1: none yet), keep (ms). Trims ``gone`` (by age, and to the newest
# 100,000) and returns {now, ids that ended at or after ``since``}.
GONE: Final = (
    _FREES
    + _CLOCK
    + """
local gone, since, keep = KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', gone, '-inf', now - keep)
redis.call('ZREMRANGEBYRANK', gone, 0, -100001)
local ids = {}
if since >= 0 then ids = redis.call('ZRANGEBYSCORE', gone, since, '+inf') end
return {now, ids}
"""
)
