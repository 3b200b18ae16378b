-- refresh.lua: extend a lock, but only while every key of it holds our token
-- (compare-and-pexpire).
--
-- KEYS    the lock's keys (one hash slot in Cluster mode)
-- ARGV[1] token of the holder
-- ARGV[2] new time to live in milliseconds
--
-- Returns 1 when the time to live of every key was set, 0 when some key is
-- missing or holds another token; then no key is changed. A missing key is never
-- created again: a lost lock stays lost.
for _, key in ipairs(KEYS) do
  if redis.call("get", key) ~= ARGV[1] then
    return 0
  end
end
for _, key in ipairs(KEYS) do
  redis.call("pexpire", key, ARGV[2])
end
return 1
