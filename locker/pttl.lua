-- pttl.lua: remaining time to live of a lock, if every key of it holds our token.
--
-- KEYS    the lock's keys (one hash slot in Cluster mode)
-- ARGV[1] token of the holder
--
-- Returns the smallest remaining time to live among KEYS in milliseconds, or -2
-- when some key is missing or holds another token.
local least = nil
for _, key in ipairs(KEYS) do
  if redis.call("get", key) ~= ARGV[1] then
    return -2
  end
  local ttl = redis.call("pttl", key)
  if least == nil or ttl < least then
    least = ttl
  end
end
return least
