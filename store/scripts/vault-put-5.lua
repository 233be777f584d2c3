--[[
  Writes one vault secret: its sealed value, its metadata, its place in the ref index, the count of secrets its
  key seals, and the vault revision (which in-process caches of resolved values compare), all in one step; the
  revision key is announced on the change channel.

  Input:
    KEYS[1] sealed values   <prefix>{vault}:sealed   (hash ref -> svc:enc:aesgcm:v1:<key id>:...)
    KEYS[2] metadata        <prefix>{vault}:meta     (hash ref -> {kind, created_at, updated_at} json)
    KEYS[3] ref index       <prefix>{vault}:refs     (zset, every score 0: listed by ZRANGE BYLEX)
    KEYS[4] revision        <prefix>{vault}:rev      (counter: bumped by every write and delete)
    KEYS[5] key use         <prefix>{vault}:keyuse   (hash key id -> secrets it seals)

    ARGV[1] ref
    ARGV[2] sealed value (its key id is parsed from it)
    ARGV[3] kind ("" keeps the stored one)
    ARGV[4] now (ISO-8601)
    ARGV[5] change channel: the revision key is published on it (a process's masking set reads the vault again)

  Output:
    {1, meta json} created
    {0, meta json} replaced
]]
local ref = ARGV[1]
local function keyid(s) return string.match(s, '^svc:enc:aesgcm:v1:([^:]+):') or '' end
local old = redis.call('HGET', KEYS[1], ref)
if old then
  local k = keyid(old)
  if redis.call('HINCRBY', KEYS[5], k, -1) <= 0 then redis.call('HDEL', KEYS[5], k) end
end
redis.call('HSET', KEYS[1], ref, ARGV[2])
redis.call('HINCRBY', KEYS[5], keyid(ARGV[2]), 1)
local meta = { kind = ARGV[3], created_at = ARGV[4], updated_at = ARGV[4] }
local prior = redis.call('HGET', KEYS[2], ref)
if prior then
  local p = cjson.decode(prior)
  meta.created_at = p.created_at
  if ARGV[3] == '' then meta.kind = p.kind end
end
local json = cjson.encode(meta)
redis.call('HSET', KEYS[2], ref, json)
redis.call('ZADD', KEYS[3], 0, ref)
redis.call('INCR', KEYS[4])
redis.call('PUBLISH', ARGV[5], KEYS[4])
if old then return {0, json} end
return {1, json}
