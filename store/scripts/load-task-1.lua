--[==[
  load-task: reads one task with everything a task-family write starts from, at one instant and in one round trip:
  its hash, its revision (checked again by commit-tasks at commit), the hashes of its runs and the ids of the tasks
  that depend on it. A lease route knows only a run id, so the task may be named by one of its runs instead.

  KEYS[1] the scheduler hash (its hash tag `{tasks}` is the tag of every key this script reads)
  ARGV[1] key prefix (e.g. `svc:{tasks}:`)
  ARGV[2] task id ("" = the task of the run ARGV[3])
  ARGV[3] run id ("" when ARGV[2] names the task)
  NOTE: keys other than KEYS[1] are built from ARGV[1]; they all share the `{tasks}` hash tag (one slot).

  Returns: {task_id, task_fields, revision, {run_fields, ...}, {dependent_id, ...}}, the fields as HGETALL answers
    them; task_fields is empty when the task does not exist; {} when the run ARGV[3] does not exist.
]==]
local prefix = ARGV[1]
local task = ARGV[2]
if task == '' then
  task = redis.call('HGET', prefix .. 'run:' .. ARGV[3], 'task_id')
  if not task then return {} end
end
local fields = redis.call('HGETALL', prefix .. 'task:' .. task)
local rev = redis.call('GET', prefix .. 'trev:' .. task) or '0'
local runs = {}
if #fields > 0 then
  for _, id in ipairs(redis.call('ZRANGE', prefix .. 'runs:' .. task, 0, -1)) do
    local h = redis.call('HGETALL', prefix .. 'run:' .. id)
    if #h > 0 then runs[#runs + 1] = h end
  end
end
return {task, fields, rev, runs, redis.call('SMEMBERS', prefix .. 'dependents:' .. task)}
