-- obtain.lua: take the first free key among KEYS for ARGV[1].
--
-- KEYS    the ARGV[3] keys to release first, then the candidate lock keys, in order
--         of preference (all of one hash slot in Cluster mode)
-- ARGV[1] token of the would-be holder
-- ARGV[2] time to live in milliseconds
-- ARGV[3] how many of KEYS come first to be released, not obtained (absent: 0)
--
-- Each key to release is deleted if it holds ARGV[1]; another token's is left
-- alone. Returns the 1-based index among the candidates of the key obtained, or
-- 0 when every candidate is held by another token. A key that already holds
-- ARGV[1] counts as obtained and gets the new time to live, so obtaining again
-- with the same token is reentrant.
local first = tonumber(ARGV[3] or "0")
for i = 1, first do
  if redis.call("get", KEYS[i]) == ARGV[1] then
    redis.call("del", KEYS[i])
  end
end
for i = first + 1, #KEYS do
  local key = KEYS[i]
  if redis.call("set", key, ARGV[1], "nx", "px", ARGV[2]) then
    return i - first
  end
  if redis.call("get", key) == ARGV[1] then
    redis.call("pexpire", key, ARGV[2])
    return i - first
  end
end
return 0
