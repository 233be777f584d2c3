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
    enqueue: [[task_id, run_id, attempt, max_attempts]]  -- runs this plan creates (their hash is in `hset`)
  }
  NOTE: keys other than KEYS[1] are built from ARGV[1]; they all share the `{tasks}` hash tag (one slot).

  The run rule (README "Tasks", "One task, one live run"): a task has at most one live run (queued, claimed,
  starting, running), and its attempts are unique, increasing and at most max_attempts. It is checked here, on the
  state as this plan leaves it, so no plan can break it, whichever replica or code path built it.

  Returns a table whose first element is the code:
    {1} committed; {0} a task changed since it was read; {-1} an `absent` key exists; {-2} the scheduler is paused;
    {-3, task_id, run_id, status}   the task already has the live run `run_id`;
    {-4, task_id, attempt, max}     the new run's attempt is over the task's max_attempts;
    {-5, task_id, attempt, run_id}  the run `run_id` already has this attempt number or a later one.
  Nothing is written unless the code is 1.
]==]
local prefix = ARGV[1]
local plan = cjson.decode(ARGV[2])
for _, c in ipairs(plan.checks or {}) do
  local cur = redis.call('GET', prefix .. 'trev:' .. c[1]) or '0'
  if cur ~= tostring(c[2]) then return {0} end
end
if plan.open then
  local sched = redis.call('HMGET', KEYS[1], 'paused', 'draining')
  if sched[1] == '1' or sched[2] == '1' then return {-2} end
end
for _, k in ipairs(plan.absent or {}) do
  if redis.call('EXISTS', k) == 1 then return {-1} end
end
if plan.enqueue then
  local live = {queued = true, claimed = true, starting = true, running = true}
  -- NOTE: a run this plan ends (a failed run and its retry in one plan) counts with the status the plan writes.
  local planned = {}
  for _, h in ipairs(plan.hset or {}) do
    for i = 1, #h[2], 2 do if h[2][i] == 'status' then planned[h[1]] = h[2][i + 1] end end
  end
  local fresh = {}
  for _, e in ipairs(plan.enqueue) do
    local task, run, attempt, max = e[1], e[2], tonumber(e[3]), tonumber(e[4])
    if attempt > max then return {-4, task, tostring(attempt), tostring(max)} end
    local others = redis.call('ZRANGE', prefix .. 'runs:' .. task, 0, -1)
    for _, f in ipairs(fresh[task] or {}) do others[#others + 1] = f end
    for _, id in ipairs(others) do
      if id ~= run then
        local key = prefix .. 'run:' .. id
        local st = redis.call('HMGET', key, 'status', 'attempt')
        local status = planned[key] or st[1]
        if live[status] then return {-3, task, id, status} end
        if tonumber(st[2] or '0') >= attempt then return {-5, task, tostring(attempt), id} end
      end
    end
    fresh[task] = fresh[task] or {}
    table.insert(fresh[task], run)
  end
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
return {1}
