package redisstore

import "github.com/redis/go-redis/v9"

// The frontier's scripts. Each runs on the keys of one shard (frontierKeys): every key it names,
// those in KEYS and those it builds from ARGV's key base and a host, carries the shard's hash tag, so
// they share one hash slot and the script runs as it is on a Redis Cluster. An entry of a host's
// queue is "<id>:<request as JSON>"; a handed-out entry is the field <id> of the host's taken hash,
// its JSON the value. Scores of the schedule are the server's unix milliseconds.

// frontierNowLua reads the server's clock in milliseconds.
const frontierNowLua = `
local T = redis.call('TIME')
local now = tonumber(T[1]) * 1000 + math.floor(tonumber(T[2]) / 1000)
`

// frontierRequeueLua puts a host's handed-out entries back at the head of its queue, lowest ID first,
// and, when redo is true, marks them as handed out again (a taker whose lease ran out may have sent
// them).
const frontierRequeueLua = `
local function requeue(tk, qk, rk, redo)
  local taken = redis.call('HGETALL', tk)
  if #taken == 0 then return end
  local ids = {}
  local byID = {}
  for i = 1, #taken, 2 do
    local id = tonumber(taken[i])
    table.insert(ids, id)
    byID[id] = taken[i + 1]
  end
  table.sort(ids, function(a, b) return a > b end)
  for _, id in ipairs(ids) do
    redis.call('LPUSH', qk, string.format('%d', id) .. ':' .. byID[id])
    if redo then redis.call('SADD', rk, string.format('%d', id)) end
  end
  redis.call('DEL', tk)
end
`

// frontierSeenLua keeps the shard's seen set as fingerprints (seen.go): linear hashing over buckets,
// each a set of integers, <base>seen:<b>, so that Redis keeps each in its compact intset encoding (8
// bytes a fingerprint) while it holds no more than set-max-intset-entries (512). The hash
// <base>seen:lh holds the level and the split pointer of the linear hashing and n, how many
// fingerprints the buckets hold: there are 2^level + split buckets; a fingerprint's address is its
// last 15 digits modulo 2^level, or modulo 2^(level+1) when that is under split. When the buckets hold
// more than seenLoad fingerprints on average, bucket split is split in two (its fingerprints whose
// address at the next level is split + 2^level move there) and split moves on. seenAdd(base, fp) adds
// the fingerprint fp (a decimal int64) and returns 1 when it was not there.
const frontierSeenLua = `
local seenLoad = 192
local function seenAddr(fp, level)
  local y = tonumber(string.sub((string.gsub(fp, '^-', '')), -15))
  return y % (2 ^ level)
end
local function seenAdd(base, fp)
  local lh = base .. 'seen:lh'
  local st = redis.call('HMGET', lh, 'level', 'split', 'n')
  local level, split, n = tonumber(st[1] or '0'), tonumber(st[2] or '0'), tonumber(st[3] or '0')
  local b = seenAddr(fp, level)
  if b < split then b = seenAddr(fp, level + 1) end
  if redis.call('SADD', base .. 'seen:' .. string.format('%d', b), fp) == 0 then return 0 end
  n = n + 1
  if n > seenLoad * (2 ^ level + split) then
    local from, to = base .. 'seen:' .. string.format('%d', split), base .. 'seen:' .. string.format('%d', split + 2 ^ level)
    local moved = {}
    for _, m in ipairs(redis.call('SMEMBERS', from)) do
      if seenAddr(m, level + 1) ~= split then table.insert(moved, m) end
    end
    if #moved > 0 then
      redis.call('SADD', to, unpack(moved))
      redis.call('SREM', from, unpack(moved))
    end
    split = split + 1
    if split == 2 ^ level then level, split = level + 1, 0 end
  end
  redis.call('HSET', lh, 'level', string.format('%d', level), 'split', string.format('%d', split), 'n', string.format('%d', n))
  return 1
end
`

// frontierAddScript queues requests of one host. KEYS: the shard's schedule, the seen set of the
// format before fingerprints (whole keys), the count and the ID sequence, then the host's queue.
// ARGV[1] is the host, ARGV[2] "1" to queue even a request seen before (a retry), ARGV[3] the shard's
// key base, then a fingerprint (seen.go) and a request (JSON) for each request. A request whose
// fingerprint the seen set holds is not queued (unless forced); a queued one gets the next ID and
// raises the count; the host enters the schedule, due now, unless it is there already (leased, or
// due). It returns how many were queued, or -1, changing nothing, while the shard's seen set is in the
// format before fingerprints (KEYS[2] exists: see migrateSeen).
var frontierAddScript = redis.NewScript(frontierNowLua + frontierSeenLua + `
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local added = 0
for i = 4, #ARGV, 2 do
  if seenAdd(ARGV[3], ARGV[i]) == 1 or ARGV[2] == '1' then
    local id = redis.call('INCR', KEYS[4])
    redis.call('RPUSH', KEYS[5], string.format('%d', id) .. ':' .. ARGV[i + 1])
    added = added + 1
  end
end
if added > 0 then
  redis.call('INCRBY', KEYS[3], added)
  redis.call('ZADD', KEYS[1], 'NX', now, ARGV[1])
end
return added
`)

