--[[
  Starts a batch of reconciles (controllers/batch-reconciler.ts): takes each key's reconcile lease, and for
  every key it took, reads the record and its last status, all at one instant with the global revision.
  A key whose lease another reconcile holds is left alone (the caller hands it to that kind's queue).

  Input (variable number of keys: the caller passes numkeys first):
    KEYS[1]            global revision  <prefix>{r}:revision
    KEYS[3i-1 .. 3i+1] per key i: lease <prefix>{r}:lock:reconciling:<kind>:<id>, record hash, status

    ARGV[1] the batch's lease token
    ARGV[2] lease time in ms

  Output:
    { revision or false, then per key: 1 and record json or false and status json or false, or 0 false false }
]]
local out = { redis.call("GET", KEYS[1]) }
for i = 2, #KEYS, 3 do
  if redis.call("SET", KEYS[i], ARGV[1], "PX", ARGV[2], "NX") then
    out[#out + 1] = 1
    out[#out + 1] = redis.call("HGET", KEYS[i + 1], "json")
    out[#out + 1] = redis.call("GET", KEYS[i + 2])
  else
    out[#out + 1] = 0
    out[#out + 1] = false
    out[#out + 1] = false
  end
end
return out
