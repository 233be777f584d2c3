--[[
  Records what a reported model catalog source (an ACP agent's session/new answer: `acp_session`) says, for one
  (source, provider): its status and rows, and bumps the catalog revision. Sessions start often and mostly report
  the same list, so a report whose digest equals the stored one, within `refresh ms` of the last write, writes
  nothing (no revision bump: no process rebuilds its merged catalog); a later one rewrites the times only. The
  reported sources are bounded: past `max sources`, the least recently written one is removed, rows and status.

  Input:
    KEYS[1] rows hash      <prefix>{models}:rows      field <source id>|<provider id> → rows json (a list)
    KEYS[2] status hash    <prefix>{models}:status    field <source id>|<provider id> → status json (has `digest`)
    KEYS[3] revision       <prefix>{models}:rev
    KEYS[4] reported zset  <prefix>{models}:reported  member <source id>|<provider id>, score = last write (ms)
    ARGV[1] field          <source id>|<provider id>
    ARGV[2] status json    (its `digest` is compared with the stored status's)
    ARGV[3] rows json      ("[]" = no rows)
    ARGV[4] digest
    ARGV[5] now (ms)
    ARGV[6] refresh ms     (an unchanged report rewrites the times at most this often)
    ARGV[7] max sources    (of this zset)

  Output:
    0  unchanged: nothing written
    1  the same models, times rewritten (revision bumped)
    2  the models changed (revision bumped)
]]
local now = tonumber(ARGV[5])
local prev = redis.call("HGET", KEYS[2], ARGV[1])
local same = false
if prev then
  local ok, decoded = pcall(cjson.decode, prev)
  same = ok and type(decoded) == "table" and decoded["digest"] == ARGV[4]
end
local written = redis.call("ZSCORE", KEYS[4], ARGV[1])
if same and written and now - tonumber(written) < tonumber(ARGV[6]) then
  return 0
end
redis.call("HSET", KEYS[2], ARGV[1], ARGV[2])
if ARGV[3] == "[]" then
  redis.call("HDEL", KEYS[1], ARGV[1])
else
  redis.call("HSET", KEYS[1], ARGV[1], ARGV[3])
end
redis.call("ZADD", KEYS[4], now, ARGV[1])
local over = redis.call("ZCARD", KEYS[4]) - tonumber(ARGV[7])
if over > 0 then
  -- the oldest `over` other than the one just written (scores may tie within a millisecond)
  for _, field in ipairs(redis.call("ZRANGE", KEYS[4], 0, over)) do
    if over > 0 and field ~= ARGV[1] then
      redis.call("HDEL", KEYS[1], field)
      redis.call("HDEL", KEYS[2], field)
      redis.call("ZREM", KEYS[4], field)
      over = over - 1
    end
  end
end
redis.call("INCR", KEYS[3])
if same then
  return 1
end
return 2
