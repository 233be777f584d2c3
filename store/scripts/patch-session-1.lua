--[[
  Sets some top-level fields of a session hash, only if the session still exists (a deleted session is
  never resurrected by a late write from its runtime).

  Input:
    KEYS[1] session hash   <prefix>{s:<id>}:session
    ARGV[1] the channel to announce the change on (the fields set include an identity field), or ''
    ARGV[2..] field, json value, field, json value, ...

  Output:
    1 written, 0 no such session
]]
if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end
if #ARGV > 1 then redis.call("HSET", KEYS[1], unpack(ARGV, 2)) end
if ARGV[1] ~= "" then redis.call("PUBLISH", ARGV[1], KEYS[1]) end
return 1
