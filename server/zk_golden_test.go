package server

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata")

// TestAZooKeeperSessionIsAnsweredAsItsTranscriptSays runs a scripted
// session of two ZooKeeper clients, every op of the port with the refusals
// that differ from Arbor's protocol, and compares every frame they are sent
// (replies and notifications, decoded, with their lengths), the metrics'
// op labels included, with testdata/zk_session.golden. Times are left out,
// a session id shows as 1. After a deliberate change of behaviour, rerun
// with -update and read the diff.
func TestAZooKeeperSessionIsAnsweredAsItsTranscriptSays(t *testing.T) {
	t.Parallel()
	s := startZKServer(t, func(c *Config) { c.MaxPath = 200 })
	var out strings.Builder
	dial := func(name string, req zkwire.ConnectRequest) *zkConn {
		c, err := dialZK(s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.nc.Close() })
		resp, err := c.connect(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.SessionID, resp.Passwd = 0, nil
		fmt.Fprintf(&out, "%s connected %s\n", name, brief(reflect.ValueOf(resp)))
		return c
	}
	a := dial("a", zkwire.ConnectRequest{TimeOut: 60000, HasReadOnly: true})
	b := dial("b", zkwire.ConnectRequest{TimeOut: 60000})
	// send writes frame and records what comes back, up to the reply to
	// xid or the connection's end.
	send := func(name string, c *zkConn, frame []byte, xid int32, op zkwire.Op) {
		t.Helper()
		_ = c.nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.nc.Write(frame); err != nil {
			t.Fatal(err)
		}
		for {
			body, err := wire.ReadFrame(c.br, nil, 64<<20)
			if err != nil {
				fmt.Fprintf(&out, "%s closed\n", name)
				return
			}
			var r zkwire.Reply
			if err := zkwire.DecodeReply(body, op, &r); err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			fmt.Fprintf(&out, "%s< %d bytes %s\n", name, len(body), brief(reflect.ValueOf(withoutTimes(r))))
			if r.Xid == xid {
				return
			}
		}
	}
	for _, step := range zkScript() {
		c := a
		if step.who == "b" {
			c = b
		}
		if step.awaitClose {
			send(step.who, c, nil, 0, zkwire.OpPing)
			continue
		}
		r := step.req
		if r.Xid == 0 {
			c.xid++
			r.Xid = c.xid
		}
		fmt.Fprintf(&out, "%s> %s\n", step.who, brief(reflect.ValueOf(r)))
		frame := zkwire.AppendRequest(nil, &r)
		if step.mangle != nil {
			step.mangle(frame)
		}
		send(step.who, c, frame, r.Xid, r.Op)
	}
	out.WriteString(requestCounts(t, s))

	const golden = "testdata/zk_session.golden"
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(out.String(), "\n")
	for i, line := range strings.Split(string(want), "\n") {
		if i >= len(got) || got[i] != line {
			g := "(nothing)"
			if i < len(got) {
				g = got[i]
			}
			t.Fatalf("%s:%d differs\n got %s\nwant %s", golden, i+1, g, line)
		}
	}
	if len(got) > len(strings.Split(string(want), "\n")) {
		t.Fatalf("the session went on past %s", golden)
	}
}

type zkStep struct {
	who        string // "a" or "b"
	req        zkwire.Request
	mangle     func(frame []byte) // spoils the encoded frame
	awaitClose bool               // sends nothing: reads until the server closes
}

