--[[
  Finishes a batch of reconciles that reconcile-read-n.lua started: per key, projects the registry entry
  (only where it differs, bumping the registry revision, as project-entry-2.lua), writes the status (never the
  record or its version) and the observed revision (as write-status-3.lua), and releases the key's lease;
  then announces every reconciled key in one message so `?wait=true` callers wake up.

  Input (variable number of keys: the caller passes numkeys first):
    KEYS[1]             observed hash            <prefix>{r}:observed
    KEYS[2]             overlap counter          <prefix>{r}:lock:reconcile-overlaps
    KEYS[5i-2 .. 5i+2]  per key i: lease, record hash, status, registry hash, registry revision

    ARGV[1] the batch's lease token
    ARGV[2] global revision the batch read the records at
    ARGV[3] notification channel
    ARGV[4] registry change channel: each registry revision bumped is published on it (RegistryWatch), "" = none
    ARGV[5i .. 5i+4] per key i: member "<kind> <id>", id, mode, entry json ("" removes), status json ("" removes)
      mode "p": project the entry and write the status; "s": write the status only; "r": release the lease only

  Output:
    per key: 1 if the registry changed, plus 2 if the lease had lapsed (another reconcile may have overlapped)
]]
local out = {}
local announced = {}
local bumped = {}
local rev = tonumber(ARGV[2])
local k = 3
for a = 5, #ARGV, 5 do
  local member, id, mode, entry, status = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local changed = 0
  if mode == "p" then
    local held = redis.call("HGET", KEYS[k + 3], id)
    if entry == "" then
      if held then
        redis.call("HDEL", KEYS[k + 3], id)
        changed = 1
      end
    elseif held ~= entry then
      redis.call("HSET", KEYS[k + 3], id, entry)
      changed = 1
    end
    if changed == 1 then
      redis.call("INCR", KEYS[k + 4])
      bumped[KEYS[k + 4]] = true
    end
  end
  if mode ~= "r" then
    if status ~= "" and redis.call("EXISTS", KEYS[k + 1]) == 1 then
      redis.call("SET", KEYS[k + 2], status)
    else
      redis.call("DEL", KEYS[k + 2])
    end
    local seen = tonumber(redis.call("HGET", KEYS[1], member) or "0")
    if rev > seen then redis.call("HSET", KEYS[1], member, ARGV[2]) end
    announced[#announced + 1] = member
  end
  if redis.call("GET", KEYS[k]) == ARGV[1] then
    redis.call("DEL", KEYS[k])
  else
    redis.call("INCR", KEYS[2])
    changed = changed + 2
  end
  out[#out + 1] = changed
  k = k + 5
end
if #announced > 0 then redis.call("PUBLISH", ARGV[3], table.concat(announced, "\n")) end
if ARGV[4] ~= "" then
  for revisionKey in pairs(bumped) do redis.call("PUBLISH", ARGV[4], revisionKey) end
end
return out
