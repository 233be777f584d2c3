--[[
  Projects one entry into a kind's runtime registry, writing only when it differs, and bumps the registry's
  revision on a change so readers that cache the registry re-read it.

  Input:
    KEYS[1] registry hash       <prefix>{r}:registry:<kind>   (field id -> entry json)
    KEYS[2] registry revision   <prefix>{r}:registry-rev:<kind>

    ARGV[1] id
    ARGV[2] entry json, or "" to remove the entry
    ARGV[3] channel to announce a change on (PUBLISH of KEYS[2], so caches re-read; RegistryWatch), or absent

  Output:
    1 the registry changed, 0 it already held this entry (or had none to remove)
]]
local observed = redis.call("HGET", KEYS[1], ARGV[1])
if ARGV[2] == "" then
  if not observed then return 0 end
  redis.call("HDEL", KEYS[1], ARGV[1])
else
  if observed == ARGV[2] then return 0 end
  redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
end
redis.call("INCR", KEYS[2])
if ARGV[3] and ARGV[3] ~= "" then redis.call("PUBLISH", ARGV[3], KEYS[2]) end
return 1
