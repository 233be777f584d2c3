--[[
  Appends one event to a session's event log with the next per-session sequence number, atomically, so
  sequences are gapless and ordered even with several writers.

  Input:
    KEYS[1] event stream      <prefix>{s:<id>}:events
    KEYS[2] sequence counter  <prefix>{s:<id>}:seq

    ARGV[1] the event as a JSON object without "sequence" and without "id" (it must start with "{")
    ARGV[2] the event id prefix (the id is prefix .. sequence)

  Output:
    the event's sequence number
]]
local seq = redis.call("INCR", KEYS[2])
local json = '{"id":"' .. ARGV[2] .. seq .. '","sequence":' .. seq .. ',' .. string.sub(ARGV[1], 2)
redis.call("XADD", KEYS[1], seq .. "-0", "e", json)
return seq
