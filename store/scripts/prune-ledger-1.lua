--[[
  Prunes one session ledger: its bytes go and a tombstone (pruned_at, the checksum and stop time it had) stays, so
  neither the stop hook nor a repair writes it again. One step, so a ledger is counted once however many prunes run
  at the same time. The caller has chosen it by its stop time (immutable: a ledger is written once).

  Input:
    KEYS[1] ledger hash    <prefix>{s:<session id>}:ledger

    ARGV[1] pruned_at (RFC 3339)

  Output:
    the number of events the ledger held (0 or more) when pruned; -1 no ledger; -2 already pruned
]]
local fields = redis.call("HMGET", KEYS[1], "checksum", "events", "pruned_at", "session_id", "workspace_id", "stopped_at")
if fields[3] then return -2 end
if not fields[1] then return -1 end
redis.call("DEL", KEYS[1])
redis.call("HSET", KEYS[1], "pruned_at", ARGV[1], "checksum", fields[1], "session_id", fields[4], "workspace_id", fields[5], "stopped_at", fields[6])
return tonumber(fields[2]) or 0
