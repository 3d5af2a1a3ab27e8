package redisstore

import "testing"

// The tags' slots are Redis Cluster's (CRC-16/XMODEM mod 16384: its check value, and the slots a
// cluster gave "{0}", "{1}", "{2}"), and each shard's tag lies in its even share of the slots, so that
// a cluster split evenly holds the shards evenly: 3 shards on 3 masters, one each (the former tags put
// two on one master).
func TestShardTagsSpreadOverTheSlots(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16 check value %#x, want 0x31c3", got)
	}
	for tag, slot := range map[string]uint16{"0": 13907, "1": 9842, "2": 5649} {
		if got := crc16(tag) % clusterSlots; got != slot {
			t.Errorf("slot of {%s} %d, want %d", tag, got, slot)
		}
	}
	if got := shardTag(0, 1); got != "0" {
		t.Errorf("one shard's tag %q, want 0 (a frontier of one shard keeps its keys)", got)
	}
	for _, shards := range []int{2, 3, 4, 6, 12, 1024} {
		masters := min(shards, 3)
		perMaster := map[int]int{}
		for i, tag := range shardTags(shards) {
			slot := int(crc16(tag) % clusterSlots)
			if lo, hi := i*clusterSlots/shards, (i+1)*clusterSlots/shards; slot < lo || slot >= hi {
				t.Fatalf("%d shards: shard %d's tag %q in slot %d, outside its share [%d, %d)", shards, i, tag, slot, lo, hi)
			}
			perMaster[slot*masters/clusterSlots]++
		}
		if shards%masters == 0 {
			for m := range masters {
				if perMaster[m] != shards/masters {
					t.Errorf("%d shards on %d masters split evenly: %v a master, want %d each", shards, masters, perMaster, shards/masters)
				}
			}
		}
	}
}
