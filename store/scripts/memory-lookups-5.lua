--[[
  Builds a partition's lookup index and injection set from its memories, once: for memories written before the
  apply script kept them (memory-apply-13.lua answers 4 until this ran). The caller read the partition and the
  revision first; when any memory was applied since, nothing is stored and the caller reads again.

  Input:
    KEYS[1] partition records <prefix>{mem}:m:<partition>
    KEYS[2] lookups           <prefix>{mem}:x:<partition>
    KEYS[3] injection         <prefix>{mem}:i:<partition>
    KEYS[4] lookups built     <prefix>{mem}:xparts
    KEYS[5] revision          <prefix>{mem}:rev

    ARGV[1] partition
    ARGV[2] the revision the caller read
    ARGV[3] "\n"-joined filenames marked injection
    ARGV[4..] lookup field, "\n"-joined filenames, ... (pairs)

  Output:
    1  built (or it was built already: nothing changed)
    0  the revision moved since the caller read: nothing stored
]]
if redis.call('SISMEMBER', KEYS[4], ARGV[1]) == 1 then return 1 end
if tostring(redis.call('GET', KEYS[5]) or '0') ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[2], KEYS[3])
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
for f in string.gmatch(ARGV[3], '[^\n]+') do redis.call('SADD', KEYS[3], f) end
redis.call('SADD', KEYS[4], ARGV[1])
return 1
