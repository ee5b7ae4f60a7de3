package server

import (
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
// version=, the zxid (raft index) of the membership change that last
// changed it, in hex. Every member writes it as it applies a membership
// change (ApplyMembers), from the change's entry and the configuration
// before it only, so that every replica writes the same bytes at the
// same zxid and a watch on the node fires as for any setData. A change
// that leaves the text as it was (the entry that leaves a joint
// configuration) writes nothing.
//
// A member's client addresses are its own to tell: once it is in the
// configuration, a member whose line does not name the ZooKeeper
// addresses it listens on (or its peer address), or that finds the text
// naming other members than raft has, changes its own spec, by a
// membership change that is none to raft (registerSelf).

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
// the change gave it (its meta, changeMeta), or the one it had, or one
// made from its peer address. It returns the configuration then, a
// configReply. It runs on raftnode's apply goroutine, as Apply.
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

// registerEvery is how often a member checks that /zookeeper/config names
// its own addresses.
const registerEvery = 500 * time.Millisecond

// registerLoop runs registerSelf until the server stops. It runs only in
// a cluster.
func (s *Server) registerLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(registerEvery)
	defer tick.Stop()
	for {
		select {
		case <-s.stopc:
			return
		case <-tick.C:
		}
		s.registerSelf()
	}
}

// registerSelf makes this member's line of /zookeeper/config name its
// peer address as the group knows it and the ZooKeeper addresses it
// listens on, if it does not (or the text lists other members than raft
// has): a membership change that only carries this member's spec, which
// every member applies as any other (ApplyMembers). It asks no rights:
// the member itself makes it.
func (s *Server) registerSelf() {
	if s.node.Leader() == 0 {
		return
	}
	members := s.node.Members()
	i := slices.IndexFunc(members, func(m raftnode.Member) bool { return m.ID == s.cfg.ID })
	if i < 0 || members[i].Addr == "" {
		return // not (yet) a member
	}
	self := members[i]
	text, _ := s.fsm.config()
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
	// still names): any change rewrites it from raft's members. (A member
	// it lacks, and the other members' addresses, are theirs to add and
	// correct.)
	stale := slices.ContainsFunc(text.Servers, func(sp zkwire.ServerSpec) bool {
		i := slices.IndexFunc(members, func(m raftnode.Member) bool { return m.ID == sp.ID })
		return i < 0 || members[i].Learner != sp.Observer
	})
	if had && want == have && !stale {
		return
	}
	// A change of this member's spec only: none to raft.
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	change := []raftnode.MemberChange{{ID: self.ID, Learner: self.Learner}}
	if o := s.node.ChangeMembers(ctx, change, changeMeta(time.Now().UnixMilli(), []zkwire.ServerSpec{want})); o.Err != nil {
		s.log.Debug("registering this member's addresses in /zookeeper/config", zap.Error(o.Err))
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
