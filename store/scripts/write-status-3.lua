--[[
  Writes a record's reconcile status (never its version) and the global revision its controller observed,
  then announces the reconcile so `?wait=true` callers wake up.
  A status for a record that no longer exists is removed instead of written.

  Input:
    KEYS[1] record hash     <prefix>{r}:rec:<kind>:<id>
    KEYS[2] status          <prefix>{r}:status:<kind>:<id>
    KEYS[3] observed hash   <prefix>{r}:observed   (field "<kind> <id>" -> revision)

    ARGV[1] status json, or "" when the record is gone
    ARGV[2] "<kind> <id>"
    ARGV[3] global revision the reconcile read the record at
    ARGV[4] notification channel

  Output:
    1 status written, 0 status removed
]]
local written = 0
if ARGV[1] ~= "" and redis.call("EXISTS", KEYS[1]) == 1 then
  redis.call("SET", KEYS[2], ARGV[1])
  written = 1
else
  redis.call("DEL", KEYS[2])
end
local seen = tonumber(redis.call("HGET", KEYS[3], ARGV[2]) or "0")
if tonumber(ARGV[3]) > seen then redis.call("HSET", KEYS[3], ARGV[2], ARGV[3]) end
redis.call("PUBLISH", ARGV[4], ARGV[2])
return written
