package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/arbor-coord/arbor/wire"
)

// The round-trip tables below are shared with the golden tests, the fuzz
// targets (as seeds) and the benchmarks. Every message in them must come
// back from encode+decode deeply equal, so they only hold fields that travel
// for their op: a field that does not travel would come back zero. Empty
// lists are written as nil because the decoder gives nil for an empty array;
// byte slices keep the nil/empty difference (nil travels as msgpack nil).

// fullStat has a value in every field, spread over msgpack's integer widths.
var fullStat = wire.Stat{
	Czxid:          0x1_0000_0001, // uint64
	Mzxid:          0x1_0000_0002,
	Pzxid:          300,               // uint16
	Ctime:          1_700_000_000_000, // uint64
	Mtime:          1_700_000_123_456,
	Version:        7, // positive fixint
	Cversion:       200,
	Aversion:       0,
	EphemeralOwner: 0x0123_4567_89ab_cdef,
	DataLength:     256,
	NumChildren:    70000, // uint32
}

var connectRequests = []struct {
	name string
	m    wire.ConnectRequest
}{
	{"a new session is asked for with a zero session id and no password", wire.ConnectRequest{
		ProtocolVersion: wire.ProtocolVersion, TimeoutMs: 10000,
	}},
	{"a reattach carries the session id, the password and the last zxid seen", wire.ConnectRequest{
		ProtocolVersion: wire.ProtocolVersion, LastZxidSeen: 0x1_0000_0001, TimeoutMs: 30000,
		SessionID: 0x0123_4567_89ab_cdef, Password: bytes.Repeat([]byte{0xa5}, 16),
	}},
	{"an empty password stays empty rather than nil", wire.ConnectRequest{
		ProtocolVersion: 2, TimeoutMs: 1, SessionID: -1, Password: []byte{},
	}},
}

var connectResponses = []struct {
	name string
	m    wire.ConnectResponse
}{
	{"an accepted connection carries the negotiated timeout, session id and password", wire.ConnectResponse{
		ProtocolVersion: wire.ProtocolVersion, TimeoutMs: 20000,
		SessionID: 0x0123_4567_89ab_cdef, Password: bytes.Repeat([]byte{0x5a}, 16),
	}},
	{"an unknown or expired session is refused with SessionExpired", wire.ConnectResponse{
		ProtocolVersion: wire.ProtocolVersion, Err: wire.CodeSessionExpired,
	}},
	{"a wrong password is refused with BadPassword", wire.ConnectResponse{
		ProtocolVersion: wire.ProtocolVersion, SessionID: 42, Err: wire.CodeBadPassword,
	}},
	{"a server behind the client is refused with NotCaughtUp", wire.ConnectResponse{
		ProtocolVersion: wire.ProtocolVersion, SessionID: 42, Err: wire.CodeNotCaughtUp,
	}},
}

