package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
	"go.uber.org/zap"
)

// admin answers the membership, status and snapshot ops. A membership
// change (the member ops and reconfig, one path: changeMembers) waits
// until it is applied on this member; the reply lists the members then,
// or for reconfig gives the new configuration. ACLs do not cover them: an
// op that needs admin rights (the membership changes, a snapshot) needs
// what mayAdminister asks; the status and the member list are open to
// every client. Reconfig is first refused to everyone while it is off,
// as ZooKeeper refuses it before it looks at who asks.
func (s *Server) admin(c *conn, req *wire.Request, reply *wire.Reply) {
	ctx, cancel := context.WithTimeout(c.ctx, s.cfg.RequestTimeout)
	defer cancel()
	m := req.Member
	if req.Op == wire.OpReconfig && !s.cfg.ReconfigEnabled {
		reply.Err = zkwire.CodeReconfigDisabled
		return
	}
	authorize := func() error {
		err := s.mayAdminister(c, req.Op)
		if err != nil {
			// The reply carries only the code: the log says why.
			what := "membership change refused"
			switch req.Op {
			case wire.OpSnapshot:
				what = "backup refused"
			case wire.OpShardPartition, wire.OpShardSplit, wire.OpShardLead:
				what = "shard map change refused"
			}
			c.log.Info(what, zap.Stringer("op", req.Op), zap.Int64("member", m.ID),
				zap.Strings("identities", identityNames(whoAmI(c.identities()))), zap.Error(err))
		}
		return err
	}
	// Reconfig asks last, as ZooKeeper does (after the version, the specs
	// and the quorum): kazoo's tests expect those refusals of any client.
	if req.Op.NeedsAdminRights() && req.Op != wire.OpReconfig {
		if err := authorize(); err != nil {
			reply.Err = wire.CodeOf(err)
			return
		}
	}
	var err error
	switch req.Op {
	case wire.OpReconfig:
		r, err := s.reconfig(ctx, &req.Reconfig, authorize)
		reply.Err, reply.Data, reply.Stat = wire.CodeOf(err), r.data, r.stat
		if err != nil {
			c.log.Info("reconfig refused", zap.Any("reconfig", req.Reconfig), zap.Error(err))
		}
		return
	case wire.OpStatus:
		st := s.Status()
		digest, _ := strconv.ParseUint(st.Digest, 16, 64)
		reply.Status = wire.Status{
			ID: int64(st.ID), Leader: int64(st.Leader), Term: int64(st.Term), Applied: int64(st.Applied),
			Zxid: st.Zxid, Digest: digest, Sessions: int64(st.Sessions), Znodes: int64(st.Znodes),
		}
		return
	case wire.OpSnapshot:
		s.snapshot(c, &req.Snapshot, reply)
		return
	case wire.OpShardPartition:
		reply.Data, reply.Stat, err = s.changeShardMap(ctx, func(m *shardmap.Map) (*shardmap.Map, error) { return m.Partition(req.Path) })
		reply.Err = wire.CodeOf(err)
		return
	case wire.OpShardSplit:
		reply.Data, reply.Stat, err = s.splitShards(ctx, req.Path, req.Data)
		reply.Err = wire.CodeOf(err)
		return
	case wire.OpShardLead:
		reply.Data, reply.Stat, err = s.leadShard(ctx, req.Shard, uint64(req.Member.ID))
		reply.Err = wire.CodeOf(err)
		return
	case wire.OpMembers:
	case wire.OpMemberAdd, wire.OpMemberRemove, wire.OpMemberPromote:
		err = s.memberOp(ctx, req.Op, m)
	}
	if err != nil {
		reply.Err = wire.CodeOf(err)
		return
	}
	for _, mem := range s.node.Members() {
		reply.Members = append(reply.Members, wire.Member{ID: int64(mem.ID), Addr: mem.Addr, Learner: mem.Learner})
	}
}

