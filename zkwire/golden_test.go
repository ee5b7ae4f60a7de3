package zkwire

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// unhex turns a commented hex dump (comments after '#', any spacing) into
// bytes.
func unhex(t *testing.T, dump string) []byte {
	t.Helper()
	var sb strings.Builder
	for _, line := range strings.Split(dump, "\n") {
		line, _, _ = strings.Cut(line, "#")
		sb.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(sb.String())
	if err != nil {
		t.Fatalf("bad golden dump: %v", err)
	}
	return b
}

// The golden frames below are written field by field from the records of
// ZooKeeper's zookeeper.jute (int: 4 bytes, long: 8, boolean: 1, buffer and
// ustring: an int length then the bytes, vector: an int count then the
// elements, all big-endian), behind the 4-byte frame length.

var goldenStat = wire.Stat{
	Czxid: 1, Mzxid: 2, Pzxid: 11, Ctime: 3, Mtime: 4,
	Version: 5, Cversion: 6, Aversion: 7, EphemeralOwner: 8, DataLength: 9, NumChildren: 10,
}

const goldenStatHex = `
	0000000000000001  # czxid
	0000000000000002  # mzxid
	0000000000000003  # ctime
	0000000000000004  # mtime
	00000005          # version
	00000006          # cversion
	00000007          # aversion
	0000000000000008  # ephemeralOwner
	00000009          # dataLength
	0000000a          # numChildren
	000000000000000b  # pzxid: last in jute, unlike Arbor's own protocol
`

func TestGoldenFrames(t *testing.T) {
	tests := []struct {
		name  string
		frame []byte
		want  string
	}{
		{
			name: "ConnectRequest of a new session, as go-zookeeper sends it (no readOnly flag)",
			frame: AppendConnectRequest(nil, &ConnectRequest{
				TimeOut: 30000, Passwd: make([]byte, 16),
			}),
			want: `
				0000002c          # length 44
				00000000          # protocolVersion 0
				0000000000000000  # lastZxidSeen
				00007530          # timeOut 30000
				0000000000000000  # sessionId 0: a new session
				00000010 00000000000000000000000000000000  # passwd: 16 zero bytes
			`,
		},
		{
			name: "ConnectRequest reattaching, with the readOnly flag the Java client appends",
			frame: AppendConnectRequest(nil, &ConnectRequest{
				LastZxidSeen: 0x12c, TimeOut: 4000, SessionID: 0x0123456789abcdef,
				Passwd: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, HasReadOnly: true,
			}),
			want: `
				0000002d
				00000000
				000000000000012c  # lastZxidSeen 300
				00000fa0          # timeOut 4000
				0123456789abcdef
				00000010 0102030405060708090a0b0c0d0e0f10
				00                # readOnly false
			`,
		},
		{
			name: "ConnectResponse with the readOnly flag echoed",
			frame: AppendConnectResponse(nil, &ConnectResponse{
				TimeOut: 4000, SessionID: 0x0123456789abcdef,
				Passwd: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, HasReadOnly: true,
			}),
			want: `
				00000025          # length 37
				00000000          # protocolVersion
				00000fa0          # timeOut
				0123456789abcdef  # sessionId
				00000010 0102030405060708090a0b0c0d0e0f10
				00                # readOnly: this server is never read-only
			`,
		},
		{
			name:  "ConnectResponse refusing an expired session",
			frame: AppendConnectResponse(nil, &ConnectResponse{Passwd: make([]byte, 16)}),
			want: `
				00000024
				00000000 00000000 0000000000000000
				00000010 00000000000000000000000000000000
			`,
		},
		{
			name: "create of an ephemeral-sequential node open to anyone",
			frame: AppendRequest(nil, &Request{
				Xid: 1, Op: OpCreate, Path: "/a", Data: []byte("hi"), ACL: OpenACL, Flags: 3,
			}),
			want: `
				00000033
				00000001 00000001          # RequestHeader: xid 1, type 1 (create)
				00000002 2f61              # path "/a"
				00000002 6869              # data "hi"
				00000001                   # acl: a vector of 1
				  0000001f                 #   perms 31 (cdrwa)
				  00000005 776f726c64      #   id.scheme "world"
				  00000006 616e796f6e65    #   id.id "anyone"
				00000003                   # flags: ephemeral-sequential
			`,
		},
		{
			name: "createTTL",
			frame: AppendRequest(nil, &Request{
				Xid: 2, Op: OpCreateTTL, Path: "/t", ACL: OpenACL, Flags: 5, TTL: 60000,
			}),
			want: `
				00000039
				00000002 00000015          # createTTL (21)
				00000002 2f74
				ffffffff                   # data: null
				00000001 0000001f 00000005 776f726c64 00000006 616e796f6e65
				00000005                   # flags: persistent with TTL
				000000000000ea60           # ttl 60000 ms
			`,
		},
		{
			name:  "exists with a watch",
			frame: AppendRequest(nil, &Request{Xid: 3, Op: OpExists, Path: "/a", Watch: true}),
			want:  `0000000f 00000003 00000003 00000002 2f61 01`,
		},
		{
			name:  "ping",
			frame: AppendRequest(nil, &Request{Xid: XidPing, Op: OpPing}),
			want:  `00000008 fffffffe 0000000b`,
		},
		{
			name: "multi: a check and a delete",
			frame: AppendRequest(nil, &Request{Xid: 4, Op: OpMulti, Ops: []Request{
				{Op: OpCheck, Path: "/a", Version: 1},
				{Op: OpDelete, Path: "/b", Version: -1},
			}}),
			want: `
				00000037
				00000004 0000000e                     # multi (14)
				0000000d 00 ffffffff                  # MultiHeader: check, not done, err -1
				00000002 2f61 00000001                # CheckVersionRequest
				00000002 00 ffffffff                  # MultiHeader: delete
				00000002 2f62 ffffffff                # DeleteRequest, version -1
				ffffffff 01 ffffffff                  # the done header
			`,
		},
		{
			name: "setWatches2",
			frame: AppendRequest(nil, &Request{Xid: XidSetWatches, Op: OpSetWatches2, RelativeZxid: 9,
				DataWatches: []string{"/d"}, PersistentWatches: []string{"/p"}}),
			want: `
				00000030
				fffffff8 00000069                     # xid -8, setWatches2 (105)
				0000000000000009                      # relativeZxid
				00000001 00000002 2f64                # dataWatches
				00000000                              # existWatches
				00000000                              # childWatches
				00000001 00000002 2f70                # persistentWatches
				00000000                              # persistentRecursiveWatches
			`,
		},
		{
			name: "auth packet with a digest",
			frame: AppendRequest(nil, &Request{Xid: XidAuth, Op: OpAuth, Scheme: "digest",
				Auth: []byte("u:p")}),
			want: `
				0000001d
				fffffffc 00000064                     # xid -4, auth (100)
				00000000                              # type
				00000006 646967657374                 # scheme "digest"
				00000003 753a70                       # auth "u:p"
			`,
		},
		{
			name:  "sasl request: a GetSASLRequest, the client's first (empty) DIGEST-MD5 token",
			frame: AppendRequest(nil, &Request{Xid: 1, Op: OpSASL, Data: []byte{}}),
			want: `
				0000000c
				00000001 00000066                     # xid 1, sasl (102)
				00000000                              # token: empty
			`,
		},
		{
			name:  "sasl reply: ReplyHeader and a SetSASLResponse",
			frame: AppendReply(nil, OpSASL, &Reply{Xid: 2, Data: []byte("rspauth=x")}),
			want: `
				0000001d
				00000002 0000000000000000 00000000   # xid 2, zxid 0, err 0
				00000009 72737061757468 3d78          # token "rspauth=x"
			`,
		},
		{
			name:  "a failed sasl reply carries a null token after its error, as ZooKeeper's does",
			frame: AppendReply(nil, OpSASL, &Reply{Xid: 3, Err: -115}),
			want: `
				00000014
				00000003 0000000000000000 ffffff8d   # xid 3, zxid 0, AuthFailed (-115)
				ffffffff                              # token: null
			`,
		},
		{
			name:  "exists reply: ReplyHeader and a Stat",
			frame: AppendReply(nil, OpExists, &Reply{Xid: 5, Zxid: 0x10, Stat: goldenStat}),
			want: `
				00000054
				00000005 0000000000000010 00000000   # ReplyHeader: xid 5, zxid 16, err 0
			` + goldenStatHex,
		},
		{
			name:  "an error reply carries the header alone",
			frame: AppendReply(nil, OpGetData, &Reply{Xid: 7, Zxid: 300, Err: -101, Data: []byte("x")}),
			want:  `00000010 00000007 000000000000012c ffffff9b`,
		},
		{
			name: "a notification: ReplyHeader with xid -1 and a WatcherEvent",
			frame: AppendReply(nil, OpPing, &Reply{Xid: XidNotification, Zxid: 0x12,
				EventType: 3, State: 3, Path: "/x"}),
			want: `
				0000001e
				ffffffff 0000000000000012 00000000
				00000003 00000003 00000002 2f78       # NodeDataChanged, SyncConnected, "/x"
			`,
		},
		{
			name: "getChildren2 reply",
			frame: AppendReply(nil, OpGetChildren2, &Reply{Xid: 6, Zxid: 1,
				Children: []string{"a", "bc"}, Stat: goldenStat}),
			want: `
				00000063
				00000006 0000000000000001 00000000
				00000002 00000001 61 00000002 6263
			` + goldenStatHex,
		},
		{
			name: "getACL reply: world:anyone cdrwa and the Stat",
			frame: AppendReply(nil, OpGetACL, &Reply{Xid: 8, Zxid: 1, ACL: OpenACL,
				Stat: goldenStat}),
			want: `
				0000006f
				00000008 0000000000000001 00000000
				00000001 0000001f 00000005 776f726c64 00000006 616e796f6e65
			` + goldenStatHex,
		},
		{
			name:  "addWatch reply carries an ErrorResponse of 0",
			frame: AppendReply(nil, OpAddWatch, &Reply{Xid: 9, Zxid: 1}),
			want:  `00000014 00000009 0000000000000001 00000000 00000000`,
		},
		{
			name: "whoAmI reply",
			frame: AppendReply(nil, OpWhoAmI, &Reply{Xid: 10, Zxid: 1, Clients: []ClientInfo{
				{AuthScheme: "ip", User: "127.0.0.1"}}}),
			want: `
				00000027
				0000000a 0000000000000001 00000000
				00000001 00000002 6970 00000009 3132372e302e302e31
			`,
		},
		{
			name: "a failed multi: header err 0, every result an error, then done",
			frame: AppendReply(nil, OpMulti, &Reply{Xid: 11, Zxid: 1, Results: []OpResult{
				{Op: OpError, Err: 0}, {Op: OpError, Err: -110}, {Op: OpError, Err: -2},
			}}),
			want: `
				00000040
				0000000b 0000000000000001 00000000
				ffffffff 00 00000000 00000000         # error result, err 0: came before the failure
				ffffffff 00 ffffff92 ffffff92         # error result, err -110 (NodeExists)
				ffffffff 00 fffffffe fffffffe         # error result, err -2 (RuntimeInconsistency)
				ffffffff 01 ffffffff                  # done
			`,
		},
		{
			name: "a successful multi: create, create2, setData, delete and check results",
			frame: AppendReply(nil, OpMulti, &Reply{Xid: 12, Zxid: 2, Results: []OpResult{
				{Op: OpCreate, Path: "/a"}, {Op: OpCreate2, Path: "/b", Stat: goldenStat},
				{Op: OpSetData, Stat: goldenStat}, {Op: OpDelete}, {Op: OpCheck},
			}}),
			want: `
				000000da
				0000000c 0000000000000002 00000000
				00000001 00 00000000 00000002 2f61
				0000000f 00 00000000 00000002 2f62
			` + goldenStatHex + `
				00000005 00 00000000
			` + goldenStatHex + `
				00000002 00 00000000
				0000000d 00 00000000
				ffffffff 01 ffffffff
			`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := unhex(t, tt.want)
			if !bytes.Equal(tt.frame, want) {
				t.Fatalf("frame\n got % x\nwant % x", tt.frame, want)
			}
		})
	}
}
