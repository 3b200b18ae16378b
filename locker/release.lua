-- release.lua: delete locks, but only those holding our token (compare-and-delete).
--
-- KEYS    lock keys (one hash slot in Cluster mode)
-- ARGV[1] token of the holder
--
-- Returns the number of keys deleted; keys held by another token are left alone.
local deleted = 0
for _, key in ipairs(KEYS) do
  if redis.call("get", key) == ARGV[1] then
    deleted = deleted + redis.call("del", key)
  end
end
return deleted