var requests = []struct {
	name string
	r    wire.Request
}{
	{"a create of a persistent node carries path, data and mode", wire.Request{
		Xid: 1, Op: wire.OpCreate, Path: "/app", Data: []byte("config"), Mode: wire.ModePersistent,
	}},
	{"a create of an ephemeral node carries its mode", wire.Request{
		Xid: 2, Op: wire.OpCreate, Path: "/app/lock", Data: []byte{}, Mode: wire.ModeEphemeral,
	}},
	{"a create of a persistent sequential node carries its mode", wire.Request{
		Xid: 3, Op: wire.OpCreate, Path: "/queue/item-", Data: []byte{1, 2, 3}, Mode: wire.ModePersistentSequential,
	}},
	{"a create of an ephemeral sequential node keeps nil data nil", wire.Request{
		Xid: 4, Op: wire.OpCreate, Path: "/election/n_", Mode: wire.ModeEphemeralSequential,
	}},
	{"a create of a container node carries its mode", wire.Request{
		Xid: 5, Op: wire.OpCreate, Path: "/locks", Mode: wire.ModeContainer,
	}},
	{"a create of a persistent node with a TTL carries the TTL in milliseconds", wire.Request{
		Xid: 6, Op: wire.OpCreate, Path: "/cache/entry", Data: []byte("v"), Mode: wire.ModePersistentWithTTL, TTL: 60_000,
	}},
	{"a create of a persistent sequential node with a TTL carries a large TTL", wire.Request{
		Xid: 7, Op: wire.OpCreate, Path: "/cache/seq-", Mode: wire.ModePersistentSequentialWithTTL, TTL: 1 << 40,
	}},
	{"a create with data over 64 KiB and a long path uses the wide lengths", wire.Request{
		Xid: 8, Op: wire.OpCreate, Path: "/" + strings.Repeat("p", 300),
		Data: bytes.Repeat([]byte{0xee}, 70_000), Mode: wire.ModePersistent,
	}},
	{"a delete carries the expected version", wire.Request{
		Xid: 9, Op: wire.OpDelete, Path: "/app", Version: 3,
	}},
	{"a delete of any version carries -1", wire.Request{
		Xid: 10, Op: wire.OpDelete, Path: "/app", Version: -1,
	}},
	{"a setData carries path, data and expected version", wire.Request{
		Xid: 11, Op: wire.OpSetData, Path: "/app/config", Data: []byte("x=1"), Version: 12,
	}},
	{"a setData of any version with nil data keeps both", wire.Request{
		Xid: 12, Op: wire.OpSetData, Path: "/app/config", Version: -1,
	}},
	{"a getData without a watch", wire.Request{
		Xid: 13, Op: wire.OpGetData, Path: "/app/config",
	}},
	{"a getData that leaves a watch", wire.Request{
		Xid: 14, Op: wire.OpGetData, Path: "/app/config", Watch: true,
	}},
	{"an exists without a watch", wire.Request{
		Xid: 15, Op: wire.OpExists, Path: "/app/missing",
	}},
	{"an exists that leaves a watch", wire.Request{
		Xid: 16, Op: wire.OpExists, Path: "/app/missing", Watch: true,
	}},
	{"a getChildren without a watch", wire.Request{
		Xid: 17, Op: wire.OpGetChildren, Path: "/",
	}},
	{"a getChildren that leaves a watch", wire.Request{
		Xid: 18, Op: wire.OpGetChildren, Path: "/app", Watch: true,
	}},
	{"a linearizable getData carries its flag", wire.Request{
		Xid: 18, Op: wire.OpGetData, Path: "/app", Watch: true, Linearizable: true,
	}},
	{"a linearizable exists carries its flag", wire.Request{
		Xid: 18, Op: wire.OpExists, Path: "/app", Linearizable: true,
	}},
	{"a linearizable getChildren carries its flag", wire.Request{
		Xid: 18, Op: wire.OpGetChildren, Path: "/app", Linearizable: true,
	}},
	{"a linearizable getACL carries its flag", wire.Request{
		Xid: 18, Op: wire.OpGetACL, Path: "/app", Linearizable: true,
	}},
	{"a linearizable deadlocks carries its flag", wire.Request{
		Xid: 18, Op: wire.OpDeadlocks, Linearizable: true,
	}},
	{"a getData that leaves a waiter's watch names the waiter", wire.Request{
		Xid: 18, Op: wire.OpGetData, Path: "/lk/_c_ab-lock-0000000001", Watch: true, Waiter: "_c_cd-lock-0000000002",
	}},
	{"a linearizable exists of a waiter carries both", wire.Request{
		Xid: 18, Op: wire.OpExists, Path: "/lk/_c_ab-lock-0000000001", Watch: true, Linearizable: true, Waiter: "_c_cd-lock-0000000002",
	}},
	{"a check carries path and version", wire.Request{
		Xid: 19, Op: wire.OpCheck, Path: "/app", Version: 4,
	}},
	{"a check of the cversion carries its mode", wire.Request{
		Xid: 19, Op: wire.OpCheck, Path: "/app", Version: 4, Mode: wire.CheckCversion,
	}},
	{"a sync carries the path", wire.Request{
		Xid: 20, Op: wire.OpSync, Path: "/app",
	}},
	{"a multi carries its create, delete, setData and check sub-requests in order", wire.Request{
		Xid: 21, Op: wire.OpMulti, Ops: []wire.Request{
			{Op: wire.OpCheck, Path: "/app", Version: 4},
			{Op: wire.OpCheck, Path: "/app", Version: 7, Mode: wire.CheckCversion},
			{Op: wire.OpCreate, Path: "/app/a", Data: []byte("a"), Mode: wire.ModeEphemeralSequential},
			{Op: wire.OpCreate, Path: "/app/t", Mode: wire.ModePersistentWithTTL, TTL: 5000},
			{Op: wire.OpSetData, Path: "/app", Data: []byte{}, Version: -1},
			{Op: wire.OpDelete, Path: "/app/old", Version: 2},
		},
	}},
	{"an empty multi has no sub-requests", wire.Request{
		Xid: 22, Op: wire.OpMulti,
	}},
	{"a setWatches carries the relative zxid and the three watch lists", wire.Request{
		Xid: wire.XidSetWatches, Op: wire.OpSetWatches, RelativeZxid: 0x1_0000_0010,
		DataWatches:  []string{"/a", "/b"},
		ExistWatches: []string{"/missing"},
		ChildWatches: []string{"/", "/a", "/queue"},
	}},
	{"a setWatches with only child watches leaves the other lists nil", wire.Request{
		Xid: wire.XidSetWatches, Op: wire.OpSetWatches, RelativeZxid: 5,
		ChildWatches: []string{"/queue"},
	}},
	{"a ping uses the reserved ping xid", wire.Request{
		Xid: wire.XidPing, Op: wire.OpPing,
	}},
	{"a close has no fields", wire.Request{
		Xid: 23, Op: wire.OpClose,
	}},
	{"the largest xid travels", wire.Request{
		Xid: math.MaxInt32, Op: wire.OpGetData, Path: "/",
	}},
	{"a members request has no fields", wire.Request{Xid: 30, Op: wire.OpMembers}},
	{"a memberAdd carries id, peer address and learner flag", wire.Request{
		Xid: 31, Op: wire.OpMemberAdd, Member: wire.Member{ID: 4, Addr: "127.0.0.1:2384", Learner: true},
	}},
	{"a memberRemove carries the id", wire.Request{Xid: 32, Op: wire.OpMemberRemove, Member: wire.Member{ID: 3}}},
	{"a memberPromote carries the id", wire.Request{Xid: 33, Op: wire.OpMemberPromote, Member: wire.Member{ID: 4}}},
	{"a reconfig carries the joining and leaving servers, the new members and the version", wire.Request{Xid: 36, Op: wire.OpReconfig,
		Reconfig: wire.Reconfig{Joining: "server.4=h:2384:0:participant;h:2184", Leaving: "3", FromConfig: 0x1f}}},
	{"a status request has no fields", wire.Request{Xid: 34, Op: wire.OpStatus}},
	{"a snapshot request for a new snapshot has no ID", wire.Request{Xid: 35, Op: wire.OpSnapshot}},
	{"a snapshot request for a chunk carries the ID and the offset", wire.Request{
		Xid: 36, Op: wire.OpSnapshot, Snapshot: wire.SnapshotRequest{ID: 0x7123_4567_89ab_cdef, Offset: 3 << 30},
	}},
	{"a snapshot request may release it", wire.Request{Xid: 37, Op: wire.OpSnapshot, Snapshot: wire.SnapshotRequest{ID: 9, Release: true}}},
	{"a leaseCreate carries the TTL and the owner", wire.Request{Xid: 60, Op: wire.OpLeaseCreate, TTL: 30_000, Owner: "web-1:4242"}},
	{"a leaseCreate may carry a maximum hold", wire.Request{Xid: 67, Op: wire.OpLeaseCreate, TTL: 30_000, Owner: "w", MaxHold: 600_000}},
	{"a leaseRenew carries the lease and a TTL", wire.Request{Xid: 61, Op: wire.OpLeaseRenew, Lease: 0x0123_4567_89ab_cdef, TTL: 10_000}},
	{"a leaseRenew may name a node to look at", wire.Request{Xid: 68, Op: wire.OpLeaseRenew, Lease: 7, Path: "/locks/a/_c_x-lock-0000000001"}},
	{"a leaseClose carries the lease", wire.Request{Xid: 62, Op: wire.OpLeaseClose, Lease: 0x0123_4567_89ab_cdef}},
	{"a locks request carries the path", wire.Request{Xid: 64, Op: wire.OpLocks, Path: "/locks"}},
	{"a deadlocks request has no fields", wire.Request{Xid: 65, Op: wire.OpDeadlocks}},
	{"a lockHistory request carries the path", wire.Request{Xid: 66, Op: wire.OpLockHistory, Path: "/locks/a"}},
	{"a lockBreak carries the path and the reason", wire.Request{Xid: 66, Op: wire.OpLockBreak, Path: "/locks/a", Reason: "stuck since noon"}},
	{"a shardPartition carries the parent", wire.Request{Xid: 69, Op: wire.OpShardPartition, Path: "/locks"}},
	{"a shardSplit carries the space and the key", wire.Request{Xid: 70, Op: wire.OpShardSplit, Path: "/locks", Data: []byte{0x80, 0, 0, 0, 0, 0, 0, 0}}},
	{"a shardLead carries the shard and the member", wire.Request{Xid: 71, Op: wire.OpShardLead, Shard: 3, Member: wire.Member{ID: 2}}},
	{"a create of a lease's ephemeral carries the lease", wire.Request{Xid: 63, Op: wire.OpCreate, Path: "/locks/a/n-", Mode: wire.ModeEphemeralSequential, Lease: 0x0123_4567_89ab_cdef}},
	{"a getEphemerals carries the path prefix", wire.Request{Xid: 35, Op: wire.OpGetEphemerals, Path: "/app/lock-"}},
	{"a getEphemerals of every ephemeral carries the root", wire.Request{Xid: 36, Op: wire.OpGetEphemerals, Path: "/"}},
	{"a getAllChildrenNumber carries the path", wire.Request{Xid: 37, Op: wire.OpGetAllChildrenNumber, Path: "/app"}},
	{"an addWatch carries the path and the mode", wire.Request{
		Xid: 38, Op: wire.OpAddWatch, Path: "/services", AddWatchMode: wire.AddWatchPersistentRecursive,
	}},
	{"an addWatch from a past zxid carries it", wire.Request{
		Xid: 38, Op: wire.OpAddWatch, Path: "/services", AddWatchMode: wire.AddWatchPersistent, FromZxid: 0x0123_4567_89ab,
	}},
	{"a removeWatches carries the path and the watcher type", wire.Request{
		Xid: 39, Op: wire.OpRemoveWatches, Path: "/services", WatcherType: wire.WatcherPersistent,
	}},
	{"a create carries its ACL", wire.Request{
		Xid: 40, Op: wire.OpCreate, Path: "/secret", Data: []byte("k"), ACL: []wire.ACL{
			{Perms: wire.PermAll, Scheme: "digest", ID: "alice:X/NSthOYBg8A1Yyh2DbzQgqqgvU="},
			{Perms: wire.PermRead, Scheme: "ip", ID: "10.0.0.0/8"},
		},
	}},
	{"a create of a lock node may ask for its turn", wire.Request{
		Xid: 40, Op: wire.OpCreate, Path: "/lk/_c_ab-lock-", Mode: wire.ModeEphemeralSequential, Lease: 7, TellTurn: true,
	}},
	{"a getACL carries the path", wire.Request{Xid: 41, Op: wire.OpGetACL, Path: "/secret"}},
	{"a setACL carries the path, the ACL and the expected aversion", wire.Request{
		Xid: 42, Op: wire.OpSetACL, Path: "/secret", Version: 3, ACL: wire.OpenACL,
	}},
	{"an auth carries the scheme and the credential", wire.Request{
		Xid: 43, Op: wire.OpAuth, AuthScheme: "digest", AuthData: []byte("alice:secret"),
	}},
	{"a whoAmI has no fields", wire.Request{Xid: 44, Op: wire.OpWhoAmI}},
	{"a multi's create carries its ACL", wire.Request{Xid: 45, Op: wire.OpMulti, Ops: []wire.Request{
		{Op: wire.OpCreate, Path: "/a", ACL: []wire.ACL{{Perms: wire.PermRead | wire.PermAdmin, Scheme: "world", ID: "anyone"}}},
	}}},
	{"a setWatches2 carries the five watch lists", wire.Request{
		Xid: wire.XidSetWatches, Op: wire.OpSetWatches2, RelativeZxid: 77,
		DataWatches: []string{"/a"}, ExistWatches: []string{"/b"}, ChildWatches: []string{"/c"},
		PersistentWatches: []string{"/d"}, RecursiveWatches: []string{"/", "/e"},
	}},
	{"a setWatches2 with more frames to come says so", wire.Request{
		Xid: wire.XidSetWatches, Op: wire.OpSetWatches2, RelativeZxid: 77,
		RecursiveWatches: []string{"/e"}, MoreWatches: true,
	}},
	{"a setWatches2 names the zxid each one-shot watch was set at", wire.Request{
		Xid: wire.XidSetWatches, Op: wire.OpSetWatches2, RelativeZxid: 77,
		DataWatches: []string{"/a"}, ExistWatches: []string{"/b"}, ChildWatches: []string{"/c"},
		WatchZxids: []int64{5, 77, 1 << 40},
	}},
	{"and with more frames to come too", wire.Request{
		Xid: wire.XidSetWatches, Op: wire.OpSetWatches2, RelativeZxid: 77,
		DataWatches: []string{"/a"}, WatchZxids: []int64{5}, MoreWatches: true,
	}},
	{"a setWatches2 names where each lasting watch over shards resumes in each", wire.Request{
		Xid: wire.XidSetWatches, Op: wire.OpSetWatches2, RelativeZxid: 77,
		PersistentWatches: []string{"/a"}, RecursiveWatches: []string{"/"}, WatchZxids: []int64{5, 9},
		WatchPositions: [][]int64{nil, {9, wire.Position(2, 40), wire.Position(3, 7)}},
	}},
}

