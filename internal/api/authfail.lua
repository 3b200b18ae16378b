-- authfail.lua: count one failed authentication of a client in a fixed window.
--
-- KEYS[1] the client's failure counter
-- ARGV[1] the window in milliseconds
--
-- The first failure starts the window: the counter expires with it. Returns
-- {failures in this window so far, milliseconds left of the window}.
local n = redis.call("incr", KEYS[1])
if n == 1 then
  redis.call("pexpire", KEYS[1], ARGV[1])
end
local left = redis.call("pttl", KEYS[1])
if left < 0 then
  -- A counter left without a time to live (written by hand): give it one.
  redis.call("pexpire", KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
return {n, left}
