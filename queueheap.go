package ext

import "container/heap"

// hostHeap is a heap of hosts in the order less gives; each host knows its heap and index.
type hostHeap struct {
	hosts []*queueHost
	less  func(a, b *queueHost) bool
}

// dueFirst orders waiting hosts by when they can depart, then by arrival.
func dueFirst(a, b *queueHost) bool {
	if !a.readyAt.Equal(b.readyAt) {
		return a.readyAt.Before(b.readyAt)
	}
	return a.seq < b.seq
}

// longestFirst orders ready hosts by remaining schedule, longest first, then by arrival.
func longestFirst(a, b *queueHost) bool {
	if a.work != b.work {
		return a.work > b.work
	}
	return a.seq < b.seq
}

func (h *hostHeap) push(qh *queueHost)   { qh.heap = h; heap.Push(h, qh) }
func (h *hostHeap) pop() *queueHost      { return heap.Pop(h).(*queueHost) }
func (h *hostHeap) fix(qh *queueHost)    { heap.Fix(h, qh.index) }
func (h *hostHeap) remove(qh *queueHost) { heap.Remove(h, qh.index) }

func (h *hostHeap) Len() int           { return len(h.hosts) }
func (h *hostHeap) Less(i, j int) bool { return h.less(h.hosts[i], h.hosts[j]) }
func (h *hostHeap) Swap(i, j int) {
	h.hosts[i], h.hosts[j] = h.hosts[j], h.hosts[i]
	h.hosts[i].index, h.hosts[j].index = i, j
}
func (h *hostHeap) Push(x any) {
	qh := x.(*queueHost)
	qh.index = len(h.hosts)
	h.hosts = append(h.hosts, qh)
}
func (h *hostHeap) Pop() any {
	qh := h.hosts[len(h.hosts)-1]
	h.hosts[len(h.hosts)-1] = nil
	h.hosts = h.hosts[:len(h.hosts)-1]
	qh.heap = nil
	return qh
}