var replies = []struct {
	name string
	op   wire.Op
	r    wire.Reply
}{
	{"a create reply carries the created path and its Stat", wire.OpCreate, wire.Reply{
		Xid: 1, Zxid: 0x1_0000_0001, Path: "/queue/item-0000000007", Stat: fullStat,
	}},
	{"a create reply may say the new lock node holds", wire.OpCreate, wire.Reply{
		Xid: 1, Zxid: 90, Path: "/lk/_c_ab-lock-0000000000", Stat: fullStat, Turn: wire.LockTurn{Known: true, Holds: true, Zxid: 90},
	}},
	{"a create reply may name the node the new one waits for", wire.OpCreate, wire.Reply{
		Xid: 1, Zxid: 91, Path: "/lk/_c_cd-lock-0000000001", Stat: fullStat,
		Turn: wire.LockTurn{Known: true, Blocker: "_c_ab-lock-0000000000", Zxid: 92},
	}},
	{"a create that found the node refuses with NodeExists and no body", wire.OpCreate, wire.Reply{
		Xid: 2, Zxid: 90, Err: wire.CodeNodeExists,
	}},
	{"a delete reply has no body", wire.OpDelete, wire.Reply{
		Xid: 3, Zxid: 91,
	}},
	{"a delete of a node with children refuses with NotEmpty", wire.OpDelete, wire.Reply{
		Xid: 4, Zxid: 91, Err: wire.CodeNotEmpty,
	}},
	{"a setData reply carries the new Stat", wire.OpSetData, wire.Reply{
		Xid: 5, Zxid: 92, Stat: fullStat,
	}},
	{"a setData with the wrong version refuses with BadVersion", wire.OpSetData, wire.Reply{
		Xid: 6, Zxid: 92, Err: wire.CodeBadVersion,
	}},
	{"a getData reply carries data and Stat", wire.OpGetData, wire.Reply{
		Xid: 7, Zxid: 93, Data: bytes.Repeat([]byte("d"), 256), Stat: fullStat,
	}},
	{"a getData reply of a node without data keeps nil data nil", wire.OpGetData, wire.Reply{
		Xid: 8, Zxid: 93, Stat: wire.Stat{Czxid: 1, Mzxid: 1, Pzxid: 1},
	}},
	{"a getData reply of empty data keeps it empty", wire.OpGetData, wire.Reply{
		Xid: 9, Zxid: 93, Data: []byte{}, Stat: wire.Stat{Czxid: 1, Mzxid: 1, Pzxid: 1},
	}},
	{"a getData of a missing node refuses with NoNode", wire.OpGetData, wire.Reply{
		Xid: 10, Zxid: 93, Err: wire.CodeNoNode,
	}},
	{"an exists reply carries the Stat", wire.OpExists, wire.Reply{
		Xid: 11, Zxid: 94, Stat: fullStat,
	}},
	{"an exists of a missing node refuses with NoNode", wire.OpExists, wire.Reply{
		Xid: 12, Zxid: 94, Err: wire.CodeNoNode,
	}},
	{"a getChildren reply carries the sorted children and the parent's Stat", wire.OpGetChildren, wire.Reply{
		Xid: 13, Zxid: 95, Children: []string{"a", "b", "lock-0000000001"}, Stat: fullStat,
	}},
	{"a getChildren reply of a leaf has nil children", wire.OpGetChildren, wire.Reply{
		Xid: 14, Zxid: 95, Stat: wire.Stat{Czxid: 2, Mzxid: 2, Pzxid: 2},
	}},
	{"a getChildren of a missing node refuses with NoNode", wire.OpGetChildren, wire.Reply{
		Xid: 15, Zxid: 95, Err: wire.CodeNoNode,
	}},
	{"a check reply has no body", wire.OpCheck, wire.Reply{
		Xid: 16, Zxid: 96,
	}},
	{"a check of another version refuses with BadVersion", wire.OpCheck, wire.Reply{
		Xid: 17, Zxid: 96, Err: wire.CodeBadVersion,
	}},
	{"a sync reply carries the path", wire.OpSync, wire.Reply{
		Xid: 18, Zxid: 97, Path: "/app",
	}},
	{"a sync without a quorum refuses with NoQuorum", wire.OpSync, wire.Reply{
		Xid: 19, Zxid: 97, Err: wire.CodeNoQuorum,
	}},
	{"a multi success carries one result per sub-request", wire.OpMulti, wire.Reply{
		Xid: 20, Zxid: 98, Results: []wire.OpResult{
			{Op: wire.OpCheck},
			{Op: wire.OpCreate, Path: "/app/a0000000003", Stat: fullStat},
			{Op: wire.OpSetData, Stat: fullStat},
			{Op: wire.OpDelete},
		},
	}},
	{"a multi failure names the failed op and marks the later ones RuntimeInconsistency", wire.OpMulti, wire.Reply{
		Xid: 21, Zxid: 98, Err: wire.CodeNoNode, Results: []wire.OpResult{
			{Op: wire.OpCheck},
			{Op: wire.OpCreate},
			{Op: wire.OpDelete, Err: wire.CodeNoNode},
			{Op: wire.OpSetData, Err: wire.CodeRuntimeInconsistency},
			{Op: wire.OpCreate, Err: wire.CodeRuntimeInconsistency},
		},
	}},
	{"an empty multi has no results", wire.OpMulti, wire.Reply{
		Xid: 22, Zxid: 98,
	}},
	{"a members reply lists voters and learners", wire.OpMembers, wire.Reply{
		Xid: 30, Zxid: 9, Members: []wire.Member{{ID: 1, Addr: "127.0.0.1:2381"}, {ID: 4, Addr: "127.0.0.1:2384", Learner: true}},
	}},
	{"a memberAdd reply lists the new membership", wire.OpMemberAdd, wire.Reply{
		Xid: 31, Zxid: 10, Members: []wire.Member{{ID: 1, Addr: "a:1"}},
	}},
	{"a reconfig reply carries the new configuration and its node's Stat", wire.OpReconfig, wire.Reply{
		Xid: 36, Zxid: 12, Data: []byte("server.1=h:2381:0:participant\nversion=c"), Stat: wire.Stat{Mzxid: 12, Version: 3},
	}},
	{"a leaseCreate reply carries the lease", wire.OpLeaseCreate, wire.Reply{Xid: 60, Zxid: 9, Lease: wire.Lease{ID: 0x0123_4567_89ab_cdef, TTLMs: 30_000, Expires: 1_700_000_030_000, Version: 1, MaxUntil: 1_700_000_600_000}}},
	{"a leaseRenew reply carries the lease after it", wire.OpLeaseRenew, wire.Reply{Xid: 61, Zxid: 10, Lease: wire.Lease{ID: 7, TTLMs: 10_000, Expires: 1_700_000_040_000, Version: 2}}},
	{"a leaseRenew reply says what it found of the node named", wire.OpLeaseRenew, wire.Reply{Xid: 68, Zxid: 11, Lease: wire.Lease{ID: 7, TTLMs: 10_000, Expires: 1_700_000_041_000, Version: 3, Node: wire.NodeGone}}},
	{"a leaseClose reply has no fields", wire.OpLeaseClose, wire.Reply{Xid: 62, Zxid: 11}},
	{"a locks reply carries each lock's holders and waiters", wire.OpLocks, wire.Reply{Xid: 64, Zxid: 12, Locks: []wire.LockInfo{
		{Path: "/locks/a", Holders: []wire.LockParty{{Node: "_c_ab-read-0000000001", Mode: "read", Owner: "web-1:42", Holder: "h1",
			Session: 0x0123_4567_89ab_cdef, Lease: 7, Token: 300, Since: 1_700_000_000_000, Expires: 1_700_000_030_000}},
			Waiters:         []wire.LockParty{{Node: "_c_cd-write-0000000002", Mode: "write", Owner: "web-2:43", Session: 9, Token: 301, Since: 1_700_000_001_000}},
			EstimatedWaitMs: 1500},
		{Path: "/locks/b"},
	}}},
	{"a shardSplit reply carries the map's node", wire.OpShardSplit, wire.Reply{Xid: 70, Zxid: 16, Data: []byte{0x83, 0xa2}, Stat: wire.Stat{Czxid: 12, Mzxid: 16, Version: 2}}},
	{"a shardLead reply carries the map's node", wire.OpShardLead, wire.Reply{Xid: 71, Zxid: 17, Data: []byte{0x83, 0xa2}, Stat: wire.Stat{Czxid: 12, Mzxid: 17, Version: 3}}},
	{"a shardPartition reply carries the map's node", wire.OpShardPartition, wire.Reply{Xid: 69, Zxid: 15, Data: []byte{0x83, 0xa1}, Stat: wire.Stat{Czxid: 12, Mzxid: 15, Version: 1}}},
	{"a lockBreak reply carries the nodes deleted", wire.OpLockBreak, wire.Reply{Xid: 66, Zxid: 14, Children: []string{"_c_ab-lock-0000000001"}}},
	{"a lockHistory reply carries its events", wire.OpLockHistory, wire.Reply{Xid: 66, Zxid: 14, LockHistory: []wire.LockEvent{
		{Zxid: 9, Time: 1700000000000, Lock: "/locks/a", Kind: wire.LockAcquired, Node: "_c_x-lock-0000000001", Mode: "lock",
			Owner: "web-1:42", Holder: "h1", Session: 7, Lease: 8, Token: 9, WaitedMs: 120},
		{Zxid: 12, Time: 1700000005000, Lock: "/locks/a", Kind: wire.LockBroken, Node: "_c_x-lock-0000000001", Mode: "lock",
			Owner: "web-1:42", Session: 7, Token: 9, HeldMs: 5000, By: "digest:admin", Reason: "stuck"},
	}}},
	{"a deadlocks reply carries each cycle's waits", wire.OpDeadlocks, wire.Reply{Xid: 65, Zxid: 13, Deadlocks: [][]wire.LockWait{{
		{Waiter: wire.LockParty{Owner: "p2", Holder: "B"}, Lock: "/a", Holder: wire.LockParty{Owner: "p1", Holder: "A"}},
		{Waiter: wire.LockParty{Owner: "p1", Holder: "A"}, Lock: "/b", Holder: wire.LockParty{Owner: "p2", Holder: "B"}},
	}}}},
	{"a snapshot reply carries the description and a chunk", wire.OpSnapshot, wire.Reply{Xid: 36, Zxid: 11, Snapshot: wire.SnapshotChunk{
		ID: 0x7123_4567_89ab_cdef, Member: 2, Index: 1 << 40, Size: 5 << 30, Sum: bytes.Repeat([]byte{0xab}, 32),
		Znodes: 1_000_000, Sessions: 12, Members: []wire.Member{{ID: 1, Addr: "10.0.0.1:2381"}, {ID: 2, Addr: "10.0.0.2:2381", Learner: true}},
		Offset: 512 << 10, Data: bytes.Repeat([]byte("state"), 1000),
	}}},
	{"a snapshot reply past the end carries no data", wire.OpSnapshot, wire.Reply{Xid: 37, Zxid: 11, Snapshot: wire.SnapshotChunk{
		ID: 9, Member: 1, Index: 7, Size: 100, Sum: make([]byte, 32), Znodes: 1, Members: []wire.Member{{ID: 1}}, Offset: 100,
	}}},
	{"a sharded cluster's snapshot lists its shards", wire.OpSnapshot, wire.Reply{Xid: 39, Zxid: 11, Snapshot: wire.SnapshotChunk{
		ID: 9, Member: 1, Index: 7, Size: 100, Sum: make([]byte, 32), Znodes: 1, Members: []wire.Member{{ID: 1}}, Offset: 0, Data: []byte("meta"),
		Shards: []wire.SnapshotShard{{Group: 1, Index: 40, Znodes: 6, Size: 30}, {Group: 2, Index: 9, Znodes: 4, Size: 20}},
	}}},
	{"a refused snapshot has no body", wire.OpSnapshot, wire.Reply{Xid: 38, Zxid: 11, Err: wire.CodeNoAuth}},
	{"a status reply carries the full digest", wire.OpStatus, wire.Reply{
		Xid: 34, Zxid: 11, Status: wire.Status{ID: 2, Leader: 1, Term: 3, Applied: 12, Zxid: 11, Digest: math.MaxUint64 - 5, Sessions: 4, Znodes: 100},
	}},
	{"a getEphemerals reply carries the sorted full paths", wire.OpGetEphemerals, wire.Reply{
		Xid: 35, Zxid: 12, Children: []string{"/app/lock-0000000001", "/app/lock-0000000004"},
	}},
	{"a getEphemerals reply of a session without ephemerals has nil paths", wire.OpGetEphemerals, wire.Reply{
		Xid: 36, Zxid: 12,
	}},
	{"a getAllChildrenNumber reply carries the count", wire.OpGetAllChildrenNumber, wire.Reply{
		Xid: 37, Zxid: 12, Descendants: 70_000,
	}},
	{"a getACL reply carries the ACL and the Stat", wire.OpGetACL, wire.Reply{
		Xid: 41, Zxid: 12, Stat: fullStat, ACL: []wire.ACL{{Perms: wire.PermRead, Scheme: "x509", ID: "CN=alice,O=Example"}},
	}},
	{"a setACL reply carries the Stat", wire.OpSetACL, wire.Reply{Xid: 42, Zxid: 12, Stat: fullStat}},
	{"a setACL refused for a wrong aversion has no body", wire.OpSetACL, wire.Reply{Xid: 42, Zxid: 12, Err: wire.CodeBadVersion}},
	{"an auth reply has no body", wire.OpAuth, wire.Reply{Xid: 43, Zxid: 12}},
	{"a failed auth has no body", wire.OpAuth, wire.Reply{Xid: 43, Zxid: 12, Err: wire.CodeAuthFailed}},
	{"a whoAmI reply carries the identities", wire.OpWhoAmI, wire.Reply{
		Xid: 44, Zxid: 12, Identities: []wire.Identity{{Scheme: "ip", ID: "127.0.0.1"}, {Scheme: "digest", ID: "alice"}},
	}},
	{"a getAllChildrenNumber of a missing node refuses with NoNode", wire.OpGetAllChildrenNumber, wire.Reply{
		Xid: 38, Zxid: 12, Err: wire.CodeNoNode,
	}},
	{"a setWatches reply has no body", wire.OpSetWatches, wire.Reply{
		Xid: wire.XidSetWatches, Zxid: 99,
	}},
	{"a setWatches2 reply has no body", wire.OpSetWatches2, wire.Reply{
		Xid: wire.XidSetWatches, Zxid: 99,
	}},
	{"an addWatch reply has no body", wire.OpAddWatch, wire.Reply{Xid: 40, Zxid: 99}},
	{"an addWatch over shards names where it is set in each", wire.OpAddWatch, wire.Reply{Xid: 40, Zxid: 99,
		Positions: []int64{99, wire.Position(1, 120), wire.Position(wire.MaxPositionGroup, 1<<wire.PositionShift-1)}}},
	{"a removeWatches of nothing refuses with NoWatcher", wire.OpRemoveWatches, wire.Reply{
		Xid: 41, Zxid: 99, Err: wire.CodeNoWatcher,
	}},
	{"a NodeDataChanged notification may carry the node's data and Stat", 0, wire.Reply{
		Xid: wire.XidNotification, Zxid: 12, EventType: wire.EventNodeDataChanged, State: wire.StateConnected, Path: "/cfg",
		Data: []byte("v=2"), Stat: wire.Stat{Czxid: 3, Mzxid: 12, Version: 4, DataLength: 3},
	}},
	{"a NodeCreated notification may carry the node with empty data", 0, wire.Reply{
		Xid: wire.XidNotification, Zxid: 13, EventType: wire.EventNodeCreated, State: wire.StateConnected, Path: "/n",
		Stat: wire.Stat{Czxid: 13, Mzxid: 13},
	}},
	{"a PersistentWatchRemoved notification", 0, wire.Reply{
		Xid: wire.XidNotification, Zxid: 99, EventType: wire.EventPersistentWatchRemoved, State: wire.StateConnected, Path: "/services",
	}},
	{"an addWatch refused with HistoryCompacted names the oldest zxid kept", wire.OpAddWatch, wire.Reply{
		Xid: 42, Zxid: 99, Err: wire.CodeHistoryCompacted, OldestZxid: 0x0123_4567_89ab,
	}},
	{"a replayed event names the addWatch it is for", 0, wire.Reply{
		Xid: wire.XidReplay, Zxid: 98, EventType: wire.EventNodeDeleted, State: wire.StateConnected, Path: "/services/a", ReplayOf: 42,
	}},
	{"a replayed NodeDataChanged may carry the node's data and Stat", 0, wire.Reply{
		Xid: wire.XidReplay, Zxid: 97, EventType: wire.EventNodeDataChanged, State: wire.StateConnected, Path: "/services/a", ReplayOf: 42,
		Data: []byte("v=3"), Stat: wire.Stat{Czxid: 3, Mzxid: 97, Version: 5, DataLength: 3},
	}},
	{"a PersistentWatchRemoved after a compacted history names the oldest zxid", 0, wire.Reply{
		Xid: wire.XidNotification, Zxid: 99, Err: wire.CodeHistoryCompacted, EventType: wire.EventPersistentWatchRemoved,
		State: wire.StateConnected, Path: "/services", OldestZxid: 77,
	}},
	{"a ping reply has no body", wire.OpPing, wire.Reply{
		Xid: wire.XidPing, Zxid: 99,
	}},
	{"a close reply has no body", wire.OpClose, wire.Reply{
		Xid: 23, Zxid: 99,
	}},
	{"a closing frame carries the reason the server hangs up", wire.OpPing, wire.Reply{
		Xid: wire.XidClosing, Zxid: 99, Err: wire.CodeFrameTooLarge,
	}},
	{"a NodeCreated notification carries the change's zxid and the path", wire.OpGetData, wire.Reply{
		Xid: wire.XidNotification, Zxid: 100, EventType: wire.EventNodeCreated, State: wire.StateConnected, Path: "/app/new",
	}},
	{"a NodeDeleted notification ignores the op it is decoded with", wire.OpMulti, wire.Reply{
		Xid: wire.XidNotification, Zxid: 101, EventType: wire.EventNodeDeleted, State: wire.StateConnected, Path: "/app/new",
	}},
	{"a NodeDeleted notification names the waiters whose turn came", wire.OpGetData, wire.Reply{
		Xid: wire.XidNotification, Zxid: 104, EventType: wire.EventNodeDeleted, State: wire.StateConnected, Path: "/lk/_c_ab-lock-0000000001",
		Turns: []string{"_c_cd-lock-0000000002"},
	}},
	{"a NodeDataChanged notification", wire.OpPing, wire.Reply{
		Xid: wire.XidNotification, Zxid: 102, EventType: wire.EventNodeDataChanged, State: wire.StateConnected, Path: "/app/config",
	}},
	{"a NodeChildrenChanged notification", wire.OpGetChildren, wire.Reply{
		Xid: wire.XidNotification, Zxid: 103, EventType: wire.EventNodeChildrenChanged, State: wire.StateConnected, Path: "/app",
	}},
	{"a session event has type None, a state and no path", wire.OpCreate, wire.Reply{
		Xid: wire.XidNotification, EventType: wire.EventNone, State: wire.StateExpired,
	}},
}

