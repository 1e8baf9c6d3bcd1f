"""The Lua scripts the Redis stores run: memcached's semantics, and claims made in a read.

Each runs atomically on the server, so a check and the write it decides are
one step no other client can come between.
"""

from __future__ import annotations

__all__ = ["APPEND", "CAS", "DECR", "INCR", "PERSIST", "PFADD", "PREPEND", "READ_CLAIMING"]

# Both answer the count as Redis stores it, a string: a Lua number is a double, exact only
# up to 2**53, and tag versions are larger (mcache.model.tags.VERSION_BITS).
INCR = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('INCRBY', KEYS[1], ARGV[1])
return redis.call('GET', KEYS[1])
"""
DECR = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local n = redis.call('DECRBY', KEYS[1], ARGV[1])
if n < 0 then redis.call('SET', KEYS[1], '0', 'KEEPTTL') return '0' end
return redis.call('GET', KEYS[1])
"""
APPEND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('STRLEN', KEYS[1]) + string.len(ARGV[1]) > tonumber(ARGV[2]) then return -1 end
redis.call('APPEND', KEYS[1], ARGV[1])
return 1
"""
PREPEND = """
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
if string.len(v) + string.len(ARGV[1]) > tonumber(ARGV[2]) then return -1 end
redis.call('SET', KEYS[1], ARGV[1] .. v, 'KEEPTTL')
return 1
"""
CAS = """
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
if redis.sha1hex(v) ~= ARGV[1] then return 0 end
local ttl = tonumber(ARGV[3])
if ttl < 0 then
  redis.call('DEL', KEYS[1])
elseif ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
return 1
"""
PFADD = """
local changed = redis.call('PFADD', KEYS[1], ARGV[1])
if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return changed
"""
PERSIST = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('PERSIST', KEYS[1])
return 1
"""

READ_CLAIMING = """
-- KEYS: the entry, the keys read with it, the entry's lock. ARGV: token, window ms, lock ms.
-- An entry in its last <window> ms in the store (its stale time: see ClaimsStale) is
-- claimed for this reader with SET NX, as memcached's meta protocol wins with mg ... R.
local n = #KEYS - 1
local values = redis.call('MGET', unpack(KEYS, 1, n))
local outcome = 0
if values[1] then
  local left = redis.call('PTTL', KEYS[1])
  if left >= 0 and left <= tonumber(ARGV[2]) then
    outcome = 2
    if redis.call('SET', KEYS[n + 1], ARGV[1], 'NX', 'PX', ARGV[3]) then outcome = 1 end
  end
end
values[n + 1] = outcome
return values
"""
