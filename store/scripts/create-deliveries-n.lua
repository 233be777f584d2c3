-- create-deliveries: store each notification delivery row whose id is not stored yet (a redelivered bus page never
-- resets a row), index it by time and mark it pending for its bridge (NotificationStore.createDeliveries).
-- KEYS[1] the rows (hash)                  <prefix>{notify}:deliveries
-- KEYS[2] the time index (zset)            <prefix>{notify}:deliveries:by-time
-- KEYS[3..] the bridges' pending sets      <prefix>{notify}:pending:<bridge>
-- ARGV, four per row: id, row JSON, created-at score, index into KEYS of its pending set (0: not pending).
-- Returns 1 for each row created, 0 for each already stored, in order.
-- NOTE: one script rather than a MULTI of three commands per row: a page of rows is one command on the wire, and
-- no pipeline of hundreds of command objects is held until its EXEC answers.
local out = {}
for i = 1, #ARGV, 4 do
  local created = redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[2], 'NX', ARGV[i + 2], ARGV[i])
  local pending = tonumber(ARGV[i + 3])
  if pending > 0 then redis.call('SADD', KEYS[pending], ARGV[i]) end
  out[#out + 1] = created
end
return out
