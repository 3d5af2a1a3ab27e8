package redisstore_test

import (
	"testing"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
	"github.com/gocolly/colly/v2"
)

// Issue 27, item 4: AddNewURL says whether a URL was new to the fleet's frontier, whichever member
// queued it first; a Queue WithoutFrontier keeps its URLs to itself and queues each one it is given.
func TestAddNewURLSaysWhetherTheFrontierHadIt(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	queue := func(opts ...ext.QueueOption) *ext.Queue {
		st := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
		p := ext.AdaptivePacing(colly.NewCollector(), ext.WithStore(st), ext.WithoutRobots())
		t.Cleanup(func() { _ = p.Close() })
		return ext.NewQueue(p, 1, opts...)
	}
	a, b := queue(), queue()
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
	if _, ok := a.FleetStats(); !ok {
		t.Error("a Queue on a redisstore is not a member of the fleet's frontier")
	}
	local := queue(ext.WithoutFrontier())
	for range 2 {
		if added, err := local.AddNewURL("http://n.test/1"); err != nil || !added {
			t.Errorf("AddNewURL on a Queue WithoutFrontier = %v, %v; want queued", added, err)
		}
	}
	if n := local.Size(); n != 2 {
		t.Errorf("Size of the Queue WithoutFrontier = %d, want its 2 URLs (the frontier's are not its)", n)
	}
	if _, ok := local.FleetStats(); ok {
		t.Error("a Queue WithoutFrontier reports fleet figures")
	}
}
