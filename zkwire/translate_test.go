package zkwire

import (
	"errors"
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

var (
	openWire = []wire.ACL{{Perms: wire.PermAll, Scheme: "world", ID: "anyone"}}
	digestZK = []ACL{{Perms: PermRead | PermAdmin, ID: ID{Scheme: "digest", ID: "u:hash"}}}
)

func TestRequestToWire(t *testing.T) {
	tests := []struct {
		name string
		zr   Request
		want wire.Request
		code wire.Code // the refusal's code; CodeOK when it maps
	}{
		{name: "a create keeps its path, data, mode and ACL",
			zr:   Request{Op: OpCreate, Path: "/a", Data: []byte("d"), ACL: OpenACL, Flags: int32(wire.ModeEphemeralSequential)},
			want: wire.Request{Op: wire.OpCreate, Path: "/a", Data: []byte("d"), ACL: openWire, Mode: wire.ModeEphemeralSequential}},
		{name: "create2 is a create",
			zr:   Request{Op: OpCreate2, Path: "/a", ACL: digestZK},
			want: wire.Request{Op: wire.OpCreate, Path: "/a", ACL: []wire.ACL{{Perms: wire.PermRead | wire.PermAdmin, Scheme: "digest", ID: "u:hash"}}}},
		{name: "a create with an empty ACL is InvalidACL, not the server's default",
			zr: Request{Op: OpCreate, Path: "/a"}, code: wire.CodeInvalidACL},
		{name: "createContainer makes a container",
			zr:   Request{Op: OpCreateContainer, Path: "/c", ACL: OpenACL, Flags: int32(wire.ModeContainer)},
			want: wire.Request{Op: wire.OpCreate, Path: "/c", ACL: openWire, Mode: wire.ModeContainer}},
		{name: "createContainer of another mode is BadArguments",
			zr: Request{Op: OpCreateContainer, Path: "/c", ACL: OpenACL}, code: wire.CodeBadArguments},
		{name: "createTTL keeps its TTL",
			zr:   Request{Op: OpCreateTTL, Path: "/t", ACL: OpenACL, Flags: int32(wire.ModePersistentWithTTL), TTL: 5000},
			want: wire.Request{Op: wire.OpCreate, Path: "/t", ACL: openWire, Mode: wire.ModePersistentWithTTL, TTL: 5000}},
		{name: "createTTL of a mode without a TTL is BadArguments",
			zr: Request{Op: OpCreateTTL, Path: "/t", ACL: OpenACL, TTL: 5000}, code: wire.CodeBadArguments},
		{name: "a TTL mode is made only with createTTL",
			zr: Request{Op: OpCreate, Path: "/t", ACL: OpenACL, Flags: int32(wire.ModePersistentWithTTL)}, code: wire.CodeBadArguments},
		{name: "setData keeps its data and version",
			zr:   Request{Op: OpSetData, Path: "/a", Data: []byte("x"), Version: 3},
			want: wire.Request{Op: wire.OpSetData, Path: "/a", Data: []byte("x"), Version: 3}},
		{name: "delete keeps its version",
			zr:   Request{Op: OpDelete, Path: "/a", Version: -1},
			want: wire.Request{Op: wire.OpDelete, Path: "/a", Version: -1}},
		{name: "check keeps its version",
			zr:   Request{Op: OpCheck, Path: "/a", Version: 2},
			want: wire.Request{Op: wire.OpCheck, Path: "/a", Version: 2}},
		{name: "exists keeps its watch",
			zr:   Request{Op: OpExists, Path: "/a", Watch: true},
			want: wire.Request{Op: wire.OpExists, Path: "/a", Watch: true}},
		{name: "getData keeps its watch",
			zr:   Request{Op: OpGetData, Path: "/a", Watch: true},
			want: wire.Request{Op: wire.OpGetData, Path: "/a", Watch: true}},
		{name: "getChildren2 is a getChildren",
			zr:   Request{Op: OpGetChildren2, Path: "/a", Watch: true},
			want: wire.Request{Op: wire.OpGetChildren, Path: "/a", Watch: true}},
		{name: "sync keeps its path",
			zr: Request{Op: OpSync, Path: "/a"}, want: wire.Request{Op: wire.OpSync, Path: "/a"}},
		{name: "getAllChildrenNumber keeps its path",
			zr: Request{Op: OpGetAllChildrenNumber, Path: "/"}, want: wire.Request{Op: wire.OpGetAllChildrenNumber, Path: "/"}},
		{name: "getEphemerals takes a prefix that is no path as it is",
			zr: Request{Op: OpGetEphemerals, Path: "/app/"}, want: wire.Request{Op: wire.OpGetEphemerals, Path: "/app/"}},
		{name: "getEphemerals keeps the spaces of a prefix that is not blank",
			zr: Request{Op: OpGetEphemerals, Path: "/a "}, want: wire.Request{Op: wire.OpGetEphemerals, Path: "/a "}},
		{name: "getEphemerals of an empty prefix lists every ephemeral",
			zr: Request{Op: OpGetEphemerals}, want: wire.Request{Op: wire.OpGetEphemerals, Path: "/"}},
		{name: "getEphemerals of a blank prefix lists every ephemeral",
			zr: Request{Op: OpGetEphemerals, Path: " \t "}, want: wire.Request{Op: wire.OpGetEphemerals, Path: "/"}},
		{name: "getEphemerals of a slash between spaces lists every ephemeral",
			zr: Request{Op: OpGetEphemerals, Path: " / "}, want: wire.Request{Op: wire.OpGetEphemerals, Path: "/"}},
		{name: "ping is a ping",
			zr: Request{Xid: XidPing, Op: OpPing}, want: wire.Request{Op: wire.OpPing}},
		{name: "closeSession is a close",
			zr: Request{Op: OpCloseSession}, want: wire.Request{Op: wire.OpClose}},
		{name: "a multi maps each of its ops",
			zr: Request{Op: OpMulti, Ops: []Request{
				{Op: OpCreate, Path: "/m", ACL: OpenACL}, {Op: OpCreateTTL, Path: "/t", ACL: OpenACL, Flags: int32(wire.ModePersistentWithTTL), TTL: 9},
				{Op: OpSetData, Path: "/m", Data: []byte("x"), Version: -1}, {Op: OpCheck, Path: "/m", Version: 1}, {Op: OpDelete, Path: "/m", Version: -1},
			}},
			want: wire.Request{Op: wire.OpMulti, Ops: []wire.Request{
				{Op: wire.OpCreate, Path: "/m", ACL: openWire}, {Op: wire.OpCreate, Path: "/t", ACL: openWire, Mode: wire.ModePersistentWithTTL, TTL: 9},
				{Op: wire.OpSetData, Path: "/m", Data: []byte("x"), Version: -1}, {Op: wire.OpCheck, Path: "/m", Version: 1}, {Op: wire.OpDelete, Path: "/m", Version: -1},
			}}},
		{name: "an empty multi is a multi of nothing",
			zr: Request{Op: OpMulti}, want: wire.Request{Op: wire.OpMulti, Ops: []wire.Request{}}},
		{name: "a multi holding a read is BadArguments",
			zr: Request{Op: OpMulti, Ops: []Request{{Op: OpCheck, Path: "/"}, {Op: OpGetData, Path: "/"}}}, code: wire.CodeBadArguments},
		{name: "a multi holding a create without an ACL is InvalidACL",
			zr: Request{Op: OpMulti, Ops: []Request{{Op: OpCreate, Path: "/m"}}}, code: wire.CodeInvalidACL},
		{name: "a multiRead leaves its reads in Ops and no op",
			zr:   Request{Op: OpMultiRead, Ops: []Request{{Op: OpGetData, Path: "/a", Watch: true}, {Op: OpGetChildren, Path: "/"}}},
			want: wire.Request{Ops: []wire.Request{{Op: wire.OpGetData, Path: "/a", Watch: true}, {Op: wire.OpGetChildren, Path: "/"}}}},
		{name: "a multiRead holding a write is BadArguments",
			zr: Request{Op: OpMultiRead, Ops: []Request{{Op: OpGetData, Path: "/a"}, {Op: OpDelete, Path: "/a"}}}, code: wire.CodeBadArguments},
		{name: "setWatches keeps its zxid and lists",
			zr:   Request{Op: OpSetWatches, RelativeZxid: 7, DataWatches: []string{"/d"}, ExistWatches: []string{"/e"}, ChildWatches: []string{"/c"}},
			want: wire.Request{Op: wire.OpSetWatches, RelativeZxid: 7, DataWatches: []string{"/d"}, ExistWatches: []string{"/e"}, ChildWatches: []string{"/c"}}},
		{name: "setWatches2 keeps its persistent and recursive lists too",
			zr:   Request{Op: OpSetWatches2, RelativeZxid: 8, PersistentWatches: []string{"/p"}, PersistentRecursiveWatches: []string{"/r"}},
			want: wire.Request{Op: wire.OpSetWatches2, RelativeZxid: 8, PersistentWatches: []string{"/p"}, RecursiveWatches: []string{"/r"}}},
		{name: "addWatch keeps its mode",
			zr:   Request{Op: OpAddWatch, Path: "/w", Mode: 1},
			want: wire.Request{Op: wire.OpAddWatch, Path: "/w", AddWatchMode: wire.AddWatchPersistentRecursive}},
		{name: "removeWatches keeps its watcher type",
			zr:   Request{Op: OpRemoveWatches, Path: "/w", WatcherType: 2},
			want: wire.Request{Op: wire.OpRemoveWatches, Path: "/w", WatcherType: wire.WatcherData}},
		{name: "checkWatches is a removeWatches in form",
			zr:   Request{Op: OpCheckWatches, Path: "/w", WatcherType: 3},
			want: wire.Request{Op: wire.OpRemoveWatches, Path: "/w", WatcherType: wire.WatcherAny}},
		{name: "getACL keeps its path",
			zr: Request{Op: OpGetACL, Path: "/a"}, want: wire.Request{Op: wire.OpGetACL, Path: "/a"}},
		{name: "setACL converts its ACL and keeps its version",
			zr:   Request{Op: OpSetACL, Path: "/a", ACL: OpenACL, Version: 4},
			want: wire.Request{Op: wire.OpSetACL, Path: "/a", ACL: openWire, Version: 4}},
		{name: "setACL with an empty ACL is left to the server's ACL check",
			zr: Request{Op: OpSetACL, Path: "/a", Version: -1}, want: wire.Request{Op: wire.OpSetACL, Path: "/a", Version: -1}},
		{name: "auth keeps its scheme and credential",
			zr:   Request{Xid: XidAuth, Op: OpAuth, Scheme: "digest", Auth: []byte("u:p")},
			want: wire.Request{Op: wire.OpAuth, AuthScheme: "digest", AuthData: []byte("u:p")}},
		{name: "whoAmI is a whoAmI",
			zr: Request{Op: OpWhoAmI}, want: wire.Request{Op: wire.OpWhoAmI}},
		{name: "reconfig keeps its servers and version (the server says whether it is enabled)",
			zr:   Request{Op: OpReconfig, Reconfig: &ReconfigRequest{JoiningServers: "server.4=h:1:2;3", LeavingServers: "2", CurConfigID: -1}},
			want: wire.Request{Op: wire.OpReconfig, Reconfig: wire.Reconfig{Joining: "server.4=h:1:2;3", Leaving: "2", FromConfig: -1}}},
		{name: "a reconfig's new members",
			zr:   Request{Op: OpReconfig, Reconfig: &ReconfigRequest{NewMembers: "server.1=h:1:2", CurConfigID: 7}},
			want: wire.Request{Op: wire.OpReconfig, Reconfig: wire.Reconfig{NewMembers: "server.1=h:1:2", FromConfig: 7}}},
		{name: "sasl is an auth of no scheme carrying the token",
			zr: Request{Op: OpSASL, Data: []byte("t")}, want: wire.Request{Op: wire.OpAuth, AuthData: []byte("t")}},
		{name: "an op only servers send to each other is Unimplemented",
			zr: Request{Op: OpCreateSession}, code: wire.CodeUnimplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got wire.Request
			err := RequestToWire(&tt.zr, &got)
			if code := wire.CodeOf(err); code != tt.code {
				t.Fatalf("code %d (%v), want %d", code, err, tt.code)
			}
			if tt.code == wire.CodeOK && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("mapped to\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

func TestReplyFromWire(t *testing.T) {
	st := goldenStat
	tests := []struct {
		name  string
		zr    Request
		reply wire.Reply
		reads []wire.Reply
		want  Reply
	}{
		{name: "a create answers the path alone",
			zr:    Request{Op: OpCreate},
			reply: wire.Reply{Xid: 1, Zxid: 2, Path: "/a0000000001", Stat: st},
			want:  Reply{Xid: 1, Zxid: 2, Path: "/a0000000001", Stat: st}},
		{name: "a createTTL answers the path and the Stat",
			zr:    Request{Op: OpCreateTTL},
			reply: wire.Reply{Xid: 1, Zxid: 2, Path: "/t", Stat: st},
			want:  Reply{Xid: 1, Zxid: 2, Path: "/t", Stat: st}},
		{name: "exists answers the Stat",
			zr:    Request{Op: OpExists},
			reply: wire.Reply{Xid: 1, Zxid: 2, Stat: st},
			want:  Reply{Xid: 1, Zxid: 2, Stat: st}},
		{name: "getData answers the data and the Stat",
			zr:    Request{Op: OpGetData},
			reply: wire.Reply{Xid: 1, Zxid: 2, Data: []byte("v"), Stat: st},
			want:  Reply{Xid: 1, Zxid: 2, Data: []byte("v"), Stat: st}},
		{name: "sasl answers the server's token",
			zr:    Request{Op: OpSASL, Data: []byte{}},
			reply: wire.Reply{Xid: 1, Zxid: 2, Data: []byte(`realm="zk-sasl-md5"`)},
			want:  Reply{Xid: 1, Zxid: 2, Data: []byte(`realm="zk-sasl-md5"`)}},
		{name: "reconfig answers the new configuration and its Stat",
			zr:    Request{Op: OpReconfig},
			reply: wire.Reply{Xid: 1, Zxid: 2, Data: []byte("server.1=h:1:0:participant\nversion=2"), Stat: st},
			want:  Reply{Xid: 1, Zxid: 2, Data: []byte("server.1=h:1:0:participant\nversion=2"), Stat: st}},
		{name: "getChildren2 answers the names and the Stat",
			zr:    Request{Op: OpGetChildren2},
			reply: wire.Reply{Xid: 1, Zxid: 2, Children: []string{"a", "b"}, Stat: st},
			want:  Reply{Xid: 1, Zxid: 2, Children: []string{"a", "b"}, Stat: st}},
		{name: "getEphemerals answers the paths",
			zr:    Request{Op: OpGetEphemerals},
			reply: wire.Reply{Xid: 1, Zxid: 2, Children: []string{"/e"}},
			want:  Reply{Xid: 1, Zxid: 2, Children: []string{"/e"}}},
		{name: "getAllChildrenNumber answers the number",
			zr:    Request{Op: OpGetAllChildrenNumber},
			reply: wire.Reply{Xid: 1, Zxid: 2, Descendants: 42},
			want:  Reply{Xid: 1, Zxid: 2, Number: 42}},
		{name: "getACL answers the ACL in ZooKeeper's shape and the Stat",
			zr:    Request{Op: OpGetACL},
			reply: wire.Reply{Xid: 1, Zxid: 2, ACL: openWire, Stat: st},
			want:  Reply{Xid: 1, Zxid: 2, ACL: OpenACL, Stat: st}},
		{name: "sync answers the path",
			zr:    Request{Op: OpSync},
			reply: wire.Reply{Xid: 1, Zxid: 2, Path: "/"},
			want:  Reply{Xid: 1, Zxid: 2, Path: "/"}},
		{name: "whoAmI answers each identity as a client info",
			zr:    Request{Op: OpWhoAmI},
			reply: wire.Reply{Xid: 1, Zxid: 2, Identities: []wire.Identity{{Scheme: "ip", ID: "127.0.0.1"}, {Scheme: "digest", ID: "u"}}},
			want:  Reply{Xid: 1, Zxid: 2, Clients: []ClientInfo{{"ip", "127.0.0.1"}, {"digest", "u"}}}},
		{name: "a delete answers nothing but the header",
			zr:    Request{Op: OpDelete},
			reply: wire.Reply{Xid: 1, Zxid: 2, Path: "/ignored"},
			want:  Reply{Xid: 1, Zxid: 2}},
		{name: "a refusal carries its code ZooKeeper's way",
			zr:    Request{Op: OpSetData},
			reply: wire.Reply{Xid: 1, Zxid: 2, Err: wire.CodeDataTooLarge},
			want:  Reply{Xid: 1, Zxid: 2, Err: int32(wire.CodeBadArguments)}},
		{name: "a multi answers a create or create2 with the path alone, a createContainer or createTTL as a create2",
			zr: Request{Op: OpMulti, Ops: []Request{{Op: OpCreate}, {Op: OpCreate2}, {Op: OpCreateContainer}, {Op: OpCreateTTL}, {Op: OpSetData}, {Op: OpDelete}, {Op: OpCheck}}},
			reply: wire.Reply{Xid: 1, Zxid: 2, Results: []wire.OpResult{
				{Op: wire.OpCreate, Path: "/a", Stat: st}, {Op: wire.OpCreate, Path: "/b", Stat: st},
				{Op: wire.OpCreate, Path: "/c", Stat: st}, {Op: wire.OpCreate, Path: "/t", Stat: st},
				{Op: wire.OpSetData, Stat: st}, {Op: wire.OpDelete}, {Op: wire.OpCheck},
			}},
			want: Reply{Xid: 1, Zxid: 2, Results: []OpResult{
				{Op: OpCreate, Path: "/a"}, {Op: OpCreate, Path: "/b"},
				{Op: OpCreate2, Path: "/c", Stat: st}, {Op: OpCreate2, Path: "/t", Stat: st},
				{Op: OpSetData, Stat: st}, {Op: OpDelete}, {Op: OpCheck},
			}}},
		{name: "a multi that ran and failed has header error 0 and an error result per op",
			zr: Request{Op: OpMulti, Ops: []Request{{Op: OpCreate}, {Op: OpCheck}, {Op: OpDelete}}},
			reply: wire.Reply{Xid: 1, Zxid: 2, Err: wire.CodeBadVersion, Results: []wire.OpResult{
				{Op: wire.OpCreate}, {Op: wire.OpCheck, Err: wire.CodeBadVersion}, {Op: wire.OpDelete, Err: wire.CodeRuntimeInconsistency},
			}},
			want: Reply{Xid: 1, Zxid: 2, Results: []OpResult{
				{Op: OpError}, {Op: OpError, Err: int32(wire.CodeBadVersion)}, {Op: OpError, Err: int32(wire.CodeRuntimeInconsistency)},
			}}},
		{name: "a multi refused before it ran has its code in the header and no results",
			zr:    Request{Op: OpMulti, Ops: []Request{{Op: OpCreate}}},
			reply: wire.Reply{Xid: 1, Zxid: 2, Err: wire.CodeNoQuorum},
			want:  Reply{Xid: 1, Zxid: 2, Err: int32(wire.CodeConnectionLoss)}},
		{name: "a multiRead answers each read, an error result for each that failed",
			zr:    Request{Op: OpMultiRead, Ops: []Request{{Op: OpGetData}, {Op: OpGetChildren}, {Op: OpGetData}}},
			reply: wire.Reply{Xid: 1, Zxid: 2},
			reads: []wire.Reply{{Data: []byte("d"), Stat: st}, {Children: []string{"x"}, Stat: st}, {Err: wire.CodeNoNode}},
			want: Reply{Xid: 1, Zxid: 2, Results: []OpResult{
				{Op: OpGetData, Data: []byte("d"), Stat: st}, {Op: OpGetChildren, Children: []string{"x"}}, {Op: OpError, Err: int32(wire.CodeNoNode)},
			}}},
		{name: "a multiRead of nothing answers no results",
			zr:    Request{Op: OpMultiRead},
			reply: wire.Reply{Xid: 1, Zxid: 2},
			want:  Reply{Xid: 1, Zxid: 2, Results: []OpResult{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReplyFromWire(&tt.zr, &tt.reply, tt.reads); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

func TestNotificationFromWireCarriesTheEventAlone(t *testing.T) {
	n := wire.Reply{Xid: wire.XidNotification, Zxid: 9, EventType: wire.EventNodeDataChanged, State: wire.StateConnected,
		Path: "/a", Data: []byte("new"), Stat: goldenStat}
	want := Reply{Xid: XidNotification, Zxid: 9, EventType: 3, State: 3, Path: "/a"}
	if got := NotificationFromWire(&n); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestCodeFromWire(t *testing.T) {
	tests := []struct {
		name string
		code wire.Code
		want int32
	}{
		{"success is 0", wire.CodeOK, 0},
		{"ZooKeeper's own codes are kept", wire.CodeNoNode, -101},
		{"NoWatcher is kept", wire.CodeNoWatcher, -121},
		{"ReconfigDisabled is kept", CodeReconfigDisabled, -123},
		{"Throttled is kept", wire.CodeThrottled, -127},
		{"data too large is BadArguments", wire.CodeDataTooLarge, -8},
		{"no quorum is ConnectionLoss", wire.CodeNoQuorum, -4},
		{"a member not caught up is ConnectionLoss", wire.CodeNotCaughtUp, -4},
		{"shutting down is ConnectionLoss", wire.CodeShuttingDown, -4},
		{"too many connections is ConnectionLoss", wire.CodeTooManyConnections, -4},
		{"a malformed frame is MarshallingError", wire.CodeMalformed, -5},
		{"a frame too large is MarshallingError", wire.CodeFrameTooLarge, -5},
		{"a bad password is AuthFailed", wire.CodeBadPassword, -115},
		{"a multi across shards is BadArguments", wire.CodeCrossShard, -8},
		{"a write that reached a shard that moved it is ConnectionLoss", wire.CodeWrongShard, -4},
		{"any other code of Arbor's is SystemError", wire.Code(-999), -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CodeFromWire(tt.code); got != tt.want {
				t.Fatalf("CodeFromWire(%d) = %d, want %d", tt.code, got, tt.want)
			}
		})
	}
}

func TestConnectTranslation(t *testing.T) {
	t.Run("a ConnectRequest keeps its session, password, timeout and last zxid", func(t *testing.T) {
		m := ConnectRequest{ProtocolVersion: 0, LastZxidSeen: 7, TimeOut: 4000, SessionID: 3, Passwd: []byte{1, 2}, ReadOnly: true, HasReadOnly: true}
		want := wire.ConnectRequest{LastZxidSeen: 7, TimeoutMs: 4000, SessionID: 3, Password: []byte{1, 2}}
		if got := ConnectRequestToWire(&m); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
	tests := []struct {
		name        string
		resp        wire.ConnectResponse
		hasReadOnly bool
		want        ConnectResponse
		answered    bool
	}{
		{"a session made or reattached is answered with its id, password and timeout",
			wire.ConnectResponse{ProtocolVersion: wire.ProtocolVersion, TimeoutMs: 4000, SessionID: 3, Password: []byte{1}}, false,
			ConnectResponse{TimeOut: 4000, SessionID: 3, Passwd: []byte{1}}, true},
		{"the readOnly flag is echoed to a client that sent one",
			wire.ConnectResponse{TimeoutMs: 4000, SessionID: 3, Password: []byte{1}}, true,
			ConnectResponse{TimeOut: 4000, SessionID: 3, Passwd: []byte{1}, HasReadOnly: true}, true},
		{"an unknown session is answered with zeros: the client reports it expired",
			wire.ConnectResponse{Err: wire.CodeSessionExpired}, false,
			ConnectResponse{Passwd: make([]byte, PasswordSize)}, true},
		{"a wrong password is answered like an unknown session",
			wire.ConnectResponse{Err: wire.CodeBadPassword, SessionID: 3}, true,
			ConnectResponse{Passwd: make([]byte, PasswordSize), HasReadOnly: true}, true},
		{"no quorum is not answered: the client tries another server",
			wire.ConnectResponse{Err: wire.CodeNoQuorum}, false, ConnectResponse{}, false},
		{"a client ahead of the server is not answered",
			wire.ConnectResponse{Err: wire.CodeNotCaughtUp}, false, ConnectResponse{}, false},
		{"too many connections is not answered",
			wire.ConnectResponse{Err: wire.CodeTooManyConnections}, false, ConnectResponse{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, answered := ConnectResponseFromWire(&tt.resp, tt.hasReadOnly)
			if answered != tt.answered {
				t.Fatalf("answered %v, want %v", answered, tt.answered)
			}
			if answered && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestACLTranslation(t *testing.T) {
	t.Run("an ACL keeps its permissions, schemes and ids both ways", func(t *testing.T) {
		acl := append([]ACL{{Perms: PermAll, ID: Anyone}}, digestZK...)
		if got := ACLFromWire(ACLToWire(acl)); !reflect.DeepEqual(got, acl) {
			t.Fatalf("round trip: %+v, want %+v", got, acl)
		}
	})
	t.Run("an empty ACL is nil in wire", func(t *testing.T) {
		if got := ACLToWire([]ACL{}); got != nil {
			t.Fatalf("got %+v", got)
		}
	})
}

// FuzzRequestToWire checks that whatever a ZooKeeper client can send maps
// without a panic, to a request with an op (or a multiRead's reads) or to
// a refusal with a code.
//
//	go test ./zkwire -run XXX -fuzz FuzzRequestToWire -fuzztime 1m
func FuzzRequestToWire(f *testing.F) {
	for _, r := range requestSamples() {
		f.Add(AppendRequest(nil, &r)[4:])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var zr Request
		if DecodeRequest(body, &zr) != nil {
			return
		}
		var req wire.Request
		err := RequestToWire(&zr, &req)
		var refusal *wire.Error
		switch {
		case err != nil && !errors.As(err, &refusal):
			t.Fatalf("%s refused without a code: %v", zr.Op, err)
		case err == nil && req.Op == 0 && zr.Op != OpMultiRead:
			t.Fatalf("%s mapped to no op", zr.Op)
		case err == nil && zr.Op == OpMultiRead && len(req.Ops) != len(zr.Ops):
			t.Fatalf("multiRead of %d reads mapped to %d", len(zr.Ops), len(req.Ops))
		}
	})
}
