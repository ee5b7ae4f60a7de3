package faults

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/raftnode"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// nopMachine is a state machine that keeps nothing.
type nopMachine struct{}

func (nopMachine) Apply(uint64, []byte) any { return nil }
func (nopMachine) Snapshot() (func(io.Writer) error, error) {
	return func(io.Writer) error { return nil }, nil
}
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

// A linearizable read on a member cut off from the rest never returns
// what the rest has since overwritten: it fails until the member is back,
// and then sees the overwrite. A plain read there serves the old value
// meanwhile, as ZooKeeper's reads do.
func TestALinearizableReadOnACutOffMemberIsNeverStale(t *testing.T) {
	c, lead, dir := startLed(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var cut uint64
	var rest []string
	for _, id := range c.ids {
		if id != lead && cut == 0 {
			cut = id
		} else {
			rest = append(rest, c.members[id].addr)
		}
	}
	onCut, err := client.Dial(ctx, []string{c.members[cut].addr}, client.WithSessionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer onCut.Close()
	onRest, err := client.Dial(ctx, rest, client.WithSessionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer onRest.Close()
	if _, err := onRest.Create(ctx, "/lin", []byte("old"), client.Persistent); err != nil {
		t.Fatal(err)
	}
	if data, _, err := onCut.Get(ctx, "/lin", client.Linearizable()); err != nil || string(data) != "old" {
		t.Fatalf("linearizable get on member %d before the cut: %q, %v", cut, data, err)
	}

	for k, l := range c.links {
		if k[0] == cut || k[1] == cut {
			l.set(linkBlackhole, 0, 0)
		}
	}
	if _, err := onRest.Set(ctx, "/lin", []byte("new"), -1); err != nil {
		t.Fatalf("set on the majority: %v", err)
	}
	if data, _, err := onCut.Get(ctx, "/lin"); err == nil && string(data) != "old" {
		t.Fatalf("plain get on the cut-off member %d: %q, want the old value it still holds", cut, data)
	}
	for i := range 3 {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		data, _, err := onCut.Get(rctx, "/lin", client.Linearizable())
		rcancel()
		if err == nil {
			t.Fatalf("linearizable get %d on the cut-off member %d returned %q; want an error", i, cut, data)
		}
	}

	c.heal()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		data, _, err := onCut.Get(rctx, "/lin", client.Linearizable())
		rcancel()
		if err == nil {
			if string(data) != "new" {
				t.Fatalf("linearizable get after the heal: %q, want new", data)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("linearizable get on member %d 30s after the heal: %v (logs in %s)", cut, err, dir)
		}
	}
}
