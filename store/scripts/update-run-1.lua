--[[
  Moves a run on (an automation run, a support bundle operation): merges the patch into the run when its current
  status is one of the expected ones (a compare-and-set on status, so two workers cannot both finish or both start
  the same run). The key keeps its time to live (a support bundle operation expires 24 h after it was asked for).

  Input:
    KEYS[1] run            <prefix>{auto}:run:<run id> or <prefix>{support}:op:<operation id>
    ARGV[1] patch json     (top-level fields to set)
    ARGV[2] expected statuses, comma-separated ("" = any)

  Output:
    {1, run json} updated; {0, run json} its status was not expected (unchanged); {-1} no such run
]]
local raw = redis.call("GET", KEYS[1])
if not raw then return {-1} end
local run = cjson.decode(raw)
if ARGV[2] ~= "" then
  local ok = false
  for s in string.gmatch(ARGV[2], "[^,]+") do
    if s == run.status then ok = true end
  end
  if not ok then return {0, raw} end
end
for k, v in pairs(cjson.decode(ARGV[1])) do run[k] = v end
local out = cjson.encode(run)
redis.call("SET", KEYS[1], out, "KEEPTTL")
return {1, out}
