--[[
  Appends one event to a session's event log with the next per-session sequence number, atomically, so
  sequences are gapless and ordered even with several writers; and sets some top-level fields of the session
  hash in the same step (its activity, whether a prompt runs), only if the session still exists (a deleted
  session is never resurrected by a late write from its runtime), so a reader that sees the event sees them too.

  Input:
    KEYS[1] event stream      <prefix>{s:<id>}:events
    KEYS[2] sequence counter  <prefix>{s:<id>}:seq
    KEYS[3] session hash      <prefix>{s:<id>}:session

    ARGV[1] the event as a JSON object without "sequence" and without "id" (it must start with "{")
    ARGV[2] the event id prefix (the id is prefix .. sequence)
    ARGV[3] the channel to announce the session's change on (the fields set include an identity field), or ''
    ARGV[4..] field, json value, field, json value, ... to set on the session hash (none: the hash is not touched)

  Output:
    the event's sequence number
]]
local seq = redis.call("INCR", KEYS[2])
local json = '{"id":"' .. ARGV[2] .. seq .. '","sequence":' .. seq .. ',' .. string.sub(ARGV[1], 2)
redis.call("XADD", KEYS[1], seq .. "-0", "e", json)
if #ARGV > 3 and redis.call("EXISTS", KEYS[3]) == 1 then
  redis.call("HSET", KEYS[3], unpack(ARGV, 4))
  if ARGV[3] ~= "" then redis.call("PUBLISH", ARGV[3], KEYS[3]) end
end
return seq
