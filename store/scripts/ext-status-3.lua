--[[
  Writes one extension daemon's observed status, only while the writer holds the extension's lease, so a runtime
  whose lease lapsed (a paused or partitioned process) never overwrites what the new holder reports.

  Input:
    KEYS[1] lease            <prefix>{ext}:lease:<name>
    KEYS[2] statuses         <prefix>{ext}:status   hash name -> status json
    KEYS[3] status revision  <prefix>{ext}:status-rev
    ARGV[1] the writer's lease token
    ARGV[2] name
    ARGV[3] status json ("" = remove)

  Output:
    1 written, 0 the writer does not hold the lease (unchanged)
]]
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] == "" then
  redis.call("HDEL", KEYS[2], ARGV[2])
else
  redis.call("HSET", KEYS[2], ARGV[2], ARGV[3])
end
redis.call("INCR", KEYS[3])
return 1
