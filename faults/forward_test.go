package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// A write that a follower forwarded to the leader, lost on the way, is
// sent again and applied once: it completes soon after the network
// heals, rather than waiting out the request timeout with an unknown
// outcome and closing its connection.
func TestALostForwardedWriteCompletesOnce(t *testing.T) {
	c, lead, dir := startLed(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	follower := lead%3 + 1
	cl, err := client.Dial(ctx, []string{c.members[follower].addr}, client.WithSessionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Create(ctx, "/fwd", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		// The follower's messages to the leader are lost for 300 ms:
		// shorter than it takes the follower to drop its clients.
		l := c.links[[2]uint64{follower, lead}]
		l.set(linkBlackhole, 0, 0)
		time.AfterFunc(300*time.Millisecond, l.heal)
		wctx, wcancel := context.WithTimeout(ctx, requestTimeout+2*time.Second)
		start := time.Now()
		_, err := cl.Create(wctx, fmt.Sprintf("/fwd/n-%d", i), nil, client.Persistent)
		wcancel()
		if err != nil {
			t.Fatalf("write %d, forwarded while the link to the leader lost everything for 300ms: %v after %v (logs in %s)", i, err, time.Since(start), dir)
		}
		if took := time.Since(start); took >= requestTimeout {
			t.Fatalf("write %d took %v, the request timeout", i, took)
		}
	}
	if kids, st, err := cl.Children(ctx, "/fwd", client.Linearizable()); err != nil || len(kids) != 3 || st.Cversion != 3 {
		t.Fatalf("after three writes: children %v, cversion %d, %v; want three, each applied once", kids, st.Cversion, err)
	}
}
