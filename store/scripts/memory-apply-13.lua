--[[
  Applies one memory controller decision: stores the decision and the change it makes to the memory together, so
  no crash leaves one without the other. A compare-and-set on the memory's content hash refuses the step when
  another writer (another replica) changed the memory since the controller read it; the caller decides again.
  An idempotency key already used answers the decision stored under it and changes nothing. The same step keeps
  the partition's lookup index (what the controller's rules read instead of the whole partition: canonical body
  hash, entity slot and name, each -> filenames) and its set of `injection` memories.

  Input:
    KEYS[1] partition records <prefix>{mem}:m:<partition>  (hash filename -> memory json)
    KEYS[2] content hashes    <prefix>{mem}:h              (hash memory id -> content hash)
    KEYS[3] partitions        <prefix>{mem}:parts          (set of partitions holding a memory)
    KEYS[4] decisions         <prefix>{mem}:d              (hash decision id -> decision json)
    KEYS[5] decision order    <prefix>{mem}:dz             (zset decision id, score decided_at ms)
    KEYS[6] idempotency keys  <prefix>{mem}:idem           (hash <partition> <key> -> decision id)
    KEYS[7] revision          <prefix>{mem}:rev            (counter: bumped by every applied change)
    KEYS[8] reverted          <prefix>{mem}:reverted       (hash decision id -> id of the decision reverting it)
    KEYS[9] recall counts     <prefix>{mem}:rc             (hash memory id -> recall_count)
    KEYS[10] recall last      <prefix>{mem}:rl             (hash memory id -> {at, score} json)
    KEYS[11] lookups          <prefix>{mem}:x:<partition>  (hash "b:|s:|n:<hash>" -> filenames joined by "\n")
    KEYS[12] injection        <prefix>{mem}:i:<partition>  (set of filenames marked injection)
    KEYS[13] lookups built    <prefix>{mem}:xparts         (set of partitions whose lookups are kept)

    ARGV[1] partition
    ARGV[2] filename
    ARGV[3] expected content hash ("" = the memory must be absent, "*" = any: no change is made)
    ARGV[4] change: "put" | "del" | "none"
    ARGV[5] memory json (put)
    ARGV[6] memory content hash (put)
    ARGV[7] decision id
    ARGV[8] decision json
    ARGV[9] decided_at (ms)
    ARGV[10] idempotency key ("" = none)
    ARGV[11] id of the decision this one reverts ("" = none)
    ARGV[12] lookup fields of the memory as it was (removed; "\n"-joined, "" = none)
    ARGV[13] lookup fields of the memory as it will be (put; "\n"-joined)
    ARGV[14] "1" when the memory put is marked injection

  Output:
    {1, revision}                applied
    {0, current content hash}    the memory changed since it was read ("" = absent): nothing stored
    {2, stored decision json}    the idempotency key was used before: nothing stored
    {3, reverting decision id}   the decision to revert (ARGV[11]) was reverted already: nothing stored
    {4, ""}                      the partition holds memories written before lookups were kept: build them
                                 (memory-lookups-5.lua), then decide again; nothing stored
]]
local function split(s)
  local out = {}
  for v in string.gmatch(s, '[^\n]+') do out[#out + 1] = v end
  return out
end
-- NOTE: a lookup field holds every filename with that key ("\n"-joined): a revert may restore a body another
-- memory of the partition also has, so one value per key would lose one of them.
local function unlink(field, file)
  local cur = redis.call('HGET', KEYS[11], field)
  if not cur then return end
  local keep = {}
  for _, f in ipairs(split(cur)) do if f ~= file then keep[#keep + 1] = f end end
  if #keep == 0 then redis.call('HDEL', KEYS[11], field) else redis.call('HSET', KEYS[11], field, table.concat(keep, '\n')) end
end
local function link(field, file)
  local cur = redis.call('HGET', KEYS[11], field)
  if not cur then return redis.call('HSET', KEYS[11], field, file) end
  for _, f in ipairs(split(cur)) do if f == file then return end end
  redis.call('HSET', KEYS[11], field, cur .. '\n' .. file)
end
local part, file = ARGV[1], ARGV[2]
if redis.call('SISMEMBER', KEYS[13], part) == 0 then
  if redis.call('HLEN', KEYS[1]) > 0 then return {4, ''} end
  redis.call('SADD', KEYS[13], part)
end
local id = part .. '/' .. file
local idem = ''
if ARGV[10] ~= '' then
  idem = part .. ' ' .. ARGV[10]
  local prior = redis.call('HGET', KEYS[6], idem)
  if prior then return {2, redis.call('HGET', KEYS[4], prior) or ''} end
end
if ARGV[11] ~= '' then
  local by = redis.call('HGET', KEYS[8], ARGV[11])
  if by then return {3, by} end
end
local current = redis.call('HGET', KEYS[2], id) or ''
if ARGV[3] ~= '*' and current ~= ARGV[3] then return {0, current} end
if ARGV[4] ~= 'none' then
  for _, f in ipairs(split(ARGV[12])) do unlink(f, file) end
end
if ARGV[4] == 'put' then
  for _, f in ipairs(split(ARGV[13])) do link(f, file) end
  if ARGV[14] == '1' then redis.call('SADD', KEYS[12], file) else redis.call('SREM', KEYS[12], file) end
  redis.call('HSET', KEYS[1], file, ARGV[5])
  redis.call('HSET', KEYS[2], id, ARGV[6])
  redis.call('SADD', KEYS[3], part)
elseif ARGV[4] == 'del' then
  redis.call('SREM', KEYS[12], file)
  redis.call('HDEL', KEYS[1], file)
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[9], id)
  redis.call('HDEL', KEYS[10], id)
  if redis.call('HLEN', KEYS[1]) == 0 then redis.call('SREM', KEYS[3], part) end
end
redis.call('HSET', KEYS[4], ARGV[7], ARGV[8])
redis.call('ZADD', KEYS[5], ARGV[9], ARGV[7])
if idem ~= '' then redis.call('HSET', KEYS[6], idem, ARGV[7]) end
if ARGV[11] ~= '' then redis.call('HSET', KEYS[8], ARGV[11], ARGV[7]) end
local rev = redis.call('INCR', KEYS[7])
return {1, rev}
