package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
)

// Every change of the members, arbor member's (memberAdd, memberRemove,
// memberPromote) and ZooKeeper's reconfig alike, is one operation here:
// the next configuration, in ZooKeeper's terms (zkwire.ServerSpec), is
// worked out from the current one, compared with raft's members, and the
// difference proposed as one raft membership change (raftnode's
// ChangeMembers: one change, or several at once through joint
// consensus). The entry carries the specs of the servers it changes, so
// that every member writes the same /zookeeper/config as it applies it
// (zkconfig.go). The member ops are the reconfigs they describe:
//
//	memberAdd 4 host:2384          server.4=host:2384:0:participant joins
//	memberAdd --learner 4 ...      server.4=host:2384:0:observer joins
//	memberPromote 4                server.4 joins again as a participant
//	memberRemove 4                 4 leaves
//
// A member's one peer port is ZooKeeper's quorum port; the election port
// a reconfig names is kept in the configuration and not used (0 when
// Arbor writes the spec itself).

// Why a membership change was refused, for each protocol to answer in
// its own terms (memberChangeError, reconfig).
var (
	errChangeInProgress  = errors.New("another membership change is in progress; try again")
	errNewConfigNoQuorum = errors.New("the voters of the new configuration are not a quorum connected to the leader and caught up with it")
)

// memberChange is a change of the members: the configuration it makes.
type memberChange struct {
	next []zkwire.ServerSpec // the whole next configuration
	// fromConfig, when not -1, is the version the change is made from:
	// another one is refused with BadVersion.
	fromConfig int64
	// checkQuorum refuses a change of the voters whose new voters are not
	// a quorum the leader hears from and keeps up to date (ZooKeeper's
	// reconfig checks it; arbor member adds a voter before it starts).
	checkQuorum bool
	// authorize, if set, decides whether the asker may make the change,
	// after every other check: ZooKeeper's reconfig checks its rights last.
	authorize func() error
	time      int64 // ms since the Unix epoch: the configuration node's mtime
}

// configReply is the configuration after a change: /zookeeper/config's
// data and Stat (MembershipApplier's result, reconfig's answer).
type configReply struct {
	data []byte
	stat wire.Stat
}

// currentConfig is the configuration now, as a change is worked out from
// it: raft's members, each with its spec in /zookeeper/config (or, for one
// not listed yet, one made from its peer address as this member knows
// it), with raft's role and peer address (the text may still name an old
// one: a cluster restored from another's backup, until each member names
// its own), and the configuration's version.
func (s *Server) currentConfig() zkwire.Config {
	text, _ := s.fsm.config()
	members := s.node.Members()
	servers := mergeConfig(text.Servers, members, nil)
	for _, m := range members {
		if _, listed := specOf(servers, m.ID); !listed {
			if spec, ok := specFromAddr(m.ID, m.Addr); ok {
				spec.Observer = m.Learner
				servers = append(servers, spec)
			}
		}
	}
	slices.SortFunc(servers, func(a, b zkwire.ServerSpec) int { return cmp.Compare(a.ID, b.ID) })
	for i, spec := range servers {
		j := slices.IndexFunc(members, func(m raftnode.Member) bool { return m.ID == spec.ID })
		if members[j].Addr == spec.PeerAddr() {
			continue
		}
		if fromRaft, ok := specFromAddr(spec.ID, members[j].Addr); ok {
			spec.Host, spec.QuorumPort = fromRaft.Host, fromRaft.QuorumPort
			if spec.ElectionPort == spec.QuorumPort {
				spec.ElectionPort = 0
			}
			servers[i] = spec
		}
	}
	return zkwire.Config{Servers: servers, Version: text.Version}
}

