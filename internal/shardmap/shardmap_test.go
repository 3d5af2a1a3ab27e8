package shardmap

import (
	"strconv"
	"sync"
	"testing"
)

type item struct{ n int }

func TestLoadOrCreateOnce(t *testing.T) {
	var m Map[*item]
	m.Init()
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for range 8 {
		wg.Go(func() {
			for i := range 100 {
				if _, c := m.LoadOrCreate(strconv.Itoa(i), func() *item { return &item{i} }); c {
					mu.Lock()
					created++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if created != 100 || m.Len() != 100 {
		t.Errorf("created %d, len %d; want 100 each", created, m.Len())
	}
	if v, ok := m.Load("42"); !ok || v.n != 42 {
		t.Errorf("Load(42) = %v, %v", v, ok)
	}
}

func TestDeleteIfChecksValueAndCondition(t *testing.T) {
	var m Map[*item]
	m.Init()
	a, _ := m.LoadOrCreate("k", func() *item { return &item{1} })
	if m.DeleteIf("k", &item{1}, func(*item) bool { return true }) {
		t.Error("deleted for another value")
	}
	if m.DeleteIf("k", a, func(*item) bool { return false }) {
		t.Error("deleted although the condition was false")
	}
	if !m.DeleteIf("k", a, func(*item) bool { return true }) || m.Len() != 0 {
		t.Error("not deleted")
	}
}

func TestRangeVisitsEveryValue(t *testing.T) {
	var m Map[*item]
	m.Init()
	for i := range 1000 {
		m.LoadOrCreate(strconv.Itoa(i), func() *item { return &item{i} })
	}
	sum := 0
	m.Range(func(v *item) { sum += v.n })
	if sum != 999*1000/2 {
		t.Errorf("sum %d", sum)
	}
}

// A map emptied by deletions gives its room back: its memory follows the keys down.
func TestDeleteShrinks(t *testing.T) {
	var m Map[*int]
	m.Init()
	v := new(int)
	keys := make([]string, 64*Shards*4)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
		m.LoadOrCreate(keys[i], func() *int { return v })
	}
	always := func(*int) bool { return true }
	for _, k := range keys[8:] {
		m.DeleteIf(k, v, always)
	}
	for i := range m.shards {
		s := &m.shards[i]
		if s.peak >= minShrink && len(s.m) < s.peak/shrinkBelow {
			t.Fatalf("shard %d holds %d keys with the room of %d", i, len(s.m), s.peak)
		}
	}
	if got := m.Len(); got != 8 {
		t.Fatalf("%d keys left, want 8", got)
	}
	for _, k := range keys[:8] {
		if _, ok := m.Load(k); !ok {
			t.Errorf("key %s lost by a shrink", k)
		}
	}
}
