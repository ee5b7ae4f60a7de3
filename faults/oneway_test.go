package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// A member whose messages are lost on their way to the others, while it
// still hears them (a one-way cut), must not keep its clients: the
// leader hears nothing of their sessions and would expire them while the
// member answered their pings. The member stops vouching for sessions
// once the leader no longer answers its touches, and its clients move to
// the others and keep their sessions.
func TestAOneWayCutExpiresNoSessionOfTheCutMember(t *testing.T) {
	c, lead, dir := startLed(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cut := lead%3 + 1
	sleep(ctx, 2*time.Second) // the members' first cards and probes

	// Clients whose sessions start on the member about to be cut: they
	// may dial the others only afterwards.
	var placed atomic.Bool
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		if !placed.Load() && addr != c.members[cut].addr {
			return nil, errors.New("not yet")
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	var clients []*client.Client
	for i := range 4 {
		cl, err := client.Dial(ctx, c.addrs(), client.WithSessionTimeout(sessionTimeout), client.WithDialer(dial))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, err := cl.Create(ctx, fmt.Sprintf("/oneway-%d", i), nil, client.Ephemeral); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
	}
	placed.Store(true)

	for k, l := range c.links {
		if k[0] == cut {
			l.set(linkBlackhole, 0, 0)
		}
	}
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Go(func() {
			for i := 0; i < 100 && ctx.Err() == nil; i++ {
				octx, ocancel := context.WithTimeout(ctx, time.Second)
				_, _, _ = cl.Exists(octx, "/")
				ocancel()
				sleep(ctx, 100*time.Millisecond)
			}
		})
	}
	wg.Wait() // 10 s or more: three session timeouts
	c.heal()

	for i, cl := range clients {
		if err := cl.Err(); err != nil {
			t.Errorf("client %d (session %#x) on member %d lost its session during the one-way cut: %v (logs in %s)", i, cl.SessionID(), cut, err, dir)
		}
	}
	check, err := client.Dial(ctx, c.addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	if err := check.Sync(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	for i := range clients {
		if ok, _, err := check.Exists(ctx, fmt.Sprintf("/oneway-%d", i)); err != nil || !ok {
			t.Errorf("ephemeral %d after the cut: exists %v, %v", i, ok, err)
		}
	}
}
