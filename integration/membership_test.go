package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
)

// voters returns the ids of the voters in members, and of the learners.
func roles(members []client.Member) (voters, learners []int64) {
	for _, m := range members {
		if m.Learner {
			learners = append(learners, m.ID)
		} else {
			voters = append(voters, m.ID)
		}
	}
	return voters, learners
}

func TestMembershipGrowShrinkAndReplaceUnderLoad(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := testCtx(t)
	admin, err := client.Dial(ctx, []string{c.addr(1), c.addr(2)}) // members that stay
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	// A writer keeps writing through every change; each write it saw
	// acknowledged must be on every member at the end.
	load := startAckedWriter(ctx, dial(t, c.addr(1), client.WithSessionTimeout(5*time.Second)))

	// Grow to five: each new member joins as a learner, catches up, and is
	// promoted.
	for _, id := range []uint64{4, 5} {
		if _, err := admin.AddMember(ctx, id, c.peerAddr(id), true); err != nil {
			t.Fatalf("add learner %d: %v", id, err)
		}
		c.join(id)
		c.converged()
		members, err := admin.PromoteMember(ctx, id)
		if err != nil {
			t.Fatalf("promote %d: %v", id, err)
		}
		if v, l := roles(members); len(v) != int(id) || len(l) != 0 {
			t.Fatalf("after promoting %d: voters %v learners %v", id, v, l)
		}
	}
	if _, err := admin.AddMember(ctx, 4, "127.0.0.1:1", false); err == nil {
		t.Fatal("adding an existing member succeeded")
	}
	if _, err := admin.AddMember(ctx, 9, c.cfgs[2].Peers[2], true); !errors.Is(err, client.ErrBadArguments) {
		t.Fatalf("adding a member at member 2's peer address: %v, want ErrBadArguments", err)
	}

	// Shrink back to three; a removed member stops serving.
	for _, id := range []uint64{5, 4} {
		if _, err := admin.RemoveMember(ctx, id); err != nil {
			t.Fatalf("remove %d: %v", id, err)
		}
		select {
		case <-c.servers[id].Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("removed member %d still serving", id)
		}
		c.stop(id)
		delete(c.cfgs, id)
	}

	// Replace a dead member: 3 dies, is removed, and 6 takes its place.
	c.stop(3)
	delete(c.cfgs, 3)
	// Until a new leader is elected (if 3 led), the change cannot commit.
	if err := retry(func() error { _, err := admin.RemoveMember(ctx, 3); return err }); err != nil {
		t.Fatalf("remove dead member 3: %v", err)
	}
	if _, err := admin.AddMember(ctx, 6, c.peerAddr(6), false); err != nil {
		t.Fatalf("add member 6: %v", err)
	}
	c.join(6)

	load.cancel()
	c.converged()
	members, err := admin.Members(ctx)
	if v, l := roles(members); err != nil || fmt.Sprint(v) != "[1 2 6]" || len(l) != 0 {
		t.Fatalf("final members %v %v, %v; want voters [1 2 6]", v, l, err)
	}
	load.stopAndCheck(t, ctx, c.addr(6))
}

// retry retries op while it fails for want of a leader, for up to 10s.
func retry(op func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := op()
		transient := errors.Is(err, client.ErrNoQuorum) || errors.Is(err, client.ErrOperationTimeout) ||
			errors.Is(err, client.ErrConnectionLoss)
		if !transient || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOnAServerWithASuperuserOnlyTheSuperuserChangesTheMembers: loopback
// is not enough once a superuser is configured; the client proves it is
// the superuser with WithAuth at Dial or AddAuth later.
func TestOnAServerWithASuperuserOnlyTheSuperuserChangesTheMembers(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "", func(cfg *server.Config) { cfg.SuperDigest = client.DigestID("super", "test") })
	addr := s.Addr().String()
	ctx := testCtx(t)
	c := dial(t, addr, client.WithAuth("digest", client.DigestCredential("alice", "secret")))
	if _, err := c.AddMember(ctx, 2, "127.0.0.1:1", true); !errors.Is(err, client.ErrNoAuth) {
		t.Fatalf("AddMember by alice from loopback: %v, want ErrNoAuth", err)
	}
	if members, err := c.Members(ctx); err != nil || len(members) != 1 {
		t.Fatalf("Members by alice = %v, %v; the list stays open", members, err)
	}
	if err := c.AddAuth(ctx, "digest", client.DigestCredential("super", "test")); err != nil {
		t.Fatal(err)
	}
	if _, l, err := rolesOf(c.AddMember(ctx, 2, "127.0.0.1:1", true)); err != nil || fmt.Sprint(l) != "[2]" {
		t.Fatalf("AddMember after AddAuth as the superuser: learners %v, %v", l, err)
	}
	root := dial(t, addr, client.WithAuth("digest", client.DigestCredential("super", "test")))
	if v, l, err := rolesOf(root.RemoveMember(ctx, 2)); err != nil || fmt.Sprint(v) != "[1]" || len(l) != 0 {
		t.Fatalf("RemoveMember by a session dialed as the superuser: %v %v, %v", v, l, err)
	}
}

// rolesOf is roles of a membership call's answer.
func rolesOf(members []client.Member, err error) (voters, learners []int64, _ error) {
	voters, learners = roles(members)
	return voters, learners, err
}

// ackedWriter creates /load-N nodes through cl, one after another, until
// it is stopped, and keeps the paths whose creates were acknowledged.
type ackedWriter struct {
	cancel context.CancelFunc
	done   chan struct{}
	acked  []string // set when done closes
}

func startAckedWriter(ctx context.Context, cl *client.Client) *ackedWriter {
	ctx, cancel := context.WithCancel(ctx)
	w := &ackedWriter{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ctx.Err() == nil; i++ {
			p := fmt.Sprintf("/load-%d", i)
			if _, err := cl.Create(ctx, p, nil, client.Persistent); err == nil {
				w.acked = append(w.acked, p)
			}
		}
	}()
	return w
}

// stopAndCheck stops the writer and fails t unless every acknowledged
// path is on the member at addr, read after a sync; it fails t too if
// none was acknowledged.
func (w *ackedWriter) stopAndCheck(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	w.cancel()
	<-w.done
	check := dial(t, addr)
	if err := check.Sync(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	for _, p := range w.acked {
		if ok, _, err := check.Exists(ctx, p); !ok || err != nil {
			t.Fatalf("acknowledged %s missing on %s: %v", p, addr, err)
		}
	}
	if len(w.acked) == 0 {
		t.Fatal("no write was acknowledged during the changes")
	}
	t.Logf("%d writes acknowledged during the changes, all on %s", len(w.acked), addr)
}
