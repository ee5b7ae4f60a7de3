package wire

// Stat is a znode's metadata, with ZooKeeper's fields and meanings.
type Stat struct {
	Czxid          int64 // zxid of the create
	Mzxid          int64 // zxid of the last setData (or the create)
	Pzxid          int64 // zxid of the last change to the children
	Ctime          int64 // create time, ms since the Unix epoch
	Mtime          int64 // last setData time, ms since the Unix epoch
	Version        int32 // number of setData calls
	Cversion       int32 // number of changes to the children
	Aversion       int32 // number of ACL changes
	EphemeralOwner int64 // owning session of an ephemeral node, else 0
	DataLength     int32
	NumChildren    int32
}

const statFields = 11

func (enc *encoder) stat(s *Stat) {
	enc.array(statFields)
	enc.int(s.Czxid)
	enc.int(s.Mzxid)
	enc.int(s.Pzxid)
	enc.int(s.Ctime)
	enc.int(s.Mtime)
	enc.int(int64(s.Version))
	enc.int(int64(s.Cversion))
	enc.int(int64(s.Aversion))
	enc.int(s.EphemeralOwner)
	enc.int(int64(s.DataLength))
	enc.int(int64(s.NumChildren))
}

func (dec *decoder) stat(s *Stat) {
	n := dec.array(statFields)
	s.Czxid = dec.int64()
	s.Mzxid = dec.int64()
	s.Pzxid = dec.int64()
	s.Ctime = dec.int64()
	s.Mtime = dec.int64()
	s.Version = dec.int32()
	s.Cversion = dec.int32()
	s.Aversion = dec.int32()
	s.EphemeralOwner = dec.int64()
	s.DataLength = dec.int32()
	s.NumChildren = dec.int32()
	dec.skip(n - statFields)
}

// ConnectRequest is the first frame a client sends. A zero SessionID asks
// for a new session; otherwise the client reattaches SessionID, proving it
// with Password.
type ConnectRequest struct {
	ProtocolVersion int32
	LastZxidSeen    int64 // the highest zxid the client has seen, 0 if none
	TimeoutMs       int32 // the session timeout the client asks for
	SessionID       int64
	Password        []byte
}

const connectRequestFields = 5

// AppendConnectRequest appends m as a frame to dst.
func AppendConnectRequest(dst []byte, m *ConnectRequest) []byte {
	dst, start := beginFrame(dst)
	enc := getEncoder(dst)
	enc.array(connectRequestFields)
	enc.int(int64(m.ProtocolVersion))
	enc.int(m.LastZxidSeen)
	enc.int(int64(m.TimeoutMs))
	enc.int(m.SessionID)
	enc.bytes(m.Password)
	return endFrame(enc.finish(), start)
}

// DecodeConnectRequest decodes a frame body into m.
func DecodeConnectRequest(body []byte, m *ConnectRequest) error {
	dec := getDecoder(body)
	n := dec.array(connectRequestFields)
	m.ProtocolVersion = dec.int32()
	m.LastZxidSeen = dec.int64()
	m.TimeoutMs = dec.int32()
	m.SessionID = dec.int64()
	m.Password = dec.bytes()
	dec.skip(n - connectRequestFields)
	return dec.finish()
}

// ConnectResponse is the server's answer to a ConnectRequest. A non-zero Err
// refuses the connection (for example ErrSessionExpired for an unknown
// session, ErrBadPassword); the server closes the connection after sending
// it.
type ConnectResponse struct {
	ProtocolVersion int32
	TimeoutMs       int32 // the negotiated session timeout
	SessionID       int64
	Password        []byte
	Err             Code
}

const connectResponseFields = 5

// AppendConnectResponse appends m as a frame to dst.
func AppendConnectResponse(dst []byte, m *ConnectResponse) []byte {
	dst, start := beginFrame(dst)
	enc := getEncoder(dst)
	enc.array(connectResponseFields)
	enc.int(int64(m.ProtocolVersion))
	enc.int(int64(m.TimeoutMs))
	enc.int(m.SessionID)
	enc.bytes(m.Password)
	enc.int(int64(m.Err))
	return endFrame(enc.finish(), start)
}

// DecodeConnectResponse decodes a frame body into m.
func DecodeConnectResponse(body []byte, m *ConnectResponse) error {
	dec := getDecoder(body)
	n := dec.array(connectResponseFields)
	m.ProtocolVersion = dec.int32()
	m.TimeoutMs = dec.int32()
	m.SessionID = dec.int64()
	m.Password = dec.bytes()
	m.Err = Code(dec.int32())
	dec.skip(n - connectResponseFields)
	return dec.finish()
}

