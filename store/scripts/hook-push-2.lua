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
    1 queued, 0 already queued before
]]
if redis.call("SET", KEYS[1], "1", "NX", "PX", ARGV[2]) then
  redis.call("RPUSH", KEYS[2], ARGV[1])
  return 1
end
return 0
