package raftnode

import (
	"slices"
	"testing"
	"time"
)

// A queue keeps its items in order up to its limit, refuses one more, and
// takes them in rounds of at most max, telling its consumer when some are
// left; an emptied queue lets a large array go.
func TestAQueueKeepsItsOrderAndItsLimit(t *testing.T) {
	q := newQueue[int](100)
	for i := range 100 {
		if !q.push(i) {
			t.Fatalf("push %d refused below the limit", i)
		}
	}
	if q.push(100) {
		t.Fatal("a full queue took one more")
	}
	<-q.ready
	got := q.take(nil, 30)
	if !slices.Equal(got, seq(0, 30)) || waiting(q) != 70 {
		t.Fatalf("took %v, %d left; want 0-29 and 70", got, waiting(q))
	}
	select {
	case <-q.ready:
	default:
		t.Fatal("items left, and the consumer not told")
	}
	if got = q.take(got, 1000); !slices.Equal(got, seq(30, 100)) || waiting(q) != 0 {
		t.Fatalf("took %v, %d left; want 30-99 and none", got, waiting(q))
	}
	if q.items != nil {
		t.Errorf("an emptied queue keeps an array of %d", cap(q.items))
	}
	if got = q.take(got, 10); len(got) != 0 {
		t.Errorf("an empty queue gave %v", got)
	}
}

// A pusher waiting on a full queue goes on once the consumer takes, and
// gives up when its done channel closes.
func TestAPushWaitsForRoomOrGivesUp(t *testing.T) {
	q := newQueue[int](1)
	q.push(1)
	pushed := make(chan bool)
	go func() { pushed <- q.pushWait(2, nil, nil) }()
	select {
	case <-pushed:
		t.Fatal("pushed into a full queue")
	case <-time.After(20 * time.Millisecond):
	}
	if got := q.take(nil, 1); !slices.Equal(got, []int{1}) {
		t.Fatalf("took %v", got)
	}
	if !<-pushed {
		t.Fatal("the waiting push gave up")
	}
	done := make(chan struct{})
	go func() { pushed <- q.pushWait(3, nil, done) }()
	close(done)
	if <-pushed {
		t.Fatal("a push into a full queue went on after its done channel closed")
	}
	if got := q.take(nil, 10); !slices.Equal(got, []int{2}) {
		t.Errorf("took %v, want only 2", got)
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// A queue that is taken from in part and pushed to again keeps its order,
// moving what waits to the front rather than growing its array.
func TestAQueueTakenInPartKeepsItsOrder(t *testing.T) {
	q := newQueue[int](4)
	for i := range 4 {
		q.push(i)
	}
	if got := q.take(nil, 2); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("took %v", got)
	}
	before := cap(q.items)
	if !q.push(4) || !q.push(5) || q.push(6) {
		t.Fatal("a queue with two taken of four took other than two more")
	}
	if cap(q.items) != before {
		t.Errorf("the array grew from %d to %d with room at its front", before, cap(q.items))
	}
	if got := q.take(nil, 10); !slices.Equal(got, []int{2, 3, 4, 5}) || waiting(q) != 0 {
		t.Errorf("took %v, %d left; want 2-5 and none", got, waiting(q))
	}
}

// waiting is the number of items waiting in q.
func waiting[T any](q *queue[T]) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head
}
