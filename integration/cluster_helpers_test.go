package integration

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/server"
	"go.uber.org/zap/zaptest"
)

// cluster is n in-process members, each with its own data dir and client
// port on loopback, that can be stopped, restarted and partitioned. Their
// raft traffic goes over an in-memory network (raftnode.MemNetwork) whose
// faults the tests set, or over TCP on loopback peer ports for the tests
// of the TCP transport itself (peer TLS, overTCP).
type cluster struct {
	t        testing.TB
	net      *raftnode.MemNetwork // nil: the members talk over TCP
	cfgs     map[uint64]server.Config
	servers  map[uint64]*server.Server // nil while stopped
	newPeers map[uint64]string         // peer addresses of members added later
}

// clusterTick is the raft tick of test clusters: elections after 10 ticks.
const clusterTick = 20 * time.Millisecond

// patience is how long a cluster test waits for a condition (a leader, a
// member caught up) before it fails: far more than a loaded machine needs,
// as it only bounds a wait that ends as soon as the condition holds.
const patience = 30 * time.Second

// overTCP is a config change that puts a cluster's raft traffic on TCP, as
// in production, instead of the in-memory network.
func overTCP(cfg *server.Config) { cfg.PeerNetwork = nil }

func startCluster(t testing.TB, n int, mod ...func(*server.Config)) *cluster {
	t.Helper()
	peers := map[uint64]string{}
	for id := uint64(1); id <= uint64(n); id++ {
		peers[id] = freePort(t)
	}
	c := &cluster{t: t, net: raftnode.NewMemNetwork(), cfgs: map[uint64]server.Config{}, servers: map[uint64]*server.Server{}}
	for id := uint64(1); id <= uint64(n); id++ {
		cfg := server.Config{
			ID: id, Listen: freePort(t), HTTP: "-", DataDir: t.TempDir(), Peers: peers, PeerNetwork: c.net,
			MinSessionTimeout: 200 * time.Millisecond, TickInterval: clusterTick,
			RequestTimeout:  3 * time.Second,
			Logger:          zaptest.NewLogger(t).Named(fmt.Sprintf("n%d", id)),
			FourLetterWords: []string{"*"}, // every word, for the tests that ask (the default is srvr and isro)
		}
		for _, m := range mod {
			m(&cfg)
		}
		if cfg.PeerTLSCert != "" {
			cfg.PeerNetwork = nil // peer TLS is the TCP transport's
		}
		if cfg.PeerNetwork == nil {
			c.net = nil
		}
		c.cfgs[id] = cfg
		c.start(id)
	}
	t.Cleanup(func() {
		for id := range c.servers {
			c.stop(id)
		}
	})
	c.leader()
	shardAtStart(t, slices.Collect(maps.Values(c.servers))...)
	return c
}

func (c *cluster) start(id uint64) {
	c.t.Helper()
	s, err := server.New(c.cfgs[id])
	if err != nil {
		c.t.Fatalf("start member %d: %v", id, err)
	}
	c.servers[id] = s
}

func (c *cluster) stop(id uint64) {
	if s := c.servers[id]; s != nil {
		s.Close()
		delete(c.servers, id)
	}
}

func (c *cluster) addr(id uint64) string { return c.cfgs[id].Listen }

// addrs lists every member's client address.
func (c *cluster) addrs() []string {
	var out []string
	for id := uint64(1); int(id) <= len(c.cfgs); id++ {
		out = append(out, c.addr(id))
	}
	return out
}

// leader waits until every running member agrees on one running leader.
func (c *cluster) leader() uint64 {
	c.t.Helper()
	deadline := time.Now().Add(patience)
	for {
		var lead uint64
		agree := true
		for _, s := range c.servers {
			l := s.Status().Leader
			if l == 0 || (lead != 0 && l != lead) {
				agree = false
			}
			lead = l
		}
		if agree && c.servers[lead] != nil {
			return lead
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the cluster agreed on no leader within %v", patience)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// follower returns a running member other than the leader.
func (c *cluster) follower() uint64 {
	lead := c.leader()
	for id := range c.servers {
		if id != lead {
			return id
		}
	}
	c.t.Fatal("no follower running")
	return 0
}

// partition cuts raft traffic between the groups; members in no group are
// left alone. On the in-memory network the cut is in effect when it
// returns.
func (c *cluster) partition(groups ...[]uint64) {
	if c.net != nil {
		c.net.Partition(groups...)
		return
	}
	group := map[uint64]int{}
	for i, g := range groups {
		for _, id := range g {
			group[id] = i
		}
	}
	pass := func(from, to uint64) bool {
		gf, inF := group[from]
		gt, inT := group[to]
		return !inF || !inT || gf == gt
	}
	for _, s := range c.servers {
		s.SetPeerFilter(pass)
	}
}

// heal lifts the partition, and on the in-memory network every other
// fault as well.
func (c *cluster) heal() {
	if c.net != nil {
		c.net.Heal()
		return
	}
	for _, s := range c.servers {
		s.SetPeerFilter(nil)
	}
}

// converged waits until every running member applied the same entries and
// has the same tree digest.
func (c *cluster) converged() {
	c.t.Helper()
	deadline := time.Now().Add(patience)
	for {
		var sts []server.Status
		for _, s := range c.servers {
			sts = append(sts, s.Status())
		}
		same := slices.IndexFunc(sts, func(st server.Status) bool {
			return st.Applied != sts[0].Applied || st.Digest != sts[0].Digest || !slices.EqualFunc(st.Shards, sts[0].Shards, func(a, b server.GroupStatus) bool {
				return a.Group == b.Group && a.Applied == b.Applied && a.Digest == b.Digest
			})
		}) < 0
		if same {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("members did not converge: %+v", sts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// join starts member id as a new member of the running cluster (it must
// have been added with AddMember first).
func (c *cluster) join(id uint64) {
	c.t.Helper()
	var any server.Config
	for _, cfg := range c.cfgs {
		any = cfg
		break
	}
	peers := map[uint64]string{}
	for m, cfg := range c.cfgs {
		peers[m] = cfg.Peers[m]
	}
	peers[id] = c.peerAddr(id)
	cfg := any
	cfg.ID, cfg.Listen, cfg.DataDir, cfg.Peers, cfg.PeerAddr, cfg.Join = id, freePort(c.t), c.t.TempDir(), peers, "", true
	cfg.Logger = zaptest.NewLogger(c.t).Named(fmt.Sprintf("n%d", id))
	c.cfgs[id] = cfg
	c.start(id)
}

// peerAddr gives member id a peer address, once.
func (c *cluster) peerAddr(id uint64) string {
	if c.newPeers == nil {
		c.newPeers = map[uint64]string{}
	}
	if _, ok := c.newPeers[id]; !ok {
		c.newPeers[id] = freePort(c.t)
	}
	return c.newPeers[id]
}
