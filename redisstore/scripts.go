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

// nowLua reads the server's clock: every decision of the fleet is taken on this one clock, whatever
// the clocks of the crawler machines say.
const nowLua = `
local T = redis.call('TIME')
local now_s, now_n = tonumber(T[1]), tonumber(T[2]) * 1000
`

// ttlLua refreshes the host key's expiry when ARGV[ttlArg] (milliseconds) is positive.
const ttlLua = `
local function refresh(ms)
  if tonumber(ms) > 0 then redis.call('PEXPIRE', KEYS[1], ms) end
end
`

// admitScript decides a departure, GCRA style, on the server's clock: KEYS[1] is the host hash,
// ARGV[1] and ARGV[2] the gap (at least 0) as seconds and nanoseconds, ARGV[3] the key's TTL in
// milliseconds (0: none). The departure may go when now >= max(last_departure + max(gap,
// adaptive_delay), hold_srv): then last_departure = now and it returns {1, "0", now, adaptive_delay,
// known_limit}. Otherwise it changes nothing and returns {0, wait, now, adaptive_delay, known_limit};
// wait, now and the delays in decimal (unix) nanoseconds, a delay "" when none is stored. A field it cannot read is a CORRUPT
// error (and Redis answers WRONGTYPE for a key that is not a hash).
var admitScript = redis.NewScript(timeLua + nowLua + ttlLua + `
local f = redis.call('HMGET', KEYS[1], 'last_departure', 'hold_srv', 'adaptive_delay', 'known_limit')
local ad, kl = f[3] or '', f[4] or ''
if not parse(kl) then kl = '' end
local ld_s, ld_n = parse(f[1])
if ld_s == false then return redis.error_reply('CORRUPT field last_departure is not a decimal int64') end
local hu_s, hu_n = parse(f[2])
if hu_s == false then return redis.error_reply('CORRUPT field hold_srv is not a decimal int64') end
local ad_s, ad_n = parse(f[3])
if ad_s == false or f[3] == '' then return redis.error_reply('CORRUPT field adaptive_delay is not a decimal int64') end
local gp_s, gp_n = tonumber(ARGV[1]), tonumber(ARGV[2])
if ad_s and less(gp_s, gp_n, ad_s, ad_n) then gp_s, gp_n = ad_s, ad_n end
local al_s, al_n = -9223372037, 145224192
if ld_s then al_s, al_n = add(ld_s, ld_n, gp_s, gp_n) end
if hu_s and less(al_s, al_n, hu_s, hu_n) then al_s, al_n = hu_s, hu_n end
if less(now_s, now_n, al_s, al_n) then
  local w_s, w_n = al_s - now_s, al_n - now_n
  if w_n < 0 then w_s, w_n = w_s - 1, w_n + E9 end
  return {0, format(w_s, w_n), format(now_s, now_n), ad, kl}
end
redis.call('HSET', KEYS[1], 'last_departure', format(now_s, now_n))
refresh(ARGV[3])
return {1, '0', format(now_s, now_n), ad, kl}
`)

// departedScript moves a host's last departure to at least ARGV[1] nanoseconds before the server's now
// (a request that reached the wire after its admission). ARGV[2] is the TTL as for admitScript.
var departedScript = redis.NewScript(timeLua + nowLua + ttlLua + `
local ago = tonumber(ARGV[1])
local a_s, a_n = math.floor(ago / E9), ago % E9
local c_s, c_n = now_s - a_s, now_n - a_n
if c_n < 0 then c_s, c_n = c_s - 1, c_n + E9 end
local ld_s, ld_n = parse(redis.call('HGET', KEYS[1], 'last_departure'))
if ld_s == false or not ld_s or less(ld_s, ld_n, c_s, c_n) then
  redis.call('HSET', KEYS[1], 'last_departure', format(c_s, c_n))
  refresh(ARGV[2])
end
return 1
`)

// saveScript writes one host's state with SaveHosts' merge rule: KEYS[1] is the host hash, ARGV[1..12]
// the fields in hostFields order, ARGV[13] "1" to replace without merging, ARGV[14] the hold's time
// left in nanoseconds when it was sent (0: none), ARGV[15] the TTL as for admitScript. next_departure
// and hold_until keep the later of the stored and the given value (hold_trigger goes with hold_until);
// the rest is overwritten. hold_srv, the hold on the server's clock that admitScript reads, is the
// server's now + the time left, and likewise keeps the later. A stored value that cannot be read, or a
// key of another type, is overwritten: saving is how the pacer repairs a corrupt record.
var saveScript = redis.NewScript(timeLua + nowLua + ttlLua + `
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
local left = tonumber(ARGV[14])
local hs = ''
if left > 0 then
  local l_s, l_n = math.floor(left / E9), left % E9
  hs = format(add(now_s, now_n, l_s, l_n))
end
local oldhs = redis.call('HGET', KEYS[1], 'hold_srv')
if ARGV[13] ~= '1' then
  if later(old[1], nd) then nd = old[1] end
  if later(old[2], hu) then hu, ht = old[2], old[3] or '' end
  if later(oldhs, hs) then hs = oldhs end
end
redis.call('HSET', KEYS[1],
  'v', ARGV[1], 'adaptive_delay', ARGV[2], 'known_limit', ARGV[3],
  'next_departure', nd, 'hold_until', hu, 'hold_trigger', ht,
  'crawl_delay', ARGV[7], 'crawl_clamped', ARGV[8], 'breaker', ARGV[9],
  'breaker_changed', ARGV[10], 'failures', ARGV[11], 'updated_at', ARGV[12])
if parse(hs) then redis.call('HSET', KEYS[1], 'hold_srv', hs) else redis.call('HDEL', KEYS[1], 'hold_srv') end
if parse(redis.call('HGET', KEYS[1], 'last_departure')) == false then redis.call('HDEL', KEYS[1], 'last_departure') end
refresh(ARGV[15])
return 1
`)
