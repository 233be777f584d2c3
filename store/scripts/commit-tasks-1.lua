--[==[
  commit-tasks: applies one task-family write plan atomically, if every task it read is unchanged (optimistic
  concurrency: the service reads tasks and runs, computes the change with pure functions, and commits here).

  KEYS[1] the scheduler hash (its hash tag `{tasks}` is the tag of every key this script touches)
  ARGV[1] key prefix (e.g. `svc:{tasks}:`)
  ARGV[2] plan JSON: {
    checks: [[task_id, rev]]       -- each task's revision must still be `rev` ("0" = must not exist)
    absent: [key]                  -- keys that must not exist (idempotency keys)
    hset:   [[key, [f, v, ...]]]   -- fields to write (a value of "" is stored as "")
    del:    [key]
    set:    [[key, value, ttl_seconds]]   -- ttl 0 = none
    zadd:   [[key, score, member]]
    zrem:   [[key, member]]
    sadd:   [[key, member]]
    srem:   [[key, member]]
    delif:  [[key, value]]          -- delete key only if it still holds value (a session's lease pointer)
    open:   true                    -- the scheduler must be neither paused nor draining (an operator claim)
  }
  NOTE: keys other than KEYS[1] are built from ARGV[1]; they all share the `{tasks}` hash tag (one slot).

  Returns: 1 committed; 0 a task changed since it was read; -1 an `absent` key exists; -2 the scheduler is paused.
]==]
local prefix = ARGV[1]
local plan = cjson.decode(ARGV[2])
for _, c in ipairs(plan.checks or {}) do
  local cur = redis.call('GET', prefix .. 'trev:' .. c[1]) or '0'
  if cur ~= tostring(c[2]) then return 0 end
end
if plan.open then
  local sched = redis.call('HMGET', KEYS[1], 'paused', 'draining')
  if sched[1] == '1' or sched[2] == '1' then return -2 end
end
for _, k in ipairs(plan.absent or {}) do
  if redis.call('EXISTS', k) == 1 then return -1 end
end
for _, k in ipairs(plan.del or {}) do redis.call('DEL', k) end
for _, h in ipairs(plan.hset or {}) do
  if #h[2] > 0 then redis.call('HSET', h[1], unpack(h[2])) end
end
for _, s in ipairs(plan.set or {}) do
  if tonumber(s[3]) and tonumber(s[3]) > 0 then redis.call('SET', s[1], s[2], 'EX', s[3]) else redis.call('SET', s[1], s[2]) end
end
for _, z in ipairs(plan.zadd or {}) do redis.call('ZADD', z[1], z[2], z[3]) end
for _, z in ipairs(plan.zrem or {}) do redis.call('ZREM', z[1], z[2]) end
for _, s in ipairs(plan.sadd or {}) do redis.call('SADD', s[1], s[2]) end
for _, s in ipairs(plan.srem or {}) do redis.call('SREM', s[1], s[2]) end
for _, d in ipairs(plan.delif or {}) do
  if redis.call('GET', d[1]) == d[2] then redis.call('DEL', d[1]) end
end
for _, c in ipairs(plan.checks or {}) do redis.call('INCR', prefix .. 'trev:' .. c[1]) end
return 1
