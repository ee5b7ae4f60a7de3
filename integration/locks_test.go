package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/recipes"
	"github.com/arbor-coord/arbor/server"
)

// withHTTP gives each member of a test cluster an HTTP port.
func withHTTP(cfg *server.Config) { cfg.HTTP = "127.0.0.1:0" }

// lockCall posts body to the lock API of member s, at path, and returns
// the status and the answer; a member that is down is status 0.
func lockCall(s *server.Server, path string, body any) (int, map[string]any) {
	b, _ := json.Marshal(body)
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Post("http://"+s.HTTPAddr().String()+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

// running returns the members that are running now.
func (c *cluster) running() []*server.Server {
	var out []*server.Server
	for id := uint64(1); int(id) <= len(c.cfgs); id++ {
		if s := c.servers[id]; s != nil {
			out = append(out, s)
		}
	}
	return out
}

// HTTP clients hold leases and take turns on a lock through every member
// while the leader dies: the lock is never held twice, tokens still
// increase, and a lease taken before the leader's death outlives it.
func TestHTTPLocksSurviveTheLeadersDeath(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, withHTTP)
	lead := c.leader()
	var mu sync.Mutex
	members := c.running()
	pick := func(i int) *server.Server {
		mu.Lock()
		defer mu.Unlock()
		return members[i%len(members)]
	}

	// A lease held through the leader's death, taken through a follower.
	follower := c.servers[c.follower()]
	// Its TTL outlasts the test: the lease is not renewed meanwhile, and a
	// leader change leaves a lease its replicated deadline.
	code, kept := lockCall(follower, "/api/v1/locks/kept/acquire", map[string]any{"client_id": "keeper", "ttl_ms": 120_000})
	if code != http.StatusOK {
		t.Fatalf("acquire of the kept lock: %d %v", code, kept)
	}

	var inside atomic.Int32
	var lastToken atomic.Int64
	var grants atomic.Int32
	errs := make(chan error, 100)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			client := fmt.Sprintf("worker-%d", w)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s := pick(w + i)
				code, v := lockCall(s, "/api/v1/locks/job/acquire", map[string]any{"client_id": client, "ttl_ms": 5000, "wait_timeout_ms": 2000})
				if code != http.StatusOK {
					continue // a member down, no quorum yet, or the wait ran out: try another
				}
				token := int64(v["fencing_token"].(float64))
				if n := inside.Add(1); n != 1 {
					errs <- fmt.Errorf("%s holds with %d others holding", client, n-1)
				}
				for {
					last := lastToken.Load()
					if token <= last {
						errs <- fmt.Errorf("%s got token %d after %d", client, token, last)
						break
					}
					if lastToken.CompareAndSwap(last, token) {
						break
					}
				}
				grants.Add(1)
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				// Release through any member; if none can, the lease ends
				// by itself.
				for j := range 3 {
					if code, _ := lockCall(pick(w+i+j), "/api/v1/locks/job/release", map[string]any{"lease_id": v["lease_id"]}); code == http.StatusOK {
						break
					}
				}
			}
		})
	}
	waitUntil(t, "a few grants", patience, func() bool { return grants.Load() >= 10 })
	mu.Lock()
	dead := c.servers[lead]
	for i, s := range members {
		if s == dead {
			members = append(members[:i:i], members[i+1:]...)
			break
		}
	}
	mu.Unlock()
	c.stop(lead)
	before := grants.Load()
	waitUntil(t, "grants under the new leader", patience, func() bool { return grants.Load() >= before+10 })
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// The lease taken before the death is still there, and renews.
	renewed := false
	for deadline := time.Now().Add(5 * time.Second); !renewed && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		code, _ := lockCall(follower, "/api/v1/locks/kept/renew", map[string]any{"lease_id": kept["lease_id"]})
		renewed = code == http.StatusOK
	}
	if !renewed {
		t.Error("a lease taken before the leader's death did not outlive it")
	}
}

// A member cut off from the quorum grants no lock: 503.
func TestAMemberWithoutAQuorumGrantsNoLock(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, withHTTP)
	cut := c.follower()
	var others []uint64
	for id := range c.servers {
		if id != cut {
			others = append(others, id)
		}
	}
	c.partition([]uint64{cut}, others)
	s := c.servers[cut]
	waitUntil(t, "the cut member to lose its leader", patience, func() bool { return s.Status().Leader == 0 })
	code, v := lockCall(s, "/api/v1/locks/cut/acquire", map[string]any{"client_id": "w"})
	if code != http.StatusServiceUnavailable || v["error"] == "" {
		t.Errorf("an acquire on a member without a quorum: %d %v, want 503", code, v)
	}
	c.heal()
}

// A token check is linearizable: a follower that lags behind the leader
// does not answer from what it has applied, but learns from the leader
// what is committed first. Asked right after a break through the leader,
// it never calls the broken holder's token current, in either protocol.
func TestATokenCheckOnALaggingFollowerIsNotStale(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, withHTTP)
	lead, lag := c.leader(), c.follower()
	ctx := context.Background()
	holder := dial(t, c.addr(lead))
	m := recipes.NewMutex(holder, "/locks/lag", recipes.WithOwner("old"))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	asker := dial(t, c.addr(lag))
	if v, err := asker.CheckToken(ctx, "/locks/lag", m.Token()); err != nil || !v.Current {
		t.Fatalf("the holder's token on the follower: %+v, %v", v, err)
	}
	c.net.Delay(lead, lag, 100*time.Millisecond) // the follower hears of the break late (within its election timeout)
	defer c.net.Delay(lead, lag, 0)
	if _, err := dial(t, c.addr(lead)).BreakLock(ctx, "/locks/lag", "a test"); err != nil {
		t.Fatal(err)
	}
	if v, err := asker.CheckToken(ctx, "/locks/lag", m.Token()); err != nil || v.Current {
		t.Errorf("the broken holder's token on the lagging follower, through the client: %+v, %v", v, err)
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/api/v1/check?path=/locks/lag&token=%d", c.servers[lag].HTTPAddr(), m.Token()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 200 || v["current"] != false {
		t.Errorf("the broken holder's token on the lagging follower, over HTTP: %d %v %v", resp.StatusCode, v, err)
	}
}