// Request is any request. Which fields travel depends on Op (see
// docs/protocol.md); the others are zero after decoding.
type Request struct {
	Xid  int32
	Op   Op
	Path string // getEphemerals: the prefix the paths start with

	Data    []byte     // create, setData
	Version int32      // delete, setData, check: expected version, -1 for any
	Mode    CreateMode // create; check: CheckCversion, or 0 for the data version
	TTL     int64      // create with a TTL mode: milliseconds
	Watch   bool       // getData, exists, getChildren: leave a watch

	// Every read (ClassRead): served only once the member has applied
	// everything committed before the request arrived (a raft read
	// index), so the answer is linearizable. Servers of protocol version
	// 1 do not know it and skip it: send it only on a connection of
	// version LinearizableReads or later.
	Linearizable bool
	// getData and exists with Watch (optional): the name of a node in
	// the watched node's parent that waits for it in a lock's queue (a
	// lockq name). If the watched node is deleted, the notification names
	// it in Turns when its acquisition holds the lock by then, which
	// spares the waiter a read of the queue. Servers that do not know it
	// skip it, and their notifications name no turn.
	Waiter string

	Ops []Request // multi: create, delete, setData and check sub-requests

	// create (optional: empty means the server's default ACL) and setACL.
	ACL []ACL

	// auth: the scheme (digest, and so on) and its credential; for digest
	// "user:password".
	AuthScheme string
	AuthData   []byte

	// setWatches and setWatches2: the client's last seen zxid and the
	// watches to restore; the last two lists only in setWatches2.
	RelativeZxid      int64
	DataWatches       []string
	ExistWatches      []string
	ChildWatches      []string
	PersistentWatches []string
	RecursiveWatches  []string
	// setWatches2 (optional, protocol version ResumableWatches): more
	// frames of the same restore follow. The server keeps the watches of
	// such frames and restores them all with the frame without it, in one
	// step, so that the replay has no duplicate and no gap.
	MoreWatches bool
	// setWatches2 (optional): for each watch, in the order of DataWatches,
	// ExistWatches, ChildWatches, PersistentWatches and then
	// RecursiveWatches, the zxid the client has seen its path since: of
	// the reply that set a one-shot watch, or where a lasting watch's
	// replay resumes. On a sharded cluster, whose shards number their
	// zxids each on its own, RelativeZxid does not say what the client saw
	// of a path's shard, and this does (docs/scale-out.md, "Zxids across
	// shards"). Empty: RelativeZxid for every watch.
	WatchZxids []int64
	// setWatches2 (optional, protocol version ShardedWatches): for each
	// persistent and then each recursive watch, the positions (Position)
	// where its replay resumes in each shard it was set in or has had
	// events of.
	WatchPositions [][]int64
	AddWatchMode   AddWatchMode // addWatch
	// addWatch (optional, protocol version ResumableWatches): replay every
	// event after this zxid the watch sees, in zxid order, before the
	// reply (XidReplay notifications); 0: live events only.
	FromZxid    int64
	WatcherType WatcherType // removeWatches

	// memberAdd: ID, Addr (its peer address) and Learner; memberRemove,
	// memberPromote and shardLead: ID.
	Member Member
	// shardLead: the shard's group, whose preferred leader becomes
	// Member.ID (0: its leadership spread as the cluster's are).
	Shard uint64
	// reconfig: the change, in ZooKeeper's terms.
	Reconfig Reconfig

	// Leases. leaseCreate: TTL (ms) and Owner, who asks (shown to
	// operators); leaseRenew: Lease and TTL (0: the lease's own);
	// leaseClose: Lease. create (optional): Lease makes an ephemeral the
	// lease's rather than the session's. leaseCreate (optional): MaxHold
	// (ms), after which no renewal keeps the lease (0: none). leaseRenew
	// (optional): Path, a node the reply says whether the lease still has
	// (Lease.Node).
	Lease   int64
	Owner   string
	MaxHold int64

	// create (optional, not in a multi): answer with the new node's turn
	// in its lock's queue (Reply.Turn), if it is a lock node (lockq).
	TellTurn bool

	Reason string // lockBreak: why the lock is broken, for the log

	Snapshot SnapshotRequest // snapshot
}

// Lease is a lease as a leaseCreate or leaseRenew reply gives it.
type Lease struct {
	ID       int64
	TTLMs    int64
	Expires  int64 // ms since the Unix epoch, by the clock of the member that took the renewal
	Version  int64 // 1 at creation, one more at each renewal
	MaxUntil int64 // ms since the Unix epoch: when it ends whatever its renewals; 0: never
	// Node is, for a leaseRenew that named a node (Request.Path), whether
	// the renewed lease has it: NodeHeld or NodeGone. NodeNotLooked
	// otherwise, and from a member that does not look (before this field).
	Node NodeState
}

// NodeState is what a renewal found of the node it named.
type NodeState int8

// The node states.
const (
	NodeNotLooked NodeState = iota
	NodeHeld                // there, an ephemeral of the renewed lease
	NodeGone                // not there, or not the lease's
)

// Member is a member of the cluster.
type Member struct {
	ID      int64
	Addr    string // peer address
	Learner bool   // a learner receives the log but does not vote
}

// Reconfig is a reconfig request: ZooKeeper's dynamic reconfiguration,
// which changes the members as memberAdd, memberRemove and memberPromote
// do, several at once. Its servers are written as ZooKeeper writes them
// (server.N=host:quorumPort:electionPort:role;clientHost:clientPort); see
// docs/zookeeper-compat.md for how they map onto Arbor's members.
type Reconfig struct {
	Joining    string // servers that come in, or change: server.N=... entries separated by commas
	Leaving    string // ids of servers that go, separated by commas
	NewMembers string // the whole new configuration instead (server.N=... entries); then Joining and Leaving are empty
	FromConfig int64  // the version of the configuration the change is made from; -1 for any
}

