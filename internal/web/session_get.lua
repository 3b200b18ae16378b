-- session_get.lua: read a session and extend its life by the idle time, never
-- past its absolute end; a session past its end is deleted.
--
-- KEYS[1] the session's key
-- ARGV[1] the idle time in milliseconds
-- ARGV[2] now, Unix milliseconds (the clock of the taskd process)
--
-- Returns the session's JSON, or false when there is none, it is past its end
-- ("ends_ms") or it has no end.
local v = redis.call("get", KEYS[1])
if not v then
  return false
end
local now = tonumber(ARGV[2])
local ok, s = pcall(cjson.decode, v)
local ends = ok and type(s) == "table" and tonumber(s["ends_ms"]) or nil
if not ends or ends <= now then
  redis.call("del", KEYS[1])
  return false
end
redis.call("pexpire", KEYS[1], math.min(tonumber(ARGV[1]), ends - now))
return v
