--[[
  Writes a session ledger once: the same bytes again change nothing; different bytes are refused, so a
  ledger, once written, is never changed; a pruned ledger (its tombstone) is not written again.

  Input:
    KEYS[1] ledger hash    <prefix>{s:<session id>}:ledger

    ARGV[1] the ledger's JSON-Lines text
    ARGV[2] its checksum (hex SHA-256 of ARGV[1])
    ARGV[3] session id
    ARGV[4] workspace id
    ARGV[5] stopped_at (RFC 3339)
    ARGV[6] number of events
    ARGV[7] written_at (RFC 3339)

  Output:
    1 written; 0 already written with these bytes; -1 already written with other bytes (refused); -2 pruned
]]
local existing = redis.call("HMGET", KEYS[1], "checksum", "jsonl", "pruned_at")
if existing[3] then return -2 end
if existing[1] then
  if existing[1] == ARGV[2] and existing[2] == ARGV[1] then return 0 end
  return -1
end
redis.call("HSET", KEYS[1], "jsonl", ARGV[1], "checksum", ARGV[2], "session_id", ARGV[3], "workspace_id", ARGV[4],
  "stopped_at", ARGV[5], "events", ARGV[6], "written_at", ARGV[7])
return 1
