package faults

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/raftnode"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// nopMachine is a state machine that keeps nothing.
type nopMachine struct{}

func (nopMachine) Apply(uint64, []byte) any            { return nil }
func (nopMachine) Snapshot(io.Writer) error            { return nil }
func (nopMachine) Restore(r io.Reader, _ uint64) error { _, err := io.Copy(io.Discard, r); return err }

// campaigns counts the elections a member starts: the pre-votes it asks
// of one peer, each round of an election asking every peer once.
type campaigns struct {
	raftnode.Transport
	peer   uint64
	rounds atomic.Int64
}

func (c *campaigns) Send(msgs []raftpb.Message) {
	for _, m := range msgs {
		if m.Type == raftpb.MsgPreVote && m.To == c.peer {
			c.rounds.Add(1)
		}
	}
	c.Transport.Send(msgs)
}

// A sync on a member that knows no leader must fail at once, as a write
// does (raft drops the read without a word): otherwise it waits out the
// request timeout, and the connection's later requests, its pings among
// them, wait behind it. The fault suite saw a client lose its session
// that way: its member was between two leaders for a few milliseconds
// when the client's sync arrived.
func TestASyncWithoutALeaderFailsAtOnce(t *testing.T) {
	// Member 1 of a group whose other members are not on the network: it
	// campaigns forever and never knows a leader.
	nw := raftnode.NewMemNetwork()
	tr := nw.NewTransport(1)
	defer tr.Close()
	sent := &campaigns{Transport: tr, peer: 2}
	peers := map[uint64]string{1: "", 2: "", 3: ""}
	n, err := raftnode.Start(raftnode.Config{ID: 1, Peers: peers, Dir: t.TempDir(), TickInterval: 10 * time.Millisecond,
		Transport: sent, Logger: zap.NewNop()}, nopMachine{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	tr.Attach(n, nil)
	// Several elections lost.
	for deadline := time.Now().Add(30 * time.Second); sent.rounds.Load() < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("member 1 started %d elections in 30s, want 3", sent.rounds.Load())
		}
	}
	if lead := n.Leader(); lead != 0 {
		t.Fatalf("member 1 knows leader %d", lead)
	}

	// At once, not at the deadline: a read raft dropped would end with
	// ctx's error instead, however long the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.ReadIndex(ctx); !errors.Is(err, raftnode.ErrProposalDropped) {
		t.Fatalf("ReadIndex without a leader returned %v; want ErrProposalDropped at once", err)
	}
}
