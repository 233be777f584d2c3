--[[
  Appends one line to a scope's daily log (append-only), rotating to the next segment `{date}.{seq}.md` when the
  line would take the current one past its line or byte limit (5000 lines, 1 MiB).

  Input:
    KEYS[1] daily index      <prefix>{mem}:daily                        (hash "<partition> <date>" -> {seq, lines, bytes} json)
    KEYS[2] segment          <prefix>{mem}:dl:<partition>:<date>:<seq>    (list of lines: the segment the caller read as current)
    KEYS[3] next segment     <prefix>{mem}:dl:<partition>:<date>:<seq+1>

    ARGV[1] "<partition> <date>"
    ARGV[2] the seq the caller read (1 when the day has no log yet)
    ARGV[3] line
    ARGV[4] max lines
    ARGV[5] max bytes

  Output:
    {1, seq}   appended to segment seq
    {0, seq}   the current segment is not the one the caller read (another writer rotated): nothing stored
]]
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local meta = raw and cjson.decode(raw) or { seq = 1, lines = 0, bytes = 0 }
if tonumber(meta.seq) ~= tonumber(ARGV[2]) then return {0, meta.seq} end
local len = string.len(ARGV[3]) + 1
local key = KEYS[2]
if meta.lines > 0 and (meta.lines + 1 > tonumber(ARGV[4]) or meta.bytes + len > tonumber(ARGV[5])) then
  meta = { seq = meta.seq + 1, lines = 0, bytes = 0 }
  key = KEYS[3]
end
redis.call('RPUSH', key, ARGV[3])
meta.lines = meta.lines + 1
meta.bytes = meta.bytes + len
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(meta))
return {1, meta.seq}
