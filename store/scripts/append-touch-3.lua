--[[
  Appends one event to a session's event log (as append-event-2.lua) and, first, sets some top-level fields of the
  session hash if the session still exists (as patch-session-1.lua): one script where a runtime wrote each event
  and then its session's activity, two round trips per event. NOTE: the fields are set before the event is added,
  so a reader that sees the event finds the session as it says (a turn's `done`: the session idle).

  Input:
    KEYS[1] event stream      <prefix>{s:<id>}:events
    KEYS[2] sequence counter  <prefix>{s:<id>}:seq
    KEYS[3] session hash      <prefix>{s:<id>}:session

    ARGV[1] the event as a JSON object without "sequence" and without "id" (it must start with "{")
    ARGV[2] the event id prefix (the id is prefix .. sequence)
    ARGV[3..] field, json value, field, json value, ... for the session hash

  Output:
    the event's sequence number
]]
if #ARGV > 2 and redis.call("EXISTS", KEYS[3]) == 1 then redis.call("HSET", KEYS[3], unpack(ARGV, 3)) end
local seq = redis.call("INCR", KEYS[2])
local json = '{"id":"' .. ARGV[2] .. seq .. '","sequence":' .. seq .. ',' .. string.sub(ARGV[1], 2)
redis.call("XADD", KEYS[1], seq .. "-0", "e", json)
return seq
