--[[
  Counts a prompt for a busy session within the input queue's limits, in one step: adds it
  to the session's queue accounting and returns the owning runtime, or refuses it and changes nothing.
  The caller then appends the prompt to that runtime's command stream; the runtime takes the prompt back off the
  accounting when it runs or drops it.
  NOTE: the command stream belongs to the runtime process (tag `{rt:<owner>}`), not to the session (`{s:<id>}`),
  so on a Redis Cluster it sits in another slot and cannot be written here; a caller that fails to append takes
  the prompt back off the accounting itself.

  Input:
    KEYS[1] session lease        <prefix>{s:<id>}:lease
    KEYS[2] queue accounting     <prefix>{s:<id>}:queue   (hash: n, bytes)
    ARGV[1] the prompt's text size in bytes
    ARGV[2] most prompts queued at once
    ARGV[3] most queued text in bytes

  Output:
    the owner's id; false when the session is not live; "full" or "too_large" when refused
]]
local owner = redis.call("GET", KEYS[1])
if not owner then return false end
local n = tonumber(redis.call("HGET", KEYS[2], "n") or "0")
local bytes = tonumber(redis.call("HGET", KEYS[2], "bytes") or "0")
local size = tonumber(ARGV[1])
if n + 1 > tonumber(ARGV[2]) then return "full" end
if bytes + size > tonumber(ARGV[3]) then return "too_large" end
redis.call("HINCRBY", KEYS[2], "n", 1)
redis.call("HINCRBY", KEYS[2], "bytes", size)
return owner
