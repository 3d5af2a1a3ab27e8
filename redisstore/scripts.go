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
// milliseconds (0: none), ARGV[4] how long an admitted departure stays pending (nanoseconds, 0: not
// recorded), ARGV[5] an instant before which nothing is admitted (unix nanoseconds, "" for none: the
// grace after the store lost its state), ARGV[6] the asking Store's token. A pending departure the
// asking Store recorded itself (pending_by) does not hold it: the pacer asks again only once its own
// departures reached the wire, so it is one whose answer never arrived (a timeout). The gap is the
// longest of ARGV's, adaptive_delay, crawl_delay and, before rate_srv, rate_interval. The departure may go when now >= max(last_departure + gap,
// hold_srv, ARGV[5]) and no departure is pending (pending, the instant it stops being: until Departed
// clears it). Then last_departure = now, pending = now + ARGV[4], seq grows by one, and it returns {1, "0", now,
// adaptive_delay, known_limit, 0, refused_interval, model_ver, "", noise, seq, since, refused_seq}, since the
// nanoseconds from the previous last_departure ("" when none) and refused_seq the latest departure
// reported refused (refusedScript; 0 when none). Otherwise it changes nothing and returns
// {0, wait, now, adaptive_delay, known_limit, pending, refused_interval, model_ver, pending_by, noise, 0, fence, 0, "", refused_seq}, noise the
// verdict as an integer (0 when none or unreadable), pending 1 when the wait is for a pending departure (at most
// pendingPoll: its wire instant may come any time); wait, now and the delays in decimal (unix) nanoseconds, a delay "" when
// none is stored. A field it cannot read is a CORRUPT error (and Redis answers WRONGTYPE for a key
// that is not a hash).
//
// A departure under a frontier's lease (FrontierAdmit) gives ARGV[7], the lease's fencing token, and
// ARGV[8], when it runs out (the frontier's unix ms); "" and "" otherwise. It is refused, changing
// nothing, when the token is below the host's fence (the greatest token presented here: the host was
// leased to another member since) or the server's now has reached ARGV[8] (the lease ran out
// unrenewed): {0, "0", now, adaptive_delay, known_limit, 0, refused_interval, model_ver, "", noise,
// 1 or 2, fence, 0, "", refused_seq}. Otherwise a greater token becomes the fence, and the departure is
// decided as above. Every answer holds those two after noise: 0 and the fence when the lease holds or
// none was given; then seq, since and refused_seq (seq 0 and since "" unless admitted).
var admitScript = redis.NewScript(timeLua + nowLua + ttlLua + `
local f = redis.call('HMGET', KEYS[1], 'last_departure', 'hold_srv', 'adaptive_delay', 'known_limit',
  'crawl_delay', 'rate_interval', 'rate_srv', 'pending', 'pending_by', 'refused_interval', 'model_ver', 'noise', 'fence',
  'seq', 'refused_seq', 'pool_mark', 'pool_bn', 'pool_br', 'pool_ar')
local ad, kl, ri, mv = f[3] or '', f[4] or '', f[10] or '', f[11] or ''
local nv = math.floor(tonumber(f[12] or '') or 0)
local sq = math.floor(tonumber(f[14] or '') or 0)
local rq = math.floor(tonumber(f[15] or '') or 0)
if not parse(kl) then kl = '' end
if not parse(ri) then ri = '' end
if not parse(mv) then mv = '' end
local ld_s, ld_n = parse(f[1])
if ld_s == false then return redis.error_reply('CORRUPT field last_departure is not a decimal int64') end
local hu_s, hu_n = parse(f[2])
if hu_s == false then return redis.error_reply('CORRUPT field hold_srv is not a decimal int64') end
local ad_s, ad_n = parse(f[3])
if ad_s == false or f[3] == '' then return redis.error_reply('CORRUPT field adaptive_delay is not a decimal int64') end
local fence = tonumber(f[13] or '') or 0
if ARGV[7] ~= '' then
  local token, lease = tonumber(ARGV[7]), 0
  if token < fence then
    lease = 1
  elseif now_s * 1000 + math.floor(now_n / 1000000) >= tonumber(ARGV[8]) then
    lease = 2
  end
  if lease > 0 then return {0, '0', format(now_s, now_n), ad, kl, 0, ri, mv, '', nv, lease, fence, 0, '', rq, 0, 0, 0, 0} end
  if token > fence then
    fence = token
    redis.call('HSET', KEYS[1], 'fence', ARGV[7])
    refresh(ARGV[3])
  end
end
local gp_s, gp_n = tonumber(ARGV[1]), tonumber(ARGV[2])
if ad_s and less(gp_s, gp_n, ad_s, ad_n) then gp_s, gp_n = ad_s, ad_n end
local cd_s, cd_n = parse(f[5])
if cd_s and less(gp_s, gp_n, cd_s, cd_n) then gp_s, gp_n = cd_s, cd_n end
local rs_s, rs_n = parse(f[7])
if rs_s and less(now_s, now_n, rs_s, rs_n) then
  local ri_s, ri_n = parse(f[6])
  if ri_s and less(gp_s, gp_n, ri_s, ri_n) then gp_s, gp_n = ri_s, ri_n end
end
local al_s, al_n = -9223372037, 145224192
if ld_s then al_s, al_n = add(ld_s, ld_n, gp_s, gp_n) end
if hu_s and less(al_s, al_n, hu_s, hu_n) then al_s, al_n = hu_s, hu_n end
local nb_s, nb_n = parse(ARGV[5])
if nb_s and less(al_s, al_n, nb_s, nb_n) then al_s, al_n = nb_s, nb_n end
local pd_s, pd_n = parse(f[8])
if f[9] == ARGV[6] then pd_s = nil end
local pending = 0
if not less(now_s, now_n, al_s, al_n) and pd_s and less(now_s, now_n, pd_s, pd_n) then
  pending = 1
  al_s, al_n = add(now_s, now_n, 0, ` + pendingPollNS + `)
  if less(pd_s, pd_n, al_s, al_n) then al_s, al_n = pd_s, pd_n end
end
if less(now_s, now_n, al_s, al_n) then
  local w_s, w_n = al_s - now_s, al_n - now_n
  if w_n < 0 then w_s, w_n = w_s - 1, w_n + E9 end
  local by = ''
  if pending == 1 then by = f[9] or '' end
  return {0, format(w_s, w_n), format(now_s, now_n), ad, kl, pending, ri, mv, by, nv, 0, fence, 0, '', rq, 0, 0, 0, 0}
end
local since = ''
if ld_s and not less(now_s, now_n, ld_s, ld_n) then
  local d_s, d_n = now_s - ld_s, now_n - ld_n
  if d_n < 0 then d_s, d_n = d_s - 1, d_n + E9 end
  since = format(d_s, d_n)
end
sq = sq + 1
local nowText = format(now_s, now_n)
local pend = tonumber(ARGV[4])
if pend > 0 then -- one HSET: a command fewer than the departure and its pending apart
  redis.call('HSET', KEYS[1], 'last_departure', nowText, 'seq', string.format('%d', sq),
    'pending', format(add(now_s, now_n, math.floor(pend / E9), pend % E9)), 'pending_by', ARGV[6])
else
  redis.call('HSET', KEYS[1], 'last_departure', nowText, 'seq', string.format('%d', sq))
  redis.call('HDEL', KEYS[1], 'pending', 'pending_by')
end
refresh(ARGV[3])
local function count(v) return math.max(math.floor(tonumber(v or '') or 0), 0) end
local pm = count(f[16])
if pm > sq then pm = 0 end -- a mark beyond the count: the count started again (lost), the pool with it
return {1, '0', nowText, ad, kl, 0, ri, mv, '', nv, 0, fence, sq, since, rq, pm, count(f[17]), count(f[18]), count(f[19])}
`)