// memberOp makes a member op's change, the reconfig it describes
// (reconfig.go): memberAdd a server that joins, memberRemove one that
// leaves, memberPromote an observer that joins again as a participant.
// Unlike reconfig, it does not ask whether the new voters follow the
// leader: Arbor adds a member before it starts (arbord --join).
func (s *Server) memberOp(ctx context.Context, op wire.Op, m wire.Member) error {
	id := uint64(m.ID)
	cur := s.currentConfig()
	members := s.node.Members()
	i := slices.IndexFunc(members, func(mem raftnode.Member) bool { return mem.ID == id })
	next := slices.Clone(cur.Servers)
	switch op {
	case wire.OpMemberAdd:
		if m.ID <= 0 || m.Addr == "" {
			return wire.Errorf(wire.CodeBadArguments, "a new member needs an id above 0 and a peer address")
		}
		if i >= 0 {
			return wire.Errorf(wire.CodeNodeExists, "member %d already exists", id)
		}
		spec, ok := specFromAddr(id, m.Addr)
		if !ok {
			return wire.Errorf(wire.CodeBadArguments, "peer address %q is not host:port", m.Addr)
		}
		spec.Observer = m.Learner
		next = append(next, spec)
	case wire.OpMemberRemove:
		if i < 0 {
			return wire.Errorf(wire.CodeNoNode, "%v: %d", raftnode.ErrUnknownMember, id)
		}
		if !slices.ContainsFunc(next, func(sp zkwire.ServerSpec) bool { return sp.ID == id }) {
			// A member without a peer address: the configuration does
			// not list it, raft removes it all the same.
			return s.memberChangeError(s.changeMembersRaw(ctx, []raftnode.MemberChange{{ID: id, Remove: true}}))
		}
		next = slices.DeleteFunc(next, func(sp zkwire.ServerSpec) bool { return sp.ID == id })
	case wire.OpMemberPromote:
		if i < 0 || !members[i].Learner {
			return wire.Errorf(wire.CodeNoNode, "%v: %d is not a learner", raftnode.ErrUnknownMember, id)
		}
		for j := range next {
			if next[j].ID == id {
				next[j].Observer = false
			}
		}
		if !slices.ContainsFunc(next, func(sp zkwire.ServerSpec) bool { return sp.ID == id }) {
			// A learner without a peer address (never learned): raft
			// promotes it all the same.
			return s.memberChangeError(s.changeMembersRaw(ctx, []raftnode.MemberChange{{ID: id}}))
		}
	}
	_, err := s.changeMembers(ctx, memberChange{next: next, fromConfig: -1, time: time.Now().UnixMilli()})
	return s.memberChangeError(err)
}

// memberChangeError answers a member op's failed change in Arbor's terms.
func (s *Server) memberChangeError(err error) error {
	if errors.Is(err, errChangeInProgress) {
		return wire.Errorf(wire.CodeThrottled, "another membership change is in progress; try again")
	}
	return err
}

// changeMembersRaw proposes changes without a configuration to write.
func (s *Server) changeMembersRaw(ctx context.Context, changes []raftnode.MemberChange) error {
	o := s.node.ChangeMembers(ctx, changes, nil)
	if errors.Is(o.Err, raftnode.ErrConfChangeInProgress) {
		return errChangeInProgress
	}
	if o.Err == nil {
		s.changeInShards(ctx, changes)
	}
	return s.writeError(o.Err)
}

// reconfig makes ZooKeeper's reconfig: the configuration it asks for
// (zkwire.Reconfigure), through the one path of every membership change,
// answered in ZooKeeper's terms. A single member without --peers is
// ZooKeeper's standalone server, which takes no reconfig.
func (s *Server) reconfig(ctx context.Context, rc *wire.Reconfig, authorize func() error) (configReply, error) {
	if s.transport == nil {
		return configReply{}, wire.Errorf(wire.CodeUnimplemented, "a single member without --peers takes no reconfig, as a standalone ZooKeeper server")
	}
	// The version is checked, and the change worked out, from state at
	// least as new as the leader's when the reconfig came: a follower
	// behind would take a version a change already passed, or miss a
	// member added meanwhile, so it waits for a read index first. (The
	// leader's own log has every change: one not yet applied there is
	// ReconfigInProgress.)
	if s.node.Leader() != s.cfg.ID {
		if err := s.node.ReadIndex(ctx); err != nil {
			return configReply{}, s.writeError(err)
		}
	}
	cur := s.currentConfig()
	if rc.FromConfig != -1 && rc.FromConfig != cur.Version {
		return configReply{}, wire.Errorf(wire.CodeBadVersion, "the configuration is at version %x, not %x", cur.Version, rc.FromConfig)
	}
	next, err := zkwire.Reconfigure(cur.Servers, rc.Joining, rc.Leaving, rc.NewMembers)
	if err != nil {
		return configReply{}, err
	}
	r, err := s.changeMembers(ctx, memberChange{next: next, fromConfig: rc.FromConfig, checkQuorum: true, authorize: authorize, time: time.Now().UnixMilli()})
	switch {
	case errors.Is(err, errChangeInProgress):
		return r, wire.Errorf(zkwire.CodeReconfigInProgress, "%v", err)
	case errors.Is(err, errNewConfigNoQuorum):
		return r, wire.Errorf(zkwire.CodeNewConfigNoQuorum, "%v", err)
	}
	return r, err
}

// mayChangeMembers decides whether c may add, promote or remove members,
// here and through any other protocol that changes them.
func (s *Server) mayChangeMembers(c *conn) error {
	return memberRights(&s.cfg, "membership changes", c.nc.RemoteAddr(), c.identities())
}

// mayAdminister decides whether c may run op, an op that needs admin
// rights: the rights to change the members, which a backup of the whole
// state (every node, whatever its ACL) needs too.
func (s *Server) mayAdminister(c *conn, op wire.Op) error {
	switch op {
	case wire.OpSnapshot:
		return memberRights(&s.cfg, "backups", c.nc.RemoteAddr(), c.identities())
	case wire.OpShardPartition, wire.OpShardSplit, wire.OpShardLead:
		return memberRights(&s.cfg, "changes of the shard map", c.nc.RemoteAddr(), c.identities())
	}
	return s.mayChangeMembers(c)
}

