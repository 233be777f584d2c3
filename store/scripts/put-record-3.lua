--[[
  Creates or updates one resource record with optimistic concurrency, keeps the secondary indexes,
  appends the change to the change log and bumps the global revision, all atomically.
  A write whose scope, owner, source and spec are unchanged keeps the version and writes nothing.

  Input:
    KEYS[1] record hash        <prefix>{r}:rec:<kind>:<id>
    KEYS[2] global revision    <prefix>{r}:revision
    KEYS[3] change log stream  <prefix>{r}:changes

    ARGV[1]  key prefix
    ARGV[2]  kind
    ARGV[3]  id
    ARGV[4]  expected version (0 = create)
    ARGV[5]  scope json
    ARGV[6]  owner json
    ARGV[7]  source json
    ARGV[8]  canonical spec json
    ARGV[9]  scope index suffix  (<scope kind>:<scope id>)
    ARGV[10] owner index suffix  (<owner kind>:<owner id>)
    ARGV[11] source index suffix (<source kind>:<source id>)
    ARGV[12] now, RFC 3339
    ARGV[13] change log retention (approximate MAXLEN)
    ARGV[14] workspace id the scope names, or ""
    ARGV[15] "1" for a dry run (every check, no write)

  Output:
    {1, record json, created (0|1), changed (0|1), revision of the record's last change (0 on a dry run)}
    {-1, current version}   version conflict (stale version, or create over an existing record)
    {-2}                    expected version > 0 on a missing record
    {-3, owner json}        the record is owned by a bundle.activation or an extension and the writer is not that owner
    {-4}                    the workspace named by the scope does not exist
]]
local rkey = KEYS[1]
local prefix, kind, id = ARGV[1], ARGV[2], ARGV[3]
local expected = tonumber(ARGV[4])
local scope, owner, source, spec = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local scopeIx, ownerIx, sourceIx = ARGV[9], ARGV[10], ARGV[11]
local now, retention, workspace, dry = ARGV[12], ARGV[13], ARGV[14], ARGV[15] == "1"

if workspace ~= "" and redis.call("HEXISTS", prefix .. "ws", workspace) == 0 then
  return {-4}
end

local cur = redis.call("HMGET", rkey, "version", "created_at", "digest", "owner", "owner_ix", "scope_ix", "source_ix", "json", "revision")
local version = tonumber(cur[1])
if version == nil then
  if expected > 0 then return {-2} end
else
  -- NOTE: owned children change only through their owner, whatever the version.
  if cur[5] ~= ownerIx and (string.sub(cur[5], 1, 18) == "bundle.activation:" or string.sub(cur[5], 1, 10) == "extension:") then
    return {-3, cur[4]}
  end
  if expected ~= version then return {-1, version} end
end

local digest = redis.sha1hex(scope .. "\n" .. owner .. "\n" .. source .. "\n" .. spec)
if version ~= nil and digest == cur[3] then
  return {1, cur[8], 0, 0, tonumber(cur[9])}
end

local newVersion = (version or 0) + 1
local created = cur[2] or now
local json = '{"kind":"' .. kind .. '","id":"' .. id .. '","scope":' .. scope .. ',"owner":' .. owner ..
  ',"source":' .. source .. ',"spec":' .. spec .. ',"version":' .. newVersion ..
  ',"created_at":"' .. created .. '","updated_at":"' .. now .. '"}'
if dry then
  return {1, json, version == nil and 1 or 0, 1, 0}
end

local member = kind .. " " .. id
if version ~= nil then
  if cur[6] ~= scopeIx then redis.call("ZREM", prefix .. "idx:scope:" .. cur[6], member) end
  if cur[5] ~= ownerIx then redis.call("ZREM", prefix .. "idx:owner:" .. cur[5], member) end
  if cur[7] ~= sourceIx then redis.call("ZREM", prefix .. "idx:source:" .. cur[7], member) end
end
redis.call("ZADD", prefix .. "idx:all", 0, member)
redis.call("ZADD", prefix .. "idx:kind:" .. kind, 0, id)
redis.call("ZADD", prefix .. "idx:scope:" .. scopeIx, 0, member)
redis.call("ZADD", prefix .. "idx:owner:" .. ownerIx, 0, member)
redis.call("ZADD", prefix .. "idx:source:" .. sourceIx, 0, member)

local revision = redis.call("INCR", KEYS[2])
redis.call("HSET", rkey, "version", newVersion, "created_at", created, "digest", digest, "owner", owner,
  "owner_ix", ownerIx, "scope_ix", scopeIx, "source_ix", sourceIx, "json", json, "revision", revision)
redis.call("XADD", KEYS[3], "MAXLEN", "~", retention, revision .. "-0",
  "type", "put", "kind", kind, "id", id, "version", newVersion, "record", json)
return {1, json, version == nil and 1 or 0, 1, revision}
