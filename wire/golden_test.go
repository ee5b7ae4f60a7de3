package wire_test

import (
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// The golden frames pin the exact bytes on the wire, length prefix included,
// so that a change to the protocol is a deliberate edit here (and in
// docs/protocol.md) rather than a side effect. They were computed once from
// the encoder and the setData request was then checked by hand against the
// msgpack spec:
//
//	00 00 00 15                         frame length: 21 bytes of body follow
//	95                                  fixarray, 5 elements: [xid, op, path, data, version]
//	07                                  positive fixint 7: xid
//	05                                  positive fixint 5: op setData
//	ab                                  fixstr, 11 bytes:
//	2f 61 70 70 2f 63 6f 6e 66 69 67       "/app/config": path
//	c4 03                               bin8, 3 bytes:
//	76 3d 32                               "v=2": data
//	01                                  positive fixint 1: expected version
//
// 4 + 1+1+1 + 1+11 + 2+3 + 1 = 25 bytes in all, 21 after the prefix. The
// other frames use the same rules; the ones worth noting:
//   - cd 01 2c is uint16 300 (the zxid), cf + 8 bytes a uint64 (session ids,
//     millisecond times): the encoder always picks the smallest format.
//   - d0 9b is int8 -101 (CodeNoNode); d1 ff 35 int16 -203 (CodeBadPassword);
//     ff is negative fixint -1 (XidNotification).
//   - 9b opens the 11-field Stat array.
//   - c0 (nil) is a nil byte slice, which decodes back to nil.

var goldenStat = wire.Stat{Czxid: 5, Mzxid: 300, Pzxid: 5, Ctime: 1_700_000_000_000,
	Mtime: 1_700_000_123_456, Version: 2, DataLength: 3}

var goldenConnectRequests = []struct {
	name string
	hex  string
	m    wire.ConnectRequest
}{
	{"a reattach to a session", "00000017" + "95" + "01" + "cd012c" + "cd7530" + "cf0123456789abcdef" + "c404deadbeef",
		wire.ConnectRequest{ProtocolVersion: 1, LastZxidSeen: 300, TimeoutMs: 30000,
			SessionID: 0x0123_4567_89ab_cdef, Password: []byte{0xde, 0xad, 0xbe, 0xef}}},
}

var goldenConnectResponses = []struct {
	name string
	hex  string
	m    wire.ConnectResponse
}{
	{"a refusal for a wrong password", "00000010" + "95" + "01" + "00" + "cf0123456789abcdef" + "c0" + "d1ff35",
		wire.ConnectResponse{ProtocolVersion: 1, SessionID: 0x0123_4567_89ab_cdef, Err: wire.CodeBadPassword}},
}

var goldenRequests = []struct {
	name string
	hex  string
	r    wire.Request
}{
	{"a setData request", "00000015" + "95" + "07" + "05" + "ab2f6170702f636f6e666967" + "c403763d32" + "01",
		wire.Request{Xid: 7, Op: wire.OpSetData, Path: "/app/config", Data: []byte("v=2"), Version: 1}},
	{"a multi request of a check and a create", "00000017" + "93" + "0a" + "0e" +
		"92" + "940d" + "a22f61" + "01" + "00" + // [check, "/a", 1, mode 0: the data version]
		"9701" + "a42f612f62" + "c0" + "01" + "00" + "90" + "00", // [create, "/a/b", nil, ephemeral, ttl 0, no ACL, no lease]
		wire.Request{Xid: 10, Op: wire.OpMulti, Ops: []wire.Request{
			{Op: wire.OpCheck, Path: "/a", Version: 1},
			{Op: wire.OpCreate, Path: "/a/b", Mode: wire.ModeEphemeral},
		}}},
	{"a check of the cversion adds its mode", "00000008" + "95" + "0c" + "0d" + "a22f61" + "02" + "01", // [xid 12, check, "/a", 2, CheckCversion]
		wire.Request{Xid: 12, Op: wire.OpCheck, Path: "/a", Version: 2, Mode: wire.CheckCversion}},
	{"a linearizable getData adds its flag", "00000008" + "95" + "0d" + "04" + "a22f61" + "c2" + "c3", // [xid 13, getData, "/a", no watch, linearizable]
		wire.Request{Xid: 13, Op: wire.OpGetData, Path: "/a", Linearizable: true}},
	{"an addWatch from a past zxid adds it", "0000000a" + "95" + "0e" + "6a" + "a22f61" + "01" + "cd012c", // [xid 14, addWatch, "/a", recursive, from 300]
		wire.Request{Xid: 14, Op: wire.OpAddWatch, Path: "/a", AddWatchMode: wire.AddWatchPersistentRecursive, FromZxid: 300}},
	{"a setWatches2 with more to come adds its flag", "0000000d" + "99" + "f8" + "69" + "4d" + "90" + "90" + "90" + "91a22f64" + "90" + "c3",
		wire.Request{Xid: wire.XidSetWatches, Op: wire.OpSetWatches2, RelativeZxid: 77, PersistentWatches: []string{"/d"}, MoreWatches: true}},
	{"a getEphemerals request", "0000000e" + "93" + "0b" + "67" + "aa2f6170702f6c6f636b2d", // op 103, "/app/lock-"
		wire.Request{Xid: 11, Op: wire.OpGetEphemerals, Path: "/app/lock-"}},
}

const goldenStatHex = "9b" + "05" + "cd012c" + "05" + "cf0000018bcfe56800" + "cf0000018bcfe74a40" +
	"02" + "00" + "00" + "00" + "03" + "00"

var goldenReplies = []struct {
	name string
	hex  string
	op   wire.Op
	r    wire.Reply
}{
	{"a setData reply", "00000024" + "94" + "07" + "cd012c" + "00" + goldenStatHex, wire.OpSetData,
		wire.Reply{Xid: 7, Zxid: 300, Stat: goldenStat}},
	{"a getData reply", "00000029" + "95" + "08" + "cd012d" + "00" + "c403763d32" + goldenStatHex, wire.OpGetData,
		wire.Reply{Xid: 8, Zxid: 301, Data: []byte("v=2"), Stat: goldenStat}},
	{"an error reply", "00000007" + "93" + "09" + "cd012d" + "d09b", wire.OpGetData,
		wire.Reply{Xid: 9, Zxid: 301, Err: wire.CodeNoNode}},
	{"a setData refused with BadVersion", "00000007" + "93" + "07" + "cd012c" + "d099", wire.OpSetData,
		wire.Reply{Xid: 7, Zxid: 300, Err: wire.CodeBadVersion}},
	{"a notification", "00000014" + "96" + "ff" + "cd012e" + "00" + "03" + "03" + "ab2f6170702f636f6e666967", wire.OpGetData,
		wire.Reply{Xid: wire.XidNotification, Zxid: 302, EventType: wire.EventNodeDataChanged,
			State: wire.StateConnected, Path: "/app/config"}},
	{"an addWatch refused with HistoryCompacted names the oldest zxid", "0000000b" + "94" + "0e" + "cd0190" + "d1ff2f" + "cd012c", wire.OpAddWatch,
		wire.Reply{Xid: 14, Zxid: 400, Err: wire.CodeHistoryCompacted, OldestZxid: 300}},
	{"a replayed event names its addWatch", "0000000c" + "97" + "f7" + "cd012d" + "00" + "03" + "03" + "a22f61" + "0e", wire.OpGetData,
		wire.Reply{Xid: wire.XidReplay, Zxid: 301, EventType: wire.EventNodeDataChanged, State: wire.StateConnected, Path: "/a", ReplayOf: 14}},
	{"a PersistentWatchRemoved for a compacted history names the oldest zxid", "00000010" + "97" + "ff" + "cd0190" + "d1ff2f" + "07" + "03" + "a22f61" + "cd012c", wire.OpGetData,
		wire.Reply{Xid: wire.XidNotification, Zxid: 400, Err: wire.CodeHistoryCompacted, EventType: wire.EventPersistentWatchRemoved,
			State: wire.StateConnected, Path: "/a", OldestZxid: 300}},
	{"a closing frame", "00000008" + "93" + "fd" + "cd012e" + "d1ff34", wire.OpPing,
		wire.Reply{Xid: wire.XidClosing, Zxid: 302, Err: wire.CodeFrameTooLarge}},
	{"a getEphemerals reply", "0000001c" + "94" + "0b" + "cd012c" + "00" +
		"91" + "b4" + "2f6170702f6c6f636b2d30303030303030303031", wire.OpGetEphemerals, // ["/app/lock-0000000001"]
		wire.Reply{Xid: 11, Zxid: 300, Children: []string{"/app/lock-0000000001"}}},
	{"a getAllChildrenNumber reply", "00000009" + "94" + "0c" + "cd012c" + "00" + "cd03e8", wire.OpGetAllChildrenNumber, // 1000 descendants
		wire.Reply{Xid: 12, Zxid: 300, Descendants: 1000}},
	{"a failed multi reply", "0000000f" + "94" + "0a" + "cd012f" + "d092" +
		"92" + "920d00" + "9201d092", wire.OpMulti,
		wire.Reply{Xid: 10, Zxid: 303, Err: wire.CodeNodeExists, Results: []wire.OpResult{
			{Op: wire.OpCheck},
			{Op: wire.OpCreate, Err: wire.CodeNodeExists},
		}}},
}

// checkGolden compares an encoded frame with the pinned hex and returns the
// frame's body decoded from the pinned bytes.
func checkGolden(t *testing.T, frame []byte, want string) []byte {
	t.Helper()
	if got := hex.EncodeToString(frame); got != want {
		t.Fatalf("encoded\n  %s\nwant\n  %s", got, want)
	}
	pinned, err := hex.DecodeString(want)
	if err != nil {
		t.Fatal(err)
	}
	return frameBody(t, pinned)
}

func TestGoldenFrames(t *testing.T) {
	for _, tc := range goldenConnectRequests {
		t.Run(tc.name+" has pinned bytes", func(t *testing.T) {
			body := checkGolden(t, wire.AppendConnectRequest(nil, &tc.m), tc.hex)
			var got wire.ConnectRequest
			if err := wire.DecodeConnectRequest(body, &got); err != nil || !reflect.DeepEqual(got, tc.m) {
				t.Fatalf("pinned bytes decode to %+v, %v; want %+v", got, err, tc.m)
			}
		})
	}
	for _, tc := range goldenConnectResponses {
		t.Run(tc.name+" has pinned bytes", func(t *testing.T) {
			body := checkGolden(t, wire.AppendConnectResponse(nil, &tc.m), tc.hex)
			var got wire.ConnectResponse
			if err := wire.DecodeConnectResponse(body, &got); err != nil || !reflect.DeepEqual(got, tc.m) {
				t.Fatalf("pinned bytes decode to %+v, %v; want %+v", got, err, tc.m)
			}
		})
	}
	for _, tc := range goldenRequests {
		t.Run(tc.name+" has pinned bytes", func(t *testing.T) {
			body := checkGolden(t, wire.AppendRequest(nil, &tc.r), tc.hex)
			var got wire.Request
			if err := wire.DecodeRequest(body, &got); err != nil || !reflect.DeepEqual(got, tc.r) {
				t.Fatalf("pinned bytes decode to %+v, %v; want %+v", got, err, tc.r)
			}
		})
	}
	for _, tc := range goldenReplies {
		t.Run(tc.name+" has pinned bytes", func(t *testing.T) {
			body := checkGolden(t, wire.AppendReply(nil, tc.op, &tc.r), tc.hex)
			var got wire.Reply
			if err := wire.DecodeReply(body, tc.op, &got); err != nil || !reflect.DeepEqual(got, tc.r) {
				t.Fatalf("pinned bytes decode to %+v, %v; want %+v", got, err, tc.r)
			}
		})
	}
}

// TestACheckWithoutAModeStillDecodes checks that a check as clients sent
// it before the mode came, of two fields, decodes as a check of the data
// version, alone and in a multi.
func TestACheckWithoutAModeStillDecodes(t *testing.T) {
	frames := map[string]string{
		"alone":      "00000007" + "94" + "0c" + "0d" + "a22f61" + "02",                 // [xid 12, check, "/a", 2]
		"in a multi": "0000000a" + "93" + "0c" + "0e" + "91" + "930d" + "a22f61" + "02", // [xid 12, multi, [[check, "/a", 2]]]
	}
	want := map[string]wire.Request{
		"alone":      {Xid: 12, Op: wire.OpCheck, Path: "/a", Version: 2},
		"in a multi": {Xid: 12, Op: wire.OpMulti, Ops: []wire.Request{{Op: wire.OpCheck, Path: "/a", Version: 2}}},
	}
	for name, h := range frames {
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		var got wire.Request
		if err := wire.DecodeRequest(frameBody(t, b), &got); err != nil || !reflect.DeepEqual(got, want[name]) {
			t.Errorf("%s: decoded %+v, %v; want %+v", name, got, err, want[name])
		}
	}
}