// Status is what OpStatus reports of the answering member.
type Status struct {
	ID       int64
	Leader   int64 // 0 if none is known
	Term     int64
	Applied  int64  // last raft entry applied
	Zxid     int64  // last txn applied to the tree
	Digest   uint64 // the tree's digest at Zxid
	Sessions int64
	Znodes   int64
}

// AppendRequest appends r as a frame to dst.
func AppendRequest(dst []byte, r *Request) []byte {
	dst, start := beginFrame(dst)
	enc := getEncoder(dst)
	enc.array(2 + requestFields(r.Op) + optionalFields(r))
	enc.int(int64(r.Xid))
	enc.int(int64(r.Op))
	enc.requestBody(r)
	return endFrame(enc.finish(), start)
}

// DecodeRequest decodes a frame body into r. An unknown op decodes its xid
// and op and then fails with ErrUnimplemented, so the server can answer that
// request with an error instead of closing the connection.
func DecodeRequest(body []byte, r *Request) error {
	*r = Request{}
	dec := getDecoder(body)
	n := dec.array(2)
	r.Xid = dec.int32()
	r.Op = Op(dec.int32())
	want := requestFields(r.Op)
	if want < 0 && dec.err == nil {
		dec.finishUnknown()
		return Errorf(CodeUnimplemented, "unknown op %d", int32(r.Op))
	}
	if dec.err == nil && n-2 < want {
		dec.fail("%s request has %d fields, want %d", r.Op, n-2, want)
	}
	dec.requestBody(r)
	want += dec.optionalFields(r, n-2-want)
	dec.skip(n - 2 - want)
	return dec.finish()
}

// finishUnknown returns dec to the pool without checking what is left.
func (dec *decoder) finishUnknown() {
	dec.r.Reset(nil)
	dec.err = nil
	_ = dec.finish()
}

// requestFields is the number of body fields for op, or -1 for an unknown op.
func requestFields(op Op) int {
	switch op {
	case OpCreate, OpSetWatches:
		return 4
	case OpSetWatches2:
		return 6
	case OpSetData:
		return 3
	case OpAddWatch, OpRemoveWatches:
		return 2
	case OpDelete, OpCheck, OpGetData, OpExists, OpGetChildren:
		return 2
	case OpSync, OpMulti, OpGetEphemerals, OpGetAllChildrenNumber, OpGetACL, OpLocks, OpLockHistory, OpShardPartition:
		return 1
	case OpSetACL:
		return 3
	case OpAuth, OpLockBreak, OpShardSplit, OpShardLead:
		return 2
	case OpPing, OpClose, OpMembers, OpStatus, OpWhoAmI, OpDeadlocks:
		return 0
	case OpMemberAdd:
		return 3
	case OpMemberRemove, OpMemberPromote:
		return 1
	case OpReconfig:
		return 4
	case OpLeaseCreate, OpLeaseRenew:
		return 2
	case OpLeaseClose:
		return 1
	case OpSnapshot:
		return 1
	}
	return -1
}

// optionalFields is the number of fields an encoder sends beyond the
// requestFields a decoder requires: a create's ACL and lease came later, so
// a decoder still takes a create of four fields (which asks for the
// default ACL) or five (no lease); a check's mode came later too, so a
// check of two fields compares the data version.
func optionalFields(r *Request) int {
	switch r.Op {
	case OpCreate:
		if r.TellTurn {
			return 3 // sent only when set
		}
		return 2
	case OpLeaseCreate:
		return 1 // maxHold, which came with it
	case OpLeaseRenew:
		if r.Path != "" {
			return 1 // the node to look at, sent only when named
		}
		return 0
	case OpCheck:
		return 1 // its mode (CheckCversion), which came later
	case OpAddWatch:
		if r.FromZxid != 0 {
			return 1 // sent only when set, so a live watch is as it was
		}
		return 0
	case OpSetWatches2:
		switch {
		case len(r.WatchPositions) > 0:
			return 3 // MoreWatches, the zxids, then the positions
		case len(r.WatchZxids) > 0:
			return 2 // MoreWatches, then the zxids
		case r.MoreWatches:
			return 1
		}
		return 0
	}
	switch {
	case r.Waiter != "" && (r.Op == OpGetData || r.Op == OpExists):
		return 2 // Linearizable, then Waiter: sent only when set
	case r.Linearizable && r.Op.Class() == ClassRead:
		return 1 // sent only when set, so a plain read is as it was
	}
	return 0
}

