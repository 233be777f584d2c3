--[[
  Writes one model catalog source's state for one provider: its status and, unless told to keep them, its rows,
  and bumps the catalog revision, so every process's cached merge sees both change together (one step: a reader
  never sees new rows under an old status, or a revision that does not cover them).

  Input:
    KEYS[1] rows hash      <prefix>{models}:rows     field <source id>|<provider id> → rows json (a list)
    KEYS[2] status hash    <prefix>{models}:status   field <source id>|<provider id> → status json
    KEYS[3] revision       <prefix>{models}:rev
    ARGV[1] field          <source id>|<provider id>
    ARGV[2] status json
    ARGV[3] rows json      ("" = keep the rows as they are; "[]" = no rows)

  Output:
    the new catalog revision
]]
redis.call("HSET", KEYS[2], ARGV[1], ARGV[2])
if ARGV[3] ~= "" then
  if ARGV[3] == "[]" then
    redis.call("HDEL", KEYS[1], ARGV[1])
  else
    redis.call("HSET", KEYS[1], ARGV[1], ARGV[3])
  end
end
return redis.call("INCR", KEYS[3])
