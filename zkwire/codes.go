package zkwire

import "fmt"

// Op is a ZooKeeper op code (ZooDefs.OpCode).
type Op int32

// Op codes.
const (
	OpNotification         Op = 0
	OpCreate               Op = 1
	OpDelete               Op = 2
	OpExists               Op = 3
	OpGetData              Op = 4
	OpSetData              Op = 5
	OpGetACL               Op = 6
	OpSetACL               Op = 7
	OpGetChildren          Op = 8
	OpSync                 Op = 9
	OpPing                 Op = 11
	OpGetChildren2         Op = 12
	OpCheck                Op = 13
	OpMulti                Op = 14
	OpCreate2              Op = 15
	OpReconfig             Op = 16
	OpCheckWatches         Op = 17
	OpRemoveWatches        Op = 18
	OpCreateContainer      Op = 19
	OpDeleteContainer      Op = 20
	OpCreateTTL            Op = 21
	OpMultiRead            Op = 22
	OpAuth                 Op = 100
	OpSetWatches           Op = 101
	OpSASL                 Op = 102
	OpGetEphemerals        Op = 103
	OpGetAllChildrenNumber Op = 104
	OpSetWatches2          Op = 105
	OpAddWatch             Op = 106
	OpWhoAmI               Op = 107
	OpCreateSession        Op = -10
	OpCloseSession         Op = -11
	// OpError is the type of a failed sub-request's result in a multi.
	OpError Op = -1
)

var opNames = map[Op]string{
	OpNotification: "notification", OpCreate: "create", OpDelete: "delete", OpExists: "exists",
	OpGetData: "getData", OpSetData: "setData", OpGetACL: "getACL", OpSetACL: "setACL",
	OpGetChildren: "getChildren", OpSync: "sync", OpPing: "ping", OpGetChildren2: "getChildren2",
	OpCheck: "check", OpMulti: "multi", OpCreate2: "create2", OpReconfig: "reconfig",
	OpCheckWatches: "checkWatches", OpRemoveWatches: "removeWatches",
	OpCreateContainer: "createContainer", OpDeleteContainer: "deleteContainer",
	OpCreateTTL: "createTTL", OpMultiRead: "multiRead", OpAuth: "auth", OpSetWatches: "setWatches",
	OpSASL: "sasl", OpGetEphemerals: "getEphemerals", OpGetAllChildrenNumber: "getAllChildrenNumber",
	OpSetWatches2: "setWatches2", OpAddWatch: "addWatch", OpWhoAmI: "whoAmI",
	OpCreateSession: "createSession", OpCloseSession: "closeSession", OpError: "error",
}

func (op Op) String() string {
	if s, ok := opNames[op]; ok {
		return s
	}
	return fmt.Sprintf("op(%d)", int32(op))
}

// Reserved xids: the server's notifications and the replies to the
// client's pings, auth packets and setWatches carry these.
const (
	XidNotification int32 = -1
	XidPing         int32 = -2
	XidAuth         int32 = -4
	XidSetWatches   int32 = -8
)

// ProtocolVersion is the version in ZooKeeper's ConnectRequest and
// ConnectResponse.
const ProtocolVersion int32 = 0

// PasswordSize is the length of a session password.
const PasswordSize = 16

// Permissions of an ACL (ZooDefs.Perms).
const (
	PermRead   int32 = 1 << 0
	PermWrite  int32 = 1 << 1
	PermCreate int32 = 1 << 2
	PermDelete int32 = 1 << 3
	PermAdmin  int32 = 1 << 4
	PermAll          = PermRead | PermWrite | PermCreate | PermDelete | PermAdmin
)

// ID is an identity: a scheme and an id in it ("world", "anyone").
type ID struct {
	Scheme string
	ID     string
}

// ACL grants the permissions Perms to an identity.
type ACL struct {
	Perms int32
	ID    ID
}

// Anyone is world:anyone, the identity of every client.
var Anyone = ID{Scheme: "world", ID: "anyone"}

// OpenACL is ZooKeeper's OPEN_ACL_UNSAFE: every permission for anyone.
var OpenACL = []ACL{{Perms: PermAll, ID: Anyone}}

// ClientInfo is one identity of a connection in a whoAmI reply.
type ClientInfo struct {
	AuthScheme string
	User       string
}
