package faults

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/raftnode"
	"go.uber.org/zap"
)

// nopMachine is a state machine that keeps nothing.
type nopMachine struct{}

func (nopMachine) Apply(uint64, []byte) any            { return nil }
func (nopMachine) Snapshot(io.Writer) error            { return nil }
func (nopMachine) Restore(r io.Reader, _ uint64) error { _, err := io.Copy(io.Discard, r); return err }

// A sync on a member that knows no leader must fail at once, as a write
// does (raft drops the read without a word): otherwise it waits out the
// request timeout, and the connection's later requests, its pings among
// them, wait behind it. The fault suite saw a client lose its session
// that way: its member was between two leaders for a few milliseconds
// when the client's sync arrived.
func TestASyncWithoutALeaderFailsAtOnce(t *testing.T) {
	// Member 1 of a group whose other members never answer: it campaigns
	// forever and never knows a leader.
	peers := map[uint64]string{1: freePort(t), 2: freePort(t), 3: freePort(t)}
	tr, err := raftnode.NewTCPTransport(1, peers[1], peers, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	n, err := raftnode.Start(raftnode.Config{ID: 1, Peers: peers, Dir: t.TempDir(), TickInterval: 10 * time.Millisecond,
		Transport: tr, Logger: zap.NewNop()}, nopMachine{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	tr.Attach(n, nil)
	time.Sleep(500 * time.Millisecond) // several election timeouts

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	err = n.ReadIndex(ctx)
	if took := time.Since(start); err == nil || errors.Is(err, context.DeadlineExceeded) || took > time.Second {
		t.Fatalf("ReadIndex without a leader returned %v after %v; want an error at once", err, took.Round(time.Millisecond))
	}
}
