"""The circuit breaker's Lua scripts (:mod:`acquirers.breaker`): each
transition runs atomically in Redis, whatever the number of processes."""

# KEYS[1] breaker hash. ARGV: now, probe lease (s).
# Returns {decision, time}: closed | open (time: end of cool-down) |
# probing (another call holds the probe; time: end of its lease) | probe.
ADMIT = """
local s = redis.call('HMGET', KEYS[1], 'state', 'open_until', 'probe_until')
if not s[1] or s[1] == 'closed' then
  return {'closed', ''}
end
local now = tonumber(ARGV[1])
if now < tonumber(s[2] or '0') then
  return {'open', s[2]}
end
if s[3] and now < tonumber(s[3]) then
  return {'probing', s[3]}
end
redis.call('HSET', KEYS[1], 'state', 'half_open', 'probe_until', string.format('%.3f', now + tonumber(ARGV[2])))
return {'probe', ''}
"""

# KEYS[1] breaker hash, KEYS[2] recent calls. ARGV: now, healthy (1/0),
# latency ms, decisive (1/0: the probe or a forced call), failures in a row
# to open, failure rate to open, minimum calls for the rate, window (s),
# cool-down (s), samples kept, ttl (s).
# Returns {transition, failures in a row, state after}: transition is '' |
# opened | reopened | closed.
RECORD = """
local now = tonumber(ARGV[1])
redis.call('LPUSH', KEYS[2], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[10]) - 1)
redis.call('EXPIRE', KEYS[2], ARGV[11])
local state = redis.call('HGET', KEYS[1], 'state') or 'closed'
local decisive = ARGV[4] == '1'
local open_until = string.format('%.3f', now + tonumber(ARGV[9]))
local transition = ''
local failures = 0
if ARGV[2] == '1' then
  if state == 'closed' then
    redis.call('HSET', KEYS[1], 'failures', '0')
  elseif decisive then
    redis.call('HSET', KEYS[1], 'state', 'closed', 'failures', '0', 'closed_at', ARGV[1])
    redis.call('HDEL', KEYS[1], 'opened_at', 'open_until', 'probe_until')
    transition = 'closed'
  end
else
  failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
  if state ~= 'closed' then
    -- Calls let through before the circuit opened may still be answering:
    -- only the probe (or a forced call) decides.
    if decisive then
      redis.call('HSET', KEYS[1], 'state', 'open', 'open_until', open_until)
      redis.call('HDEL', KEYS[1], 'probe_until')
      redis.call('HINCRBY', KEYS[1], 'opens', 1)
      transition = 'reopened'
    end
  else
    local trip = failures >= tonumber(ARGV[5])
    if not trip then
      -- Only calls since the circuit last closed: the failures that opened
      -- it must not open it again on the first failure after a good probe.
      local since = math.max(now - tonumber(ARGV[8]), tonumber(redis.call('HGET', KEYS[1], 'closed_at') or '0'))
      local calls, failed = 0, 0
      for _, entry in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
        local at, healthy = string.match(entry, '^(%S+) (%S+)')
        if tonumber(at) >= since then
          calls = calls + 1
          if healthy == '0' then failed = failed + 1 end
        end
      end
      trip = calls >= tonumber(ARGV[7]) and failed >= tonumber(ARGV[6]) * calls
    end
    if trip then
      redis.call('HSET', KEYS[1], 'state', 'open', 'opened_at', ARGV[1], 'open_until', open_until)
      redis.call('HINCRBY', KEYS[1], 'opens', 1)
      transition = 'opened'
    end
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[11])
return {transition, tostring(failures), redis.call('HGET', KEYS[1], 'state') or 'closed'}
"""
