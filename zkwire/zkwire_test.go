package zkwire

import (
	"errors"
	"reflect"
	"testing"
)

// requestSamples has one request of every op this package knows, with
// every field the op carries set.
func requestSamples() []Request {
	acl := []ACL{{Perms: PermRead, ID: ID{Scheme: "digest", ID: "u:hash"}}, OpenACL[0]}
	return []Request{
		{Xid: 1, Op: OpCreate, Path: "/a", Data: []byte("v"), ACL: acl, Flags: 1},
		{Xid: 2, Op: OpCreate2, Path: "/a", Data: []byte{}, ACL: OpenACL, Flags: 2},
		{Xid: 3, Op: OpCreateContainer, Path: "/c", ACL: OpenACL, Flags: 4},
		{Xid: 4, Op: OpCreateTTL, Path: "/t", Data: []byte("x"), ACL: OpenACL, Flags: 6, TTL: 1234},
		{Xid: 5, Op: OpDelete, Path: "/a", Version: -1},
		{Xid: 6, Op: OpCheck, Path: "/a", Version: 3},
		{Xid: 7, Op: OpExists, Path: "/a", Watch: true},
		{Xid: 8, Op: OpGetData, Path: "/a"},
		{Xid: 9, Op: OpGetChildren, Path: "/", Watch: true},
		{Xid: 10, Op: OpGetChildren2, Path: "/"},
		{Xid: 11, Op: OpSetData, Path: "/a", Data: []byte("w"), Version: 2},
		{Xid: 12, Op: OpGetACL, Path: "/a"},
		{Xid: 13, Op: OpSetACL, Path: "/a", ACL: acl, Version: 0},
		{Xid: 14, Op: OpSync, Path: "/"},
		{Xid: XidPing, Op: OpPing},
		{Xid: 15, Op: OpMulti, Ops: []Request{
			{Op: OpCreate, Path: "/m", ACL: OpenACL},
			{Op: OpCreate2, Path: "/m2", Data: []byte("d"), ACL: OpenACL, Flags: 2},
			{Op: OpCreateTTL, Path: "/m3", ACL: OpenACL, Flags: 5, TTL: 9},
			{Op: OpSetData, Path: "/m", Data: []byte("x"), Version: -1},
			{Op: OpCheck, Path: "/m", Version: 1},
			{Op: OpDelete, Path: "/m", Version: -1},
		}},
		{Xid: 16, Op: OpMulti},
		{Xid: 17, Op: OpMultiRead, Ops: []Request{
			{Op: OpGetData, Path: "/a", Watch: true}, {Op: OpGetChildren, Path: "/"},
		}},
		{Xid: 18, Op: OpReconfig, Reconfig: &ReconfigRequest{JoiningServers: "server.4=h:1:2", CurConfigID: -1}},
		{Xid: 19, Op: OpCheckWatches, Path: "/a", WatcherType: 2},
		{Xid: 20, Op: OpRemoveWatches, Path: "/a", WatcherType: 3},
		{Xid: XidAuth, Op: OpAuth, Scheme: "digest", Auth: []byte("u:p")},
		{Xid: XidSetWatches, Op: OpSetWatches, RelativeZxid: 7, DataWatches: []string{"/a"},
			ExistWatches: []string{"/b", "/c"}, ChildWatches: []string{"/"}},
		{Xid: XidSetWatches, Op: OpSetWatches2, RelativeZxid: 8, PersistentWatches: []string{"/p"},
			PersistentRecursiveWatches: []string{"/r"}},
		{Xid: 21, Op: OpSASL, Data: []byte("token")},
		{Xid: 22, Op: OpGetEphemerals, Path: "/app"},
		{Xid: 23, Op: OpGetAllChildrenNumber, Path: "/"},
		{Xid: 24, Op: OpAddWatch, Path: "/w", Mode: 1},
		{Xid: 25, Op: OpWhoAmI},
		{Xid: 26, Op: OpCloseSession},
	}
}

