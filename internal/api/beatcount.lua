-- beatcount.lua: count a measured heartbeat of a claim.
--
-- KEYS[1] the claim's counter (a hash: n, the heartbeats counted; ms, the
--         highest active time a heartbeat reported)
-- ARGV[1] the active time the heartbeat reported, in milliseconds
-- ARGV[2] how long the counter lasts, in milliseconds
--
-- The counter's time is set anew. Returns the count.
local n = redis.call("hincrby", KEYS[1], "n", 1)
local ms = tonumber(redis.call("hget", KEYS[1], "ms") or "0")
if tonumber(ARGV[1]) > ms then
  redis.call("hset", KEYS[1], "ms", ARGV[1])
end
redis.call("pexpire", KEYS[1], ARGV[2])
return n
