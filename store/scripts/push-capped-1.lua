-- push-capped: put one entry at the head of a list kept to its newest entries (the hook runs and dead letters).
-- KEYS[1] the list; ARGV[1] how many entries it keeps; ARGV[2] the entry.
-- NOTE: one script instead of MULTI LPUSH LTRIM EXEC: one command on the wire and no pipeline to build per run.
redis.call('LPUSH', KEYS[1], ARGV[2])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[1]) - 1)
return 1