// frontierSeenMigrateScript adds the fingerprints ARGV[3…] to the seen set of the shard whose key
// base is ARGV[1] (frontierSeenLua), and, when ARGV[2] is "1", deletes KEYS[1], the shard's seen set
// of the format before fingerprints, whose keys they were. It returns how many were new.
var frontierSeenMigrateScript = redis.NewScript(frontierSeenLua + `
local added = 0
for i = 3, #ARGV do added = added + seenAdd(ARGV[1], ARGV[i]) end
if ARGV[2] == '1' then redis.call('DEL', KEYS[1]) end
return added
`)

// frontierMembersLua keeps the shard's members (KEYS[2], a sorted set: owner → the server instant, ms,
// its heartbeat runs out): heartbeat(owner, ttl) records owner's, drops those that ran out and returns
// how many are live; share(live) is a member's fair count of the shard's hosts with work (those in the
// schedule, KEYS[1]): the host count over the live members, rounded up.
const frontierMembersLua = `
local function heartbeat(owner, ttl)
  redis.call('ZADD', KEYS[2], now + ttl, owner)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  return redis.call('ZCARD', KEYS[2])
end
local function share(live)
  return math.ceil(redis.call('ZCARD', KEYS[1]) / math.max(live, 1))
end
`

// frontierLeaseScript leases hosts of one shard. KEYS: the schedule, the members and the count.
// ARGV[1] is the owner, ARGV[2] the lease time (ms), ARGV[3] how many hosts at most, ARGV[4] the key
// base of the shard's host keys, ARGV[5] how many of the shard's hosts the owner holds. The lease is
// also the owner's heartbeat (frontierMembersLua), and it leases no more than the owner's share less
// those it holds, so that the live members split the hosts evenly. A host due (score <= now) whose
// lease key is gone is leased: its entries handed out under the lease that ran out go back to the head
// of its queue, marked as handed out again; a host with nothing queued leaves the schedule; a leased
// host is scored at its lease's end, so that it is due again when the lease runs out unrenewed. A due
// host still leased (a renewal the score missed) is scored at its lease's end and skipped. The host's
// holder key (no expiry) names its owner from lease to release: a lease whose holder key outlived its
// lease key was taken over. Each grant takes the host's next fencing token from its fence key (no
// expiry): the server's now in microseconds, or one more than the last token when that is not less (a
// clock set back), so that tokens grow at every grant even after the shard lost its keys. It returns
// the hosts leased with their tokens ({host, token, host, token…}), the shard's count of entries
// queued or handed out, how long (ms) until the earliest host is due (-1: none), the hosts taken over,
// and when the leases granted run out unrenewed (the server's unix ms).
var frontierLeaseScript = redis.NewScript(frontierNowLua + frontierRequeueLua + frontierMembersLua + `
local owner, ttl, base = ARGV[1], tonumber(ARGV[2]), ARGV[4]
local live = heartbeat(owner, ttl)
local want = math.min(tonumber(ARGV[3]), share(live) - tonumber(ARGV[5]))
local out, over, granted = {}, {}, 0
if want > 0 then
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, want + 32)
  for _, host in ipairs(due) do
    if granted >= want then break end
    local lk, qk, tk, rk, hk = base .. 'lease:' .. host, base .. 'q:' .. host, base .. 'taken:' .. host, base .. 'redo:' .. host, base .. 'holder:' .. host
    local left = redis.call('PTTL', lk)
    if left > 0 then
      redis.call('ZADD', KEYS[1], now + left, host)
    else
      requeue(tk, qk, rk, true)
      local was = redis.call('GET', hk)
      if redis.call('LLEN', qk) == 0 then
        redis.call('ZREM', KEYS[1], host)
        redis.call('DEL', lk, rk, hk)
      else
        redis.call('SET', lk, owner, 'PX', ttl)
        redis.call('SET', hk, owner)
        redis.call('ZADD', KEYS[1], now + ttl, host)
        local fk = base .. 'fence:' .. host
        local token = math.max(tonumber(redis.call('GET', fk) or '0') + 1, tonumber(T[1]) * 1000000 + tonumber(T[2]))
        redis.call('SET', fk, string.format('%d', token))
        table.insert(out, host)
        table.insert(out, token)
        granted = granted + 1
        if was and was ~= owner then table.insert(over, host) end
      end
    end
  end
end
local nextDue = -1
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #first == 2 then nextDue = math.max(tonumber(first[2]) - now, 0) end
return {out, tonumber(redis.call('GET', KEYS[3]) or '0'), nextDue, over, now + ttl}
`)

