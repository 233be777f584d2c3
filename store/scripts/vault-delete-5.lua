--[[
  Deletes one vault secret: its sealed value, metadata and index entry, decrements its key's count and bumps the
  revision, in one step; the revision key is announced on the change channel.

  Input:
    KEYS[1..5] as vault-put-5.lua: sealed, meta, refs, rev, keyuse (all under <prefix>{vault}:)
    ARGV[1] ref
    ARGV[2] change channel (as vault-put-5.lua)

  Output:
    1 deleted
    0 no such ref
]]
local ref = ARGV[1]
local old = redis.call('HGET', KEYS[1], ref)
if not old then return 0 end
local k = string.match(old, '^svc:enc:aesgcm:v1:([^:]+):') or ''
if redis.call('HINCRBY', KEYS[5], k, -1) <= 0 then redis.call('HDEL', KEYS[5], k) end
redis.call('HDEL', KEYS[1], ref)
redis.call('HDEL', KEYS[2], ref)
redis.call('ZREM', KEYS[3], ref)
redis.call('INCR', KEYS[4])
redis.call('PUBLISH', ARGV[2], KEYS[4])
return 1
