--[[
  Deletes one resource record at its current version, removes it from the secondary indexes and its
  status, appends the deletion to the change log and bumps the global revision, all atomically.

  Input:
    KEYS[1] record hash        <prefix>{r}:rec:<kind>:<id>
    KEYS[2] global revision    <prefix>{r}:revision
    KEYS[3] change log stream  <prefix>{r}:changes
    KEYS[4] status             <prefix>{r}:status:<kind>:<id>

    ARGV[1] key prefix
    ARGV[2] kind
    ARGV[3] id
    ARGV[4] expected version
    ARGV[5] change log retention (approximate MAXLEN)
    ARGV[6] "1" for a dry run (every check, no write)

  Output:
    {1, record json, revision}   deleted (revision 0 on a dry run)
    {-1, current version}        stale expected version
    {-2}                         no such record
]]
local rkey = KEYS[1]
local prefix, kind, id = ARGV[1], ARGV[2], ARGV[3]
local expected = tonumber(ARGV[4])

local cur = redis.call("HMGET", rkey, "version", "json", "scope_ix", "owner_ix", "source_ix")
local version = tonumber(cur[1])
if version == nil then return {-2} end
if expected ~= version then return {-1, version} end
if ARGV[6] == "1" then return {1, cur[2], 0} end

local member = kind .. " " .. id
redis.call("ZREM", prefix .. "idx:all", member)
redis.call("ZREM", prefix .. "idx:kind:" .. kind, id)
redis.call("ZREM", prefix .. "idx:scope:" .. cur[3], member)
redis.call("ZREM", prefix .. "idx:owner:" .. cur[4], member)
redis.call("ZREM", prefix .. "idx:source:" .. cur[5], member)
redis.call("DEL", rkey, KEYS[4])

local revision = redis.call("INCR", KEYS[2])
redis.call("XADD", KEYS[3], "MAXLEN", "~", ARGV[5], revision .. "-0",
  "type", "delete", "kind", kind, "id", id, "version", version, "record", cur[2])
return {1, cur[2], revision}
