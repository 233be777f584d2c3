--[[
  Records an automation run once per firing: the run key is derived from the firing (a scheduler tick's job
  id, an event id and trigger, a webhook signature), so a retried or duplicated firing finds the run it made.
  The fire_limit is checked in the same step, across every process: a sliding window of the owner's fires
  (a ZSET of run ids scored by fire time); a fire over the limit is recorded `skipped` with reason fire_limit.
  Indexes are capped: the global list keeps the newest ARGV[6] runs (older runs are deleted), each owner's
  history the newest ARGV[7].

  Input:
    KEYS[1] run            <prefix>{auto}:run:<run id>
    KEYS[2] global index   <prefix>{auto}:runs               (ZSET run id -> created ms)
    KEYS[3] owner index    <prefix>{auto}:runs:<job|trigger>:<id>
    KEYS[4] fire window    <prefix>{auto}:fires:<job|trigger>:<id>

    ARGV[1] run json (status queued)
    ARGV[2] run id
    ARGV[3] now, ms since the epoch
    ARGV[4] fire_limit max (0: no limit)
    ARGV[5] fire_limit window, ms
    ARGV[6] global retention (runs)
    ARGV[7] per-owner retention (runs)
    ARGV[8] run key prefix (<prefix>{auto}:run:), to delete runs trimmed from the global index
    ARGV[9] now, RFC 3339

  Output:
    {1, run json} created (its status may be skipped); {0, run json} the firing's run existed already
]]
local existing = redis.call("GET", KEYS[1])
if existing then return {0, existing} end
local now = tonumber(ARGV[3])
local max = tonumber(ARGV[4])
local run = ARGV[1]
if max > 0 then
  redis.call("ZREMRANGEBYSCORE", KEYS[4], "-inf", now - tonumber(ARGV[5]))
  if redis.call("ZCARD", KEYS[4]) >= max then
    local r = cjson.decode(run)
    r.status = "skipped"
    r.reason = "fire_limit"
    r.error = "fire_limit reached: " .. ARGV[4] .. " fires per window"
    r.finished_at = ARGV[9]
    run = cjson.encode(r)
  else
    redis.call("ZADD", KEYS[4], now, ARGV[2])
    redis.call("PEXPIRE", KEYS[4], tonumber(ARGV[5]))
  end
end
redis.call("SET", KEYS[1], run)
redis.call("ZADD", KEYS[2], now, ARGV[2])
redis.call("ZADD", KEYS[3], now, ARGV[2])
local over = redis.call("ZCARD", KEYS[2]) - tonumber(ARGV[6])
if over > 0 then
  local old = redis.call("ZPOPMIN", KEYS[2], over)
  for i = 1, #old, 2 do redis.call("DEL", ARGV[8] .. old[i]) end
end
redis.call("ZREMRANGEBYRANK", KEYS[3], 0, -(tonumber(ARGV[7]) + 1))
return {1, run}
