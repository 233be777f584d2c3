-- bus-append: append events to the event bus stream, in order, in one call (EventBus.publishMany).
-- KEYS[1] the stream; ARGV[1] its retention (approximate MAXLEN); ARGV[2..] one event's JSON each.
-- Returns the entry ids, in the order of the events.
local ids = {}
for i = 2, #ARGV do
  ids[#ids + 1] = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'e', ARGV[i])
end
return ids
