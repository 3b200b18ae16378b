-- pttl.lua: remaining time to live of a lock, if it holds our token.
--
-- KEYS[1] lock key
-- ARGV[1] token of the holder
--
-- Returns the remaining time to live in milliseconds, or -2 when the key is
-- missing or holds another token.
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("pttl", KEYS[1])
end
return -2
