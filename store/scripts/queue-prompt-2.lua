--[[
  Queues a prompt for a busy session within the input queue's limits (spec/gaps.md §1.3), in one step: counts it
  in the session's queue accounting and routes it to the owning runtime, or refuses it and changes nothing.
  The runtime takes the prompt back off the accounting when it runs or drops it.
  NOTE: the stream key is derived from the lease's value (see route-command-1.lua).

  Input:
    KEYS[1] session lease        <prefix>session:<id>:lease
    KEYS[2] queue accounting     <prefix>session:<id>:queue   (hash: n, bytes)
    ARGV[1], ARGV[2] the owner's command stream key before and after the owner's id
    ARGV[3] command (JSON)
    ARGV[4] the prompt's text size in bytes
    ARGV[5] most prompts queued at once
    ARGV[6] most queued text in bytes

  Output:
    the owner's id; false when the session is not live; "full" or "too_large" when refused
]]
local owner = redis.call("GET", KEYS[1])
if not owner then return false end
local n = tonumber(redis.call("HGET", KEYS[2], "n") or "0")
local bytes = tonumber(redis.call("HGET", KEYS[2], "bytes") or "0")
local size = tonumber(ARGV[4])
if n + 1 > tonumber(ARGV[5]) then return "full" end
if bytes + size > tonumber(ARGV[6]) then return "too_large" end
redis.call("HINCRBY", KEYS[2], "n", 1)
redis.call("HINCRBY", KEYS[2], "bytes", size)
redis.call("XADD", ARGV[1] .. owner .. ARGV[2], "MAXLEN", "~", 10000, "*", "c", ARGV[3])
return owner
