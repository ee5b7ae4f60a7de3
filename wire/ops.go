package wire

import "fmt"

// Op identifies a request. The numbers follow ZooKeeper's op codes where the
// meaning is the same, so a second codec for ZooKeeper's own protocol maps
// them one to one.
//
// What each op is (its class, whether it is logged, needs the leader or
// admin rights, may be in a multi, which limits it counts against) is one
// row of the table ops below: a new op needs a row there, and the server,
// the admin checks and the limits follow it.
type Op int32

// Request op codes.
const (
	OpCreate      Op = 1
	OpDelete      Op = 2
	OpExists      Op = 3
	OpGetData     Op = 4
	OpSetData     Op = 5
	OpGetChildren Op = 8 // always answers with the parent's Stat (ZooKeeper's getChildren2)
	OpSync        Op = 9
	OpPing        Op = 11
	OpCheck       Op = 13
	OpMulti       Op = 14
	OpSetWatches  Op = 101
	OpClose       Op = -11

	// ACL ops, with ZooKeeper's op codes.
	OpGetACL Op = 6
	OpSetACL Op = 7
	OpAuth   Op = 100 // add an identity to the connection
	OpWhoAmI Op = 107 // the connection's identities

	// Watch ops ZooKeeper added in 3.6, with its op codes.
	OpRemoveWatches Op = 18  // remove a connection's watches of a kind on a path
	OpSetWatches2   Op = 105 // setWatches with persistent and recursive watches too
	OpAddWatch      Op = 106 // a persistent or persistent-recursive watch

	// Reads ZooKeeper added in 3.6, with its op codes.
	OpGetEphemerals        Op = 103 // the calling session's ephemeral nodes under a path prefix
	OpGetAllChildrenNumber Op = 104 // the number of a node's descendants

	// Admin ops, Arbor's own: cluster membership and a member's status.
	OpMembers       Op = 200 // list the members
	OpMemberAdd     Op = 201 // add a voter or a learner
	OpMemberRemove  Op = 202
	OpMemberPromote Op = 203 // make a learner a voter
	OpStatus        Op = 204 // the answering member's leader, term, applied index and digest
	OpSnapshot      Op = 205 // the answering member's whole state, in chunks (a backup)
	// ZooKeeper's reconfig, with its op code: several membership changes
	// at once, in ZooKeeper's terms, answered with the new configuration
	// (the data and Stat of /zookeeper/config).
	OpReconfig Op = 16

	// Lease ops, Arbor's own. A lease is a session without a connection,
	// kept by renewals; an ephemeral created with a lease is the lease's
	// and goes when it ends (a lock bound to a lease).
	OpLeaseCreate Op = 210 // a lease of the calling session, for a TTL
	OpLeaseRenew  Op = 211 // keep one of the calling session's leases for another TTL
	OpLeaseClose  Op = 212 // end one of them, and its ephemerals

	// Lock ops, Arbor's own: the server's view of the locks (queues of
	// lock nodes, package lockq) and of who waits for whom.
	OpLocks       Op = 213 // the locks at or under a path, with their holders and waiters
	OpDeadlocks   Op = 214 // the cycles of the wait-for graph
	OpLockBreak   Op = 215 // free a lock: delete its holders' nodes (ADMIN on the lock's path)
	OpLockHistory Op = 216 // the recent acquisitions and ends of holds of the locks at or under a path

	// The partition map (docs/scale-out.md), read as the data of
	// ShardsPath and changed by these admin ops; each answers with the
	// map's new node, as getData would.
	OpShardPartition Op = 220 // route the children of a parent by the hash of their names
	OpShardSplit     Op = 221 // move the meta group's keys from a key on to a new shard
	OpShardLead      Op = 222 // make a member a shard's preferred leader, and hand it the leadership
)

// OpClass is the kind of request an op is. It decides how a server runs
// the request.
type OpClass int8

// Op classes. The zero OpClass is that of an op this package does not know.
const (
	// ClassRead ops read the member's own tree, under its read lock, in
	// order after the connection's earlier requests. Setting a watch is
	// part of the read (under the same lock), so no change slips between.
	ClassRead OpClass = iota + 1
	// ClassWrite ops change the tree by a txn built from the request,
	// proposed through the raft log as soon as the request is read; the
	// answer waits until the txn is applied on this member.
	ClassWrite
	// ClassWatch ops set or remove the connection's watches. They run as
	// reads do, under the read lock: a watch restored after a reconnect
	// looks at the tree it will watch.
	ClassWatch
	// ClassSession ops are about the session and its connection rather
	// than any node: ping keeps the session alive, close ends it, sync
	// catches this member up with the leader for it, auth and whoAmI add
	// and show the connection's identities.
	ClassSession
	// ClassAdmin ops are about the cluster: its members and a member's
	// status. ACLs do not cover them; changing the members needs admin
	// rights (Op.NeedsAdminRights).
	ClassAdmin
)