// changeMembers makes ch: the one path of every membership change, once
// the asker's rights are checked. It waits until the change is applied
// here (and, for several changes at once, the joint configuration is
// left), and returns the configuration then.
func (s *Server) changeMembers(ctx context.Context, ch memberChange) (configReply, error) {
	cur := s.currentConfig()
	if ch.fromConfig != -1 && ch.fromConfig != cur.Version {
		return configReply{}, wire.Errorf(wire.CodeBadVersion, "the configuration is at version %x, not %x", cur.Version, ch.fromConfig)
	}
	// Two members at one peer address would leave the text unparsable
	// and raft with two members at one address (arbor member add names
	// any address; a reconfig's specs are checked already).
	if err := zkwire.CheckServers(ch.next); err != nil {
		return configReply{}, err
	}
	changes, changed := planChanges(s.node.Members(), cur.Servers, ch.next)
	if len(changes) > 0 && ch.checkQuorum && votersChange(cur.Servers, ch.next) {
		if err := s.newVotersSynced(ctx, ch.next); err != nil {
			return configReply{}, err
		}
	}
	if ch.authorize != nil {
		if err := ch.authorize(); err != nil {
			return configReply{}, err
		}
	}
	if len(changes) == 0 {
		data, stat := s.fsm.configNode()
		return configReply{data, stat}, nil
	}
	o := s.node.ChangeMembers(ctx, changes, changeMeta(ch.time, changed))
	switch {
	case errors.Is(o.Err, raftnode.ErrConfChangeInProgress):
		return configReply{}, errChangeInProgress
	case o.Err != nil:
		return configReply{}, s.writeError(o.Err)
	}
	s.changeInShards(ctx, changes)
	r, _ := o.Result.(configReply)
	return r, nil
}

// planChanges works out the raft changes that make next from the current
// members and their specs: a server that comes in or goes, one whose
// role or peer address changes, and one whose spec changes otherwise (its
// client address, say), which is no change to raft but carries its new
// spec. It returns the changes and the specs they carry. cur is the
// current configuration (currentConfig: raft's members, as specs).
func planChanges(members []raftnode.Member, cur, next []zkwire.ServerSpec) ([]raftnode.MemberChange, []zkwire.ServerSpec) {
	var changes []raftnode.MemberChange
	var changed []zkwire.ServerSpec
	for _, spec := range next {
		i := slices.IndexFunc(members, func(m raftnode.Member) bool { return m.ID == spec.ID })
		j := slices.IndexFunc(cur, func(c zkwire.ServerSpec) bool { return c.ID == spec.ID })
		switch {
		case i < 0:
			changes = append(changes, raftnode.MemberChange{ID: spec.ID, Addr: spec.PeerAddr(), Learner: spec.Observer})
		case members[i].Learner != spec.Observer || members[i].Addr != spec.PeerAddr():
			addr := ""
			if members[i].Addr != spec.PeerAddr() {
				addr = spec.PeerAddr()
			}
			changes = append(changes, raftnode.MemberChange{ID: spec.ID, Addr: addr, Learner: spec.Observer})
		case j < 0 || cur[j] != spec:
			changes = append(changes, raftnode.MemberChange{ID: spec.ID, Learner: spec.Observer})
		default:
			continue
		}
		changed = append(changed, spec)
	}
	// Those that go. A member the configuration cannot list (one without
	// a peer address) is not in cur, and stays.
	for _, c := range cur {
		if !slices.ContainsFunc(next, func(s zkwire.ServerSpec) bool { return s.ID == c.ID }) &&
			slices.ContainsFunc(members, func(m raftnode.Member) bool { return m.ID == c.ID }) {
			changes = append(changes, raftnode.MemberChange{ID: c.ID, Remove: true})
		}
	}
	return changes, changed
}

// votersChange reports whether next has other voters than cur.
func votersChange(cur, next []zkwire.ServerSpec) bool {
	return !slices.Equal(voterIDs(cur), voterIDs(next))
}

