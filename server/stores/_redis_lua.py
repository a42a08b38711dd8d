"""The Lua scripts of :class:`~evalport.server.stores._redis.RedisStore`, one per operation.

Each script runs atomically in Redis. ``BEGIN_TURN`` and ``FINISH_TURN`` compose the
single operations (acquire and read, or look up the idempotency record; write, store the
record and release) so that a turn costs two round trips; every acquisition records its
token as the session's ``holder``, which fences the finish (see ``holds`` and
``settle``). ``ARGV[1]`` is always the key prefix; keys are built from it inside the
script, so the scripts need one Redis server (not a cluster).
Times come from Redis's ``TIME``. See :mod:`evalport.server.stores._redis` for the rules.
"""

from __future__ import annotations

from typing import Final

# Shared by the scripts that build their keys from the prefix in ARGV[1] (which is why
# they need a single Redis: a cluster would need every key declared in KEYS).
_COMMON: Final = """
local prefix = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local index = prefix .. 'index'
local gone = prefix .. 'gone'
local function keys_of(id)
  return prefix .. 's:' .. id, prefix .. 'l:' .. id, prefix .. 'r:' .. id, prefix .. 'o:' .. id
end
local function expire_in(id, ms)
  local s, l, r, o = keys_of(id)
  redis.call('PEXPIRE', s, ms)
  redis.call('PEXPIRE', r, ms)
  redis.call('PEXPIRE', o, ms)
  redis.call('ZADD', index, now + ms, id)
end
local function renew(id, ttl)
  local s, l = keys_of(id)
  redis.call('HSET', s, 'idle', now + ttl)
  local ms = ttl
  local left = redis.call('PTTL', l)
  if left > ms then ms = left end
  expire_in(id, ms)
end
local function write_run(id, run, state, ttl)
  local s = keys_of(id)
  if redis.call('EXISTS', s) == 0 then return 0 end
  redis.call('HSET', s, 'run', run, 'state', state)
  renew(id, ttl)
  return 1
end
local function put_result(id, key, record, keep)
  local s, l, r, o = keys_of(id)
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
local function settle(id, token)
  -- a holder that took the lease and never gave it back died mid-turn (or stalled past
  -- its lease): its key gets the turn-lost record it left, unless it has one
  local s, l, r = keys_of(id)
  if redis.call('EXISTS', l) == 1 then return end
  local h = redis.call('HMGET', s, 'holder', 'holder_key', 'holder_lost', 'holder_keep')
  if not h[1] or h[1] == token then return end
  if h[2] and h[3] and h[3] ~= '' and redis.call('HEXISTS', r, h[2]) == 0 then
    put_result(id, h[2], h[3], tonumber(h[4]))
  end
  redis.call('HDEL', s, 'holder', 'holder_key', 'holder_lost', 'holder_keep')
end
local function take_lease(id, token, lease, ttl)
  local s, l = keys_of(id)
  local holder = redis.call('GET', l)
  if holder and holder ~= token then return 'busy' end
  if not holder then settle(id, token) end
  redis.call('SET', l, token, 'PX', lease)
  redis.call('HSET', s, 'holder', token)
  renew(id, ttl)
  return 'acquired'
end
local function holds(id, token)
  -- the token took the lease and no other has since (its own may have lapsed)
  local s, l = keys_of(id)
  local lease = redis.call('GET', l)
  if lease and lease ~= token then return false end
  return redis.call('HGET', s, 'holder') == token
end
local function release(id, token)
  local s, l = keys_of(id)
  if not holds(id, token) then return 0 end
  redis.call('DEL', l)
  redis.call('HDEL', s, 'holder', 'holder_key', 'holder_lost', 'holder_keep')
  local idle = tonumber(redis.call('HGET', s, 'idle'))
  if idle then
    local ms = idle - now
    if ms < 1 then ms = 1 end
    expire_in(id, ms)
  end
  return 1
end
local function sweep()
  local due = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, 1000)
  for _, id in ipairs(due) do
    local s = prefix .. 's:' .. id
    local left = redis.call('PTTL', s)
    if left > 0 then
      redis.call('ZADD', index, now + left, id)
    else
      redis.call('ZREM', index, id)
      redis.call('ZADD', gone, now, id)
    end
  end
end
"""

CREATE: Final = (
    _COMMON
    + """
local id, meta, run, ttl, limit = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local s = keys_of(id)
if redis.call('EXISTS', s) == 0 then
  sweep()
  if redis.call('ZCARD', index) >= limit then return 0 end
end
redis.call('HSET', s, 'meta', meta, 'run', run, 'state', 'idle')
renew(id, ttl)
return 1
"""
)

READ: Final = (
    _COMMON
    + """
local id, ttl = ARGV[2], tonumber(ARGV[3])
local s = keys_of(id)
local found = redis.call('HMGET', s, 'meta', 'run', 'state')
if not found[1] then return false end
if ttl > 0 then renew(id, ttl) end
return found
"""
)