var classNames = [...]string{ClassRead: "read", ClassWrite: "write", ClassWatch: "watch", ClassSession: "session", ClassAdmin: "admin"}

func (c OpClass) String() string {
	if c > 0 && int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("OpClass(%d)", int8(c))
}

// Limit names one of the per-client limits a server holds requests to
// (docs/security.md lists them); Op.Counts says which ones an op counts
// against. The limits every request is held to (the frame size, the path
// and name lengths) are not among them.
type Limit uint8

// Limits.
const (
	// LimitOutstanding: the request is held, from read to reply, in its
	// connection's outstanding requests and bytes and in the member's
	// request memory. An op that is not (ping) is answered as soon as it
	// is read, ahead of the requests before it.
	LimitOutstanding Limit = 1 << iota
	// LimitWatches: the request may leave watches, which count against
	// its connection's watch limit.
	LimitWatches
	// LimitEphemerals: the request may create ephemeral nodes, which count
	// against its session's ephemeral limit.
	LimitEphemerals
	// LimitDataSize: the request carries node data, held to the data size
	// limit.
	LimitDataSize
	// LimitListing: the answer is a list of names, held to the listing
	// limits (names and bytes).
	LimitListing
)

// opInfo is one op's row in ops.
type opInfo struct {
	name   string
	class  OpClass
	logged bool  // changes replicated state through the raft log
	leader bool  // only a member that knows a leader can serve it
	admin  bool  // needs the right to change the members, which no ACL gives
	multi  bool  // may be a sub-request of a multi
	xid    int32 // a reserved xid it may carry besides those from 0 up; 0: none
	limits Limit // the per-client limits it counts against
}

