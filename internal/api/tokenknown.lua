-- tokenknown.lua: whether a token hash is known to be an editor's.
--
-- KEYS[1] the hash's mark (see tokenmark.lua)
--
-- Returns 1 when the mark is there, else 0.
return redis.call("exists", KEYS[1])
