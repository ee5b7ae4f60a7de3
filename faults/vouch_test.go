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
	t.Parallel()
	c, lead, dir := startLed(t, 3)
	cut := lead%3 + 1
	sessionsSurvive(t, c, dir, cut, "one-way cut", func(on bool) {
		for k, l := range c.links {
			if k[0] == cut && on {
				l.set(linkBlackhole, 0, 0)
			} else if k[0] == cut {
				l.heal()
			}
		}
	})
}

// A leader whose raft goroutine stands still (a disk that does not
// answer, a starved CPU) while the rest of it runs must not keep its
// clients: the others elect a new leader, which hears nothing of their
// sessions. The stalled leader stops vouching for sessions once its raft
// goroutine has heard from no quorum for two election timeouts, and its
// clients move to the others and keep their sessions.
func TestAStalledLeaderExpiresNoSessionOfItsClients(t *testing.T) {
	t.Parallel()
	c, lead, dir := startLed(t, 3)
	sessionsSurvive(t, c, dir, lead, "raft stall", func(on bool) { c.stallRaft(lead, on) })
}

// sessionsSurvive starts four sessions on member on, each with an
// ephemeral, puts it under fault for three session timeouts while the
// clients keep talking, and checks that every session and ephemeral
// lives on: the clients must have moved to other members in time.
func sessionsSurvive(t *testing.T, c *cluster, dir string, on uint64, fault string, set func(on bool)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sleep(ctx, 2*time.Second) // the members' first cards and probes

	// The sessions start on member on: the clients may dial the others
	// only afterwards.
	var placed atomic.Bool
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		if !placed.Load() && addr != c.members[on].addr {
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
		if _, err := cl.Create(ctx, fmt.Sprintf("/survive-%d", i), nil, client.Ephemeral); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
	}
	placed.Store(true)

	set(true)
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
	set(false)

	for i, cl := range clients {
		if err := cl.Err(); err != nil {
			t.Errorf("client %d (session %#x) on member %d lost its session during the %s: %v (logs in %s)", i, cl.SessionID(), on, fault, err, dir)
		}
	}
	check, err := client.Dial(ctx, c.addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	for i := range clients {
		if ok, _, err := check.Exists(ctx, fmt.Sprintf("/survive-%d", i), client.Linearizable()); err != nil || !ok {
			t.Errorf("ephemeral %d after the %s: exists %v, %v", i, fault, ok, err)
		}
	}
}