// optionalFields decodes the optional fields of r that are present (extra
// is how many fields are left), and returns how many it read.
func (dec *decoder) optionalFields(r *Request, extra int) int {
	if extra <= 0 || dec.err != nil {
		return 0
	}
	switch r.Op {
	case OpLeaseCreate:
		r.MaxHold = dec.int64()
		return 1
	case OpLeaseRenew:
		r.Path = dec.str()
		return 1
	case OpCheck:
		r.Mode = CreateMode(dec.int32())
		return 1
	case OpAddWatch:
		r.FromZxid = dec.int64()
		return 1
	case OpSetWatches2:
		r.MoreWatches = dec.bool()
		if extra == 1 {
			return 1
		}
		r.WatchZxids = dec.ints()
		if extra == 2 {
			return 2
		}
		n := dec.array(0)
		for i := 0; i < n && dec.err == nil; i++ {
			r.WatchPositions = append(r.WatchPositions, dec.ints())
		}
		return 3
	case OpCreate:
		r.ACL = dec.acls()
		if extra == 1 {
			return 1
		}
		r.Lease = dec.int64()
		if extra == 2 {
			return 2
		}
		r.TellTurn = dec.bool()
		return 3
	}
	if r.Op.Class() == ClassRead {
		r.Linearizable = dec.bool()
		if extra >= 2 && dec.err == nil && (r.Op == OpGetData || r.Op == OpExists) {
			r.Waiter = dec.str()
			return 2
		}
		return 1
	}
	return 0
}

func (enc *encoder) requestBody(r *Request) {
	switch r.Op {
	case OpCreate:
		enc.str(r.Path)
		enc.bytes(r.Data)
		enc.int(int64(r.Mode))
		enc.int(r.TTL)
		enc.acls(r.ACL)
		enc.int(r.Lease)
		if r.TellTurn {
			enc.bool(true)
		}
	case OpDelete, OpCheck:
		enc.str(r.Path)
		enc.int(int64(r.Version))
		if r.Op == OpCheck {
			enc.int(int64(r.Mode))
		}
	case OpSetData:
		enc.str(r.Path)
		enc.bytes(r.Data)
		enc.int(int64(r.Version))
	case OpGetData, OpExists, OpGetChildren:
		enc.str(r.Path)
		enc.bool(r.Watch)
	case OpSync, OpGetEphemerals, OpGetAllChildrenNumber, OpGetACL, OpLocks, OpLockHistory, OpShardPartition:
		enc.str(r.Path)
	case OpSetACL:
		enc.str(r.Path)
		enc.acls(r.ACL)
		enc.int(int64(r.Version))
	case OpAuth:
		enc.str(r.AuthScheme)
		enc.bytes(r.AuthData)
	case OpLockBreak:
		enc.str(r.Path)
		enc.str(r.Reason)
	case OpShardSplit:
		enc.str(r.Path)
		enc.bytes(r.Data)
	case OpShardLead:
		enc.int(int64(r.Shard))
		enc.int(r.Member.ID)
	case OpMulti:
		enc.array(len(r.Ops))
		for i := range r.Ops {
			op := &r.Ops[i]
			enc.array(1 + requestFields(op.Op) + optionalFields(op))
			enc.int(int64(op.Op))
			enc.requestBody(op)
		}
	case OpSetWatches, OpSetWatches2:
		enc.int(r.RelativeZxid)
		enc.strs(r.DataWatches)
		enc.strs(r.ExistWatches)
		enc.strs(r.ChildWatches)
		if r.Op == OpSetWatches2 {
			enc.strs(r.PersistentWatches)
			enc.strs(r.RecursiveWatches)
			if r.MoreWatches || len(r.WatchZxids) > 0 || len(r.WatchPositions) > 0 {
				enc.bool(r.MoreWatches)
			}
			if len(r.WatchZxids) > 0 || len(r.WatchPositions) > 0 {
				enc.ints(r.WatchZxids)
			}
			if len(r.WatchPositions) > 0 {
				enc.array(len(r.WatchPositions))
				for _, ps := range r.WatchPositions {
					enc.ints(ps)
				}
			}
		}
	case OpAddWatch:
		enc.str(r.Path)
		enc.int(int64(r.AddWatchMode))
		if r.FromZxid != 0 {
			enc.int(r.FromZxid)
		}
	case OpRemoveWatches:
		enc.str(r.Path)
		enc.int(int64(r.WatcherType))
	case OpMemberAdd:
		enc.int(r.Member.ID)
		enc.str(r.Member.Addr)
		enc.bool(r.Member.Learner)
	case OpMemberRemove, OpMemberPromote:
		enc.int(r.Member.ID)
	case OpReconfig:
		enc.str(r.Reconfig.Joining)
		enc.str(r.Reconfig.Leaving)
		enc.str(r.Reconfig.NewMembers)
		enc.int(r.Reconfig.FromConfig)
	case OpLeaseCreate:
		enc.int(r.TTL)
		enc.str(r.Owner)
		enc.int(r.MaxHold)
	case OpLeaseRenew:
		enc.int(r.Lease)
		enc.int(r.TTL)
		if r.Path != "" {
			enc.str(r.Path)
		}
	case OpLeaseClose:
		enc.int(r.Lease)
	case OpSnapshot:
		enc.snapshotRequest(&r.Snapshot)
	}
	switch {
	case r.Waiter != "" && (r.Op == OpGetData || r.Op == OpExists):
		enc.bool(r.Linearizable)
		enc.str(r.Waiter)
	case r.Linearizable && r.Op.Class() == ClassRead:
		enc.bool(true)
	}
}