// refusedScript records that the fleet's departure numbered ARGV[1] to the host was refused, when
// later than the one recorded (refused_seq); ARGV[2] is the TTL as for admitScript. ARGV[3] "1" counts
// it in the pool of refusals (Store.PoolRefused): pool_ar, after the last backoff mark (pool_mark), when
// numbered above it, or pool_br, before it, when above the mark before (pool_mark0); a departure not
// numbered yet (above seq: the count started again) is not counted.
var refusedScript = redis.NewScript(ttlLua + `
local f = redis.call('HMGET', KEYS[1], 'refused_seq', 'seq', 'pool_mark', 'pool_mark0')
local function count(v) return math.floor(tonumber(v or '') or 0) end
local q = tonumber(ARGV[1])
if q > count(f[1]) then redis.call('HSET', KEYS[1], 'refused_seq', ARGV[1]) end
if ARGV[3] == '1' and q <= count(f[2]) then
  if q > count(f[3]) then
    redis.call('HINCRBY', KEYS[1], 'pool_ar', 1)
  elseif q > count(f[4]) then
    redis.call('HINCRBY', KEYS[1], 'pool_br', 1)
  end
end
refresh(ARGV[2])
return 1
`)

// poolBackoffScript marks a backoff of the fleet's pace in the pool of refusals (Store.PoolBackoff) at the
// fleet's latest departure (seq): the departures since the last mark (seq - pool_mark) and the refusals
// counted after it (pool_ar) become the count before (pool_bn, pool_br), or are added to it when
// ARGV[1] is "1" (a backoff for a Retry-After) or they are fewer than 3, halved while 64 or more; the
// mark moves to pool_mark0 and seq becomes the mark. ARGV[2] is the TTL as for admitScript. A count
// that does not read as a whole number is taken as 0.
var poolBackoffScript = redis.NewScript(ttlLua + `
local f = redis.call('HMGET', KEYS[1], 'seq', 'pool_mark', 'pool_bn', 'pool_br', 'pool_ar')
local function count(v) return math.max(math.floor(tonumber(v or '') or 0), 0) end
local sq, pm, bn, br, ar = count(f[1]), count(f[2]), count(f[3]), count(f[4]), count(f[5])
if sq == 0 then return 0 end
if pm > sq then pm = 0 end
local n = sq - pm
if ARGV[1] == '1' or n < 3 then
  bn, br = bn + n, br + ar
else
  bn, br = n, ar
end
while bn >= 64 do bn, br = math.floor(bn / 2), math.floor(br / 2) end
redis.call('HSET', KEYS[1], 'pool_mark0', pm, 'pool_mark', sq, 'pool_bn', bn, 'pool_br', math.min(br, bn), 'pool_ar', 0)
refresh(ARGV[2])
return 1
`)

