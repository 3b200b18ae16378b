-- beatend.lua: read and delete a claim's heartbeat counter, when the claim ends.
--
-- KEYS[1] the claim's counter (see beatcount.lua)
--
-- Returns {n, ms}: the heartbeats counted and the highest active time one
-- reported, {0, 0} when there is no counter.
local n = tonumber(redis.call("hget", KEYS[1], "n") or "0")
local ms = tonumber(redis.call("hget", KEYS[1], "ms") or "0")
redis.call("del", KEYS[1])
return {n, ms}