func TestRequestsRoundTrip(t *testing.T) {
	for _, want := range requestSamples() {
		t.Run(want.Op.String(), func(t *testing.T) {
			frame := AppendRequest(nil, &want)
			var got Request
			if err := DecodeRequest(frame[4:], &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// replySamples pairs a reply with the op it answers, for every op whose
// reply carries a record.
func replySamples() map[Op]Reply {
	st := goldenStat
	return map[Op]Reply{
		OpCreate:               {Xid: 1, Zxid: 2, Path: "/a0000000001"},
		OpCreate2:              {Xid: 1, Zxid: 2, Path: "/a", Stat: st},
		OpCreateContainer:      {Xid: 1, Zxid: 2, Path: "/c", Stat: st},
		OpCreateTTL:            {Xid: 1, Zxid: 2, Path: "/t", Stat: st},
		OpExists:               {Xid: 1, Zxid: 2, Stat: st},
		OpSetData:              {Xid: 1, Zxid: 2, Stat: st},
		OpSetACL:               {Xid: 1, Zxid: 2, Stat: st},
		OpGetData:              {Xid: 1, Zxid: 2, Data: []byte("v"), Stat: st},
		OpReconfig:             {Xid: 1, Zxid: 2, Data: []byte("server.1=h:1:0:participant\nversion=2"), Stat: st},
		OpGetChildren:          {Xid: 1, Zxid: 2, Children: []string{"a", "b"}},
		OpGetChildren2:         {Xid: 1, Zxid: 2, Children: []string{"a"}, Stat: st},
		OpGetACL:               {Xid: 1, Zxid: 2, ACL: OpenACL, Stat: st},
		OpSync:                 {Xid: 1, Zxid: 2, Path: "/"},
		OpGetAllChildrenNumber: {Xid: 1, Zxid: 2, Number: 42},
		OpGetEphemerals:        {Xid: 1, Zxid: 2, Children: []string{"/e1", "/x/e2"}},
		OpWhoAmI:               {Xid: 1, Zxid: 2, Clients: []ClientInfo{{"ip", "127.0.0.1"}, {"digest", "u"}}},
		OpAddWatch:             {Xid: 1, Zxid: 2},
		OpSASL:                 {Xid: 1, Zxid: 2, Data: []byte(`realm="zk-sasl-md5"`)},
		OpDelete:               {Xid: 1, Zxid: 2},
		OpPing:                 {Xid: XidPing, Zxid: 2},
		OpMulti: {Xid: 1, Zxid: 2, Results: []OpResult{
			{Op: OpCreate, Path: "/a"}, {Op: OpCreate2, Path: "/b", Stat: st}, {Op: OpSetData, Stat: st},
			{Op: OpDelete}, {Op: OpCheck}, {Op: OpError, Err: -101},
		}},
		OpMultiRead: {Xid: 1, Zxid: 2, Results: []OpResult{
			{Op: OpGetData, Data: []byte("d"), Stat: st}, {Op: OpGetChildren, Children: []string{"x"}},
			{Op: OpError, Err: -101},
		}},
	}
}

func TestRepliesRoundTrip(t *testing.T) {
	for op, want := range replySamples() {
		t.Run(op.String(), func(t *testing.T) {
			frame := AppendReply(nil, op, &want)
			var got Reply
			if err := DecodeReply(frame[4:], op, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip\n got %+v\nwant %+v", got, want)
			}
		})
	}
	t.Run("notification", func(t *testing.T) {
		want := Reply{Xid: XidNotification, Zxid: 5, EventType: 4, State: 3, Path: "/a"}
		var got Reply
		if err := DecodeReply(AppendReply(nil, OpGetData, &want)[4:], OpGetData, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
}

func TestConnectRoundTrip(t *testing.T) {
	for _, want := range []ConnectRequest{
		{TimeOut: 10000, Passwd: make([]byte, 16)},
		{ProtocolVersion: 0, LastZxidSeen: 99, TimeOut: 4000, SessionID: -5, Passwd: []byte{1}, ReadOnly: true, HasReadOnly: true},
	} {
		var got ConnectRequest
		if err := DecodeConnectRequest(AppendConnectRequest(nil, &want)[4:], &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
	for _, want := range []ConnectResponse{
		{TimeOut: 10000, SessionID: 3, Passwd: make([]byte, 16)},
		{TimeOut: 10000, SessionID: 3, Passwd: make([]byte, 16), HasReadOnly: true},
	} {
		var got ConnectResponse
		if err := DecodeConnectResponse(AppendConnectResponse(nil, &want)[4:], &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
}

func TestBadRequestsFailClearly(t *testing.T) {
	frame := func(r Request) []byte { return AppendRequest(nil, &r)[4:] }
	create := frame(Request{Xid: 9, Op: OpCreate, Path: "/a", Data: []byte("v"), ACL: OpenACL})
	tests := []struct {
		name    string
		body    []byte
		want    error
		wantXid int32
		wantOp  Op
	}{
		{"a body shorter than the header", []byte{0, 0, 0, 1, 0, 0}, ErrMalformed, 0, 0},
		{"an unknown op keeps its xid and op", []byte{0, 0, 0, 7, 0, 0, 0, 77}, ErrUnknownOp, 7, 77},
		{"createSession is not a client request", []byte{0, 0, 0, 7, 0xff, 0xff, 0xff, 0xf6}, ErrUnknownOp, 7, OpCreateSession},
		{"a record cut short", create[:len(create)-2], ErrMalformed, 9, OpCreate},
		{"a string longer than the frame", []byte{0, 0, 0, 3, 0, 0, 0, 4, 0x7f, 0xff, 0xff, 0xff}, ErrMalformed, 3, OpGetData},
		{"a negative length other than -1", []byte{0, 0, 0, 3, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xfe}, ErrMalformed, 3, OpGetData},
		{"a vector count the frame cannot hold", []byte{0, 0, 0, 3, 0, 0, 0, 101, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0}, ErrMalformed, 3, OpSetWatches},
		{"a multi without its done header", frame(Request{Xid: 4, Op: OpMulti})[:8], ErrMalformed, 4, OpMulti},
		{"a multi holding a ping", []byte{0, 0, 0, 4, 0, 0, 0, 14, 0, 0, 0, 11, 0, 0, 0, 0, 0}, ErrMalformed, 4, OpMulti},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			err := DecodeRequest(tt.body, &r)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if r.Xid != tt.wantXid || r.Op != tt.wantOp {
				t.Fatalf("xid %d op %s, want xid %d op %s", r.Xid, r.Op, tt.wantXid, tt.wantOp)
			}
		})
	}
	t.Run("bytes after the record are ignored, as ZooKeeper ignores them", func(t *testing.T) {
		var r Request
		if err := DecodeRequest(append(create, 1, 2, 3), &r); err != nil || r.Path != "/a" {
			t.Fatalf("err %v, path %q", err, r.Path)
		}
	})
	t.Run("a null string reads as empty and a null buffer as nil", func(t *testing.T) {
		var r Request
		body := []byte{0, 0, 0, 1, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
		if err := DecodeRequest(body, &r); err != nil || r.Path != "" || r.Data != nil {
			t.Fatalf("err %v, %+v", err, r)
		}
	})
}

func TestBadRepliesFailClearly(t *testing.T) {
	for _, tt := range []struct {
		name string
		body []byte
		op   Op
	}{
		{"a header cut short", []byte{0, 0, 0, 1, 0, 0}, OpPing},
		{"a Stat cut short", AppendReply(nil, OpExists, &Reply{Xid: 1, Stat: goldenStat})[4:40], OpExists},
		{"a multi result of an unknown type", []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11, 0, 0, 0, 0, 0}, OpMulti},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r Reply
			if err := DecodeReply(tt.body, tt.op, &r); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
	var resp ConnectResponse
	if err := DecodeConnectResponse([]byte{0, 0, 0, 0, 0, 0}, &resp); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short ConnectResponse: %v", err)
	}
	var req ConnectRequest
	if err := DecodeConnectRequest(make([]byte, 20), &req); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short ConnectRequest: %v", err)
	}
}