func voterIDs(specs []zkwire.ServerSpec) []uint64 {
	var ids []uint64
	for _, s := range specs {
		if !s.Observer {
			ids = append(ids, s.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// newVotersSynced refuses a configuration whose voters are not a quorum
// of members that follow the leader's log, as ZooKeeper's leader refuses
// one without a quorum of synced followers (Leader.isQuorumSynced): the
// group would stop until the others caught up. Which members follow is
// the leader's raft progress (raftnode's Synced): asked here on the
// leader, and elsewhere read from the leader's latest card, at most a
// second old.
func (s *Server) newVotersSynced(ctx context.Context, next []zkwire.ServerSpec) error {
	synced, err := s.syncedMembers(ctx)
	if err != nil {
		return err
	}
	voters := voterIDs(next)
	n := 0
	for _, id := range voters {
		if slices.Contains(synced, id) {
			n++
		}
	}
	if n <= len(voters)/2 {
		return fmt.Errorf("%w: %d of the %d voters %v follow the leader (%v)", errNewConfigNoQuorum, n, len(voters), voters, synced)
	}
	return nil
}

// syncedMembers is the leader's list of the members that follow its log.
func (s *Server) syncedMembers(ctx context.Context) ([]uint64, error) {
	if s.node.IsLeader() {
		return s.node.Synced(ctx)
	}
	lead, term := s.node.Leader(), s.node.Term()
	if lead == 0 || s.cards == nil {
		return nil, wire.ErrNoQuorum
	}
	s.cards.mu.Lock()
	h, ok := s.cards.heard[lead]
	s.cards.mu.Unlock()
	if !ok || time.Since(h.at) > heardWithin || h.card.Leader != lead || h.card.Term != term {
		return nil, fmt.Errorf("%w: this member has no recent word from the leader on its followers; try again, or ask the leader", errNewConfigNoQuorum)
	}
	return h.card.Synced, nil
}

// changeMeta is the meta of a membership change's entry, for every
// member's fsm (zkconfig.go): the configuration node's mtime and the
// specs of the servers the change names, as ZooKeeper writes them.
func changeMeta(time int64, changed []zkwire.ServerSpec) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "time=%d\n", time)
	for _, s := range changed {
		b.WriteString(s.String() + "\n")
	}
	return []byte(b.String())
}

// parseChangeMeta reads changeMeta's meta; what it cannot read it leaves
// out (every member reads the same bytes the same way).
func parseChangeMeta(meta []byte) (time int64, specs []zkwire.ServerSpec) {
	for line := range strings.Lines(string(meta)) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "time="); ok {
			time, _ = strconv.ParseInt(v, 10, 64)
		} else if spec, err := zkwire.ParseServer(line); err == nil {
			specs = append(specs, spec)
		}
	}
	return time, specs
}

// mergeConfig is the configuration of members, as every member writes
// it: for each, the spec given for it (a change's meta), or the one the
// configuration had, with raft's role. Both come from the log, so the
// result is the same on every member; a member with neither (one whose
// spec no change carried yet: a new cluster's first members, until each
// names itself) is left out. Peer addresses known locally never go in:
// --peers may name a member differently on each.
func mergeConfig(had []zkwire.ServerSpec, members []raftnode.Member, given []zkwire.ServerSpec) []zkwire.ServerSpec {
	var out []zkwire.ServerSpec
	for _, m := range members {
		spec, ok := specOf(given, m.ID)
		if !ok {
			spec, ok = specOf(had, m.ID)
		}
		if !ok {
			continue
		}
		spec.Observer = m.Learner
		out = append(out, spec)
	}
	return out
}

func specOf(specs []zkwire.ServerSpec, id uint64) (zkwire.ServerSpec, bool) {
	i := slices.IndexFunc(specs, func(s zkwire.ServerSpec) bool { return s.ID == id })
	if i < 0 {
		return zkwire.ServerSpec{}, false
	}
	return specs[i], true
}

// specFromAddr is the spec of a member Arbor knows only by its peer
// address: that address as the quorum address, election port 0 (Arbor
// has none), no client address.
func specFromAddr(id uint64, addr string) (zkwire.ServerSpec, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return zkwire.ServerSpec{}, false
	}
	spec, err := zkwire.ParseServer(fmt.Sprintf("server.%d=%s:%s:0", id, bracketHost(host), port))
	if err != nil || spec.QuorumPort == 0 {
		return zkwire.ServerSpec{}, false
	}
	return spec, true
}

func bracketHost(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}