func (dec *decoder) requestBody(r *Request) {
	switch r.Op {
	case OpCreate:
		r.Path = dec.str()
		r.Data = dec.bytes()
		r.Mode = CreateMode(dec.int32())
		r.TTL = dec.int64()
	case OpDelete, OpCheck:
		r.Path = dec.str()
		r.Version = dec.int32()
	case OpSetData:
		r.Path = dec.str()
		r.Data = dec.bytes()
		r.Version = dec.int32()
	case OpGetData, OpExists, OpGetChildren:
		r.Path = dec.str()
		r.Watch = dec.bool()
	case OpSync, OpGetEphemerals, OpGetAllChildrenNumber, OpGetACL, OpLocks, OpLockHistory, OpShardPartition:
		r.Path = dec.str()
	case OpSetACL:
		r.Path = dec.str()
		r.ACL = dec.acls()
		r.Version = dec.int32()
	case OpAuth:
		r.AuthScheme = dec.str()
		r.AuthData = dec.bytes()
	case OpLockBreak:
		r.Path = dec.str()
		r.Reason = dec.str()
	case OpShardSplit:
		r.Path = dec.str()
		r.Data = dec.bytes()
	case OpShardLead:
		r.Shard = uint64(dec.int64())
		r.Member.ID = dec.int64()
	case OpMulti:
		n := dec.array(0)
		if n > 0 {
			r.Ops = make([]Request, 0, min(n, 64))
		}
		for i := 0; i < n && dec.err == nil; i++ {
			var op Request
			m := dec.array(1)
			op.Op = Op(dec.int32())
			if !op.Op.InMulti() {
				dec.fail("op %s is not allowed in a multi", op.Op)
			}
			want := requestFields(op.Op)
			if dec.err == nil && m-1 < want {
				dec.fail("%s in multi has %d fields, want %d", op.Op, m-1, want)
			}
			dec.requestBody(&op)
			want += dec.optionalFields(&op, m-1-want)
			dec.skip(m - 1 - want)
			r.Ops = append(r.Ops, op)
		}
	case OpSetWatches, OpSetWatches2:
		r.RelativeZxid = dec.int64()
		r.DataWatches = dec.strs()
		r.ExistWatches = dec.strs()
		r.ChildWatches = dec.strs()
		if r.Op == OpSetWatches2 {
			r.PersistentWatches = dec.strs()
			r.RecursiveWatches = dec.strs()
		}
	case OpAddWatch:
		r.Path = dec.str()
		r.AddWatchMode = AddWatchMode(dec.int32())
	case OpRemoveWatches:
		r.Path = dec.str()
		r.WatcherType = WatcherType(dec.int32())
	case OpMemberAdd:
		r.Member.ID = dec.int64()
		r.Member.Addr = dec.str()
		r.Member.Learner = dec.bool()
	case OpMemberRemove, OpMemberPromote:
		r.Member.ID = dec.int64()
	case OpReconfig:
		r.Reconfig.Joining = dec.str()
		r.Reconfig.Leaving = dec.str()
		r.Reconfig.NewMembers = dec.str()
		r.Reconfig.FromConfig = dec.int64()
	case OpLeaseCreate:
		r.TTL = dec.int64()
		r.Owner = dec.str()
	case OpLeaseRenew:
		r.Lease = dec.int64()
		r.TTL = dec.int64()
	case OpLeaseClose:
		r.Lease = dec.int64()
	case OpSnapshot:
		r.Snapshot = dec.snapshotRequest()
	}
}

// Reply answers a Request, or, with Xid == XidNotification, carries a watch
// event. Which fields travel depends on the op and on Err (see
// docs/protocol.md).
type Reply struct {
	Xid  int32
	Zxid int64 // the server's last applied zxid; for a notification, the zxid of the change
	Err  Code

	Path        string   // create: the created path; sync: the path
	Data        []byte   // getData; reconfig: the new configuration; a NodeCreated or NodeDataChanged notification with the node
	Stat        Stat     // create, setData, exists, getData, getChildren; reconfig: the configuration node's; a notification with the node
	Children    []string // getChildren: the names, sorted; getEphemerals: the full paths, sorted; lockBreak: the nodes deleted
	Descendants int32    // getAllChildrenNumber: the node's descendants, the node itself not counted
	Results     []OpResult
	Members     []Member   // members and the member ops: the membership after the change
	Status      Status     // status
	ACL         []ACL      // getACL (with the node's Stat in Stat)
	Identities  []Identity // whoAmI: the connection's identities
	Lease       Lease      // leaseCreate, leaseRenew
	Locks       []LockInfo // locks
	Deadlocks   [][]LockWait
	LockHistory []LockEvent // lockHistory: oldest first
	Snapshot    SnapshotChunk

	// create, when the request asked (Request.TellTurn): the new node's
	// turn in its lock's queue.
	Turn LockTurn

	// Notification fields.
	EventType EventType
	State     SessionState
	// ReplayOf is, in a replayed event (Xid XidReplay), the xid of the
	// addWatch it is replayed for.
	ReplayOf int32
	// Turns are, in a NodeDeleted notification of a watch left with
	// Request.Waiter, the waiters named so whose acquisitions hold their
	// lock once the node is gone.
	Turns []string
	// OldestZxid is, with CodeHistoryCompacted (an addWatch's error reply,
	// or a PersistentWatchRemoved notification after a restore), the
	// oldest zxid a watch can resume from now: every event after it is
	// kept.
	OldestZxid int64
	// Positions is, in the reply to an addWatch (protocol version
	// ShardedWatches), where the watch is set: a position in its path's
	// shard, or one in each shard for a watch whose events come from
	// several. It sees the events after them.
	Positions []int64
}

