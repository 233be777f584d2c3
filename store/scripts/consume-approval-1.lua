--[[
  Consumes a tool approval token exactly once. The token's record stays (marked used) until its key
  expires, so a second presentation is told apart from an unknown token.

  Input:
    KEYS[1] approval key   <prefix>{ta:<sha256 of the token>}
    ARGV[1] binding        the digest of tool id, session, workspace, agent and input digest at invoke
    ARGV[2] now            ms since the epoch

  Output:
    "ok" consumed; "missing" unknown token; "replayed" already used; "expired"; "mismatch" other binding
]]
local raw = redis.call("GET", KEYS[1])
if not raw then return "missing" end
local approval = cjson.decode(raw)
if approval.used then return "replayed" end
if tonumber(ARGV[2]) > approval.expires_at_ms then return "expired" end
if approval.binding ~= ARGV[1] then return "mismatch" end
approval.used = true
redis.call("SET", KEYS[1], cjson.encode(approval), "KEEPTTL")
return "ok"