// frameBody checks that frame is one whole frame and returns its body.
func frameBody(t testing.TB, frame []byte) []byte {
	t.Helper()
	if len(frame) < wire.FrameHeaderSize {
		t.Fatalf("frame of %d bytes has no header", len(frame))
	}
	if n := binary.BigEndian.Uint32(frame); int(n) != len(frame)-wire.FrameHeaderSize {
		t.Fatalf("frame header says %d bytes, body has %d", n, len(frame)-wire.FrameHeaderSize)
	}
	return frame[wire.FrameHeaderSize:]
}

func TestConnectRequestRoundTrip(t *testing.T) {
	for _, tc := range connectRequests {
		t.Run(tc.name, func(t *testing.T) {
			body := frameBody(t, wire.AppendConnectRequest(nil, &tc.m))
			// Start from a value with every field set: decoding must overwrite all of them.
			got := wire.ConnectRequest{ProtocolVersion: 9, LastZxidSeen: 9, TimeoutMs: 9, SessionID: 9, Password: []byte("old")}
			if err := wire.DecodeConnectRequest(body, &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.m) {
				t.Fatalf("got %+v, want %+v", got, tc.m)
			}
		})
	}
}

func TestConnectResponseRoundTrip(t *testing.T) {
	for _, tc := range connectResponses {
		t.Run(tc.name, func(t *testing.T) {
			body := frameBody(t, wire.AppendConnectResponse(nil, &tc.m))
			got := wire.ConnectResponse{ProtocolVersion: 9, TimeoutMs: 9, SessionID: 9, Password: []byte("old"), Err: 9}
			if err := wire.DecodeConnectResponse(body, &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.m) {
				t.Fatalf("got %+v, want %+v", got, tc.m)
			}
		})
	}
}