// memberRights is the rule of mayChangeMembers, and of the other acts of
// an operator (what names them, for the refusal), for a client at from
// with identities ids. Where from: a loopback address, or any with RemoteAdmin.
// Who: anyone, until a superuser or client certificates are configured;
// then only the superuser or a certificate named in AdminIdentities (every
// process and account on a host shares its loopback address, so it proves
// nothing once there are identities to ask for).
func memberRights(cfg *Config, what string, from net.Addr, ids []wire.Identity) error {
	if !cfg.RemoteAdmin && !isLoopback(from) {
		return wire.Errorf(wire.CodeNoAuth, "%s are taken only from a loopback address unless the server runs with --remote-admin", what)
	}
	if cfg.SuperDigest == "" && cfg.TLSCA == "" {
		return nil
	}
	for _, id := range ids {
		if id.Scheme == tree.SuperScheme || slices.Contains(cfg.AdminIdentities, id) {
			return nil
		}
	}
	return wire.Errorf(wire.CodeNoAuth, "%s need %s", what, adminsWanted(cfg))
}

// adminsWanted names who may change the members under cfg, for the
// refusal's message.
func adminsWanted(cfg *Config) string {
	switch {
	case cfg.SuperDigest != "" && len(cfg.AdminIdentities) > 0:
		return "the superuser (auth digest) or a client certificate listed in the admin identities"
	case cfg.SuperDigest != "":
		return "the superuser (auth digest)"
	case len(cfg.AdminIdentities) > 0:
		return "a client certificate listed in the admin identities"
	}
	return "the superuser or an admin certificate, and this server has neither (--super-digest, --admin-identities)"
}

// identityNames writes ids as scheme:id, for the log.
func identityNames(ids []wire.Identity) []string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = id.Scheme + ":" + id.ID
	}
	return names
}

// ParseAdminIdentities parses a list of admin identities, scheme:id
// entries separated by commas, as in
// "x509:CN=ops,O=Arbor,x509:CN=alice,O=Arbor". A subject has commas of its
// own, so an entry ends only before a part that starts with a scheme (a
// ":" before any "="), which an attribute of a subject never does. It
// checks the form; New checks the schemes (see Config.AdminIdentities).
func ParseAdminIdentities(s string) ([]wire.Identity, error) {
	if s == "" {
		return nil, nil
	}
	var entries []string
	for i, part := range strings.Split(s, ",") {
		if i > 0 && (!startsWithScheme(part) || endsEscaped(entries[len(entries)-1])) {
			entries[len(entries)-1] += "," + part
			continue
		}
		entries = append(entries, part)
	}
	ids := make([]wire.Identity, len(entries))
	for i, e := range entries {
		scheme, id, ok := strings.Cut(e, ":")
		if !ok || scheme == "" || id == "" || strings.Contains(scheme, "=") {
			return nil, fmt.Errorf("admin identity %q is not scheme:id, as x509:CN=ops,O=Arbor", e)
		}
		ids[i] = wire.Identity{Scheme: scheme, ID: id}
	}
	return ids, nil
}

// startsWithScheme reports whether part of an identity list starts a new
// entry: it has a ":" before any "=".
func startsWithScheme(part string) bool {
	colon, eq := strings.IndexByte(part, ':'), strings.IndexByte(part, '=')
	return colon > 0 && (eq < 0 || colon < eq)
}

// endsEscaped reports whether s ends in an odd run of backslashes: the
// comma that follows it is escaped, part of a value.
func endsEscaped(s string) bool {
	n := len(s) - len(strings.TrimRight(s, `\`))
	return n%2 == 1
}

// checkAdminIdentities checks Config.AdminIdentities: client certificate
// subjects, written as certSubject writes them, on a server that asks
// clients for certificates.
func checkAdminIdentities(cfg *Config) error {
	for _, id := range cfg.AdminIdentities {
		switch {
		case id.Scheme != "x509":
			return fmt.Errorf("admin identity of scheme %q: only client certificates (x509:SUBJECT) are named admins; the superuser is the super digest", id.Scheme)
		case id.ID == "":
			return errors.New("admin identity x509: has no subject")
		case strings.Contains(strings.ReplaceAll(id.ID, `\,`, ""), ", "):
			// A subject never matches with these spaces: say so now rather
			// than refuse its certificate later.
			return fmt.Errorf("admin identity x509:%s: write the subject without spaces after its commas, as whoami shows it (CN=ops,O=Arbor)", id.ID)
		}
	}
	if len(cfg.AdminIdentities) > 0 && cfg.TLSCA == "" {
		return errors.New("admin identities (--admin-identities) name client certificates, and without a TLS CA (--tls-ca) no client presents one")
	}
	return nil
}

func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
