--[[
  Deletes a workspace and its root and name entries. Its workspace-scoped records are deleted afterwards by
  the caller, one record script each, so every deletion reaches the change log; new writes to the
  workspace's scope already fail because the workspace is gone.

  Input:
    KEYS[1] workspaces hash   <prefix>{r}:ws
    KEYS[2] roots hash        <prefix>{r}:ws:root
    KEYS[3] names hash        <prefix>{r}:ws:name

    ARGV[1] workspace id

  Output:
     1  deleted
    -1  no such workspace
]]
local old = redis.call("HGET", KEYS[1], ARGV[1])
if not old then return -1 end
local prev = cjson.decode(old)
redis.call("HDEL", KEYS[1], ARGV[1])
redis.call("HDEL", KEYS[2], prev.root_dir)
redis.call("HDEL", KEYS[3], prev.name)
return 1