// zkScript is the transcript's session. Client a does most of it; b owns
// no ephemerals, changes what a watches, and fails an auth.
func zkScript() []zkStep {
	open := zkwire.OpenACL
	worldMe := []zkwire.ACL{{Perms: zkwire.PermAll, ID: zkwire.ID{Scheme: "world", ID: "me"}}}
	long := strings.Repeat("x", 300)
	reqs := []zkwire.Request{
		{Op: zkwire.OpCreate, Path: "/r", Data: []byte("d"), ACL: open},
		{Op: zkwire.OpCreate, Path: "/r", Data: []byte("d"), ACL: open},
		{Op: zkwire.OpCreate2, Path: "/r/c2", Data: []byte("d"), ACL: open},
		{Op: zkwire.OpCreate, Path: "/r/noacl"},
		{Op: zkwire.OpCreate, Path: "/r/worldme", ACL: worldMe},
		{Op: zkwire.OpCreateContainer, Path: "/r/box", ACL: open, Flags: int32(wire.ModeContainer)},
		{Op: zkwire.OpCreateContainer, Path: "/r/box2", ACL: open},
		{Op: zkwire.OpCreateTTL, Path: "/r/ttl", ACL: open, Flags: int32(wire.ModePersistentWithTTL), TTL: 100000},
		{Op: zkwire.OpCreateTTL, Path: "/r/ttl2", ACL: open, TTL: 100000},
		{Op: zkwire.OpCreate, Path: "/r/ttl3", ACL: open, Flags: int32(wire.ModePersistentWithTTL), TTL: 100000},
		{Op: zkwire.OpCreate, Path: "/r/e1", ACL: open, Flags: int32(wire.ModeEphemeral)},
		{Op: zkwire.OpCreate, Path: "/r/s-", ACL: open, Flags: int32(wire.ModeEphemeralSequential)},
		{Op: zkwire.OpCreate, Path: "/r/ sp", ACL: open, Flags: int32(wire.ModeEphemeral)},
		{Op: zkwire.OpCreate, Path: "/rx", ACL: open, Flags: int32(wire.ModeEphemeral)},
		{Op: zkwire.OpCreate, Path: "bad", ACL: open},
		{Op: zkwire.OpCreate, Path: "/r/" + long, ACL: open},
		{Op: zkwire.OpExists, Path: "/r", Watch: true},
		{Op: zkwire.OpExists, Path: "/nope", Watch: true},
		{Op: zkwire.OpGetData, Path: "/r", Watch: true},
		{Op: zkwire.OpGetData, Path: "/nope"},
		{Op: zkwire.OpGetChildren, Path: "/r", Watch: true},
		{Op: zkwire.OpGetChildren2, Path: "/r"},
		{Op: zkwire.OpSetData, Path: "/r", Data: []byte("x"), Version: -1},
		{Op: zkwire.OpSetData, Path: "/r", Data: []byte("x"), Version: 7},
		{Op: zkwire.OpCheck, Path: "/r", Version: 1},
		{Op: zkwire.OpSync, Path: "/r"},
		{Op: zkwire.OpGetAllChildrenNumber, Path: "/"},
		{Op: zkwire.OpGetAllChildrenNumber, Path: "/nope"},
		// getEphemerals takes any string: a prefix, not a path.
		{Op: zkwire.OpGetEphemerals, Path: "/r/e"},
		{Op: zkwire.OpGetEphemerals, Path: ""},
		{Op: zkwire.OpGetEphemerals, Path: "   "},
		{Op: zkwire.OpGetEphemerals, Path: " / "},
		{Op: zkwire.OpGetEphemerals, Path: "/"},
		{Op: zkwire.OpGetEphemerals, Path: "/r/"},
		{Op: zkwire.OpGetEphemerals, Path: "/r/ "},
		{Op: zkwire.OpGetEphemerals, Path: "/r"},
		{Op: zkwire.OpGetEphemerals, Path: "r"},
		{Op: zkwire.OpGetEphemerals, Path: "/x"},
		{Op: zkwire.OpGetEphemerals, Path: strings.Repeat(" ", 300)},
		{Op: zkwire.OpGetEphemerals, Path: "/" + long},
		{Op: zkwire.OpMultiRead, Ops: []zkwire.Request{
			{Op: zkwire.OpGetData, Path: "/r", Watch: true}, {Op: zkwire.OpGetChildren, Path: "/r"},
			{Op: zkwire.OpGetData, Path: "/nope"}, {Op: zkwire.OpGetData, Path: "bad"}, {Op: zkwire.OpGetChildren, Path: "/nope"},
		}},
		{Op: zkwire.OpMultiRead},
		{Op: zkwire.OpMultiRead, Ops: []zkwire.Request{{Op: zkwire.OpDelete, Path: "/r"}}},
		{Op: zkwire.OpMulti, Ops: []zkwire.Request{
			{Op: zkwire.OpCreate, Path: "/r/m1", ACL: open}, {Op: zkwire.OpCreate2, Path: "/r/m2", ACL: open},
			{Op: zkwire.OpCreateContainer, Path: "/r/m3", ACL: open, Flags: int32(wire.ModeContainer)},
			{Op: zkwire.OpCreateTTL, Path: "/r/m4", ACL: open, Flags: int32(wire.ModePersistentWithTTL), TTL: 100000},
			{Op: zkwire.OpSetData, Path: "/r/m1", Data: []byte("q"), Version: -1},
			{Op: zkwire.OpCheck, Path: "/r/m1", Version: 1},
			{Op: zkwire.OpDelete, Path: "/r/m1", Version: -1},
		}},
		{Op: zkwire.OpMulti, Ops: []zkwire.Request{
			{Op: zkwire.OpCreate, Path: "/r/m5", ACL: open}, {Op: zkwire.OpCheck, Path: "/r", Version: 99}, {Op: zkwire.OpDelete, Path: "/r/e1", Version: -1},
		}},
		{Op: zkwire.OpMulti, Ops: []zkwire.Request{{Op: zkwire.OpCreate, Path: "/r/m6", ACL: open}, {Op: zkwire.OpCreate, Path: "/r/m7"}}},
		{Op: zkwire.OpMulti, Ops: []zkwire.Request{{Op: zkwire.OpCreate, Path: "/r/m6", ACL: open}, {Op: zkwire.OpGetData, Path: "/r"}}},
		{Op: zkwire.OpMulti, Ops: []zkwire.Request{{Op: zkwire.OpCreate, Path: "/r/m6", ACL: open}, {Op: zkwire.OpCreateContainer, Path: "/r/m8", ACL: open}}},
		{Op: zkwire.OpMulti, Ops: []zkwire.Request{{Op: zkwire.OpCreate, Path: "bad", ACL: open}}},
		{Op: zkwire.OpMulti},
		{Op: zkwire.OpCheck, Path: "/r", Version: 99},
		{Op: zkwire.OpCheckWatches, Path: "/r", WatcherType: int32(wire.WatcherData)},
		{Op: zkwire.OpCheckWatches, Path: "/r", WatcherType: int32(wire.WatcherChildren)},
		{Op: zkwire.OpCheckWatches, Path: "/zz", WatcherType: int32(wire.WatcherAny)},
		{Op: zkwire.OpCheckWatches, Path: "/r", WatcherType: 9},
		{Op: zkwire.OpCheckWatches, Path: "bad", WatcherType: 9},
		{Op: zkwire.OpRemoveWatches, Path: "/r", WatcherType: int32(wire.WatcherChildren)},
		{Op: zkwire.OpRemoveWatches, Path: "/r", WatcherType: 0},
		{Op: zkwire.OpAddWatch, Path: "/r", Mode: int32(wire.AddWatchPersistentRecursive)},
		{Op: zkwire.OpAddWatch, Path: "/r", Mode: 7},
		{Op: zkwire.OpCheckWatches, Path: "/r", WatcherType: int32(wire.WatcherPersistentRecursive)},
		{Op: zkwire.OpRemoveWatches, Path: "/r", WatcherType: int32(wire.WatcherPersistentRecursive)},
		{Op: zkwire.OpCheckWatches, Path: "/r", WatcherType: int32(wire.WatcherPersistentRecursive)},
		{Op: zkwire.OpGetData, Path: "/r", Watch: true},
		{Op: zkwire.OpCheckWatches, Path: "/r", WatcherType: int32(wire.WatcherAny)},
		{Op: zkwire.OpRemoveWatches, Path: "/r", WatcherType: int32(wire.WatcherAny)},
		{Op: zkwire.OpRemoveWatches, Path: "/r", WatcherType: int32(wire.WatcherAny)},
		{Op: zkwire.OpGetACL, Path: "/r"},
		{Op: zkwire.OpSetACL, Path: "/r", ACL: open, Version: 0},
		{Op: zkwire.OpSetACL, Path: "/r", Version: -1},
		{Op: zkwire.OpWhoAmI},
		{Op: zkwire.OpReconfig},
		{Op: zkwire.OpSASL, Data: []byte("x")},
		{Op: 77},
		{Op: zkwire.OpDelete, Path: "/r/c2", Version: -1},
		{Op: zkwire.OpDelete, Path: "/r", Version: -1},
		{Xid: zkwire.XidPing, Op: zkwire.OpPing},
		{Xid: zkwire.XidSetWatches, Op: zkwire.OpSetWatches, RelativeZxid: 1,
			DataWatches: []string{"/r", "/gone"}, ExistWatches: []string{"/r/c2", "/new"}, ChildWatches: []string{"/r"}},
		{Xid: zkwire.XidSetWatches, Op: zkwire.OpSetWatches2, RelativeZxid: 1000,
			PersistentWatches: []string{"/p"}, PersistentRecursiveWatches: []string{"/q"}},
		{Xid: zkwire.XidSetWatches, Op: zkwire.OpSetWatches, DataWatches: []string{"bad"}},
	}
	var steps []zkStep
	for _, r := range reqs {
		steps = append(steps, zkStep{who: "a", req: r})
	}
	return append(steps,
		zkStep{who: "b", req: zkwire.Request{Op: zkwire.OpGetEphemerals, Path: "/"}},
		zkStep{who: "b", req: zkwire.Request{Op: zkwire.OpSetData, Path: "/r", Data: []byte("from b"), Version: -1}},
		zkStep{who: "b", req: zkwire.Request{Op: zkwire.OpCreate, Path: "/r/fromb", ACL: open}},
		zkStep{who: "a", req: zkwire.Request{Op: zkwire.OpExists, Path: "/"}}, // and a's notifications before it
		zkStep{who: "a", req: zkwire.Request{Xid: zkwire.XidAuth, Op: zkwire.OpAuth, Scheme: "digest", Auth: []byte("alice:secret")}},
		zkStep{who: "a", req: zkwire.Request{Op: zkwire.OpWhoAmI}},
		zkStep{who: "b", req: zkwire.Request{Xid: zkwire.XidAuth, Op: zkwire.OpAuth, Scheme: "nope", Auth: []byte("x")}},
		zkStep{who: "b", awaitClose: true},
		zkStep{who: "a", req: zkwire.Request{Op: zkwire.OpGetData, Path: "/r"},
			mangle: func(frame []byte) { frame[15] = 0x7f }}, // a path length past the frame
		zkStep{who: "a", req: zkwire.Request{Op: zkwire.OpCloseSession}},
		zkStep{who: "a", awaitClose: true},
	)
}

