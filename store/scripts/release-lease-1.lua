--[[
  Releases a lease only if the caller still holds it, so a holder whose lease lapsed never deletes the
  lease a later holder took.

  Input:
    KEYS[1] lease key
    ARGV[1] the holder's token

  Output:
    1 released, 0 the lease had lapsed or belongs to another holder
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("DEL", KEYS[1])
  return 1
end
return 0
