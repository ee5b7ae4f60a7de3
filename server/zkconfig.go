package server

import (
	"cmp"
	"context"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
	"go.uber.org/zap"
)

// /zookeeper/config holds the cluster's configuration in ZooKeeper's
// dynamic-config format (zkwire.Config): a server.N line per member and
// version=, the zxid (raft index) of the node's last write, in hex. Every
// member writes it as it applies a membership change (ApplyMembers),
// from the change's entry and the configuration before it only, so that
// every replica writes the same bytes at the same zxid and a watch on
// the node fires as for any setData. A change that leaves the text as it
// was (the entry that leaves a joint configuration) writes nothing.
// Every write of the node is a tree.TxnSetConfig, whose version line the
// fsm sets to the write's zxid as it applies it (stampVersion), so that
// version= is always the node's mzxid.
//
// Each member tells its own spec: once it is a member, a member whose
// line is missing, or does not name its peer address or the ZooKeeper
// addresses it listens on, or that finds the text naming members raft
// does not have, writes the node itself (registerSelf).

// config is the configuration /zookeeper/config holds, and the node's
// Stat: empty when the node is (a single member without --peers, as a
// standalone ZooKeeper server) or holds what does not parse.
func (f *fsm) config() (zkwire.Config, wire.Stat) {
	data, stat := f.configNode()
	c, err := zkwire.ParseConfig(data)
	if err != nil {
		return zkwire.Config{}, stat
	}
	return c, stat
}

// configNode is the data and Stat of /zookeeper/config.
func (f *fsm) configNode() ([]byte, wire.Stat) {
	var data []byte
	var stat wire.Stat
	f.read(func(t *tree.Tree) { data, stat, _ = t.Get(wire.ConfigPath) })
	return data, stat
}

// ApplyMembers writes the configuration after the membership change at
// index (raftnode.MembershipApplier): raft's members, each with the spec
// the change gave it (its meta, changeMeta) or the one it had, those with
// neither left out until they name themselves (mergeConfig). It returns
// the configuration then, a configReply. It runs on raftnode's apply
// goroutine, as Apply.
func (f *fsm) ApplyMembers(index uint64, members []raftnode.Member, meta []byte) any {
	had, stat := f.config()
	mtime, given := parseChangeMeta(meta)
	next := zkwire.Config{Servers: mergeConfig(had.Servers, members, given), Version: int64(index)}
	if slices.Equal(next.Servers, had.Servers) {
		data, stat := f.configNode()
		return configReply{data, stat}
	}
	if mtime == 0 {
		mtime = stat.Mtime // a change from before the meta had a time: the same on every member
	}
	data := next.Format()
	txn := tree.Txn{Type: tree.TxnSetConfig, Data: data, Version: -1, Time: mtime}
	res, _ := f.Apply(index, tree.AppendTxn(nil, &txn)).(*tree.Result)
	if res == nil || res.Err != nil {
		f.log.Error("writing /zookeeper/config failed", zap.Uint64("index", index), zap.Any("result", res))
		data, stat := f.configNode()
		return configReply{data, stat}
	}
	return configReply{data, res.Stat}
}

// stampVersion sets the version line of a configuration written at
// index to index, so that version= is always the node's mzxid: the
// zxid of its last write, by a membership change or by a member naming
// itself. Data that does not parse as a configuration is written as it is.
func stampVersion(data []byte, index uint64) []byte {
	c, err := zkwire.ParseConfig(data)
	if err != nil || len(c.Servers) == 0 {
		return data
	}
	c.Version = int64(index)
	return c.Format()
}

// registerEvery is how often a member checks that /zookeeper/config names
// its own addresses.
const registerEvery = 500 * time.Millisecond

// registerLoop runs registerSelf until the server stops. It runs only in
// a cluster.
func (s *Server) registerLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(registerEvery)
	defer tick.Stop()
	// A write in flight ends when the server stops, not at its timeout:
	// Close waits for this goroutine before it stops raft.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stopc
		cancel()
	}()
	for {
		select {
		case <-s.stopc:
			return
		case <-tick.C:
		}
		s.registerSelf(ctx)
	}
}

// registerSelf makes this member's line of /zookeeper/config name its
// peer address as the group knows it and the ZooKeeper addresses it
// listens on, if it does not (or the text lists members raft does not
// have, or other roles): a write of the node at the dataVersion it read
// (tree.TxnSetConfig), which fails, to be tried again at the next tick,
// if a membership change or another member's write came first; its
// version line becomes its zxid, as for every write of the node. It asks
// no rights: the member itself writes it. (A write, not a membership change: one at each
// member's start would stand in the way of the changes operators make.)
func (s *Server) registerSelf(ctx context.Context) {
	if s.node.Leader() == 0 {
		return
	}
	members := s.node.Members()
	i := slices.IndexFunc(members, func(m raftnode.Member) bool { return m.ID == s.cfg.ID })
	if i < 0 || members[i].Addr == "" {
		return // not (yet) a member
	}
	self := members[i]
	text, stat := s.fsm.config()
	have, had := specOf(text.Servers, self.ID)
	want := have
	if !had || want.PeerAddr() != self.Addr {
		from, ok := specFromAddr(self.ID, self.Addr)
		if !ok {
			return
		}
		if had && from.QuorumPort != want.ElectionPort {
			from.ElectionPort = want.ElectionPort // the election port given for it stays
		}
		want = from
	}
	want.Observer = self.Learner
	want.Client, want.SecureClient = clientAddr(s.ZKAddr()), clientAddr(s.ZKSecureAddr())
	// The text may also list members raft does not have, or other roles
	// (a cluster restored from a backup of another, whose members it
	// still names). (The other members' lines are theirs to add and
	// correct.)
	stale := false
	next := zkwire.Config{Version: text.Version}
	for _, sp := range text.Servers {
		j := slices.IndexFunc(members, func(m raftnode.Member) bool { return m.ID == sp.ID })
		switch {
		case j < 0:
			stale = true
		case sp.ID == self.ID:
		default:
			stale = stale || members[j].Learner != sp.Observer
			sp.Observer = members[j].Learner
			next.Servers = append(next.Servers, sp)
		}
	}
	if had && want == have && !stale {
		return
	}
	next.Servers = append(next.Servers, want)
	slices.SortFunc(next.Servers, func(a, b zkwire.ServerSpec) int { return cmp.Compare(a.ID, b.ID) })
	txn := tree.Txn{Type: tree.TxnSetConfig, Data: next.Format(), Version: stat.Version, Time: time.Now().UnixMilli()}
	if _, err := s.write(ctx, &txn); err != nil {
		s.log.Debug("registering this member's addresses in /zookeeper/config", zap.Error(err))
		return
	}
	s.log.Info("registered this member's addresses in /zookeeper/config", zap.Stringer("spec", want))
}

// clientAddr writes a ZooKeeper listener's address as a spec's client
// address; "" for none.
func clientAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || tcp == nil {
		return ""
	}
	return net.JoinHostPort(tcp.IP.String(), strconv.Itoa(tcp.Port))
}
