-- tokenmark.lua: mark a token hash as an editor's, for a time.
--
-- KEYS[1] the hash's mark
-- ARGV[1] how long the mark lasts, in milliseconds
--
-- The mark is set anew, with its full time. Returns 1.
redis.call("set", KEYS[1], "1", "px", ARGV[1])
return 1