// withoutTimes clears what differs from run to run: the times in Stats,
// and the session that owns an ephemeral, shown as 1.
func withoutTimes(r zkwire.Reply) zkwire.Reply {
	clear := func(st *wire.Stat) {
		st.Ctime, st.Mtime = 0, 0
		if st.EphemeralOwner != 0 {
			st.EphemeralOwner = 1
		}
	}
	clear(&r.Stat)
	for i := range r.Results {
		clear(&r.Results[i].Stat)
	}
	return r
}

// brief writes v with only its fields that are not zero, a long string
// cut short.
func brief(v reflect.Value) string {
	if s, ok := v.Interface().(fmt.Stringer); ok && v.Kind() != reflect.Struct {
		return s.String()
	}
	switch v.Kind() {
	case reflect.Struct:
		var parts []string
		for i := range v.NumField() {
			if f := v.Field(i); !f.IsZero() {
				parts = append(parts, v.Type().Field(i).Name+":"+brief(f))
			}
		}
		return "{" + strings.Join(parts, " ") + "}"
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return strconv.Quote(string(v.Bytes()))
		}
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = brief(v.Index(i))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case reflect.String:
		if s := v.String(); len(s) > 40 {
			return fmt.Sprintf("%q...(%d bytes)", s[:20], len(s))
		}
		return strconv.Quote(v.String())
	case reflect.Pointer:
		return brief(v.Elem())
	}
	return fmt.Sprint(v.Interface())
}

// requestCounts lists the server's request counters by op and result.
func requestCounts(t *testing.T, s *Server) string {
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		if mf.GetName() != "arbor_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			lines = append(lines, fmt.Sprintf("counted %s %v\n", strings.Join(labels, " "), m.GetCounter().GetValue()))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "")
}
