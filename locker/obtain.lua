-- obtain.lua: take the first free key among KEYS for ARGV[1].
--
-- KEYS    candidate lock keys, in order of preference (one hash slot in Cluster mode)
-- ARGV[1] token of the would-be holder
-- ARGV[2] time to live in milliseconds
--
-- Returns the 1-based index of the key obtained, or 0 when every key is held by
-- another token. A key that already holds ARGV[1] counts as obtained and gets
-- the new time to live, so obtaining again with the same token is reentrant.
for i, key in ipairs(KEYS) do
  if redis.call("set", key, ARGV[1], "nx", "px", ARGV[2]) then
    return i
  end
  if redis.call("get", key) == ARGV[1] then
    redis.call("pexpire", key, ARGV[2])
    return i
  end
end
return 0
