-- refresh.lua: extend a lock, but only while it holds our token (compare-and-pexpire).
--
-- KEYS[1] lock key
-- ARGV[1] token of the holder
-- ARGV[2] new time to live in milliseconds
--
-- Returns 1 when the time to live was set, 0 when the key is missing or holds
-- another token. A missing key is never created again: a lost lock stays lost.
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("pexpire", KEYS[1], ARGV[2])
end
return 0
