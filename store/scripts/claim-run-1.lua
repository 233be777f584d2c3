--[==[
  claim-run: claims the first eligible queued run of one queue for a caller session, in one atomic step:
  no other claimer can see the run between the choice and the write.

  KEYS[1] the scheduler hash ({paused, draining})
  ARGV[1] key prefix (`svc:{tasks}:`; every key shares the `{tasks}` hash tag)
  ARGV[2] queue key (one sorted set per scope: global or one workspace)
  ARGV[3] now (ms)          ARGV[4] now (ISO-8601)
  ARGV[5] caller session id ARGV[6] caller capabilities (JSON array)
  ARGV[7] caller channel ("" = none)   ARGV[8] max score (from priority_min; "+inf" = any)
  ARGV[9] lease length (ms) ARGV[10] claim token hash (`sha256:<hex>`)
  ARGV[11] idempotency key ("" = none)  ARGV[12] claimed_by JSON
  ARGV[13] scan limit (queue entries looked at before giving up)
  ARGV[14] mode: "" claims; "peek" only chooses (no write), so a pre_claim hook can judge the run first
  ARGV[15] target run id ("" = the best of the queue): claim only this run, if it is still queued and eligible
  ARGV[16] the caller session's agent name (kept on the run, so the run's events name their agent)
  ARGV[17] "1": answer the claimed run's and task's hashes too (the API's answer), so it needs no second read, and
    the task's revision, runs and dependents (load-task-1.lua's answer)

  Queue order: score = band * 1e13 + queued_at ms, band 0 = urgent .. 3 = low (priority rank descending, then
  queued_at ascending); equal scores order by member = run id. Among eligible runs of the best band the one
  matching most of the caller's capabilities among the task's preferred_capabilities wins (first on ties).

  Returns: {'ok', run_id, task_id[, run_fields, task_fields, revision, {run_fields, ...}, {dependent_id, ...}]}
    | {'peek', run_id, task_id} | {'idem', run_id} | {'held', run_id} | {'paused'} | {'none'}. With ARGV[17] "1",
    run_fields and task_fields are the claimed run's and its task's hashes as written (HGETALL), then come the
    task's revision after the claim, the hashes of all its runs (the claimed one among them) and its dependents.
]==]
local prefix, queue = ARGV[1], ARGV[2]
local now = tonumber(ARGV[3])
local sid = ARGV[5]
local sched = redis.call('HMGET', KEYS[1], 'paused', 'draining')
if sched[1] == '1' or sched[2] == '1' then return {'paused'} end
if ARGV[11] ~= '' then
  local prior = redis.call('GET', ARGV[11])
  if prior then return {'idem', prior} end
end
local held = redis.call('GET', prefix .. 'slease:' .. sid)
if held then
  local st = redis.call('HMGET', prefix .. 'run:' .. held, 'status', 'session_id', 'lease_until_ms')
  if (st[1] == 'claimed' or st[1] == 'starting' or st[1] == 'running') and st[2] == sid and tonumber(st[3] or '0') > now then
    return {'held', held}
  end
end
local caps = {}
for _, c in ipairs(cjson.decode(ARGV[6])) do caps[c] = true end
local channel = ARGV[7]
local limit = tonumber(ARGV[13])

local function eligible(task)
  local t = redis.call('HMGET', prefix .. 'task:' .. task, 'status', 'paused', 'parent_task_id', 'required_capabilities', 'network_channel', 'preferred_capabilities')
  if t[1] == false or t[1] == 'draft' or t[1] == 'blocked' or t[1] == 'canceled' or t[1] == 'pending' then return nil end
  if t[2] == '1' then return nil end
  local parent, depth = t[3], 0
  while parent and parent ~= '' and depth < 16 do
    local p = redis.call('HMGET', prefix .. 'task:' .. parent, 'paused', 'parent_task_id')
    if p[1] == '1' then return nil end
    parent, depth = p[2], depth + 1
  end
  if t[4] and t[4] ~= '' and t[4] ~= '[]' then
    for _, c in ipairs(cjson.decode(t[4])) do if not caps[c] then return nil end end
  end
  local ch = t[5] or ''
  if (ch ~= '' or channel ~= '') and ch ~= channel then return nil end
  local pref = 0
  if t[6] and t[6] ~= '' and t[6] ~= '[]' then
    for _, c in ipairs(cjson.decode(t[6])) do if caps[c] then pref = pref + 1 end end
  end
  return pref
