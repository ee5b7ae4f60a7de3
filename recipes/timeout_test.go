package recipes

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// waitShort is the deadline of the waits these tests let time out.
const waitShort = 200 * time.Millisecond

// Every wait that can block takes a ctx; a wait its deadline ends returns
// an error matching context.DeadlineExceeded, and by then its node is gone,
// so the queue is as it was before it came.
func TestAWaitThatTimesOutLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	tests := []struct {
		name string
		dirs []string                                                       // where its nodes are, under the path
		hold func(ctx context.Context, c *client.Client, path string) error // takes what blocks the wait
		wait func(ctx context.Context, c *client.Client, path string) error
	}{
		{"Mutex.Lock", []string{""},
			func(ctx context.Context, c *client.Client, p string) error { return NewMutex(c, p).Lock(ctx) },
			func(ctx context.Context, c *client.Client, p string) error { return NewMutex(c, p).Lock(ctx) }},
		{"RWMutex.RLock behind a Mutex", []string{""},
			func(ctx context.Context, c *client.Client, p string) error { return NewMutex(c, p).Lock(ctx) },
			func(ctx context.Context, c *client.Client, p string) error { return NewRWMutex(c, p).RLock(ctx) }},
		{"RWMutex.Lock behind a reader", []string{""},
			func(ctx context.Context, c *client.Client, p string) error { return NewRWMutex(c, p).RLock(ctx) },
			func(ctx context.Context, c *client.Client, p string) error { return NewRWMutex(c, p).Lock(ctx) }},
		{"Semaphore.Acquire", []string{"/lock", "/leases"},
			func(ctx context.Context, c *client.Client, p string) error {
				_, err := NewSemaphore(c, p, 1).Acquire(ctx)
				return err
			},
			func(ctx context.Context, c *client.Client, p string) error {
				_, err := NewSemaphore(c, p, 1).Acquire(ctx)
				return err
			}},
		{"Election.Campaign", []string{""},
			func(ctx context.Context, c *client.Client, p string) error {
				return NewElection(c, p).Campaign(ctx, []byte("a"))
			},
			func(ctx context.Context, c *client.Client, p string) error {
				return NewElection(c, p).Campaign(ctx, []byte("b"))
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/timeouts/" + string(rune('a'+i))
			holder, waiter := s.dial(t), s.dial(t)
			must(t, tt.hold(ctxWait(t), holder, path))
			nodes := func() (all []string) {
				for _, d := range tt.dirs {
					all = append(all, children(t, holder, path+d)...)
				}
				return all
			}
			before := nodes()
			if len(before) == 0 {
				t.Fatal("the holder has no node where the test looks")
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitShort)
			defer cancel()
			err := tt.wait(ctx, waiter, path)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a wait past its deadline returned %v, want one matching context.DeadlineExceeded", err)
			}
			if after := nodes(); len(after) != len(before) {
				t.Fatalf("the timed-out waiter left nodes behind: %v, before it came %v", after, before)
			}
		})
	}
}

// A waiter that gives up wakes no one for nothing: the waiter behind it
// goes on waiting for the holder, and gets the lock when the holder lets
// go.
func TestAWaiterThatGivesUpHandsNothingToTheNextOne(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dial(t)
	holder := NewMutex(c, "/locks/giveup")
	must(t, holder.Lock(ctxWait(t)))
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- NewMutex(s.dial(t), "/locks/giveup").Lock(ctx) }()
	waitFor(t, "the first waiter to queue", func() bool { return len(children(t, c, "/locks/giveup")) == 2 })
	next := NewMutex(s.dial(t), "/locks/giveup")
	acquired := make(chan error, 1)
	go func() { acquired <- next.Lock(ctxWait(t)) }()
	waitFor(t, "the second waiter to queue", func() bool { return len(children(t, c, "/locks/giveup")) == 3 })
	getData := func() int { return s.metric(t, `arbor_requests_total{op="getData"`) }
	before := getData()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled Lock returned %v", err)
	}
	if n := len(children(t, c, "/locks/giveup")); n != 2 {
		t.Fatalf("%d nodes once the cancelled Lock returned, want 2 (the holder and the next waiter)", n)
	}
	// The next waiter sees the deletion and watches the holder instead
	// (a getData with a watch), without listing the queue again.
	waitFor(t, "the next waiter to watch the holder", func() bool { return getData() > before })
	select {
	case err := <-acquired:
		t.Fatalf("the next waiter took the lock while it was held: %v", err)
	default:
	}
	must(t, holder.Unlock(ctxWait(t)))
	must(t, <-acquired)
	must(t, next.Unlock(ctxWait(t)))
}

// A waiter whose connection is down when its deadline passes gets its
// error at once, without waiting for the reconnect; its node goes when the
// client is back.
func TestAWaitThatTimesOutWhileDisconnectedRemovesItsNodeAtReconnect(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dial(t)
	holder := NewMutex(c, "/locks/offline")
	must(t, holder.Lock(ctxWait(t)))
	var k cutter
	waiter := s.dial(t, client.WithDialer(k.dial), client.WithSessionTimeout(10*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewMutex(waiter, "/locks/offline").Lock(ctx) }()
	waitFor(t, "the waiter to queue", func() bool { return len(children(t, c, "/locks/offline")) == 2 })
	k.cut()
	waitFor(t, "the waiter's client to see the cut", func() bool { return waiter.State() == client.StateDisconnected })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock cancelled while disconnected: %v", err)
	}
	if n := len(children(t, c, "/locks/offline")); n != 2 {
		t.Fatalf("%d nodes while the waiter is away, want 2: its session lives", n)
	}
	k.heal()
	waitFor(t, "the waiter's node to go at reconnect", func() bool { return len(children(t, c, "/locks/offline")) == 1 })
	if waiter.Err() != nil {
		t.Fatalf("the waiter's session ended (%v): the node went with it, not at reconnect", waiter.Err())
	}
	must(t, holder.Unlock(ctxWait(t)))
}
