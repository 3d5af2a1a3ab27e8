package redisstore_test

import (
	"testing"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
	"github.com/gocolly/colly/v2"
)

// Issue 27, item 4: AddNewURL says whether a URL was new to the fleet's frontier, whichever member
// queued it first; a Queue whose pacer sees the store as a SharedStore alone (the documented opt-out)
// keeps its URLs to itself and queues each one it is given.
func TestAddNewURLSaysWhetherTheFrontierHadIt(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	queue := func(shared bool) *ext.Queue {
		var st ext.Store = redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
		if !shared {
			st = struct{ ext.SharedStore }{st.(ext.SharedStore)}
		}
		p := ext.AdaptivePacing(colly.NewCollector(), ext.WithStore(st), ext.WithoutRobots())
		t.Cleanup(func() { _ = p.Close() })
		return ext.NewQueue(p, 1)
	}
	a, b := queue(true), queue(true)
	for i, c := range []struct {
		q    *ext.Queue
		url  string
		want bool
	}{
		{a, "http://n.test/1", true},
		{a, "http://n.test/1", false}, // queued before by this member
		{b, "http://n.test/1", false}, // and by another
		{b, "http://n.test/2", true},  // a new one
	} {
		if added, err := c.q.AddNewURL(c.url); err != nil || added != c.want {
			t.Errorf("%d: AddNewURL(%s) = %v, %v; want %v", i, c.url, added, err, c.want)
		}
	}
	if _, err := a.AddNewURL("no host"); err == nil {
		t.Error("AddNewURL of a URL without a host: no error")
	}
	local := queue(false)
	for range 2 {
		if added, err := local.AddNewURL("http://n.test/1"); err != nil || !added {
			t.Errorf("AddNewURL on a Queue off the frontier = %v, %v; want queued", added, err)
		}
	}
	if n := local.Size(); n != 2 {
		t.Errorf("Size of the Queue off the frontier = %d, want its 2 URLs (the frontier's are not its)", n)
	}
}
