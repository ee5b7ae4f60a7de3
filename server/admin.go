package server

import (
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/wire"
)

// admin answers the membership and status ops. A membership change waits
// until it is applied on this member; the reply lists the members then.
// ACLs do not cover them: membership changes are taken only from clients on a
// loopback address, unless Config.RemoteAdmin allows them from anywhere.
func (s *Server) admin(c *conn, req *wire.Request, reply *wire.Reply) {
	ctx, cancel := context.WithTimeout(c.ctx, s.cfg.RequestTimeout)
	defer cancel()
	id, m := uint64(req.Member.ID), req.Member
	if req.Op != wire.OpStatus && req.Op != wire.OpMembers && !s.cfg.RemoteAdmin && !isLoopback(c.nc.RemoteAddr()) {
		reply.Err = wire.CodeNoAuth
		return
	}
	var err error
	switch req.Op {
	case wire.OpStatus:
		st := s.Status()
		digest, _ := strconv.ParseUint(st.Digest, 16, 64)
		reply.Status = wire.Status{
			ID: int64(st.ID), Leader: int64(st.Leader), Term: int64(st.Term), Applied: int64(st.Applied),
			Zxid: st.Zxid, Digest: digest, Sessions: int64(st.Sessions), Znodes: int64(st.Znodes),
		}
		return
	case wire.OpMembers:
	case wire.OpMemberAdd:
		if m.ID <= 0 || m.Addr == "" {
			err = wire.Errorf(wire.CodeBadArguments, "a new member needs an id above 0 and a peer address")
			break
		}
		err = s.node.AddMember(ctx, id, m.Addr, m.Learner)
	case wire.OpMemberRemove:
		err = s.node.RemoveMember(ctx, id)
	case wire.OpMemberPromote:
		err = s.node.PromoteMember(ctx, id)
	}
	if err != nil {
		reply.Err = wire.CodeOf(s.memberError(err, id))
		return
	}
	for _, mem := range s.node.Members() {
		reply.Members = append(reply.Members, wire.Member{ID: int64(mem.ID), Addr: mem.Addr, Learner: mem.Learner})
	}
}

// memberError maps raftnode's membership errors to protocol errors.
func (s *Server) memberError(err error, id uint64) error {
	switch {
	case errors.Is(err, raftnode.ErrMemberExists):
		return wire.Errorf(wire.CodeNodeExists, "member %d already exists", id)
	case errors.Is(err, raftnode.ErrUnknownMember):
		return wire.Errorf(wire.CodeNoNode, "%v", err)
	case errors.Is(err, raftnode.ErrConfChangeInProgress):
		return wire.Errorf(wire.CodeThrottled, "another membership change is in progress; try again")
	}
	return s.writeError(err)
}

// isAdmin reports whether op is one of the admin ops.
func isAdmin(op wire.Op) bool {
	switch op {
	case wire.OpMembers, wire.OpMemberAdd, wire.OpMemberRemove, wire.OpMemberPromote, wire.OpStatus:
		return true
	}
	return false
}

func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