// LockTurn is, in the reply to a create that asked (Request.TellTurn), the
// new node's place in its lock's queue just after it was made, as a list
// of the queue would show: whether its acquisition holds the lock, and if
// not, the node it waits for (lockq.Blocker), which it watches. A reply
// without it, or with an empty one (Known false: not a lock node, or a
// server that does not know the field), says nothing; the client lists
// the queue.
type LockTurn struct {
	Known   bool
	Holds   bool
	Blocker string // the name of the node it waits for, under the same parent
	Zxid    int64  // the member's last applied zxid when it looked
}

const lockTurnFields = 3

// OpResult is one sub-request's outcome in a multi reply. When the multi
// failed, the op that failed carries its error, the ops before it carry
// CodeOK and the ops after it CodeRuntimeInconsistency, and none of them
// was applied (ZooKeeper's convention).
type OpResult struct {
	Op   Op
	Err  Code
	Path string // create
	Stat Stat   // create, setData
}

// replyFields is the number of body fields in a successful reply to op.
func replyFields(op Op) int {
	switch op {
	case OpCreate, OpGetData, OpGetChildren, OpGetACL, OpReconfig, OpShardPartition, OpShardSplit, OpShardLead:
		return 2
	case OpSetData, OpExists, OpSync, OpMulti, OpMembers, OpMemberAdd, OpMemberRemove, OpMemberPromote, OpStatus,
		OpGetEphemerals, OpGetAllChildrenNumber, OpSetACL, OpWhoAmI, OpLeaseCreate, OpLeaseRenew, OpLocks, OpDeadlocks, OpLockBreak, OpLockHistory,
		OpSnapshot:
		return 1
	}
	return 0
}

const (
	statusFields = 8
	leaseFields  = 5 // the fewest a decoder takes: Node came later
)

// notificationFields is the number of body fields of a watch event;
// nodeNotificationFields of one that carries the node's data and Stat
// (a NodeCreated or NodeDataChanged whose Stat.Czxid is set).
// turnNotificationFields of a NodeDeleted that names turns: its Data and
// Stat are sent empty, so that a decoder that does not know Turns skips
// them.
const (
	notificationFields     = 3
	nodeNotificationFields = 5
	turnNotificationFields = 6
)

// carriesNode reports whether notification r carries the node's data and
// Stat.
func carriesNode(r *Reply) bool {
	return (r.EventType == EventNodeCreated || r.EventType == EventNodeDataChanged) && r.Stat.Czxid != 0
}

// AppendReply appends r, the reply to a request of op, as a frame to dst.
// A notification (r.Xid == XidNotification) ignores op. An error reply
// carries no body, except a multi's, which always carries its results.
func AppendReply(dst []byte, op Op, r *Reply) []byte {
	dst, start := beginFrame(dst)
	enc := getEncoder(dst)
	switch {
	case r.Xid == XidNotification && r.Err == CodeHistoryCompacted:
		enc.array(3 + notificationFields + 1)
		enc.notificationHead(r)
		enc.int(r.OldestZxid)
	case r.Xid == XidNotification:
		turns := r.EventType == EventNodeDeleted && len(r.Turns) > 0
		switch {
		case turns:
			enc.array(3 + turnNotificationFields)
		case carriesNode(r):
			enc.array(3 + nodeNotificationFields)
		default:
			enc.array(3 + notificationFields)
		}
		enc.notificationHead(r)
		switch {
		case turns:
			enc.bytes(nil)
			enc.stat(&Stat{})
			enc.strs(r.Turns)
		case carriesNode(r):
			enc.bytes(r.Data)
			enc.stat(&r.Stat)
		}
	case r.Xid == XidReplay:
		if carriesNode(r) {
			enc.array(3 + notificationFields + 3)
		} else {
			enc.array(3 + notificationFields + 1)
		}
		enc.notificationHead(r)
		enc.int(int64(r.ReplayOf))
		if carriesNode(r) {
			enc.bytes(r.Data)
			enc.stat(&r.Stat)
		}
	case r.Err == CodeHistoryCompacted && op != OpMulti:
		enc.array(4)
		enc.int(int64(r.Xid))
		enc.int(r.Zxid)
		enc.int(int64(r.Err))
		enc.int(r.OldestZxid)
	case r.Err != CodeOK && op != OpMulti:
		enc.array(3)
		enc.int(int64(r.Xid))
		enc.int(r.Zxid)
		enc.int(int64(r.Err))
	default:
		turn := op == OpCreate && r.Turn.Known
		positions := op == OpAddWatch && len(r.Positions) > 0
		if turn || positions {
			enc.array(3 + replyFields(op) + 1)
		} else {
			enc.array(3 + replyFields(op))
		}
		enc.int(int64(r.Xid))
		enc.int(r.Zxid)
		enc.int(int64(r.Err))
		enc.replyBody(op, r)
		if positions {
			enc.ints(r.Positions)
		}
		if turn {
			enc.array(lockTurnFields)
			enc.bool(r.Turn.Holds)
			enc.str(r.Turn.Blocker)
			enc.int(r.Turn.Zxid)
		}
	}
	return endFrame(enc.finish(), start)
}

