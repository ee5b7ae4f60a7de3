package raftnode

import "sync"

// queue is a bounded first-in first-out queue between goroutines, as a
// buffered channel is, whose memory follows what waits in it rather than
// its bound. A member runs a node for every group it serves, and most of
// a member's thousand groups are idle; their channels, sized for a busy
// group (a thousand messages, a thousand Readys), cost 270 KB a node
// before any message came (docs/performance.md, "Idle shards on arbord").
type queue[T any] struct {
	ready chan struct{} // a slot: something may wait (set by push, taken by the consumer)

	mu    sync.Mutex
	items []T // items[head:] wait; take moves head on, push moves them back to the front before the array grows
	head  int
	limit int
	room  chan struct{} // closed when take makes room: the pushers waiting for it look again
}

func newQueue[T any](limit int) *queue[T] {
	return &queue[T]{ready: make(chan struct{}, 1), limit: limit}
}

// shrinkAt is the capacity past which an emptied queue lets its array go.
const shrinkAt = 64

// push adds v unless the queue is full, and reports whether it did.
func (q *queue[T]) push(v T) bool {
	q.mu.Lock()
	if len(q.items)-q.head >= q.limit {
		q.mu.Unlock()
		return false
	}
	if q.head > 0 && len(q.items) == cap(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// pushWait adds v, waiting while the queue is full, and reports whether
// it did: it gives up when a or b (either may be nil) is closed or sends.
func (q *queue[T]) pushWait(v T, a, b <-chan struct{}) bool {
	for {
		if q.push(v) {
			return true
		}
		q.mu.Lock()
		if len(q.items)-q.head < q.limit {
			q.mu.Unlock()
			continue // made room since
		}
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.mu.Unlock()
		select {
		case <-room:
		case <-a:
			return false
		case <-b:
			return false
		}
	}
}

// take moves up to max of the waiting items, oldest first, into dst[:0]
// and returns it.
func (q *queue[T]) take(dst []T, max int) []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(max, len(q.items)-q.head)
	dst = append(dst[:0], q.items[q.head:q.head+k]...)
	clear(q.items[q.head : q.head+k])
	q.head += k
	left := len(q.items) - q.head
	if left == 0 {
		q.items, q.head = q.items[:0], 0
		if cap(q.items) > shrinkAt {
			q.items = nil
		}
	}
	if left > 0 {
		// What is left is the consumer's next round's.
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	if k > 0 && q.room != nil {
		close(q.room)
		q.room = nil
	}
	return dst
}

// reuse readies a consumer's buffer of taken items for the next take: it
// holds nothing of them, and a buffer a burst made large goes, as an
// emptied queue's array does.
func reuse[T any](buf []T) []T {
	if cap(buf) > shrinkAt {
		return nil
	}
	clear(buf)
	return buf[:0]
}