// pendingPollNS is, in nanoseconds, the longest a process told to wait for a pending departure waits
// before asking again: the wire instant that ends it normally comes within a millisecond or so.
const pendingPollNS = "5000000"

// departedScript moves a host's last departure to at least ARGV[1] nanoseconds before the server's now
// (a request that reached the wire after its admission) and ends its pending departure. ARGV[2] is the
// TTL as for admitScript.
var departedScript = redis.NewScript(timeLua + nowLua + ttlLua + `
local ago = tonumber(ARGV[1])
local a_s, a_n = math.floor(ago / E9), ago % E9
local c_s, c_n = now_s - a_s, now_n - a_n
if c_n < 0 then c_s, c_n = c_s - 1, c_n + E9 end
local ld_s, ld_n = parse(redis.call('HGET', KEYS[1], 'last_departure'))
if ld_s == false or not ld_s or less(ld_s, ld_n, c_s, c_n) then
  redis.call('HSET', KEYS[1], 'last_departure', format(c_s, c_n))
end
redis.call('HDEL', KEYS[1], 'pending', 'pending_by')
refresh(ARGV[2])
return 1
`)

// deadPendingScript ends the pending departure of a Store that died (its alive key ran out: it sends
// nothing more) on KEYS[1], the host hash, if ARGV[1], the dead Store's token, still holds it: the
// departure reached the wire before its death, or never will, so it counts as a departure now (the
// latest it can have been), and the next waits a gap from it. ARGV[2] is the TTL as for admitScript.
// It returns 1 when it ended one.
var deadPendingScript = redis.NewScript(timeLua + nowLua + ttlLua + `
if redis.call('HGET', KEYS[1], 'pending_by') ~= ARGV[1] then return 0 end
local ld_s, ld_n = parse(redis.call('HGET', KEYS[1], 'last_departure'))
if ld_s == false or not ld_s or less(ld_s, ld_n, now_s, now_n) then
  redis.call('HSET', KEYS[1], 'last_departure', format(now_s, now_n))
end
redis.call('HDEL', KEYS[1], 'pending', 'pending_by')
refresh(ARGV[2])
return 1
`)

// saveScript writes one host's state with SaveHosts' merge rule: KEYS[1] is the host hash, ARGV[1..12]
// the fields in hostFields order, ARGV[13] "1" to replace without merging, ARGV[14] the hold's time
// left in nanoseconds when it was sent (0: none), ARGV[15] the TTL as for admitScript, ARGV[16] the
// rate-limit interval, ARGV[17] its time left (as ARGV[14]), ARGV[18] its end and ARGV[19] the park's
// end (both unix nanoseconds, "" for none), ARGV[20] and ARGV[21] the capacity model's refused interval
// and version, ARGV[22] its noise verdict. The model (adaptive_delay, known_limit, refused_interval, model_ver) is written only when
// its version is at least the stored one's: the fleet keeps its newest model. noise keeps the greater
// of the stored (when it reads as a whole number up to 255) and the given verdict, whatever the version. rate_srv, the rate-limit interval's end on the server's
// clock, keeps the later of the stored and the given value, with its interval; park_until is
// overwritten, as the breaker is. next_departure
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
local ad, kl, ri, mv = ARGV[2], ARGV[3], ARGV[20], ARGV[21]
local old_model = redis.call('HMGET', KEYS[1], 'adaptive_delay', 'known_limit', 'refused_interval', 'model_ver')
local omv = tonumber(old_model[4] or '')
if ARGV[13] ~= '1' and omv and omv > tonumber(mv) and parse(old_model[1]) and parse(old_model[2]) then
  ad, kl, ri, mv = old_model[1], old_model[2], old_model[3] or '0', old_model[4]
