package client

import (
	"context"
	"fmt"

	"github.com/arbor-coord/arbor/wire"
)

// Member is a member of the cluster: its id, peer address, and whether it
// is a learner (it receives the log but does not vote).
type Member = wire.Member

// ServerStatus is a member's report of itself: who it believes leads, its
// raft term, the last entry it applied, and its tree's zxid and digest (two
// members with equal Zxid have equal Digest).
type ServerStatus = wire.Status

// Members lists the cluster's members.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	return c.members(ctx, "members", wire.Request{Op: wire.OpMembers})
}

// AddMember adds member id with its peer address, as a voter or, with
// learner, a learner; start the new member with --join afterwards. It
// returns the membership once the change is applied on the member this
// client is connected to. One membership change at a time: another in
// progress fails with ErrThrottled.
func (c *Client) AddMember(ctx context.Context, id uint64, peerAddr string, learner bool) ([]Member, error) {
	return c.members(ctx, "add member", wire.Request{Op: wire.OpMemberAdd, Member: Member{ID: int64(id), Addr: peerAddr, Learner: learner}})
}

// RemoveMember removes member id. A removed member stops serving.
func (c *Client) RemoveMember(ctx context.Context, id uint64) ([]Member, error) {
	return c.members(ctx, "remove member", wire.Request{Op: wire.OpMemberRemove, Member: Member{ID: int64(id)}})
}

// PromoteMember makes learner id a voter.
func (c *Client) PromoteMember(ctx context.Context, id uint64) ([]Member, error) {
	return c.members(ctx, "promote member", wire.Request{Op: wire.OpMemberPromote, Member: Member{ID: int64(id)}})
}

func (c *Client) members(ctx context.Context, name string, req wire.Request) ([]Member, error) {
	subject := ""
	if req.Op != wire.OpMembers {
		subject = fmt.Sprint(req.Member.ID)
	}
	rep, err := c.do(ctx, name, subject, req, nil)
	if err != nil {
		return nil, err
	}
	return rep.Members, nil
}

// ServerStatus returns the status of the member this client is connected
// to.
func (c *Client) ServerStatus(ctx context.Context) (ServerStatus, error) {
	rep, err := c.do(ctx, "status", "", wire.Request{Op: wire.OpStatus}, nil)
	if err != nil {
		return ServerStatus{}, err
	}
	return rep.Status, nil
}