// notificationHead encodes the fields every notification starts with.
func (enc *encoder) notificationHead(r *Reply) {
	enc.int(int64(r.Xid))
	enc.int(r.Zxid)
	enc.int(int64(r.Err))
	enc.int(int64(r.EventType))
	enc.int(int64(r.State))
	enc.str(r.Path)
}

func (enc *encoder) replyBody(op Op, r *Reply) {
	switch op {
	case OpCreate:
		enc.str(r.Path)
		enc.stat(&r.Stat)
	case OpSetData, OpExists, OpSetACL:
		enc.stat(&r.Stat)
	case OpGetData, OpReconfig, OpShardPartition, OpShardSplit, OpShardLead:
		enc.bytes(r.Data)
		enc.stat(&r.Stat)
	case OpGetACL:
		enc.acls(r.ACL)
		enc.stat(&r.Stat)
	case OpWhoAmI:
		enc.array(len(r.Identities))
		for _, id := range r.Identities {
			enc.array(2)
			enc.str(id.Scheme)
			enc.str(id.ID)
		}
	case OpGetChildren:
		enc.strs(r.Children)
		enc.stat(&r.Stat)
	case OpSync:
		enc.str(r.Path)
	case OpGetEphemerals:
		enc.strs(r.Children)
	case OpGetAllChildrenNumber:
		enc.int(int64(r.Descendants))
	case OpMulti:
		enc.array(len(r.Results))
		for i := range r.Results {
			res := &r.Results[i]
			enc.array(2 + resultFields(res))
			enc.int(int64(res.Op))
			enc.int(int64(res.Err))
			switch resultFields(res) {
			case 2:
				enc.str(res.Path)
				enc.stat(&res.Stat)
			case 1:
				enc.stat(&res.Stat)
			}
		}
	case OpMembers, OpMemberAdd, OpMemberRemove, OpMemberPromote:
		enc.members(r.Members)
	case OpLockBreak:
		enc.strs(r.Children)
	case OpLocks:
		enc.lockInfos(r.Locks)
	case OpDeadlocks:
		enc.deadlocks(r.Deadlocks)
	case OpLockHistory:
		enc.lockEvents(r.LockHistory)
	case OpLeaseCreate, OpLeaseRenew:
		l := &r.Lease
		enc.array(leaseFields + 1)
		enc.int(l.ID)
		enc.int(l.TTLMs)
		enc.int(l.Expires)
		enc.int(l.Version)
		enc.int(l.MaxUntil)
		enc.int(int64(l.Node))
	case OpStatus:
		st := &r.Status
		enc.array(statusFields)
		for _, v := range [statusFields]int64{st.ID, st.Leader, st.Term, st.Applied, st.Zxid, int64(st.Digest), st.Sessions, st.Znodes} {
			enc.int(v)
		}
	case OpSnapshot:
		enc.snapshotChunk(&r.Snapshot)
	}
}

// resultFields is the number of body fields of a multi sub-result: a
// successful create carries path and Stat, a successful setData its Stat.
func resultFields(res *OpResult) int {
	if res.Err != CodeOK {
		return 0
	}
	switch res.Op {
	case OpCreate:
		return 2
	case OpSetData:
		return 1
	}
	return 0
}

// PeekXid returns the xid of a reply frame body, so that a client can tell
// which request (and so which op) it answers before decoding it.
func PeekXid(body []byte) (int32, error) {
	dec := getDecoder(body)
	dec.array(3)
	xid := dec.int32()
	err := dec.err
	dec.finishUnknown()
	if err != nil {
		return 0, &Error{Code: CodeMalformed, Msg: "malformed frame: " + err.Error()}
	}
	return xid, nil
}