end
local nv = ARGV[22]
local onv = tonumber(redis.call('HGET', KEYS[1], 'noise') or '')
if ARGV[13] ~= '1' and onv and onv == math.floor(onv) and onv <= 255 and onv > tonumber(nv) then nv = tostring(onv) end
redis.call('HSET', KEYS[1],
  'v', ARGV[1], 'adaptive_delay', ad, 'known_limit', kl, 'refused_interval', ri, 'model_ver', mv, 'noise', nv,
  'next_departure', nd, 'hold_until', hu, 'hold_trigger', ht,
  'crawl_delay', ARGV[7], 'crawl_clamped', ARGV[8], 'breaker', ARGV[9],
  'breaker_changed', ARGV[10], 'failures', ARGV[11], 'updated_at', ARGV[12])
if parse(hs) then redis.call('HSET', KEYS[1], 'hold_srv', hs) else redis.call('HDEL', KEYS[1], 'hold_srv') end
local ri, rl, ru, rs = ARGV[16], tonumber(ARGV[17]), ARGV[18], ''
if rl > 0 then rs = format(add(now_s, now_n, math.floor(rl / E9), rl % E9)) end
local old_rate = redis.call('HMGET', KEYS[1], 'rate_srv', 'rate_interval', 'rate_until')
if ARGV[13] ~= '1' and later(old_rate[1], rs) and parse(old_rate[2]) then
  rs, ri, ru = old_rate[1], old_rate[2], old_rate[3] or ''
end
if parse(rs) then
  redis.call('HSET', KEYS[1], 'rate_srv', rs, 'rate_interval', ri, 'rate_until', ru)
else
  redis.call('HDEL', KEYS[1], 'rate_srv', 'rate_interval', 'rate_until')
end
if parse(ARGV[19]) then redis.call('HSET', KEYS[1], 'park_until', ARGV[19]) else redis.call('HDEL', KEYS[1], 'park_until') end
if parse(redis.call('HGET', KEYS[1], 'last_departure')) == false then redis.call('HDEL', KEYS[1], 'last_departure') end
refresh(ARGV[15])
return 1
`)

// epochScript returns the store's epoch (KEYS[1]), the server's now and 1 when it created the epoch,
// which it does when it is missing: "<the server's now in unix nanoseconds>:<ARGV[1]>". A server
// restarted empty, or flushed, has lost it: the Store that knew the old one finds another, or none.
// ARGV[2] is the epoch the asking Store knew ("" for none): when it knew one and finds it gone or
// another, the epoch it returns is marked lost (":lost" appended), so that a Store joining within the
// grace that follows a loss keeps the grace too, and one joining a store that lost nothing does not.
var epochScript = redis.NewScript(timeLua + nowLua + `
local v = redis.call('GET', KEYS[1])
local created = 0
local function id(e) return (string.gsub(e, ':lost$', '')) end
if not v then
  v = format(now_s, now_n) .. ':' .. ARGV[1]
  created = 1
end
if ARGV[2] ~= '' and id(v) ~= id(ARGV[2]) and not string.find(v, ':lost$') then v = v .. ':lost' end
if created == 1 or v ~= redis.call('GET', KEYS[1]) then redis.call('SET', KEYS[1], v) end
return {v, format(now_s, now_n), created}
`)

// A take (TakeSpilled, TakeDeferred) is two steps, each one script on one key: the take marks the
// entries it hands out with its token and the server's time in milliseconds, in place, and returns
// them; the acknowledgement removes them. A take run again with the same token (go-redis retrying a
// command whose reply was lost) finds its marked entries and returns them again, taking nothing more;
// a concurrent take skips them; and entries whose taker never acknowledged them (it died) are taken
// again once their lease (ARGV[3], milliseconds) has run out. A marked entry is "!<token>!<ms>!" and
// the entry. Lua patterns read it: the token is hex, the entry JSON.
const markLua = `
local T = redis.call('TIME')
local now_ms = tonumber(T[1]) * 1000 + math.floor(tonumber(T[2]) / 1000)
local token, want, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local function mark(e) return '!' .. token .. '!' .. now_ms .. '!' .. e end
local function unmark(m)
  local tok, ms, e = string.match(m, '^!(%x+)!(%d+)!(.*)$')
  return tok, tonumber(ms), e
