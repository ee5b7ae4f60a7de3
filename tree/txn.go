package tree

import "github.com/arbor-coord/arbor/wire"

// Txn types beyond the client write ops (wire.OpCreate, OpDelete, OpSetData,
// OpCheck, OpMulti), which Txn.Type also takes.
const (
	TxnCreateSession wire.Op = -10 // a client's session, or with LeaseTTL a lease
	TxnRenewLease    wire.Op = -12
	// TxnRenewLeases renews several leases at once, at Time: each of its
	// Ops is a TxnRenewLease (Session, LeaseTTL), applied on its own, so
	// one lease that has ended fails only its own renewal (Result.Renewals).
	// A member batches the renewals that arrive together into one, so that
	// a renewal costs the log a few bytes and not an entry.
	TxnRenewLeases  wire.Op = -13
	TxnCloseSession wire.Op = wire.OpClose
	TxnReap         wire.Op = -50 // delete empty containers and expired TTL nodes
	// TxnSetConfig sets the data of /zookeeper/config (wire.ConfigPath)
	// to Data, at Version (-1: any): the cluster's membership, written by
	// the member as it applies a membership change, for clients to read
	// (ZooKeeper's reconfig, and getConfig). It is a setData without a
	// permission check: the version moves, mzxid and mtime are the txn's,
	// and NodeDataChanged fires. Nothing reads the membership back from
	// the node.
	TxnSetConfig wire.Op = -60
	// TxnSetShardMap writes the cluster's partition map, Data (an encoded
	// shardmap.Map, which must be valid), as the data of
	// /zookeeper/shards (wire.ShardsPath), at Version: the version of the
	// node its proposer read, or -1 when it read none, and then the node
	// is made (readable by anyone). Only this txn writes the node: a
	// client's write of it, or below it, is refused, the superuser's too.
	TxnSetShardMap wire.Op = -61
	// TxnSplit splits the tree's shard (docs/scale-out.md): Data is an
	// encoded shardmap.SplitSpec, whose keys from At on go to a new shard; the
	// tree's map (/zookeeper/shards) says so from then on. The server
	// seeds the new shard's group with the tree as the split left it.
	TxnSplit wire.Op = -62
	// TxnStub makes, in a shard's tree, the ancestors its own nodes need
	// under a partitioned parent: each of Ops (Path, ACL) that the tree
	// lacks, in order, a persistent node with no data, made by the
	// cluster. Their data and Stat are the meta group's; the shard only
	// needs them as parents, and their ACL for the CREATE and DELETE checks
	// of its nodes below them. Only paths the tree's group does not serve.
	TxnStub wire.Op = -63
)

// Txn is one replicated change to the tree. The proposer decides every
// non-deterministic value before proposing: Time, and for a new session its
// ID, Password and TimeoutMs. Apply keeps Data and Password without copying
// them: the caller must not modify them afterwards.
type Txn struct {
	Type    wire.Op
	Time    int64 // ms since the Unix epoch: ctime/mtime of what this txn writes, "now" for TxnReap
	Session int64 // create: the owner of an ephemeral; session txns: the session

	Path    string
	Data    []byte
	Version int32
	Mode    wire.CreateMode
	TTL     int64 // ms, for the TTL create modes

	TimeoutMs int32  // TxnCreateSession
	Password  []byte // TxnCreateSession

	// Leases. TxnCreateSession with LeaseTTL makes a lease (see Lease),
	// which belongs to LeaseParent and was asked for by LeaseOwner;
	// TxnRenewLease keeps one for LeaseTTL (its own TTL if 0) from Time; a
	// TxnCloseSession with LeaseVersion closes a lease only if no renewal
	// came after the version its proposer saw.
	LeaseTTL     int64 // ms
	LeaseParent  int64
	LeaseOwner   string
	LeaseVersion int64
	LeaseMaxHold int64 // TxnCreateSession of a lease: ms after which no renewal keeps it (0: none)

	Ops []Txn // wire.OpMulti

	// ACL is a create's or setACL's ACL, already resolved and checked by
	// the proposer (see ResolveACL); empty is the open ACL.
	ACL []wire.ACL
	// Identities are who asked for the change: the permission checks run
	// on them at apply time, on every replica alike. A multi's ops are
	// checked with the multi's, but for an op with identities of its own
	// (one the server adds as itself to a client's multi; a client's
	// request never makes them). No identities is granted only what
	// world:anyone is.
	Identities []wire.Identity

	// Cause says why a txn that is not a client's own write deletes lock
	// nodes (a break by an admin, the end of a deadlock), with Reason as
	// its asker gave it. They travel in the log so that every member's
	// lock history says the same; the tree lets a break and a close's
	// lock-delays through hard quota limits (see Cause.quotaExempt), and
	// does nothing else with them.
	Cause  Cause
	Reason string
}

