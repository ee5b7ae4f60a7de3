package server

import (
	"errors"
	"time"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// Lease TTLs: what a leaseCreate or leaseRenew may ask for, and what one
// that asks for none gets.
const (
	MinLeaseTTL     = time.Second
	MaxLeaseTTL     = time.Hour
	DefaultLeaseTTL = 30 * time.Second
)

// leaseTxn turns txn, built from req of session, into the txn of a lease
// op, and makes the ephemerals of a create with a lease (also in a multi)
// the lease's. A session may use only its own leases.
func (s *Server) leaseTxn(session int64, req *wire.Request, txn *tree.Txn) error {
	switch req.Op {
	case wire.OpLeaseCreate:
		ttl, err := leaseTTL(req.TTL, DefaultLeaseTTL)
		if err != nil {
			return err
		}
		maxHold, err := leaseMaxHold(req.MaxHold)
		if err != nil {
			return err
		}
		*txn = tree.Txn{Type: tree.TxnCreateSession, Session: s.ids.Next(), Time: txn.Time,
			LeaseTTL: ttl, LeaseParent: session, LeaseOwner: lockq.TrimOwner(req.Owner), LeaseMaxHold: maxHold}
	case wire.OpLeaseRenew:
		ttl, err := leaseTTL(req.TTL, 0)
		if err != nil {
			return err
		}
		if err := s.ownLease(session, req.Lease); err != nil {
			return err
		}
		*txn = tree.Txn{Type: tree.TxnRenewLease, Session: req.Lease, Time: txn.Time, LeaseTTL: ttl}
	case wire.OpLeaseClose:
		if err := s.ownLease(session, req.Lease); err != nil {
			return err
		}
		*txn = tree.Txn{Type: tree.TxnCloseSession, Session: req.Lease, Time: txn.Time}
	case wire.OpCreate:
		return s.leaseCreate(session, req, txn)
	case wire.OpMulti:
		for i := range req.Ops {
			if err := s.leaseCreate(session, &req.Ops[i], &txn.Ops[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// leaseCreate makes the ephemeral txn creates, for req, the lease's.
func (s *Server) leaseCreate(session int64, req *wire.Request, txn *tree.Txn) error {
	switch {
	case req.Op != wire.OpCreate || req.Lease == 0:
		return nil
	case !req.Mode.IsEphemeral():
		return wire.Errorf(wire.CodeBadArguments, "only an ephemeral node can be a lease's")
	}
	if err := s.ownLease(session, req.Lease); err != nil {
		return err
	}
	txn.Session = req.Lease
	return nil
}

// ownLease checks that lease is a live lease of session.
func (s *Server) ownLease(session, lease int64) error {
	var l tree.Lease
	var ok bool
	s.fsm.read(func(t *tree.Tree) { l, ok = t.Lease(lease) })
	switch {
	case !ok:
		return wire.Errorf(wire.CodeLeaseExpired, "lease %#x has ended, or never was", lease)
	case l.Parent != session:
		return wire.Errorf(wire.CodeNoAuth, "lease %#x is not this session's", lease)
	}
	return nil
}

// leaseNode says whether lease has the node at path, as a renewal that
// names it answers, read after the renewal applied: what a read the holder
// sent next would say, without that round trip (a lock's holder asks, so
// that a lock broken while its lease lived is not renewed as held).
func (s *Server) leaseNode(lease int64, path string) wire.NodeState {
	g, err := s.groupOfPath(path)
	if err != nil {
		return wire.NodeGone
	}
	var st wire.Stat
	g.fsm.read(func(t *tree.Tree) { st, err = t.Exists(path) })
	if err != nil || st.EphemeralOwner != lease {
		return wire.NodeGone
	}
	return wire.NodeHeld
}

// MaxLeaseHold is the longest maximum hold a lease may ask for.
const MaxLeaseHold = 7 * 24 * time.Hour

// leaseMaxHold checks a lease's maximum hold asked for, in ms (0: none).
func leaseMaxHold(ms int64) (int64, error) {
	if hold := time.Duration(ms) * time.Millisecond; ms != 0 && (hold < MinLeaseTTL || hold > MaxLeaseHold) {
		return 0, wire.Errorf(wire.CodeBadArguments, "a lease's maximum hold is %v to %v, not %v", MinLeaseTTL, MaxLeaseHold, hold)
	}
	return ms, nil
}

// leaseTTL checks a TTL asked for, in ms; 0 gets def.
func leaseTTL(ms int64, def time.Duration) (int64, error) {
	if ms == 0 {
		return def.Milliseconds(), nil
	}
	if ttl := time.Duration(ms) * time.Millisecond; ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return 0, wire.Errorf(wire.CodeBadArguments, "a lease's TTL is %v to %v, not %v", MinLeaseTTL, MaxLeaseTTL, ttl)
	}
	return ms, nil
}

// leaseError is the error a lease op, or a create with a lease, answers
// for err: a lease that is gone is LeaseExpired, not the session's end.
func leaseError(req *wire.Request, err error) error {
	if errors.Is(err, wire.ErrSessionExpired) && usesLease(req) {
		return wire.ErrLeaseExpired
	}
	return err
}

// usesLease reports whether req acts on a lease it names.
func usesLease(req *wire.Request) bool {
	switch req.Op {
	case wire.OpLeaseRenew, wire.OpLeaseClose:
		return true
	case wire.OpMulti:
		for i := range req.Ops {
			if req.Ops[i].Lease != 0 {
				return true
			}
		}
	}
	return req.Lease != 0
}