func TestRequestRoundTrip(t *testing.T) {
	for _, tc := range requests {
		t.Run(tc.name, func(t *testing.T) {
			body := frameBody(t, wire.AppendRequest(nil, &tc.r))
			// A reused Request must come back with no trace of its last use.
			got := wire.Request{Xid: 9, Op: wire.OpSetData, Path: "/old", Data: []byte("old"), Version: 9,
				Mode: 9, TTL: 9, Watch: true, Ops: []wire.Request{{}}, RelativeZxid: 9,
				DataWatches: []string{"old"}, ExistWatches: []string{"old"}, ChildWatches: []string{"old"}}
			if err := wire.DecodeRequest(body, &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.r) {
				t.Fatalf("got %+v, want %+v", got, tc.r)
			}
		})
	}
}

func TestReplyRoundTrip(t *testing.T) {
	for _, tc := range replies {
		t.Run(tc.name, func(t *testing.T) {
			body := frameBody(t, wire.AppendReply(nil, tc.op, &tc.r))
			got := wire.Reply{Xid: 9, Zxid: 9, Err: 9, Path: "/old", Data: []byte("old"), Stat: fullStat,
				Children: []string{"old"}, Results: []wire.OpResult{{}}, EventType: 9, State: 9}
			if err := wire.DecodeReply(body, tc.op, &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.r) {
				t.Fatalf("got %+v, want %+v", got, tc.r)
			}
			xid, err := wire.PeekXid(body)
			if err != nil || xid != tc.r.Xid {
				t.Fatalf("PeekXid = %d, %v; want %d", xid, err, tc.r.Xid)
			}
		})
	}
}

func TestAppendKeepsWhatIsAlreadyInTheBuffer(t *testing.T) {
	prefix := []byte("earlier frames")
	appenders := map[string]func([]byte) []byte{
		"connect request":  func(b []byte) []byte { return wire.AppendConnectRequest(b, &connectRequests[1].m) },
		"connect response": func(b []byte) []byte { return wire.AppendConnectResponse(b, &connectResponses[0].m) },
		"request":          func(b []byte) []byte { return wire.AppendRequest(b, &requests[0].r) },
		"reply":            func(b []byte) []byte { return wire.AppendReply(b, replies[0].op, &replies[0].r) },
	}
	for name, appendTo := range appenders {
		t.Run("a "+name+" is appended after the bytes already there", func(t *testing.T) {
			alone := appendTo(nil)
			after := appendTo(bytes.Clone(prefix))
			if !bytes.Equal(after, append(bytes.Clone(prefix), alone...)) {
				t.Fatalf("appending to %q gave % x, want the prefix then % x", prefix, after, alone)
			}
		})
	}
}

// Forward compatibility: a later protocol version may append fields to any
// array; an older decoder skips them.