# ARGV: prefix, id, run, state, ttl, token ('' for none). With a token, writes only if
# that token holds the lease (or held it last: no other took it since).
WRITE: Final = (
    _COMMON
    + """
local id, token = ARGV[2], ARGV[6]
if token ~= '' and not holds(id, token) then return 0 end
return write_run(id, ARGV[3], ARGV[4], tonumber(ARGV[5]))
"""
)

DELETE: Final = (
    _COMMON
    + """
local id = ARGV[2]
local s, l, r, o = keys_of(id)
local existed = redis.call('EXISTS', s)
redis.call('DEL', s, l, r, o)
redis.call('ZREM', index, id)
if existed == 1 then redis.call('ZADD', gone, now, id) end
return existed
"""
)

ACQUIRE: Final = (
    _COMMON
    + """
local id = ARGV[2]
local s = keys_of(id)
if redis.call('EXISTS', s) == 0 then return 'missing' end
return take_lease(id, ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]))
"""
)

# ARGV: prefix, id, token, lease, ttl, with_key ('1' or '0'), key, lost, keep. Returns
# {'missing'}, {'replay', record} (the key's record; no lease taken), {'suspended'} (no
# lease taken: the session waits for approvals), {'busy', same_key (1 or 0)} or
# {'acquired', meta, run, state}. Taking the lease records the token in the session's
# hash ('holder'), and for a keyed turn its key, the turn-lost record ``lost`` to store
# under that key if the holder never gives the lease back, and ``keep`` ('holder_key',
# 'holder_lost', 'holder_keep'); releasing clears them. A later call that finds the lease
# free and a holder still recorded stores that record first (``settle``), so a retry of
# the dead holder's key replays 409 turn-lost.
BEGIN_TURN: Final = (
    _COMMON
    + """
local id, token, lease, ttl = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local keyed, key = ARGV[6] == '1', ARGV[7]
local s, l, r = keys_of(id)
local found = redis.call('HMGET', s, 'meta', 'run', 'state')
if not found[1] then return {'missing'} end
settle(id, token)
if keyed then
  local record = redis.call('HGET', r, key)
  if record then return {'replay', record} end
end
if found[3] == 'suspended' then return {'suspended'} end
local outcome = take_lease(id, token, lease, ttl)
if outcome ~= 'acquired' then
  if not keyed then return {outcome, 0} end
  local holder = redis.call('HMGET', s, 'holder', 'holder_key')
  if holder[2] == key and holder[1] == redis.call('GET', l) then return {outcome, 1} end
  return {outcome, 0}
end
if keyed then
  redis.call('HSET', s, 'holder_key', key, 'holder_lost', ARGV[8], 'holder_keep', ARGV[9])
end
return {outcome, found[1], found[2], found[3]}
"""
)

# ARGV: prefix, id, token, with_run ('1' or '0'), run, state, ttl, with_key, key, record,
# keep. Only while the token holds the lease (or held it last): writes the run (if
# given), stores the record (if given), releases the lease and returns 1; otherwise
# changes nothing and returns 0 (another turn took the session over: fencing).
FINISH_TURN: Final = (
    _COMMON
    + """
local id, token = ARGV[2], ARGV[3]
if not holds(id, token) then return 0 end
if ARGV[4] == '1' then write_run(id, ARGV[5], ARGV[6], tonumber(ARGV[7])) end
if ARGV[8] == '1' then put_result(id, ARGV[9], ARGV[10], tonumber(ARGV[11])) end
return release(id, token)
"""
)

# ARGV: prefix, id, token, lease. Returns 1 when the token held the lease, which now ends
# ``lease`` ms from now (the session's keys then expire at the later of that and the idle
# deadline); 0, changing nothing, when the lease expired or another token holds it.
RENEW: Final = (
    _COMMON
    + """
local id, token, lease = ARGV[2], ARGV[3], tonumber(ARGV[4])
local s, l = keys_of(id)
if redis.call('GET', l) ~= token or redis.call('EXISTS', s) == 0 then return 0 end
redis.call('PEXPIRE', l, lease)
local ms = lease
local idle = tonumber(redis.call('HGET', s, 'idle'))
if idle and idle - now > ms then ms = idle - now end
expire_in(id, ms)
return 1
"""
)

RELEASE: Final = (
    _COMMON
    + """
return release(ARGV[2], ARGV[3])
"""
)

PUT_RESULT: Final = (
    _COMMON
    + """
return put_result(ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]))
"""
)

GET_RESULT: Final = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
return redis.call('HGET', KEYS[2], ARGV[1])
"""

COUNT: Final = (
    _COMMON
    + """
sweep()
return redis.call('ZCARD', index)
"""
)

PURGE: Final = (
    _COMMON
    + """
local since, keep = tonumber(ARGV[2]), tonumber(ARGV[3])
sweep()
redis.call('ZREMRANGEBYSCORE', gone, '-inf', now - keep)
redis.call('ZREMRANGEBYRANK', gone, 0, -100001)
local ids = {}
if since >= 0 then ids = redis.call('ZRANGEBYSCORE', gone, since, '+inf') end
return {now, ids}
"""
)
