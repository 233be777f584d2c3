--[[
  Routes a command to the runtime that owns a live session, in one round trip: reads the owner from the
  session's lease and appends the command to that runtime's command stream.
  NOTE: the stream key is derived from the lease's value, so it cannot be declared in KEYS; this service
  runs on one Redis (not Redis Cluster), where that is allowed.

  Input:
    KEYS[1] session lease        <prefix>session:<id>:lease
    ARGV[1], ARGV[2] the owner's command stream key before and after the owner's id
    ARGV[3] command (JSON)

  Output:
    the owner's id, or false when the session is not live
]]
local owner = redis.call("GET", KEYS[1])
if not owner then return false end
redis.call("XADD", ARGV[1] .. owner .. ARGV[2], "MAXLEN", "~", 10000, "*", "c", ARGV[3])
return owner
