-- release_each.lua: delete many locks, each only if it holds its own token
-- (compare-and-delete, per key).
--
-- KEYS        lock keys (one hash slot in Cluster mode)
-- ARGV[i]     token of the holder of KEYS[i]
--
-- Returns a table with, for each key in order, 1 when it was deleted and 0
-- when it was missing or held by another token (then left alone).
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call("get", key) == ARGV[i] then
    out[i] = redis.call("del", key)
  else
    out[i] = 0
  end
end
return out
