--[[
  Queues one bus event for one (binding, session) group of async hook runs, once: a redelivered bus page
  (at-least-once reading) finds the marker and queues nothing again.
  NOTE: both keys carry the group's hash tag {hk:<binding>|<session>}.

  Input:
    KEYS[1] the (event, binding) marker   <prefix>{hk:<group>}:seen:<event id>
    KEYS[2] the group's pending list      <prefix>{hk:<group>}:q
    ARGV[1] the event (JSON)
    ARGV[2] how long the marker is kept, in ms

  Output:
    the pending list's length once queued (1: the list was empty, so no drain is under way for it yet);
    0 when it was queued before
]]
if redis.call("SET", KEYS[1], "1", "NX", "PX", ARGV[2]) then
  return redis.call("RPUSH", KEYS[2], ARGV[1])
end
return 0
