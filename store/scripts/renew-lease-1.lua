--[[
  Renews a lease only if the caller still holds it (a holder whose lease lapsed never extends another's).

  Input:
    KEYS[1] lease key
    ARGV[1] the holder's token
    ARGV[2] the new time to live, in ms

  Output:
    1 renewed, 0 the lease had lapsed or belongs to another holder
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return 1
end
return 0
