-- obtain_multi.lua: take every key of KEYS for ARGV[1], or none of them.
--
-- KEYS    lock keys (one hash slot in Cluster mode)
-- ARGV[1] token of the would-be holder
-- ARGV[2] time to live in milliseconds
--
-- Returns 1 when every key now holds ARGV[1] with the time to live ARGV[2], or 0
-- when some key is held by another token; then no key is changed. A key that
-- already holds ARGV[1] counts as free and gets the new time to live, so
-- obtaining again with the same token is reentrant.
for _, key in ipairs(KEYS) do
  local holder = redis.call("get", key)
  if holder and holder ~= ARGV[1] then
    return 0
  end
end
for _, key in ipairs(KEYS) do
  redis.call("set", key, ARGV[1], "px", ARGV[2])
end
return 1
