--[[
  Writes, replaces or removes one installed extension's record, compared and set on its generation, so two
  installs, updates or enable/disable calls racing on one name cannot both win (the loser answers 409 and
  changes nothing). The extensions revision moves with every change, so every process re-reads the records
  (its artifact cache, its daemon supervisor).

  Input:
    KEYS[1] records   <prefix>{ext}:records   hash name -> record json (with a numeric "generation")
    KEYS[2] revision  <prefix>{ext}:rev
    ARGV[1] name
    ARGV[2] expected generation of the current record ("0" = there must be none)
    ARGV[3] new record json ("" = remove)

  Output:
    {1, revision}                    written
    {0, current json or ""}          the current record is not the expected one (unchanged)
]]
local raw = redis.call("HGET", KEYS[1], ARGV[1])
local current = 0
if raw then current = tonumber(cjson.decode(raw).generation) or 0 end
if current ~= tonumber(ARGV[2]) then return {0, raw or ""} end
if ARGV[3] == "" then
  redis.call("HDEL", KEYS[1], ARGV[1])
else
  redis.call("HSET", KEYS[1], ARGV[1], ARGV[3])
end
return {1, redis.call("INCR", KEYS[2])}
