package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
)

// processCluster is three arbord processes on loopback.
type processCluster struct {
	t                  *testing.T
	dirs, addrs, https map[uint64]string
	peers              string
	procs              map[uint64]*process
}

func startProcessCluster(t *testing.T) *processCluster {
	pc := &processCluster{t: t, dirs: map[uint64]string{}, addrs: map[uint64]string{}, https: map[uint64]string{}, procs: map[uint64]*process{}}
	var peers []string
	for id := uint64(1); id <= 3; id++ {
		pc.dirs[id], pc.addrs[id], pc.https[id] = t.TempDir(), freePort(t), freePort(t)
		peers = append(peers, fmt.Sprintf("%d=%s", id, freePort(t)))
	}
	pc.peers = strings.Join(peers, ",")
	// Members become healthy only together (each needs a leader), so start
	// all three before waiting for any.
	for id := uint64(1); id <= 3; id++ {
		pc.procs[id] = spawnProcess(t, pc.dirs[id], pc.addrs[id], pc.https[id], pc.args(id)...)
	}
	for _, p := range pc.procs {
		p.waitHealthy(t)
	}
	return pc
}

func (pc *processCluster) args(id uint64) []string {
	return []string{"--id", fmt.Sprint(id), "--peers", pc.peers, "--tick", "20ms", "--request-timeout", "3s", "--snapshot-every", "200"}
}

func (pc *processCluster) status(id uint64) (server.Status, error) {
	var st server.Status
	resp, err := http.Get("http://" + pc.https[id] + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// leader waits until the running members agree on a running leader.
func (pc *processCluster) leader() uint64 {
	pc.t.Helper()
	for deadline := time.Now().Add(patience); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var lead uint64
		agree := true
		for id := range pc.procs {
			st, err := pc.status(id)
			if err != nil || st.Leader == 0 || (lead != 0 && st.Leader != lead) {
				agree = false
			}
			lead = st.Leader
		}
		if _, running := pc.procs[lead]; agree && running {
			return lead
		}
	}
	pc.t.Fatalf("no agreed leader within %v", patience)
	return 0
}

// converged waits for equal applied indexes and digests on every member.
func (pc *processCluster) converged() server.Status {
	pc.t.Helper()
	var sts []server.Status
	for deadline := time.Now().Add(patience); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		sts = sts[:0]
		for id := range pc.procs {
			if st, err := pc.status(id); err == nil {
				sts = append(sts, st)
			}
		}
		same := len(sts) == len(pc.procs)
		for _, st := range sts {
			same = same && st.Applied == sts[0].Applied && st.Digest == sts[0].Digest
		}
		if same {
			return sts[0]
		}
	}
	pc.t.Fatalf("members did not converge: %+v", sts)
	return server.Status{}
}

func TestKill9OfTheLeaderUnderLoadLosesNothing(t *testing.T) {
	t.Parallel()
	pc := startProcessCluster(t)
	ctx := testCtx(t)
	var addrs []string
	for _, a := range pc.addrs {
		addrs = append(addrs, a)
	}
	cl, err := client.Dial(ctx, addrs, client.WithSessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Create(ctx, "/k", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]bool{}
	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	const writers = 8
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				p := fmt.Sprintf("/k/w%d-%d", w, i)
				if _, err := cl.Create(loadCtx, p, nil, client.Persistent); err == nil {
					mu.Lock()
					acked[p] = true
					mu.Unlock()
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitUntil(t, "writes acknowledged under load", patience, func() bool { return count() >= 50 })
	lead := pc.leader()
	pc.procs[lead].kill()
	delete(pc.procs, lead)
	killedAt := count()
	newLead := pc.leader()
	// Each writer has one write in flight: past killedAt+writers
	// acknowledgements, a write made after the kill was acknowledged.
	waitUntil(t, fmt.Sprintf("a write made after the leader's kill -9 acknowledged (%d before)", killedAt), patience,
		func() bool { return count() > killedAt+writers })
	stop()
	wg.Wait()
	pc.procs[lead] = startProcess(t, pc.dirs[lead], pc.addrs[lead], pc.https[lead], pc.args(lead)...)
	st := pc.converged()
	t.Logf("leader %d killed at %d acknowledged writes; %d led next; %d in all; converged at applied %d digest %s",
		lead, killedAt, newLead, count(), st.Applied, st.Digest)

	check, err := client.Dial(ctx, []string{pc.addrs[lead]})
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	mu.Lock()
	defer mu.Unlock()
	for p := range acked {
		if ok, _, err := check.Exists(ctx, p); !ok || err != nil {
			t.Fatalf("acknowledged %s missing on the restarted member: %v", p, err)
		}
	}
}
