--[[
  Creates or updates a workspace, keeping its root directory and name unique.

  Input:
    KEYS[1] workspaces hash   <prefix>{r}:ws        (id -> workspace json)
    KEYS[2] roots hash        <prefix>{r}:ws:root   (root_dir -> id)
    KEYS[3] names hash        <prefix>{r}:ws:name   (name -> id)

    ARGV[1] workspace id
    ARGV[2] workspace json
    ARGV[3] root_dir
    ARGV[4] name
    ARGV[5] "create" or "update"

  Output:
     1  written
    -1  root_dir already belongs to another workspace
    -2  name already belongs to another workspace
    -3  update of a missing workspace
]]
local id, json, root, name = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local old = redis.call("HGET", KEYS[1], id)
if ARGV[5] == "update" and not old then return -3 end
local rootOwner = redis.call("HGET", KEYS[2], root)
if rootOwner and rootOwner ~= id then return -1 end
local nameOwner = redis.call("HGET", KEYS[3], name)
if nameOwner and nameOwner ~= id then return -2 end
if old then
  local prev = cjson.decode(old)
  redis.call("HDEL", KEYS[2], prev.root_dir)
  redis.call("HDEL", KEYS[3], prev.name)
end
redis.call("HSET", KEYS[1], id, json)
redis.call("HSET", KEYS[2], root, id)
redis.call("HSET", KEYS[3], name, id)
return 1