// DecodeReply decodes a frame body that answers a request of op into r. For
// a notification (xid XidNotification) op is ignored.
func DecodeReply(body []byte, op Op, r *Reply) error {
	*r = Reply{}
	dec := getDecoder(body)
	n := dec.array(3)
	r.Xid = dec.int32()
	r.Zxid = dec.int64()
	r.Err = Code(dec.int32())
	want := 0
	switch {
	case dec.err != nil:
	case r.Xid == XidNotification || r.Xid == XidReplay:
		want = notificationFields
		if r.Xid == XidReplay {
			want++
		}
		if n-3 < want {
			dec.fail("notification has %d fields, want %d", n-3, want)
		}
		r.EventType = EventType(dec.int32())
		r.State = SessionState(dec.int32())
		r.Path = dec.str()
		switch {
		case dec.err != nil:
		case r.Xid == XidReplay:
			r.ReplayOf = dec.int32()
			if n-3 >= want+2 && dec.err == nil {
				want += 2
				r.Data = dec.bytes()
				dec.stat(&r.Stat)
				if !carriesNode(r) {
					r.Data, r.Stat = nil, Stat{}
				}
			}
		case r.Err == CodeHistoryCompacted:
			if n-3 > want {
				r.OldestZxid = dec.int64()
				want++
			}
		case n-3 >= nodeNotificationFields:
			want = nodeNotificationFields
			r.Data = dec.bytes()
			dec.stat(&r.Stat)
			if !carriesNode(r) {
				r.Data, r.Stat = nil, Stat{} // only a created or changed node's are meant
			}
			if n-3 >= turnNotificationFields && r.EventType == EventNodeDeleted && dec.err == nil {
				want = turnNotificationFields
				r.Turns = dec.strs()
			}
		}
	case r.Err == CodeHistoryCompacted && op != OpMulti:
		if n-3 > 0 {
			r.OldestZxid = dec.int64()
			want = 1
		}
	case r.Err != CodeOK && op != OpMulti:
	default:
		want = replyFields(op)
		if n-3 < want {
			dec.fail("%s reply has %d fields, want %d", op, n-3, want)
		}
		dec.replyBody(op, r)
		if op == OpCreate && n-3 > want && dec.err == nil {
			want++
			m := dec.array(lockTurnFields)
			r.Turn = LockTurn{Holds: dec.bool(), Blocker: dec.str(), Zxid: dec.int64()}
			r.Turn.Known = r.Turn.Holds || r.Turn.Blocker != "" // an empty turn says nothing
			dec.skip(m - lockTurnFields)
		}
		if op == OpAddWatch && n-3 > want && dec.err == nil {
			want++
			r.Positions = dec.ints()
		}
	}
	dec.skip(n - 3 - want)
	return dec.finish()
}

func (dec *decoder) replyBody(op Op, r *Reply) {
	switch op {
	case OpCreate:
		r.Path = dec.str()
		dec.stat(&r.Stat)
	case OpSetData, OpExists, OpSetACL:
		dec.stat(&r.Stat)
	case OpGetData, OpReconfig, OpShardPartition, OpShardSplit, OpShardLead:
		r.Data = dec.bytes()
		dec.stat(&r.Stat)
	case OpGetACL:
		r.ACL = dec.acls()
		dec.stat(&r.Stat)
	case OpWhoAmI:
		n := dec.array(0)
		for i := 0; i < n && dec.err == nil; i++ {
			m := dec.array(2)
			id := Identity{Scheme: dec.str(), ID: dec.str()}
			dec.skip(m - 2)
			r.Identities = append(r.Identities, id)
		}
	case OpGetChildren:
		r.Children = dec.strs()
		dec.stat(&r.Stat)
	case OpSync:
		r.Path = dec.str()
	case OpGetEphemerals:
		r.Children = dec.strs()
	case OpGetAllChildrenNumber:
		r.Descendants = dec.int32()
	case OpMulti:
		n := dec.array(0)
		if n > 0 {
			r.Results = make([]OpResult, 0, min(n, 64))
		}
		for i := 0; i < n && dec.err == nil; i++ {
			var res OpResult
			m := dec.array(2)
			res.Op = Op(dec.int32())
			res.Err = Code(dec.int32())
			want := resultFields(&res)
			if dec.err == nil && m-2 < want {
				dec.fail("%s result has %d fields, want %d", res.Op, m-2, want)
			}
			switch want {
			case 2:
				res.Path = dec.str()
				dec.stat(&res.Stat)
			case 1:
				dec.stat(&res.Stat)
			}
			dec.skip(m - 2 - want)
			r.Results = append(r.Results, res)
		}
	case OpMembers, OpMemberAdd, OpMemberRemove, OpMemberPromote:
		r.Members = dec.members()
	case OpLockBreak:
		r.Children = dec.strs()
	case OpLocks:
		r.Locks = dec.lockInfos()
	case OpDeadlocks:
		r.Deadlocks = dec.deadlocks()
	case OpLockHistory:
		r.LockHistory = dec.lockEvents()
	case OpLeaseCreate, OpLeaseRenew:
		n := dec.array(leaseFields)
		l := &r.Lease
		l.ID, l.TTLMs, l.Expires, l.Version, l.MaxUntil = dec.int64(), dec.int64(), dec.int64(), dec.int64(), dec.int64()
		if n > leaseFields { // the node looked at, which came later
			l.Node = NodeState(dec.int32())
			n--
		}
		dec.skip(n - leaseFields)
	case OpStatus:
		n := dec.array(statusFields)
		st := &r.Status
		st.ID, st.Leader, st.Term, st.Applied = dec.int64(), dec.int64(), dec.int64(), dec.int64()
		st.Zxid, st.Digest, st.Sessions, st.Znodes = dec.int64(), uint64(dec.int64()), dec.int64(), dec.int64()
		dec.skip(n - statusFields)
	case OpSnapshot:
		r.Snapshot = dec.snapshotChunk()
	}
}
