package faults

import (
	"context"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
)

// An Unlock whose delete times out (the member it went through cannot
// reach the leader: outcome unknown) must not leave the holder's node
// behind once the cluster can commit again: the session lives on, and
// every later contender would queue behind that node for as long.
func TestAnUnlockThatTimesOutLeavesNoNodeBehind(t *testing.T) {
	t.Parallel()
	c := startCluster(t, t.TempDir(), 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lead, ok := c.waitLeader(15 * time.Second)
	if !ok {
		t.Fatal("no leader")
	}
	var via uint64 // a follower: the holder's only server
	for _, id := range c.ids {
		if id != lead {
			via = id
			break
		}
	}
	// A session long enough to outlive the cut below.
	holder, err := client.Dial(ctx, []string{c.members[via].addr}, client.WithSessionTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	m := recipes.NewMutex(holder, "/lock/orphan")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}

	// The holder's member hears the leader but cannot answer it: the
	// delete is proposed, forwarded, lost, and times out.
	for _, o := range c.ids {
		if o != via {
			c.links[[2]uint64{via, o}].set(linkBlackhole, 0, 0)
		}
	}
	uctx, ucancel := context.WithTimeout(ctx, requestTimeout+2*time.Second)
	err = m.Unlock(uctx)
	ucancel()
	if err == nil {
		t.Fatal("Unlock succeeded through a member cut off from the leader; the test did not cut it")
	}
	t.Logf("Unlock through the cut-off member: %v", err)
	c.heal()

	other, err := client.Dial(ctx, c.addrs(), client.WithSessionTimeout(sessionTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	defer lcancel()
	if err := recipes.NewMutex(other, "/lock/orphan").Lock(lctx); err != nil {
		names, _, _ := other.Children(ctx, "/lock/orphan")
		t.Fatalf("another contender could not take the lock after the cut healed: %v; the queue: %v", err, names)
	}
}
