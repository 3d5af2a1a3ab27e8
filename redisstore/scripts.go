package redisstore

import "github.com/redis/go-redis/v9"

// Redis runs Lua 5.1, whose numbers are doubles: exact to 2^53, while unix nanoseconds (about 1.8e18)
// need 61 bits. The scripts therefore never turn a stored time into one number: timeLua splits a
// decimal int64 string into whole seconds (at most 9223372036) and nanoseconds (below 1e9), both exact
// in a double, and compares and adds those pairs. The schedule is exact to the nanosecond.
const timeLua = `
local E9 = 1000000000
local MAXS, MAXN = 9223372036, 854775807   -- math.MaxInt64 = MAXS*E9 + MAXN
local MINS, MINN = -9223372037, 145224192  -- math.MinInt64 = MINS*E9 + MINN

-- parse reads a decimal int64 into (sec, nsec) with 0 <= nsec < E9. It returns nil for an absent
-- field or "" (the zero time), and false for anything that is not a decimal int64.
local function parse(s)
  if not s or s == '' then return nil end
  local neg = string.byte(s) == 45 -- '-'
  if neg then s = string.sub(s, 2) end
  local len = #s
  if len == 0 or string.find(s, '%D') then return false end
  if len > 19 then -- leading zeros
    local first = string.find(s, '[1-9]')
    if not first then return 0, 0 end
    s = string.sub(s, first)
    len = #s
    if len > 19 then return false end
  end
  local sec, nsec = 0, 0
  if len > 9 then
    sec, nsec = tonumber(string.sub(s, 1, len - 9)), tonumber(string.sub(s, len - 8))
  else
    nsec = tonumber(s)
  end
  if not neg then
    if sec > MAXS or (sec == MAXS and nsec > MAXN) then return false end
    return sec, nsec
  end
  if sec > MAXS or (sec == MAXS and nsec > MAXN + 1) then return false end
  if nsec == 0 then return -sec, 0 end
  return -sec - 1, E9 - nsec
end

local function less(as, an, bs, bn)
  return as < bs or (as == bs and an < bn)
end

local function add(as, an, bs, bn)
  local s, n = as + bs, an + bn
  if n >= E9 then s, n = s + 1, n - E9 end
  return s, n
end

-- format writes (sec, nsec) as a decimal int64, clamped to the int64 range.
local function format(s, n)
  if less(MAXS, MAXN, s, n) then return '9223372036854775807' end
  if less(s, n, MINS, MINN) then return '-9223372036854775808' end
  local sign = ''
  if s < 0 then
    sign = '-'
    if n == 0 then s = -s else s, n = -s - 1, E9 - n end
  end
  if s == 0 then return sign .. string.format('%d', n) end
  return sign .. string.format('%d%09d', s, n)
end
`

// reserveScript books a departure: KEYS[1] is the host hash, ARGV[1] and ARGV[2] now as unix seconds
// and nanoseconds (0 to 999999999), ARGV[3] and ARGV[4] the interval (at least 0) the same way.
// at = max(now, next_departure, hold_until); next_departure = at + max(interval, adaptive_delay). It
// returns at as decimal unix nanoseconds, or a CORRUPT error for a field it cannot read (and Redis
// answers WRONGTYPE for a key that is not a hash).
var reserveScript = redis.NewScript(timeLua + `
local f = redis.call('HMGET', KEYS[1], 'next_departure', 'hold_until', 'adaptive_delay')
local at_s, at_n = tonumber(ARGV[1]), tonumber(ARGV[2])
local st_s, st_n = tonumber(ARGV[3]), tonumber(ARGV[4])
local nd_s, nd_n = parse(f[1])
if nd_s == false then return redis.error_reply('CORRUPT field next_departure is not a decimal int64') end
local hu_s, hu_n = parse(f[2])
if hu_s == false then return redis.error_reply('CORRUPT field hold_until is not a decimal int64') end
local ad_s, ad_n = parse(f[3])
if ad_s == false or f[3] == '' then return redis.error_reply('CORRUPT field adaptive_delay is not a decimal int64') end
if nd_s and less(at_s, at_n, nd_s, nd_n) then at_s, at_n = nd_s, nd_n end
if hu_s and less(at_s, at_n, hu_s, hu_n) then at_s, at_n = hu_s, hu_n end
if ad_s and less(st_s, st_n, ad_s, ad_n) then st_s, st_n = ad_s, ad_n end
local nx_s, nx_n = add(at_s, at_n, st_s, st_n)
redis.call('HSET', KEYS[1], 'next_departure', format(nx_s, nx_n))
return format(at_s, at_n)
`)

// saveScript writes one host's state with SaveHosts' merge rule: KEYS[1] is the host hash, ARGV[1..12]
// the fields in hostFields order, ARGV[13] "1" to replace without merging. next_departure and
// hold_until keep the later of the stored and the given value (hold_trigger goes with hold_until); the
// rest is overwritten. A stored value that cannot be
// read, or a key of another type, is overwritten: saving is how the pacer repairs a corrupt record.
var saveScript = redis.NewScript(timeLua + `
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'hash' and t ~= 'none' then redis.call('DEL', KEYS[1]) end
local old = redis.call('HMGET', KEYS[1], 'next_departure', 'hold_until', 'hold_trigger')

-- later reports whether the stored a is a readable time after the given b.
local function later(a, b)
  local as, an = parse(a)
  if not as then return false end
  local bs, bn = parse(b)
  if not bs then return true end
  return less(bs, bn, as, an)
end

local nd, hu, ht = ARGV[4], ARGV[5], ARGV[6]
if ARGV[13] ~= '1' then
  if later(old[1], nd) then nd = old[1] end
  if later(old[2], hu) then hu, ht = old[2], old[3] or '' end
end
redis.call('HSET', KEYS[1],
  'v', ARGV[1], 'adaptive_delay', ARGV[2], 'known_limit', ARGV[3],
  'next_departure', nd, 'hold_until', hu, 'hold_trigger', ht,
  'crawl_delay', ARGV[7], 'crawl_clamped', ARGV[8], 'breaker', ARGV[9],
  'breaker_changed', ARGV[10], 'failures', ARGV[11], 'updated_at', ARGV[12])
return 1
`)
