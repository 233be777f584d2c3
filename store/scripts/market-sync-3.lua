--[[
  Commits one sync of one source's kind: its rows and its state, in one step, so a reader never sees the rows of
  one sync with the state of another. `replace` swaps the whole row set (a full sync), `merge` upserts and drops
  rows (an incremental sync), `state` writes only the state (a failed or unchanged sync keeps its rows). The
  marketplace revision moves whenever rows changed, so each process knows to rebuild its search index.

  Input:
    KEYS[1] rows      <prefix>{market}:rows:<source>:<kind>   hash entry_id -> row json
    KEYS[2] state     <prefix>{market}:state:<source>:<kind>  kind state json
    KEYS[3] revision  <prefix>{market}:rev
    ARGV[1] mode      replace | merge | state
    ARGV[2] state json
    ARGV[3] n         how many entry ids to drop follow
    ARGV[4 .. 3+n]    entry ids to drop (merge)
    ARGV[4+n ..]      entry id, row json pairs

  Output:
    the marketplace revision after the commit
]]
local mode = ARGV[1]
redis.call("SET", KEYS[2], ARGV[2])
if mode == "state" then
  return tonumber(redis.call("GET", KEYS[3]) or "0")
end
if mode == "replace" then redis.call("DEL", KEYS[1]) end
local n = tonumber(ARGV[3])
for i = 4, 3 + n do redis.call("HDEL", KEYS[1], ARGV[i]) end
local first = 4 + n
-- NOTE: HSET in batches: unpack of thousands of arguments would overflow Lua's stack.
local batch = {}
for i = first, #ARGV, 2 do
  batch[#batch + 1] = ARGV[i]
  batch[#batch + 1] = ARGV[i + 1]
  if #batch >= 400 then
    redis.call("HSET", KEYS[1], unpack(batch))
    batch = {}
  end
end
if #batch > 0 then redis.call("HSET", KEYS[1], unpack(batch)) end
return redis.call("INCR", KEYS[3])
