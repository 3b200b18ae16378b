-- ratelimit.lua: take up to ARGV[3] claims of a category's rate limit (GCRA,
-- the generic cell rate algorithm), by the Redis server's clock.
--
-- KEYS[1] the category's key; it holds the theoretical arrival time (TAT) of
--         the next claim, in microseconds of the server's clock, and expires
--         once that time has passed (then the limit is back to its full burst)
-- ARGV[1] emission interval T in microseconds: 60s / the limit, rounded up
-- ARGV[2] burst B: how many claims may be taken at once after an idle time
-- ARGV[3] claims asked for, n >= 1
--
-- Returns {granted, wait}: granted is how many claims were taken (0..n); wait
-- is how many microseconds from now until the next claim would be granted, 0
-- when one would be now. A claim is granted when TAT - (B-1)*T <= now, and
-- each granted claim moves TAT on by T: so in any window of length W, at most
-- B + floor(W / T) claims are granted.
if redis.replicate_commands then
  redis.replicate_commands() -- Redis < 5: replicate effects, since TIME is read
end
local t = redis.call("time")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = (tonumber(ARGV[2]) - 1) * interval
local n = tonumber(ARGV[3])
local tat = tonumber(redis.call("get", KEYS[1]) or "0")
if tat < now then
  tat = now
end
local free = math.floor((now + tolerance - tat) / interval) + 1
if free < 1 then
  return {0, tat - tolerance - now}
end
if free > n then
  free = n
end
tat = tat + free * interval
redis.call("set", KEYS[1], string.format("%.0f", tat), "px", math.ceil((tat - now) / 1000) + 1)
local wait = tat - tolerance - now
if wait < 0 then
  wait = 0
end
return {free, wait}
