--[[
  Advances one loop run in one atomic step: the only writer of a run's state (runtime/loops/engine.ts). It checks
  every expectation first (the run's status, generation, active gate; each node record's version), then applies the
  status transition (checked against the run status table, the same as runtime/loops/types.ts TRANSITIONS),
  the run's fields and counters, the node records, and appends the step's events (each with the next `sequence`).
  Nothing is written when any check fails. All keys share the run's hash tag `{loop:<run id>}`.

  Input:
    KEYS[1] run hash        <prefix>{loop:<id>}:run
    KEYS[2] node records    <prefix>{loop:<id>}:nodes   (field "<generation>:<node id>:<item index>" -> record json)
    KEYS[3] events stream   <prefix>{loop:<id>}:events  (entry id "<seq>-0"; fields k kind, p payload json, t at)
    KEYS[4] definition      <prefix>{loop:<id>}:def     (the executed definition json, written once at create)

    ARGV[1] step json:
      create      {run: {field: string}, def: string}   the run must not exist
      expect      {status?: [s], generation?: n, active_gate_id?: s, not_status?: [s], fields?: {field: value}}
      transition  {to: s, cause: s, reason?: s}         status_changed is appended with {status, from, cause, reason}
      set         {field: string}                        run fields
      incr        {field: n}                             run counters (HINCRBY)
      nodes       list of (field, expected version (0 = absent), record json starting {"v":<version+1>,)
      events      list of (kind, payload json)           appended after status_changed
      at          RFC 3339 time of the step
      retain_ms   on a transition to a terminal status: every key of the run expires after this (0 = kept)

  Output:
    {1, last seq, status}             applied
    {-1}                              no such run (or, with create, the run exists)
    {-2, field, actual}               a run expectation failed (nothing written)
    {-3, from, to, cause}             the transition is not allowed (nothing written)
    {-4, node field, actual version}  a node record changed since it was read (nothing written)
]]
local step = cjson.decode(ARGV[1])
local exists = redis.call("EXISTS", KEYS[1]) == 1

if step.create then
  if exists then return {-1} end
else
  if not exists then return {-1} end
end

local TERMINAL = {done = true, ["no-op"] = true, blocked = true, failed = true, exhausted = true, stalled = true}
local ALLOWED = {
  queued = {running = true, failed = "operator_stop"},
  running = {watching = true, ["needs-approval"] = true, paused = true},
  watching = {running = true, ["needs-approval"] = true},
  ["needs-approval"] = {running = true, blocked = true, failed = "operator_stop"},
  paused = {running = true, failed = "operator_stop"},
}
for t, _ in pairs(TERMINAL) do
  ALLOWED.running[t] = true
  ALLOWED.watching[t] = true
end

local status = exists and redis.call("HGET", KEYS[1], "status") or ""
if step.create then status = step.create.run.status end

local e = step.expect
if e then
  if e.status then
    local ok = false
    for _, s in ipairs(e.status) do if s == status then ok = true end end
    if not ok then return {-2, "status", status} end
  end
  if e.not_status then
    for _, s in ipairs(e.not_status) do if s == status then return {-2, "status", status} end end
  end
  if e.generation then
    local g = tonumber(redis.call("HGET", KEYS[1], "generation") or "0")
    if g ~= tonumber(e.generation) then return {-2, "generation", tostring(g)} end
  end
  if e.fields then
    for k, v in pairs(e.fields) do
      local a = redis.call("HGET", KEYS[1], k) or ""
      if a ~= v then return {-2, k, a} end
    end
  end
  if e.active_gate_id then
    local a = redis.call("HGET", KEYS[1], "active_gate_id") or ""
    if a ~= e.active_gate_id then return {-2, "active_gate_id", a} end
  end
end

local tr = step.transition
if tr then
  local edge = ALLOWED[status] and ALLOWED[status][tr.to]
  if not edge or (edge ~= true and edge ~= tr.cause) then return {-3, status, tr.to, tr.cause} end
end

if step.nodes then
  for _, n in ipairs(step.nodes) do
    local cur = redis.call("HGET", KEYS[2], n[1])
    local v = 0
    -- NOTE: the engine writes every record as {"v":<version>,...}, so the version is read without decoding it.
    if cur then v = tonumber(string.match(cur, '^{"v":(%d+)') or "0") end
    if v ~= tonumber(n[2]) then return {-4, n[1], tostring(v)} end
  end
end

-- every check passed: write
if step.create then
  local flat = {}
  for k, v in pairs(step.create.run) do flat[#flat + 1] = k; flat[#flat + 1] = v end
  redis.call("HSET", KEYS[1], unpack(flat))
  redis.call("SET", KEYS[4], step.create.def)
end
if step.set then
  local flat = {}
  for k, v in pairs(step.set) do flat[#flat + 1] = k; flat[#flat + 1] = v end
  if #flat > 0 then redis.call("HSET", KEYS[1], unpack(flat)) end
end
if step.incr then
  for k, v in pairs(step.incr) do redis.call("HINCRBY", KEYS[1], k, v) end
end
if step.nodes then
  for _, n in ipairs(step.nodes) do redis.call("HSET", KEYS[2], n[1], n[3]) end
end

local seq = tonumber(redis.call("HGET", KEYS[1], "event_seq") or "0")
local function append(kind, payload)
  seq = seq + 1
  redis.call("XADD", KEYS[3], tostring(seq) .. "-0", "k", kind, "p", payload, "t", step.at)
end
if tr then
  redis.call("HSET", KEYS[1], "status", tr.to, "status_cause", tr.cause, "status_reason", tr.reason or "", "updated_at", step.at)
  append("status_changed", cjson.encode({status = tr.to, from = status, cause = tr.cause, reason = tr.reason or ""}))
  if TERMINAL[tr.to] then redis.call("HSET", KEYS[1], "ended_at", step.at) end
end
if step.events then
  for _, ev in ipairs(step.events) do append(ev[1], ev[2]) end
end
redis.call("HSET", KEYS[1], "event_seq", seq)
local final = tr and tr.to or status
if tr and TERMINAL[tr.to] and tonumber(step.retain_ms or 0) > 0 then
  for i = 1, 4 do redis.call("PEXPIRE", KEYS[i], step.retain_ms) end
end
return {1, seq, final}