// Cause is why a txn deletes lock nodes that are not the asker's own.
type Cause int8

// The causes.
const (
	CauseNone      Cause = iota
	CauseBreak           // an admin broke the lock (its holders' nodes)
	CauseDeadlock        // the member ended the youngest wait of a deadlock
	CauseLockDelay       // the leader put lock-delays ahead of the holds of Session, whose close comes next
	// CauseExpiry: the leader closes Session as expired, its holds lost
	// rather than given up (what a shard that ends it too needs to know).
	CauseExpiry
	// CauseShardEnd: a shard ends Session, which the meta group closed;
	// Reason is how its holds end there, a wire.LockEvent kind, as the
	// meta group's close said it (docs/scale-out.md).
	CauseShardEnd
)

// quotaExempt reports whether a txn of cause c goes through hard quota
// limits. A break and a close's lock-delays are the member's: the only
// nodes they add are the lock-delays that keep a lost holder's lock from
// the next holder for a while, and a full quota over the lock must not
// keep a lock held for good (the close, which waits for its delays,
// would never come) or drop that protection. They are counted in the
// usage all the same, and reported as exempt breaches.
func (c Cause) quotaExempt() bool { return c == CauseBreak || c == CauseLockDelay }

// Result is the outcome of applying a Txn.
type Result struct {
	Err   error           // nil, or an error matching one of wire's sentinels
	Path  string          // create: the path created (with the sequence number)
	Stat  wire.Stat       // create, setData: the node's new Stat
	Multi []wire.OpResult // multi: one result per op
	Lease Lease           // TxnCreateSession of a lease, TxnRenewLease: the lease after it
	// Renewals is, for TxnRenewLeases, the result of each of its renewals,
	// in order: its Lease, or its Err.
	Renewals []Result
	// Closed is, for TxnCloseSession, the leases that ended with the
	// session, in id order.
	Closed []int64
	// Quota lists the quota limits the txn went over: soft ones, which
	// let it through, and the hard one that refused it with
	// ErrQuotaExceeded (in a multi that failed, only that one). The
	// member that proposed the txn logs and counts them.
	Quota []QuotaBreach
}

// Event is a change that fires watches: NodeCreated, NodeDeleted and
// NodeDataChanged name the node; NodeChildrenChanged names the parent.
type Event struct {
	Type wire.EventType
	Path string
	// Data and Stat are the node's right after the change, for
	// NodeCreated and NodeDataChanged (nil and zero otherwise). Data is
	// shared with the tree, which never changes a data slice in place.
	Data []byte
	Stat wire.Stat
	// ACL is the ACL of the node the event names (for NodeDeleted, the
	// one it had), so that the server sends the event only to watchers
	// allowed to read it. It is shared with the tree and immutable.
	ACL []wire.ACL
}

// TxnFromRequest builds the txn for a client write request of session,
// made at time (ms since the Unix epoch) by a connection with identities
// ids; a multi's ops get the session and time too. The request's ACLs
// must be resolved already (see ResolveACL): they are taken as they are.
func TxnFromRequest(r *wire.Request, session, time int64, ids []wire.Identity) Txn {
	t := txnFromRequest(r, session, time)
	t.Identities = ids
	return t
}

func txnFromRequest(r *wire.Request, session, time int64) Txn {
	t := Txn{Type: r.Op, Time: time, Session: session, Path: r.Path, Data: r.Data, Version: r.Version, Mode: r.Mode, TTL: r.TTL, ACL: r.ACL}
	if len(r.Ops) > 0 {
		t.Ops = make([]Txn, len(r.Ops))
		for i := range r.Ops {
			t.Ops[i] = txnFromRequest(&r.Ops[i], session, time)
		}
	}
	return t
}
