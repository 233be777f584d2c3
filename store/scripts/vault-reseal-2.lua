--[[
  Rotation's write of one page: replaces each secret's sealed value by its re-sealed form (the same encrypted
  value, its data key sealed by another key) only where the stored value is still the one the caller read, so a
  secret written or deleted meanwhile is left as the writer left it. Each secret's rewrite and its key counts
  change together; the revision is not bumped, since no value changed.

  Input:
    KEYS[1] sealed values   <prefix>{vault}:sealed
    KEYS[2] key use         <prefix>{vault}:keyuse
    ARGV    triples: ref, the sealed value read, the re-sealed value

  Output:
    the number of secrets rewritten (the others changed since they were read)
]]
local function keyid(s) return string.match(s, '^svc:enc:aesgcm:v1:([^:]+):') or '' end
local n = 0
for i = 1, #ARGV, 3 do
  local ref, expected, new = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('HGET', KEYS[1], ref) == expected then
    redis.call('HSET', KEYS[1], ref, new)
    local k = keyid(expected)
    if redis.call('HINCRBY', KEYS[2], k, -1) <= 0 then redis.call('HDEL', KEYS[2], k) end
    redis.call('HINCRBY', KEYS[2], keyid(new), 1)
    n = n + 1
  end
end
return n
