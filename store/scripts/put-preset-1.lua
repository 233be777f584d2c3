--[[
  Writes one notification preset with compare-and-set: create only when absent, update or delete only when the
  stored definition is still the one the caller read, so two concurrent writers never lose one's change.

  Input:
    KEYS[1] presets hash   <prefix>{notify}:presets   (field name -> preset json)

    ARGV[1] name
    ARGV[2] the json the caller read, or "" to require that no preset has this name (create)
    ARGV[3] the new json, or "" to delete

  Output:
    1 written
    0 the name exists (create) or the stored preset changed or vanished since it was read (update, delete)
]]
local current = redis.call("HGET", KEYS[1], ARGV[1])
if ARGV[2] == "" then
  if current then return 0 end
elseif current ~= ARGV[2] then
  return 0
end
if ARGV[3] == "" then
  redis.call("HDEL", KEYS[1], ARGV[1])
else
  redis.call("HSET", KEYS[1], ARGV[1], ARGV[3])
end
return 1
