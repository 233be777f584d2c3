--[[
  Sets some top-level fields of a session hash, only if the session still exists (a deleted session is
  never resurrected by a late write from its runtime).

  Input:
    KEYS[1] session hash   <prefix>{s:<id>}:session
    ARGV    field, json value, field, json value, ...

  Output:
    1 written, 0 no such session
]]
if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end
if #ARGV > 0 then redis.call("HSET", KEYS[1], unpack(ARGV)) end
return 1
