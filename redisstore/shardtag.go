package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/collypace/ext"
)

// A frontier's shards each live in one cluster slot, chosen by their hash tag. The tags "{0}", "{1}",
// "{2}" fall in slots 13907, 9842 and 5649: on a 3-master cluster split evenly (as
// `redis-cli --cluster create` splits it), two of them on one master and none on another. Each shard's
// tag is therefore chosen for its slot, spread over the slot space, so that any cluster whose masters
// split the slots evenly holds the shards evenly (one a master when they are as many).

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// shardTag is shard's hash tag among shards: the first of "i", "i.1", "i.2", … (i the shard) whose
// slot lies in the shard's even share of the slots, [i×16384/shards, (i+1)×16384/shards). A frontier of
// one shard keeps "0". The search ends within a few hundred tries: each tag falls in the share with
// probability 1/shards.
func shardTag(shard, shards int) string {
	lo, hi := shard*clusterSlots/shards, (shard+1)*clusterSlots/shards
	tag := strconv.Itoa(shard)
	for i := 1; ; i++ {
		if s := int(crc16(tag) % clusterSlots); s >= lo && s < hi {
			return tag
		}
		tag = strconv.Itoa(shard) + "." + strconv.Itoa(i)
	}
}

// shardTags is the tags of shards shards.
func shardTags(shards int) []string {
	tags := make([]string, shards)
	for i := range tags {
		tags[i] = shardTag(i, shards)
	}
	return tags
}

// checkFormerTags reports, once a Store, a frontier of several shards written by an earlier build,
// whose shards were tagged "{0}", "{1}", …: its requests are under keys this build does not read, so
// its first add or lease fails with an error that says so (wrapping ext.ErrCorruptState), rather than
// crawling on without them. A store that fails to answer is asked again next time.
func (s *Store) checkFormerTags(ctx context.Context) error {
	if s.frontier.tags == nil {
		return nil // one shard: its tag has not changed
	}
	f := &s.frontier
	f.formerMu.Lock()
	defer f.formerMu.Unlock()
	if f.formerOK || f.formerErr != nil {
		return f.formerErr
	}
	for i, tag := range f.tags {
		if tag == strconv.Itoa(i) {
			continue // this shard's tag has not changed
		}
		key := s.prefix + "frontier{" + strconv.Itoa(i) + "}:n"
		n, err := s.c.Exists(ctx, key).Result()
		if err != nil {
			return wrapErr(err, "frontier: looking for shards of an earlier build") // asked again next time
		}
		if n > 0 {
			f.formerErr = fmt.Errorf("redisstore: the frontier holds shards written by an earlier build under the tags {0}, {1}, … (%s exists), which this build does not read: crawl it to the end with that build, or delete its keys: %w", key, ext.ErrCorruptState)
			return f.formerErr
		}
	}
	f.formerOK = true
	return nil
}

// crc16 is Redis Cluster's key hash: CRC-16/XMODEM (polynomial 0x1021, initial value 0).
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