end

local best, bestTask, bestPref, bestBand = nil, nil, -1, nil
local target = ARGV[15] or ''
if target ~= '' then
  -- NOTE: the run chosen by a peek: claimed only if it is still queued here, in range and eligible.
  local score = redis.call('ZSCORE', queue, target)
  local max = ARGV[8] == '+inf' and math.huge or tonumber(ARGV[8])
  if score and tonumber(score) <= max then
    local r = redis.call('HMGET', prefix .. 'run:' .. target, 'status', 'task_id')
    if r[1] == 'queued' and eligible(r[2]) then best, bestTask = target, r[2] end
  end
  limit = 0
end
-- NOTE: pages start small (the head of the queue is usually eligible) and grow when runs are skipped.
local offset, seen, size = 0, 0, 8
while seen < limit do
  local page = redis.call('ZRANGEBYSCORE', queue, '-inf', ARGV[8], 'WITHSCORES', 'LIMIT', offset, size)
  if #page == 0 then break end
  local stop = false
  for i = 1, #page, 2 do
    local id, band = page[i], math.floor(tonumber(page[i + 1]) / 1e13)
    seen = seen + 1
    if best and band ~= bestBand then stop = true break end
    local r = redis.call('HMGET', prefix .. 'run:' .. id, 'status', 'task_id')
    if r[1] ~= 'queued' then
      -- NOTE: a stale member (run gone or no longer queued) is dropped here; it cannot be claimed.
      redis.call('ZREM', queue, id)
      offset = offset - 1
    else
      local pref = eligible(r[2])
      if pref and pref > bestPref then best, bestTask, bestPref, bestBand = id, r[2], pref, band end
      -- NOTE: a run with no preferred capabilities (or when the caller has none) cannot be bettered later.
      if best and pref and bestPref == 0 and next(caps) == nil then stop = true break end
    end
    if seen >= limit then break end
  end
  if stop then break end
  offset = offset + size
  size = math.min(size * 4, 128)
end
if not best then return {'none'} end
if ARGV[14] == 'peek' then return {'peek', best, bestTask} end

local untilMs = now + tonumber(ARGV[9])
local runKey = prefix .. 'run:' .. best
redis.call('HSET', runKey, 'status', 'claimed', 'claimed_at', ARGV[4], 'heartbeat_at', ARGV[4], 'session_id', sid,
  'claimed_by', ARGV[12], 'claim_token_hash', ARGV[10], 'lease_until_ms', untilMs, 'lease_ms', ARGV[9], 'agent_name', ARGV[16])
redis.call('ZREM', queue, best)
redis.call('ZADD', prefix .. 'leases', untilMs, best)
redis.call('SET', prefix .. 'slease:' .. sid, best)
redis.call('INCR', prefix .. 'trev:' .. bestTask)
if ARGV[11] ~= '' then redis.call('SET', ARGV[11], best, 'EX', 86400) end
if ARGV[17] ~= '1' then return {'ok', best, bestTask} end
-- NOTE: the task as load-task-1.lua reads it too (revision, runs, dependents): the claimer's process starts the
-- lease's next write (a completion) from it instead of reading it again; the commit checks the revision.
local runs = {}
for _, id in ipairs(redis.call('ZRANGE', prefix .. 'runs:' .. bestTask, 0, -1)) do
  local h = redis.call('HGETALL', prefix .. 'run:' .. id)
  if #h > 0 then runs[#runs + 1] = h end
end
return {'ok', best, bestTask, redis.call('HGETALL', runKey), redis.call('HGETALL', prefix .. 'task:' .. bestTask),
  redis.call('GET', prefix .. 'trev:' .. bestTask), runs, redis.call('SMEMBERS', prefix .. 'dependents:' .. bestTask)}
