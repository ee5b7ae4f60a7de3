package faults

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// A leader stopped for longer than the session timeout has a table of
// session deadlines that is out of date by the time it runs again; the
// other members elected a new leader meanwhile, which kept the sessions
// alive. When it resumes, its expiry loop may still believe it leads for
// a moment, and the closes it proposes then must not reach the log: raft
// would forward them to the new leader, which would commit them.
func TestAResumedLeaderExpiresNoLiveSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := startCluster(t, dir, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for attempt := 1; attempt <= 3; attempt++ {
		lead, ok := c.waitLeader(15 * time.Second)
		if !ok {
			t.Fatal("no leader")
		}
		// Sessions on the other members only, kept busy: nothing they do
		// depends on the leader about to stop, except through raft.
		var others []string
		for _, id := range c.ids {
			if id != lead {
				others = append(others, c.members[id].addr)
			}
		}
		var clients []*client.Client
		for range 6 {
			cl, err := client.Dial(ctx, others, client.WithSessionTimeout(sessionTimeout))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			clients = append(clients, cl)
		}
		busy, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, cl := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 1000 && busy.Err() == nil; i++ {
					octx, cancel := context.WithTimeout(busy, time.Second)
					_, _, _ = cl.Exists(octx, "/")
					cancel()
					sleep(busy, 100*time.Millisecond)
				}
			}()
		}
		c.pause(lead)
		sleep(ctx, sessionTimeout+time.Second)
		c.resume(lead)
		c.waitLeader(15 * time.Second)
		sleep(ctx, time.Second)
		stop()
		wg.Wait()
		var expired []string
		for i, cl := range clients {
			if cl.Err() != nil {
				expired = append(expired, fmt.Sprintf("client %d (session %#x): %v", i, cl.SessionID(), cl.Err()))
			}
		}
		if len(expired) > 0 {
			t.Fatalf("attempt %d: after member %d (the leader) was stopped for %v and resumed, %d live sessions expired (logs in %s): %v",
				attempt, lead, sessionTimeout+time.Second, len(expired), dir, slices.Clip(expired))
		}
	}
}
