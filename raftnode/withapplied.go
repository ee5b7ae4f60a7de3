package raftnode

import (
	"context"
	"sync/atomic"
)

// applyCall is a function to run on the apply goroutine (WithApplied).
// Whoever claims it first decides: the apply goroutine runs it, or the
// caller, whose context ended, gives it up.
type applyCall struct {
	fn      func(index uint64) error
	claimed atomic.Bool
	done    chan error // receives fn's error once it ran; buffered
}

// run runs the call on the apply goroutine, unless its caller gave it up.
func (c *applyCall) run(index uint64) {
	if c.claimed.CompareAndSwap(false, true) {
		c.done <- c.fn(index)
	}
}

// WithApplied runs fn on the apply goroutine between two applied entries,
// with the index applied then, and returns fn's error. The state machine
// does not change while fn runs, and its readers go on: it is how a
// consistent copy of the state is taken (a backup) without a lock that
// readers would wait on. Committed entries wait to be applied meanwhile,
// so fn should be quick: take a view of the state that later entries do
// not change (the state machine's Snapshot), and write it after.
//
// fn must not call the node, nor wait for anything the node does. If ctx
// ends before fn starts, fn does not run; once fn started, WithApplied
// waits for it to end.
func (n *Node) WithApplied(ctx context.Context, fn func(index uint64) error) error {
	c := &applyCall{fn: fn, done: make(chan error, 1)}
	if err := n.handOver(applyTask{call: c}); err != nil {
		return err
	}
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		if c.claimed.CompareAndSwap(false, true) {
			return ctx.Err()
		}
		return <-c.done // it is running: wait for it
	case <-n.applyDone:
		if c.claimed.CompareAndSwap(false, true) {
			return n.stopErr()
		}
		return <-c.done
	}
}
