-- obtain_each.lua: take or extend many locks, each on its own.
--
-- KEYS          lock keys (one hash slot in Cluster mode)
-- ARGV[2i-1]    token of the holder of KEYS[i]
-- ARGV[2i]      time to live of KEYS[i] in milliseconds
--
-- Each key free is set to its token; a key that already holds its token gets
-- the new time to live (reentrant, as obtain.lua); a key held by another token
-- is left alone. Returns a table with, for each key in order, 1 when it is now
-- held by its token and 0 when another token holds it.
local out = {}
for i, key in ipairs(KEYS) do
  local token, ttl = ARGV[2 * i - 1], ARGV[2 * i]
  if redis.call("set", key, token, "nx", "px", ttl) then
    out[i] = 1
  elseif redis.call("get", key) == token then
    redis.call("pexpire", key, ttl)
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
