--[[
  Reads what a reconcile starts from, at one instant: the global revision, the record and its last status.

  Input:
    KEYS[1] global revision  <prefix>{r}:revision
    KEYS[2] record hash      <prefix>{r}:rec:<kind>:<id>
    KEYS[3] status           <prefix>{r}:status:<kind>:<id>

  Output:
    { revision or false, record json or false, status json or false }
]]
return { redis.call("GET", KEYS[1]), redis.call("HGET", KEYS[2], "json"), redis.call("GET", KEYS[3]) }