// frontierRenewScript is owner ARGV[1]'s heartbeat on one shard (KEYS: the schedule and the members),
// and extends its leases of the hosts ARGV[4…] by ARGV[2] ms (ARGV[3] is the key base). It returns
// the hosts whose lease owner no longer holds, the live members, the owner's share of the shard's
// hosts (frontierMembersLua), and when the leases renewed now run out (the server's unix ms).
var frontierRenewScript = redis.NewScript(frontierNowLua + frontierMembersLua + `
local owner, ttl, base = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local live = heartbeat(owner, ttl)
local lost = {}
for i = 4, #ARGV, 1 do
  local lk = base .. 'lease:' .. ARGV[i]
  if redis.call('GET', lk) == owner then
    redis.call('PEXPIRE', lk, ttl)
    redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i])
  else
    table.insert(lost, ARGV[i])
  end
end
return {lost, live, share(live), now + ttl}
`)

// frontierLeaveScript removes owner ARGV[1] from the shard's members (KEYS[1]): it leases no more, and
// the others' shares grow at once.
var frontierLeaveScript = redis.NewScript(`return redis.call('ZREM', KEYS[1], ARGV[1])`)

// frontierTakeScript hands owner ARGV[1] up to ARGV[4] entries of host ARGV[3]'s queue (ARGV[2] is the
// key base), moving each to the host's taken hash. KEYS[1] is the schedule. It returns {2} when owner
// does not hold the host's lease (lost); otherwise {1, id, request, redo, id, request, redo…}, redo 1
// for an entry handed out before under a lease that ran out (marked until done). With nothing queued
// and nothing taken, the lease ends and the host leaves the schedule: {0}.
var frontierTakeScript = redis.NewScript(`
local owner, base, host, want = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local lk, qk, tk, rk = base .. 'lease:' .. host, base .. 'q:' .. host, base .. 'taken:' .. host, base .. 'redo:' .. host
if redis.call('GET', lk) ~= owner then return {2} end
local out = {1}
local es = redis.call('LPOP', qk, want)
if es then
  for _, e in ipairs(es) do
    local id, req = string.match(e, '^(%d+):(.*)$')
    if id then
      redis.call('HSET', tk, id, req)
      table.insert(out, id)
      table.insert(out, req)
      table.insert(out, redis.call('SISMEMBER', rk, id))
    end
  end
end
if #out == 1 and redis.call('HLEN', tk) == 0 then
  redis.call('DEL', lk, rk, base .. 'holder:' .. host)
  redis.call('ZREM', KEYS[1], host)
  return {0}
end
return out
`)

// frontierDoneScript removes handed-out entries of hosts of one shard (ARGV[1] is its key base): ARGV
// then holds, for each host, its name, how many IDs, and the IDs. It lowers the shard's count
// (KEYS[1]) by the entries it removed: an entry done twice (by a taker whose lease ran out, and by the
// next) counts once.
var frontierDoneScript = redis.NewScript(`
local base, n, i = ARGV[1], 0, 2
while i < #ARGV do
  local host, k = ARGV[i], tonumber(ARGV[i + 1])
  local tk, rk = base .. 'taken:' .. host, base .. 'redo:' .. host
  for j = i + 2, i + 1 + k do
    n = n + redis.call('HDEL', tk, ARGV[j])
    redis.call('SREM', rk, ARGV[j])
  end
  i = i + 2 + k
end
if n > 0 then redis.call('DECRBY', KEYS[1], n) end
return n
`)

// frontierReleaseScript ends owner ARGV[1]'s lease of host ARGV[3] (ARGV[2] is the key base): its
// handed-out entries, never sent, go back to the head of its queue, and the host is due ARGV[4] ms
// from now (KEYS[1] is the schedule), or leaves the schedule when nothing is queued. It returns 0 when
// owner did not hold the lease (nothing changes).
var frontierReleaseScript = redis.NewScript(frontierNowLua + frontierRequeueLua + `
local owner, base, host = ARGV[1], ARGV[2], ARGV[3]
local lk, qk, tk, rk = base .. 'lease:' .. host, base .. 'q:' .. host, base .. 'taken:' .. host, base .. 'redo:' .. host
if redis.call('GET', lk) ~= owner then return 0 end
requeue(tk, qk, rk, false)
redis.call('DEL', lk, base .. 'holder:' .. host)
if redis.call('LLEN', qk) == 0 then
  redis.call('ZREM', KEYS[1], host)
  redis.call('DEL', rk)
else
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), host)
end
return 1
`)
