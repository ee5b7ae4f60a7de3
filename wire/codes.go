package wire

import "fmt"

// Reserved xids. Client requests use xids >= 0; the negative ones mark
// frames that do not answer a numbered request.
const (
	XidNotification int32 = -1 // a watch event pushed by the server
	XidPing         int32 = -2 // a keepalive and its reply
	XidClosing      int32 = -3 // the server's last word before it closes the connection
	XidSetWatches   int32 = -8 // re-registration of watches after a reconnect
	// XidReplay marks a past event replayed for one addWatch with a
	// FromZxid (Reply.ReplayOf names its xid): it is that watch's alone,
	// and comes before the addWatch's reply. Servers send it; clients
	// never do.
	XidReplay int32 = -9
)

// RequestXidAllowed reports whether a client may send a request of op with
// xid: any xid from 0 up, and the reserved xids only for the requests they
// name (XidPing for a ping, XidSetWatches for setWatches and setWatches2,
// as their rows in ops say). A reply echoes its request's xid, so any other
// negative xid would come back looking like a notification, a ping's answer
// or a closing frame.
func RequestXidAllowed(xid int32, op Op) bool {
	return xid >= 0 || xid == op.reservedXid()
}

// ProtocolVersion is the version this package speaks in the handshake.
// A server answers with the lower of the client's version and its own, and
// both sides then speak that version on the connection.
const ProtocolVersion int32 = ShardedWatches

// Protocol versions, each with what it added.
const (
	// LinearizableReads (2) added Request.Linearizable.
	LinearizableReads int32 = 2
	// ResumableWatches (3) added addWatch's FromZxid (with its XidReplay
	// notifications and CodeHistoryCompacted) and setWatches2's
	// MoreWatches. A version 2 server would skip FromZxid and start the
	// watch live, leaving a gap: send it only on a connection of version
	// ResumableWatches or later.
	ResumableWatches int32 = 3
	// ShardedWatches (4): a notification's zxid (and a replayed event's)
	// is a position, which names its shard (a plain zxid on a cluster of
	// one shard); an addWatch's reply carries Reply.Positions;
	// setWatches2 carries Request.WatchPositions. A client of an older
	// version gets plain zxids, and its watches that span shards are not
	// restored after a reconnect.
	ShardedWatches int32 = 4
)

// DefaultMaxFrame is the server's default limit on a request frame's length:
// room for a full 1 MiB znode value and 64 KiB for the rest of the request.
// (Replies can be larger; a client sets its own limit for them.)
const DefaultMaxFrame = 1<<20 + 64<<10

// CreateMode says what kind of znode a create makes. The values are
// ZooKeeper's.
type CreateMode int32

// Create modes.
const (
	ModePersistent                  CreateMode = 0
	ModeEphemeral                   CreateMode = 1
	ModePersistentSequential        CreateMode = 2
	ModeEphemeralSequential         CreateMode = 3
	ModeContainer                   CreateMode = 4
	ModePersistentWithTTL           CreateMode = 5
	ModePersistentSequentialWithTTL CreateMode = 6
)

// CheckCversion, as the Mode of a check, compares the check's Version
// with the node's cversion (the version of its list of children) rather
// than its data version. It is Arbor's own: ZooKeeper's check has no mode,
// and a check without one (Mode 0, ModePersistent) compares the data
// version as ZooKeeper's does. A multi of a check of a parent's cversion
// and a create under it makes the create only if the children are still
// those a getChildren listed with that cversion.
const CheckCversion CreateMode = 1

// Valid reports whether m is a known create mode.
func (m CreateMode) Valid() bool { return m >= ModePersistent && m <= ModePersistentSequentialWithTTL }

// IsEphemeral reports whether nodes of mode m belong to a session.
func (m CreateMode) IsEphemeral() bool { return m == ModeEphemeral || m == ModeEphemeralSequential }

// IsSequential reports whether mode m appends a sequence number to the name.
func (m CreateMode) IsSequential() bool {
	return m == ModePersistentSequential || m == ModeEphemeralSequential || m == ModePersistentSequentialWithTTL
}

// IsTTL reports whether nodes of mode m expire after a time to live.
func (m CreateMode) IsTTL() bool {
	return m == ModePersistentWithTTL || m == ModePersistentSequentialWithTTL
}

// IsContainer reports whether m is the container mode.
func (m CreateMode) IsContainer() bool { return m == ModeContainer }

func (m CreateMode) String() string {
	switch m {
	case ModePersistent:
		return "persistent"
	case ModeEphemeral:
		return "ephemeral"
	case ModePersistentSequential:
		return "persistent-sequential"
	case ModeEphemeralSequential:
		return "ephemeral-sequential"
	case ModeContainer:
		return "container"
	case ModePersistentWithTTL:
		return "persistent-ttl"
	case ModePersistentSequentialWithTTL:
		return "persistent-sequential-ttl"
	}
	return fmt.Sprintf("mode(%d)", int32(m))
}

// EventType says what a watch event reports. The values are ZooKeeper's.
type EventType int32

// Event types.
const (
	EventNone                EventType = -1 // a session state change, not a node event
	EventNodeCreated         EventType = 1
	EventNodeDeleted         EventType = 2
	EventNodeDataChanged     EventType = 3
	EventNodeChildrenChanged EventType = 4
	// EventPersistentWatchRemoved tells a client that the server dropped
	// its persistent and recursive watches on the event's path: it could
	// not replay what happened while the client was away (setWatches2).
	EventPersistentWatchRemoved EventType = 7
)

func (t EventType) String() string {
	switch t {
	case EventNone:
		return "None"
	case EventNodeCreated:
		return "NodeCreated"
	case EventNodeDeleted:
		return "NodeDeleted"
	case EventNodeDataChanged:
		return "NodeDataChanged"
	case EventNodeChildrenChanged:
		return "NodeChildrenChanged"
	case EventPersistentWatchRemoved:
		return "PersistentWatchRemoved"
	}
	return fmt.Sprintf("EventType(%d)", int32(t))
}

// AddWatchMode is the kind of watch addWatch leaves. The values are
// ZooKeeper's.
type AddWatchMode int32

// Watch modes.
const (
	// AddWatchPersistent fires on every NodeCreated, NodeDeleted,
	// NodeDataChanged and NodeChildrenChanged of its path, and stays.
	AddWatchPersistent AddWatchMode = 0
	// AddWatchPersistentRecursive fires on every NodeCreated, NodeDeleted
	// and NodeDataChanged of its path and of every node below it (never
	// NodeChildrenChanged), and stays.
	AddWatchPersistentRecursive AddWatchMode = 1
)

func (m AddWatchMode) String() string {
	switch m {
	case AddWatchPersistent:
		return "persistent"
	case AddWatchPersistentRecursive:
		return "persistent-recursive"
	}
	return fmt.Sprintf("AddWatchMode(%d)", int32(m))
}

// WatcherType says which of a connection's watches on a path removeWatches
// removes. The values are ZooKeeper's.
type WatcherType int32

// Watcher types.
const (
	WatcherChildren            WatcherType = 1 // one-shot child watches
	WatcherData                WatcherType = 2 // one-shot data and exist watches
	WatcherAny                 WatcherType = 3 // every kind
	WatcherPersistent          WatcherType = 4
	WatcherPersistentRecursive WatcherType = 5
)

// SessionState is the session state carried by a watch event. The values
// are ZooKeeper's KeeperState.
type SessionState int32

// Session states.
const (
	StateDisconnected SessionState = 0
	StateConnected    SessionState = 3
	StateExpired      SessionState = -112
)