// withExtraFields returns body, which must be one msgpack array, with extra
// appended to the array.
func withExtraFields(t testing.TB, body []byte, extra ...any) []byte {
	t.Helper()
	r := bytes.NewReader(body)
	n, err := msgpack.NewDecoder(r).DecodeArrayLen()
	if err != nil {
		t.Fatalf("body is not an array: %v", err)
	}
	var out bytes.Buffer
	enc := msgpack.NewEncoder(&out)
	if err := enc.EncodeArrayLen(n + len(extra)); err != nil {
		t.Fatal(err)
	}
	out.Write(body[len(body)-r.Len():])
	for _, v := range extra {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// futureField is an extra field of every msgpack kind, nested.
var futureField = map[string]any{
	"nested": []any{int64(-1), uint64(math.MaxUint64), "s", []byte{1, 2}, nil, true, 1.5,
		map[string]any{"deeper": []any{[]any{}, map[string]any{}}}},
	"ext": msgpack.RawMessage{0xd4, 0x01, 0x02}, // fixext1: type 1, one byte of data
}

func TestDecodersSkipExtraTrailingFields(t *testing.T) {
	for _, tc := range connectRequests {
		t.Run("connect request: "+tc.name, func(t *testing.T) {
			body := withExtraFields(t, frameBody(t, wire.AppendConnectRequest(nil, &tc.m)), futureField, "more")
			var got wire.ConnectRequest
			if err := wire.DecodeConnectRequest(body, &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.m) {
				t.Fatalf("got %+v, want %+v", got, tc.m)
			}
		})
	}
	for _, tc := range connectResponses {
		t.Run("connect response: "+tc.name, func(t *testing.T) {
			body := withExtraFields(t, frameBody(t, wire.AppendConnectResponse(nil, &tc.m)), futureField)
			var got wire.ConnectResponse
			if err := wire.DecodeConnectResponse(body, &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.m) {
				t.Fatalf("got %+v, want %+v", got, tc.m)
			}
		})
	}
	for _, tc := range requests {
		t.Run("request: "+tc.name, func(t *testing.T) {
			extra := []any{futureField}
			if tc.r.Op.Class() == wire.ClassRead && !tc.r.Linearizable {
				// A later version sends the fields it appends after the
				// linearizable flag, which it therefore sends.
				extra = []any{false, futureField}
			}
			// And a getData's or exists's after the waiter.
			if (tc.r.Op == wire.OpGetData || tc.r.Op == wire.OpExists) && tc.r.Waiter == "" {
				extra = []any{"", futureField}
				if !tc.r.Linearizable {
					extra = []any{false, "", futureField}
				}
			}
			// Likewise after addWatch's fromZxid and setWatches2's more.
			if tc.r.Op == wire.OpAddWatch && tc.r.FromZxid == 0 {
				extra = []any{0, futureField}
			}
			if tc.r.Op == wire.OpSetWatches2 {
				switch {
				case len(tc.r.WatchPositions) > 0:
				case len(tc.r.WatchZxids) > 0:
					extra = []any{[]any{}, futureField}
				case !tc.r.MoreWatches:
					extra = []any{false, []any{}, []any{}, futureField}
				default:
					extra = []any{[]any{}, []any{}, futureField}
				}
			}
			if tc.r.Op == wire.OpCreate && !tc.r.TellTurn {
				extra = []any{false, futureField}
			}
			if tc.r.Op == wire.OpLeaseRenew && tc.r.Path == "" {
				extra = []any{"", futureField}
			}
			body := withExtraFields(t, frameBody(t, wire.AppendRequest(nil, &tc.r)), extra...)
			var got wire.Request
			if err := wire.DecodeRequest(body, &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.r) {
				t.Fatalf("got %+v, want %+v", got, tc.r)
			}
		})
	}
	for _, tc := range replies {
		t.Run("reply: "+tc.name, func(t *testing.T) {
			extra := []any{futureField}
			if tc.op == wire.OpCreate && tc.r.Xid >= 0 && tc.r.Err == wire.CodeOK && !tc.r.Turn.Known {
				// After an empty turn, which says nothing.
				extra = []any{[]any{false, "", 0}, futureField}
			}
			if tc.op == wire.OpAddWatch && tc.r.Err == wire.CodeOK && len(tc.r.Positions) == 0 {
				extra = []any{[]any{}, futureField} // after positions, which say nothing
			}
			body := withExtraFields(t, frameBody(t, wire.AppendReply(nil, tc.op, &tc.r)), extra...)
			var got wire.Reply
			if err := wire.DecodeReply(body, tc.op, &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.r) {
				t.Fatalf("got %+v, want %+v", got, tc.r)
			}
		})
	}
}

// pack encodes vals as one msgpack array with the reflection encoder, which
// writes fixed-width integers: a different encoding from ours, as another
// client's might be.
func pack(t testing.TB, vals ...any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(vals)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func statArray(s wire.Stat, extra ...any) []any {
	return append([]any{s.Czxid, s.Mzxid, s.Pzxid, s.Ctime, s.Mtime, s.Version, s.Cversion,
		s.Aversion, s.EphemeralOwner, s.DataLength, s.NumChildren}, extra...)
}

func TestDecodersSkipExtraFieldsInNestedArrays(t *testing.T) {
	t.Run("a Stat with two more fields decodes its first eleven", func(t *testing.T) {
		body := pack(t, 7, 93, 0, []byte("d"), statArray(fullStat, "future", futureField))
		var got wire.Reply
		if err := wire.DecodeReply(body, wire.OpGetData, &got); err != nil {
			t.Fatalf("decode: %v", err)
		}
		want := wire.Reply{Xid: 7, Zxid: 93, Data: []byte("d"), Stat: fullStat}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
	t.Run("a multi sub-request with one more field decodes the fields it knows", func(t *testing.T) {
		body := pack(t, 1, wire.OpMulti, []any{
			[]any{wire.OpSetData, "/a", []byte("x"), 3, "future"},
			[]any{wire.OpDelete, "/b", -1},
		})
		var got wire.Request
		if err := wire.DecodeRequest(body, &got); err != nil {
			t.Fatalf("decode: %v", err)
		}
		want := wire.Request{Xid: 1, Op: wire.OpMulti, Ops: []wire.Request{
			{Op: wire.OpSetData, Path: "/a", Data: []byte("x"), Version: 3},
			{Op: wire.OpDelete, Path: "/b", Version: -1},
		}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
	t.Run("a multi result with one more field decodes the fields it knows", func(t *testing.T) {
		body := pack(t, 2, 98, 0, []any{
			[]any{wire.OpCreate, 0, "/a", statArray(fullStat), futureField},
			[]any{wire.OpCheck, 0, "future"},
		})
		var got wire.Reply
		if err := wire.DecodeReply(body, wire.OpMulti, &got); err != nil {
			t.Fatalf("decode: %v", err)
		}
		want := wire.Reply{Xid: 2, Zxid: 98, Results: []wire.OpResult{
			{Op: wire.OpCreate, Path: "/a", Stat: fullStat},
			{Op: wire.OpCheck},
		}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
	t.Run("an error reply with a body from a later version decodes without it", func(t *testing.T) {
		body := pack(t, 3, 99, wire.CodeNoNode, "detail a later version may send")
		var got wire.Reply
		if err := wire.DecodeReply(body, wire.OpGetData, &got); err != nil {
			t.Fatalf("decode: %v", err)
		}
		want := wire.Reply{Xid: 3, Zxid: 99, Err: wire.CodeNoNode}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
}

func TestDecodeRequestOfAnUnknownOpFailsWithUnimplemented(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"an unknown op with fields", pack(t, 77, 999, "/a", true)},
		{"an unknown op with no fields", pack(t, 77, 999)},
		{"an unknown op followed by bytes that are not msgpack", append(pack(t, 77, 999), 0xc1, 0xc1)},
	} {
		t.Run(tc.name+" still reports its xid and op so the server can answer it", func(t *testing.T) {
			var r wire.Request
			err := wire.DecodeRequest(tc.body, &r)
			if !errors.Is(err, wire.ErrUnimplemented) {
				t.Fatalf("err = %v, want ErrUnimplemented", err)
			}
			if r.Xid != 77 || r.Op != 999 {
				t.Fatalf("xid, op = %d, %d; want 77, 999", r.Xid, r.Op)
			}
		})
	}
}

func TestDecodersRefuseMalformedInput(t *testing.T) {
	type decodeFunc func([]byte) error
	request := func(b []byte) error { var r wire.Request; return wire.DecodeRequest(b, &r) }
	reply := func(op wire.Op) decodeFunc {
		return func(b []byte) error { var r wire.Reply; return wire.DecodeReply(b, op, &r) }
	}
	connectRequest := func(b []byte) error { var m wire.ConnectRequest; return wire.DecodeConnectRequest(b, &m) }
	connectResponse := func(b []byte) error { var m wire.ConnectResponse; return wire.DecodeConnectResponse(b, &m) }
	setData := frameBody(t, wire.AppendRequest(nil, &wire.Request{Xid: 1, Op: wire.OpSetData, Path: "/a", Data: []byte("x"), Version: 1}))

	for _, tc := range []struct {
		name   string
		decode decodeFunc
		body   []byte
	}{
		{"an empty body is refused", request, nil},
		{"a body that is not an array is refused", request, []byte{0x01}},
		{"a map where the request array belongs is refused", request, []byte{0x81, 0xa1, 'x', 0x01}},
		{"a request with only an xid is refused", request, pack(t, 1)},
		{"a setData with a field missing is refused", request, pack(t, 1, wire.OpSetData, "/a", []byte("x"))},
		{"a create with a field missing is refused", request, pack(t, 1, wire.OpCreate, "/a", nil, 0)},
		{"a multi containing a getData is refused", request, pack(t, 1, wire.OpMulti, []any{
			[]any{wire.OpCheck, "/a", -1}, []any{wire.OpGetData, "/a", false}})},
		{"a multi containing a multi is refused", request, pack(t, 1, wire.OpMulti, []any{
			[]any{wire.OpMulti, []any{}}})},
		{"a multi containing a ping is refused", request, pack(t, 1, wire.OpMulti, []any{[]any{wire.OpPing}})},
		{"a multi containing an unknown op is refused", request, pack(t, 1, wire.OpMulti, []any{[]any{999, "/a"}})},
		{"a multi sub-request with a field missing is refused", request, pack(t, 1, wire.OpMulti, []any{[]any{wire.OpDelete, "/a"}})},
		{"a path that is a number is refused", request, pack(t, 1, wire.OpGetData, 5, false)},
		{"a watch flag that is a number is refused", request, pack(t, 1, wire.OpGetData, "/a", 1)},
		{"a watch list that is a string is refused", request, pack(t, -8, wire.OpSetWatches, 0, "/a", []any{}, []any{})},
		{"an xid beyond int32 is refused rather than wrapped", request, pack(t, int64(1)<<32|1, wire.OpGetData, "/a", false)},
		{"a version of 2^32-1 is refused rather than read as -1", request, pack(t, 1, wire.OpSetData, "/a", nil, uint32(math.MaxUint32))},
		{"a zxid above the int64 range is refused rather than wrapped", request, pack(t, -8, wire.OpSetWatches, uint64(math.MaxUint64), []any{}, []any{}, []any{})},
		{"a data length beyond the input is refused", request, append(setData[:len(setData)-4:len(setData)-4], 0xc6, 0xff, 0xff, 0xff, 0xf0)},
		{"an array length beyond the input is refused", request, []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0x01, 0x0b}},
		{"a trailing byte after the request is refused", request, append(bytes.Clone(setData), 0xc0)},
		{"a second request in the same body is refused", request, append(bytes.Clone(setData), setData...)},
		{"a reply with only xid and zxid is refused", reply(wire.OpDelete), pack(t, 1, 2)},
		{"a getData reply with its Stat missing is refused", reply(wire.OpGetData), pack(t, 1, 2, 0, []byte("x"))},
		{"a getEphemerals request without its prefix is refused", request, pack(t, 1, wire.OpGetEphemerals)},
		{"a getEphemerals reply without its paths is refused", reply(wire.OpGetEphemerals), pack(t, 1, 2, 0)},
		{"a getAllChildrenNumber reply whose count is a string is refused", reply(wire.OpGetAllChildrenNumber), pack(t, 1, 2, 0, "7")},
		{"a getAllChildrenNumber reply with a count beyond int32 is refused", reply(wire.OpGetAllChildrenNumber), pack(t, 1, 2, 0, int64(1)<<31)},
		{"a create whose ACL is a string is refused", request, pack(t, 1, wire.OpCreate, "/a", nil, 0, 0, "world:anyone:cdrwa")},
		{"a setACL without its version is refused", request, pack(t, 1, wire.OpSetACL, "/a", []any{})},
		{"an ACL entry whose perms are a string is refused", request, pack(t, 1, wire.OpSetACL, "/a", []any{[]any{"cdrwa", "world", "anyone"}}, 0)},
		{"a Stat with ten fields is refused", reply(wire.OpExists), pack(t, 1, 2, 0, statArray(fullStat)[:10])},
		{"a multi create result without its Stat is refused", reply(wire.OpMulti), pack(t, 1, 2, 0, []any{[]any{wire.OpCreate, 0, "/a"}})},
		{"a multi result without its code is refused", reply(wire.OpMulti), pack(t, 1, 2, 0, []any{[]any{wire.OpCheck}})},
		{"a notification without its path is refused", reply(wire.OpPing), pack(t, -1, 5, 0, 1, 3)},
		{"a trailing byte after a reply is refused", reply(wire.OpDelete), append(pack(t, 1, 2, 0), 0x00)},
		{"a connect request with four fields is refused", connectRequest, pack(t, 1, 0, 1000, 0)},
		{"a connect request with a trailing byte is refused", connectRequest, append(pack(t, 1, 0, 1000, 0, nil), 0x00)},
		{"a connect response with four fields is refused", connectResponse, pack(t, 1, 1000, 5, []byte("pw"))},
		{"a connect response whose password is a number is refused", connectResponse, pack(t, 1, 1000, 5, 7, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.decode(tc.body)
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("err = %v, want one matching ErrMalformed", err)
			}
		})
	}
}

// encodedBody is one table entry, encoded, with the decoder for its kind.
type encodedBody struct {
	name   string
	body   []byte
	decode func([]byte) error
}

// encodedTable encodes every round-trip table entry.
func encodedTable(t testing.TB) []encodedBody {
	var out []encodedBody
	for _, tc := range connectRequests {
		out = append(out, encodedBody{"connect request: " + tc.name, frameBody(t, wire.AppendConnectRequest(nil, &tc.m)),
			func(b []byte) error { var m wire.ConnectRequest; return wire.DecodeConnectRequest(b, &m) }})
	}
	for _, tc := range connectResponses {
		out = append(out, encodedBody{"connect response: " + tc.name, frameBody(t, wire.AppendConnectResponse(nil, &tc.m)),
			func(b []byte) error { var m wire.ConnectResponse; return wire.DecodeConnectResponse(b, &m) }})
	}
	for _, tc := range requests {
		out = append(out, encodedBody{"request: " + tc.name, frameBody(t, wire.AppendRequest(nil, &tc.r)),
			func(b []byte) error { var r wire.Request; return wire.DecodeRequest(b, &r) }})
	}
	for _, tc := range replies {
		op := tc.op
		out = append(out, encodedBody{"reply: " + tc.name, frameBody(t, wire.AppendReply(nil, tc.op, &tc.r)),
			func(b []byte) error { var r wire.Reply; return wire.DecodeReply(b, op, &r) }})
	}
	return out
}

func TestTruncatedInputIsMalformedAtEveryOffset(t *testing.T) {
	for _, e := range encodedTable(t) {
		t.Run(e.name, func(t *testing.T) {
			for i := range len(e.body) {
				// A fresh copy with no spare capacity, so a decoder reading
				// past the end would fault rather than see the rest.
				cut := bytes.Clone(e.body[:i])
				if err := e.decode(cut); !errors.Is(err, wire.ErrMalformed) {
					t.Fatalf("cut at %d of %d bytes: err = %v, want ErrMalformed", i, len(e.body), err)
				}
			}
		})
	}
}

func TestPeekXid(t *testing.T) {
	t.Run("an xid that is cut short is malformed", func(t *testing.T) {
		body := frameBody(t, wire.AppendReply(nil, wire.OpDelete, &wire.Reply{Xid: math.MaxInt32}))
		for i := range 6 { // array header, then the uint32 code and four bytes
			if _, err := wire.PeekXid(body[:i]); !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("cut at %d: err = %v, want ErrMalformed", i, err)
			}
		}
	})
	t.Run("a body with fewer than three fields is malformed", func(t *testing.T) {
		if _, err := wire.PeekXid(pack(t, 1, 2)); !errors.Is(err, wire.ErrMalformed) {
			t.Fatalf("err = %v, want ErrMalformed", err)
		}
	})
	t.Run("the xid is read without decoding the rest of the body", func(t *testing.T) {
		body := append(pack(t, 5, 0, 0), 0xc1) // 0xc1 is never valid msgpack
		body[0] = 0x94                         // declare the fourth element
		if xid, err := wire.PeekXid(body); err != nil || xid != 5 {
			t.Fatalf("PeekXid = %d, %v; want 5, nil", xid, err)
		}
	})
}

func TestRequestXidsAreNonNegativeOrTheirOpsReservedOne(t *testing.T) {
	for _, tt := range []struct {
		name string
		xid  int32
		op   wire.Op
		want bool
	}{
		{"a getData with xid 0 is allowed", 0, wire.OpGetData, true},
		{"a create with the largest xid is allowed", math.MaxInt32, wire.OpCreate, true},
		{"a ping with the ping xid is allowed", wire.XidPing, wire.OpPing, true},
		{"a setWatches with the setWatches xid is allowed", wire.XidSetWatches, wire.OpSetWatches, true},
		{"a setWatches2 with the setWatches xid is allowed", wire.XidSetWatches, wire.OpSetWatches2, true},
		{"a ping with a numbered xid is allowed", 7, wire.OpPing, true},
		{"a getData with the notification xid is not", wire.XidNotification, wire.OpGetData, false},
		{"a getData with the closing xid is not", wire.XidClosing, wire.OpGetData, false},
		{"a getData with the ping xid is not", wire.XidPing, wire.OpGetData, false},
		{"a ping with the setWatches xid is not", wire.XidSetWatches, wire.OpPing, false},
		{"a setWatches with the ping xid is not", wire.XidPing, wire.OpSetWatches, false},
		{"an unassigned negative xid is not", -5, wire.OpExists, false},
		{"the lowest xid is not", math.MinInt32, wire.OpExists, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := wire.RequestXidAllowed(tt.xid, tt.op); got != tt.want {
				t.Fatalf("RequestXidAllowed(%d, %s) = %v, want %v", tt.xid, tt.op, got, tt.want)
			}
		})
	}
}

// Lengths read from the input are checked against the input before anything
// is allocated for them, and nesting does not grow the stack.

func allocatedBytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestDecodersDoNotAllocateForLengthsTheInputCannotHold(t *testing.T) {
	const budget = 256 << 10
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"a 4 GiB data length in a tiny setData", []byte{0x95, 0x01, 0x05, 0xa2, '/', 'a', 0xc6, 0xff, 0xff, 0xff, 0xf0, 0x00}},
		{"a 2 GiB path length in a tiny getData", []byte{0x94, 0x01, 0x04, 0xdb, 0x7f, 0xff, 0xff, 0xf0, 0xc2}},
		{"a 2 GiB string in an extra field", []byte{0x93, 0x01, 0x0b, 0xdb, 0x7f, 0xff, 0xff, 0xf0}},
		{"a 2 GiB binary in an extra field", []byte{0x93, 0x01, 0x0b, 0xc6, 0x7f, 0xff, 0xff, 0xf0}},
		{"a 2 GiB extension in an extra field", []byte{0x93, 0x01, 0x0b, 0xc9, 0x7f, 0xff, 0xff, 0xf0, 0x01}},
		{"a 4-billion-entry map in an extra field", []byte{0x93, 0x01, 0x0b, 0xdf, 0xff, 0xff, 0xff, 0xff}},
	} {
		t.Run(tc.name+" is refused without allocating for it", func(t *testing.T) {
			var err error
			// Decode many times: a decoder that kept a grown buffer in its
			// pool would show here too.
			n := allocatedBytes(func() {
				for range 100 {
					var r wire.Request
					err = wire.DecodeRequest(tc.body, &r)
				}
			})
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if n > budget {
				t.Fatalf("100 decodes allocated %d bytes, want at most %d", n, budget)
			}
		})
	}
}

func TestDeeplyNestedExtraFieldsAreSkippedWithoutDeepRecursion(t *testing.T) {
	// A ping with one extra field: an array nested a million deep, which
	// fits a 1 MiB frame. A recursive skip needs over 100 MiB of stack
	// for it, and a larger frame limit would overflow the stack and kill
	// the process.
	const depth = 1<<20 - 8
	body := append([]byte{0x93, 0x01, 0x0b}, bytes.Repeat([]byte{0x91}, depth)...)
	body = append(body, 0xc0)

	var err error
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var r wire.Request
		err = wire.DecodeRequest(body, &r)
		runtime.ReadMemStats(&after) // while this goroutine's stack is still as grown as the decode made it
	}()
	<-done
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if grown := int64(after.StackInuse) - int64(before.StackInuse); grown > 8<<20 {
		t.Fatalf("skipping the nested field grew the stacks by %d bytes", grown)
	}
}

// Frames.

// countingReader reports how many bytes were read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func header(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func TestReadFrame(t *testing.T) {
	t.Run("frames are read one after another and then io.EOF", func(t *testing.T) {
		var stream []byte
		stream = wire.AppendRequest(stream, &requests[0].r)
		stream = wire.AppendRequest(stream, &requests[10].r)
		r := bytes.NewReader(stream)
		for _, want := range []*wire.Request{&requests[0].r, &requests[10].r} {
			body, err := wire.ReadFrame(r, nil, wire.DefaultMaxFrame)
			if err != nil {
				t.Fatalf("ReadFrame: %v", err)
			}
			var got wire.Request
			if err := wire.DecodeRequest(body, &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(&got, want) {
				t.Fatalf("got %+v, want %+v", got, *want)
			}
		}
		if _, err := wire.ReadFrame(r, nil, wire.DefaultMaxFrame); err != io.EOF {
			t.Fatalf("after the last frame: err = %v, want io.EOF", err)
		}
	})
	t.Run("the body is read into buf when it fits", func(t *testing.T) {
		buf := make([]byte, 0, 64)
		body, err := wire.ReadFrame(bytes.NewReader(append(header(3), 1, 2, 3)), buf, 100)
		if err != nil || !bytes.Equal(body, []byte{1, 2, 3}) {
			t.Fatalf("ReadFrame = % x, %v; want 01 02 03", body, err)
		}
		if &body[0] != &buf[:1][0] {
			t.Fatal("body was not read into buf")
		}
	})
	t.Run("a body larger than buf gets a new buffer", func(t *testing.T) {
		buf := make([]byte, 0, 2)
		body, err := wire.ReadFrame(bytes.NewReader(append(header(3), 1, 2, 3)), buf, 100)
		if err != nil || !bytes.Equal(body, []byte{1, 2, 3}) {
			t.Fatalf("ReadFrame = % x, %v; want 01 02 03", body, err)
		}
	})
	t.Run("an empty frame gives an empty body", func(t *testing.T) {
		body, err := wire.ReadFrame(bytes.NewReader(header(0)), nil, 100)
		if err != nil || len(body) != 0 {
			t.Fatalf("ReadFrame = % x, %v; want an empty body", body, err)
		}
	})
	t.Run("a frame exactly at the limit is accepted", func(t *testing.T) {
		body, err := wire.ReadFrame(bytes.NewReader(append(header(5), make([]byte, 5)...)), nil, 5)
		if err != nil || len(body) != 5 {
			t.Fatalf("ReadFrame = %d bytes, %v; want 5 bytes", len(body), err)
		}
	})
	for _, size := range []uint32{wire.DefaultMaxFrame + 1, math.MaxInt32, math.MaxUint32} {
		t.Run(fmt.Sprintf("a frame declaring %d bytes is refused before its body is read", size), func(t *testing.T) {
			r := &countingReader{r: io.MultiReader(bytes.NewReader(header(size)), bytes.NewReader(make([]byte, 1024)))}
			var err error
			allocated := allocatedBytes(func() {
				_, err = wire.ReadFrame(r, nil, wire.DefaultMaxFrame)
			})
			var tooLarge *wire.FrameTooLargeError
			if !errors.As(err, &tooLarge) {
				t.Fatalf("err = %v, want a *FrameTooLargeError", err)
			}
			wantSize := int(min(uint64(size), math.MaxInt)) // what fits in an int on 32-bit platforms
			if tooLarge.Size != wantSize || tooLarge.Limit != wire.DefaultMaxFrame {
				t.Fatalf("error says %d bytes over a %d limit, want %d over %d", tooLarge.Size, tooLarge.Limit, wantSize, wire.DefaultMaxFrame)
			}
			if !errors.Is(err, wire.ErrFrameTooLarge) {
				t.Fatal("the error does not match ErrFrameTooLarge")
			}
			if code := wire.CodeOf(err); code != wire.CodeFrameTooLarge {
				t.Fatalf("CodeOf = %d, want CodeFrameTooLarge: the server sends this code before it closes", code)
			}
			if r.n != wire.FrameHeaderSize {
				t.Fatalf("read %d bytes, want only the %d-byte header", r.n, wire.FrameHeaderSize)
			}
			if allocated > 4096 {
				t.Fatalf("allocated %d bytes for a refused frame", allocated)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		input []byte
	}{
		{"a header cut short", []byte{0, 0}},
		{"a header with no body", header(10)},
		{"a body cut short", append(header(10), 1, 2, 3)},
	} {
		t.Run(tc.name+" gives io.ErrUnexpectedEOF", func(t *testing.T) {
			if _, err := wire.ReadFrame(bytes.NewReader(tc.input), nil, 100); err != io.ErrUnexpectedEOF {
				t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
			}
		})
	}
	t.Run("a read error is returned as it is", func(t *testing.T) {
		broken := errors.New("connection reset")
		r := io.MultiReader(bytes.NewReader(append(header(10), 1)), &failingReader{broken})
		if _, err := wire.ReadFrame(r, nil, 100); !errors.Is(err, broken) {
			t.Fatalf("err = %v, want %v", err, broken)
		}
	})
}

type failingReader struct{ err error }

func (f *failingReader) Read([]byte) (int, error) { return 0, f.err }

// Error codes.

// codeTable pins every sentinel to its code. The ZooKeeper codes must keep
// ZooKeeper's numbers.
var codeTable = []struct {
	err  error
	code wire.Code
	num  int32
}{
	{wire.ErrSystemError, wire.CodeSystemError, -1},
	{wire.ErrRuntimeInconsistency, wire.CodeRuntimeInconsistency, -2},
	{wire.ErrDataInconsistency, wire.CodeDataInconsistency, -3},
	{wire.ErrConnectionLoss, wire.CodeConnectionLoss, -4},
	{wire.ErrMarshallingError, wire.CodeMarshallingError, -5},
	{wire.ErrUnimplemented, wire.CodeUnimplemented, -6},
	{wire.ErrOperationTimeout, wire.CodeOperationTimeout, -7},
	{wire.ErrBadArguments, wire.CodeBadArguments, -8},
	{wire.ErrUnknownSession, wire.CodeUnknownSession, -12},
	{wire.ErrAPIError, wire.CodeAPIError, -100},
	{wire.ErrNoNode, wire.CodeNoNode, -101},
	{wire.ErrNoAuth, wire.CodeNoAuth, -102},
	{wire.ErrBadVersion, wire.CodeBadVersion, -103},
	{wire.ErrNoChildrenForEphemerals, wire.CodeNoChildrenForEphemerals, -108},
	{wire.ErrNodeExists, wire.CodeNodeExists, -110},
	{wire.ErrNotEmpty, wire.CodeNotEmpty, -111},
	{wire.ErrSessionExpired, wire.CodeSessionExpired, -112},
	{wire.ErrInvalidACL, wire.CodeInvalidACL, -114},
	{wire.ErrAuthFailed, wire.CodeAuthFailed, -115},
	{wire.ErrSessionMoved, wire.CodeSessionMoved, -118},
	{wire.ErrNotReadOnly, wire.CodeNotReadOnly, -119},
	{wire.ErrNoWatcher, wire.CodeNoWatcher, -121},
	{wire.ErrRequestTimeout, wire.CodeRequestTimeout, -122},
	{wire.ErrQuotaExceeded, wire.CodeQuotaExceeded, -125},
	{wire.ErrThrottled, wire.CodeThrottled, -127},
	{wire.ErrDataTooLarge, wire.CodeDataTooLarge, -200},
	{wire.ErrNoQuorum, wire.CodeNoQuorum, -201},
	{wire.ErrTooManyConnections, wire.CodeTooManyConnections, -202},
	{wire.ErrBadPassword, wire.CodeBadPassword, -203},
	{wire.ErrFrameTooLarge, wire.CodeFrameTooLarge, -204},
	{wire.ErrMalformed, wire.CodeMalformed, -205},
	{wire.ErrShuttingDown, wire.CodeShuttingDown, -206},
	{wire.ErrNotCaughtUp, wire.CodeNotCaughtUp, -207},
}

func TestErrorCodes(t *testing.T) {
	for i, tc := range codeTable {
		t.Run(fmt.Sprintf("code %d maps to %q and back", tc.num, tc.err), func(t *testing.T) {
			if int32(tc.code) != tc.num {
				t.Fatalf("code = %d, want %d", tc.code, tc.num)
			}
			if got := tc.code.Err(); got != tc.err {
				t.Fatalf("Code(%d).Err() = %v (%p), want the sentinel %p", tc.num, got, got, tc.err)
			}
			if got := wire.CodeOf(tc.err); got != tc.code {
				t.Fatalf("CodeOf(sentinel) = %d, want %d", got, tc.code)
			}
			wrapped := fmt.Errorf("getData /a: %w", tc.err)
			if !errors.Is(wrapped, tc.err) || wire.CodeOf(wrapped) != tc.code {
				t.Fatalf("wrapped: errors.Is = %v, CodeOf = %d", errors.Is(wrapped, tc.err), wire.CodeOf(wrapped))
			}
			detailed := wire.Errorf(tc.code, "detail about %s", "/a")
			if !errors.Is(detailed, tc.err) || detailed.Error() != "detail about /a" {
				t.Fatalf("Errorf(%d): errors.Is = %v, message %q", tc.num, errors.Is(detailed, tc.err), detailed)
			}
			if tc.code.String() != tc.err.Error() || tc.err.Error() == "" {
				t.Fatalf("String() = %q, Error() = %q", tc.code.String(), tc.err.Error())
			}
			for j, other := range codeTable {
				if j != i && (errors.Is(tc.err, other.err) || errors.Is(wrapped, other.err)) {
					t.Fatalf("%q matches %q", tc.err, other.err)
				}
			}
		})
	}
	t.Run("CodeOK means no error", func(t *testing.T) {
		if err := wire.CodeOK.Err(); err != nil {
			t.Fatalf("CodeOK.Err() = %v", err)
		}
		if wire.CodeOf(nil) != wire.CodeOK {
			t.Fatalf("CodeOf(nil) = %d", wire.CodeOf(nil))
		}
	})
	t.Run("an error without a code is a system error", func(t *testing.T) {
		if got := wire.CodeOf(errors.New("disk on fire")); got != wire.CodeSystemError {
			t.Fatalf("CodeOf = %d, want CodeSystemError", got)
		}
	})
	t.Run("Errorf wrapped twice keeps its code", func(t *testing.T) {
		err := fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", wire.Errorf(wire.CodeNoNode, "no node at %s", "/x")))
		if !errors.Is(err, wire.ErrNoNode) || wire.CodeOf(err) != wire.CodeNoNode {
			t.Fatalf("errors.Is = %v, CodeOf = %d", errors.Is(err, wire.ErrNoNode), wire.CodeOf(err))
		}
	})
	t.Run("an unknown code gives an *Error with that code", func(t *testing.T) {
		err := wire.Code(-999).Err()
		var e *wire.Error
		if !errors.As(err, &e) || e.Code != -999 {
			t.Fatalf("Code(-999).Err() = %#v, want an *Error with code -999", err)
		}
		if wire.CodeOf(err) != -999 || !errors.Is(err, &wire.Error{Code: -999}) {
			t.Fatalf("CodeOf = %d", wire.CodeOf(err))
		}
		if errors.Is(err, wire.ErrSystemError) || err.Error() == "" {
			t.Fatalf("err = %q matches ErrSystemError or has no message", err)
		}
	})
}

func TestIntegersUseTheSmallestFormatAndRoundTrip(t *testing.T) {
	boundaries := []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	for _, v := range boundaries {
		t.Run(fmt.Sprintf("%d is written as msgpack's EncodeInt writes it and read back", v), func(t *testing.T) {
			r := wire.Request{Xid: wire.XidSetWatches, Op: wire.OpSetWatches, RelativeZxid: v}
			body := frameBody(t, wire.AppendRequest(nil, &r))
			var want bytes.Buffer
			enc := msgpack.NewEncoder(&want)
			for _, err := range []error{enc.EncodeArrayLen(6), enc.EncodeInt(int64(wire.XidSetWatches)),
				enc.EncodeInt(int64(wire.OpSetWatches)), enc.EncodeInt(v),
				enc.EncodeArrayLen(0), enc.EncodeArrayLen(0), enc.EncodeArrayLen(0)} {
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(body, want.Bytes()) {
				t.Fatalf("encoded % x, want % x", body, want.Bytes())
			}
			var got wire.Request
			if err := wire.DecodeRequest(body, &got); err != nil || !reflect.DeepEqual(got, r) {
				t.Fatalf("decoded %+v, %v; want %+v", got, err, r)
			}
		})
	}
	for _, v := range []int64{math.MaxInt32, math.MinInt32, math.MaxInt32 + 1, math.MinInt32 - 1} {
		fits := v >= math.MinInt32 && v <= math.MaxInt32
		t.Run(fmt.Sprintf("a version of %d is accepted only if it fits in int32 (%v)", v, fits), func(t *testing.T) {
			var r wire.Request
			err := wire.DecodeRequest(pack(t, 1, wire.OpDelete, "/a", v), &r)
			if fits && (err != nil || int64(r.Version) != v) {
				t.Fatalf("decoded version %d, %v; want %d", r.Version, err, v)
			}
			if !fits && !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

// A leaseRenew reply of a member from before Lease.Node (a lease of five
// fields) decodes as a renewal that did not look.
func TestALeaseReplyOfFiveFieldsLookedAtNoNode(t *testing.T) {
	body, err := msgpack.Marshal([]any{61, 10, 0, []any{7, 10_000, 1_700_000_040_000, 2, 0}})
	if err != nil {
		t.Fatal(err)
	}
	var r wire.Reply
	if err := wire.DecodeReply(body, wire.OpLeaseRenew, &r); err != nil {
		t.Fatal(err)
	}
	want := wire.Lease{ID: 7, TTLMs: 10_000, Expires: 1_700_000_040_000, Version: 2}
	if r.Lease != want {
		t.Errorf("decoded %+v, want %+v", r.Lease, want)
	}
}