end
`

// takeSpillScript takes up to ARGV[2] entries from the head of the spill list KEYS[1]: marked entries
// stay at the head, in the order they were spilled, until acknowledged (ackSpillScript).
var takeSpillScript = redis.NewScript(markLua + `
local out, head = {}, 0
local marked = redis.call('LRANGE', KEYS[1], 0, 1023)
for i, m in ipairs(marked) do
  local tok, ms, e = unmark(m)
  if not tok then break end
  head = i
  if tok == token then table.insert(out, e) end
end
if #out > 0 then return out end -- a retry: the entries this take marked
for i = 1, head do
  if #out >= want then return out end
  local tok, ms, e = unmark(marked[i])
  if ms + lease < now_ms then -- abandoned by a taker that never acknowledged
    redis.call('LSET', KEYS[1], i - 1, mark(e))
    table.insert(out, e)
  end
end
if #out >= want then return out end
local fresh = redis.call('LRANGE', KEYS[1], head, head + want - #out - 1)
for i, e in ipairs(fresh) do
  redis.call('LSET', KEYS[1], head + i - 1, mark(e))
  table.insert(out, e)
end
return out
`)

// ackSpillScript removes the entries of the spill list KEYS[1] marked by the take ARGV[1].
var ackSpillScript = redis.NewScript(`
local token = ARGV[1]
local marked = redis.call('LRANGE', KEYS[1], 0, 1023)
for _, m in ipairs(marked) do
  local tok = string.match(m, '^!(%x+)!')
  if not tok then break end
  if tok == token then redis.call('LREM', KEYS[1], 1, m) end
end
return 1
`)

// takeDeferredScript takes up to ARGV[2] (0: all) deferred requests of host ARGV[4] ("": every host),
// lowest ID first, from the sorted set KEYS[1]: a taken member is marked and scored -ID until
// acknowledged (ackDeferredScript), so ListDeferred, which reads positive scores only, no longer sees
// it. A member that is not JSON of deferredVersion with a host, or that a Queue spilled in the layout
// before spill lists, is left where it is: never lost, and named by ListDeferred.
var takeDeferredScript = redis.NewScript(markLua + `
local host = ARGV[4]
if want <= 0 then want = 1e15 end
local out = {}
local marked = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(0', 'WITHSCORES')
for i = 1, #marked, 2 do
  local tok, ms, e = unmark(marked[i])
  if tok == token then table.insert(out, {-tonumber(marked[i + 1]), e}) end
end
if #out > 0 then return out end -- a retry: the requests this take marked
local function wanted(e)
  local ok, r = pcall(cjson.decode, e)
  if not ok or type(r) ~= 'table' or r.v ~= ` + deferredVersionLua + ` or type(r.host) ~= 'string' or r.reason == 'queue_spill' then
    return false
  end
  return host == '' or r.host == host
end
for i = 1, #marked, 2 do
  if #out >= want then return out end
  local tok, ms, e = unmark(marked[i])
  if tok and ms + lease < now_ms and wanted(e) then -- abandoned by a taker that never acknowledged
    redis.call('ZREM', KEYS[1], marked[i])
    redis.call('ZADD', KEYS[1], marked[i + 1], mark(e))
    table.insert(out, {-tonumber(marked[i + 1]), e})
  end
end
local after = '0'
while #out < want do
  local page = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. after, '+inf', 'WITHSCORES', 'LIMIT', 0, 256)
  if #page == 0 then break end
  for i = 1, #page, 2 do
    after = page[i + 1]
    if #out < want and wanted(page[i]) then
      redis.call('ZREM', KEYS[1], page[i])
      redis.call('ZADD', KEYS[1], -tonumber(page[i + 1]), mark(page[i]))
      table.insert(out, {tonumber(page[i + 1]), page[i]})
    end
  end
end
return out
`)

// deferredVersionLua is deferredVersion, for takeDeferredScript.
const deferredVersionLua = "1"

// ackDeferredScript removes the members of the deferred set KEYS[1] marked by the take ARGV[1].
var ackDeferredScript = redis.NewScript(`
local token = ARGV[1]
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(0')) do
  if string.match(m, '^!(%x+)!') == token then redis.call('ZREM', KEYS[1], m) end
end
return 1
`)