// ops is what each op is: the one place that says it. An op without a row
// is unknown (Known reports false) and a server answers it Unimplemented.
var ops = map[Op]opInfo{
	// Writes: every one goes through the log, and so the leader.
	OpCreate:  {name: "create", class: ClassWrite, logged: true, leader: true, multi: true, limits: LimitOutstanding | LimitEphemerals | LimitDataSize},
	OpDelete:  {name: "delete", class: ClassWrite, logged: true, leader: true, multi: true, limits: LimitOutstanding},
	OpSetData: {name: "setData", class: ClassWrite, logged: true, leader: true, multi: true, limits: LimitOutstanding | LimitDataSize},
	// Check is a write: it only means something inside a multi, which is.
	OpCheck:  {name: "check", class: ClassWrite, logged: true, leader: true, multi: true, limits: LimitOutstanding},
	OpMulti:  {name: "multi", class: ClassWrite, logged: true, leader: true, limits: LimitOutstanding | LimitEphemerals | LimitDataSize},
	OpSetACL: {name: "setACL", class: ClassWrite, logged: true, leader: true, limits: LimitOutstanding},

	// Reads: served from what this member holds, leader or not.
	OpGetData:              {name: "getData", class: ClassRead, limits: LimitOutstanding | LimitWatches},
	OpExists:               {name: "exists", class: ClassRead, limits: LimitOutstanding | LimitWatches},
	OpGetChildren:          {name: "getChildren", class: ClassRead, limits: LimitOutstanding | LimitWatches | LimitListing},
	OpGetACL:               {name: "getACL", class: ClassRead, limits: LimitOutstanding},
	OpGetEphemerals:        {name: "getEphemerals", class: ClassRead, limits: LimitOutstanding | LimitListing},
	OpGetAllChildrenNumber: {name: "getAllChildrenNumber", class: ClassRead, limits: LimitOutstanding},

	// Watches: held by the member the client is connected to.
	OpSetWatches:    {name: "setWatches", class: ClassWatch, xid: XidSetWatches, limits: LimitOutstanding | LimitWatches},
	OpSetWatches2:   {name: "setWatches2", class: ClassWatch, xid: XidSetWatches, limits: LimitOutstanding | LimitWatches},
	OpAddWatch:      {name: "addWatch", class: ClassWatch, limits: LimitOutstanding | LimitWatches},
	OpRemoveWatches: {name: "removeWatches", class: ClassWatch, limits: LimitOutstanding},

	// The session and the connection. A ping's answer vouches for a
	// session only the leader keeps alive, so it needs the leader too; it
	// waits behind nothing (no LimitOutstanding).
	OpPing:   {name: "ping", class: ClassSession, leader: true, xid: XidPing},
	OpClose:  {name: "close", class: ClassSession, logged: true, leader: true, limits: LimitOutstanding},
	OpSync:   {name: "sync", class: ClassSession, leader: true, limits: LimitOutstanding},
	OpAuth:   {name: "auth", class: ClassSession, limits: LimitOutstanding},
	OpWhoAmI: {name: "whoAmI", class: ClassSession, limits: LimitOutstanding},

	// Leases are writes: each is a txn, so a lease is the same on every
	// member and outlives the one that granted it.
	OpLeaseCreate: {name: "leaseCreate", class: ClassWrite, logged: true, leader: true, limits: LimitOutstanding | LimitEphemerals},
	OpLeaseRenew:  {name: "leaseRenew", class: ClassWrite, logged: true, leader: true, limits: LimitOutstanding},
	OpLeaseClose:  {name: "leaseClose", class: ClassWrite, logged: true, leader: true, limits: LimitOutstanding},

	// The locks, as this member's state shows them (a sync before asks
	// for the latest).
	OpLocks:       {name: "locks", class: ClassRead, limits: LimitOutstanding},
	OpDeadlocks:   {name: "deadlocks", class: ClassRead, limits: LimitOutstanding},
	OpLockHistory: {name: "lockHistory", class: ClassRead, limits: LimitOutstanding},
	// A break is a write: the delete of the holders' nodes, decided by the
	// member that takes it from the lock's state there, as a multi.
	OpLockBreak: {name: "lockBreak", class: ClassWrite, logged: true, leader: true, limits: LimitOutstanding},

	// The cluster. Membership changes are raft configuration changes.
	OpMembers:       {name: "members", class: ClassAdmin, limits: LimitOutstanding},
	OpStatus:        {name: "status", class: ClassAdmin, limits: LimitOutstanding},
	OpMemberAdd:     {name: "memberAdd", class: ClassAdmin, logged: true, leader: true, admin: true, limits: LimitOutstanding},
	OpMemberRemove:  {name: "memberRemove", class: ClassAdmin, logged: true, leader: true, admin: true, limits: LimitOutstanding},
	OpMemberPromote: {name: "memberPromote", class: ClassAdmin, logged: true, leader: true, admin: true, limits: LimitOutstanding},
	OpReconfig:      {name: "reconfig", class: ClassAdmin, logged: true, leader: true, admin: true, limits: LimitOutstanding},
	// A backup holds every node, whatever its ACL: an operator's act. The
	// member catches up with the leader first (a ReadIndex, as sync).
	OpSnapshot: {name: "snapshot", class: ClassAdmin, leader: true, admin: true, limits: LimitOutstanding},
	// A change of the partition map is a txn of the meta group.
	OpShardPartition: {name: "shardPartition", class: ClassAdmin, logged: true, leader: true, admin: true, limits: LimitOutstanding},
	OpShardSplit:     {name: "shardSplit", class: ClassAdmin, logged: true, leader: true, admin: true, limits: LimitOutstanding},
	OpShardLead:      {name: "shardLead", class: ClassAdmin, logged: true, leader: true, admin: true, limits: LimitOutstanding},
}

// Known reports whether op is one of this package's ops.
func (op Op) Known() bool {
	_, ok := ops[op]
	return ok
}

func (op Op) String() string {
	if info, ok := ops[op]; ok {
		return info.name
	}
	return fmt.Sprintf("op(%d)", int32(op))
}

// Class reports what kind of request op is; 0 for an unknown op.
func (op Op) Class() OpClass { return ops[op].class }

// IsWrite reports whether op changes the tree and so goes through
// replication: whether it is of ClassWrite.
func (op Op) IsWrite() bool { return op.Class() == ClassWrite }

// IsLogged reports whether op changes replicated state through the raft
// log: the writes, close (a txn that ends the session) and the membership
// changes (raft configuration changes).
func (op Op) IsLogged() bool { return ops[op].logged }

// NeedsLeader reports whether only a member that knows a leader can serve
// op: whatever is logged, sync and snapshot (the leader's commit index),
// and ping (it vouches for a session that only the leader keeps alive). A
// member without a leader answers them NoQuorum; it serves the other ops
// from what it holds.
func (op Op) NeedsLeader() bool { return ops[op].leader }

// NeedsAdminRights reports whether op needs the right to change the
// cluster's members, which ACLs do not give (the server's admin rule):
// the membership changes, and a snapshot of the whole state.
func (op Op) NeedsAdminRights() bool { return ops[op].admin }

// InMulti reports whether op may be a sub-request of a multi.
func (op Op) InMulti() bool { return ops[op].multi }

// Counts reports whether op counts against limit.
func (op Op) Counts(limit Limit) bool { return ops[op].limits&limit != 0 }

// reservedXid is the negative xid op may carry besides those from 0 up, or
// 0 if none.
func (op Op) reservedXid() int32 { return ops[op].xid }
