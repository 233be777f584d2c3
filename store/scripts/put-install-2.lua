--[[
  Writes, replaces or removes one installed skill's record, compared and set on the archive digest it replaces, so
  two installs or updates racing on one name cannot both win (the loser answers 409 and changes nothing). The
  skills revision moves with every change, so each process re-reads its installs.

  Input:
    KEYS[1] installs  <prefix>{skills}:installs   hash name -> install json
    KEYS[2] revision  <prefix>{skills}:rev
    ARGV[1] name
    ARGV[2] expected sha256 of the current install ("" = there must be none)
    ARGV[3] new install json ("" = remove)

  Output:
    {1} written; {0, current json or ""} the current install is not the expected one (unchanged)
]]
local raw = redis.call("HGET", KEYS[1], ARGV[1])
local current = ""
if raw then current = cjson.decode(raw).sha256 or "" end
if current ~= ARGV[2] then return {0, raw or ""} end
if ARGV[3] == "" then
  redis.call("HDEL", KEYS[1], ARGV[1])
else
  redis.call("HSET", KEYS[1], ARGV[1], ARGV[3])
end
redis.call("INCR", KEYS[2])
return {1}
