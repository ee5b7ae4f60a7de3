package server

import (
	"slices"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/wire"
)

// A waiter that names itself on its watch (Request.Waiter) learns with
// the deletion of the node it waits for whether its turn has come, by the
// lock's queue as the deletion left it.
func TestADeletionTellsTheWaitersWhoseTurnCame(t *testing.T) {
	t.Parallel()
	type node struct {
		id   string
		kind lockq.Kind
	}
	for _, tc := range []struct {
		name    string
		queue   []node
		watch   int   // the node the waiters watch
		waiters []int // the nodes that wait for it, on one connection
		gone    int   // the node deleted
		want    []int // the waiters told of their turn
	}{
		{"the next in line holds once the holder goes",
			[]node{{"a", lockq.Exclusive}, {"b", lockq.Exclusive}}, 0, []int{1}, 0, []int{1}},
		{"a waiter whose predecessor gave up does not hold while the holder does",
			[]node{{"a", lockq.Exclusive}, {"b", lockq.Exclusive}, {"c", lockq.Exclusive}}, 1, []int{2}, 1, nil},
		{"the readers behind a writer hold together",
			[]node{{"w", lockq.Write}, {"r1", lockq.Read}, {"r2", lockq.Read}}, 0, []int{1, 2}, 0, []int{1, 2}},
		{"a writer behind two readers waits for the second",
			[]node{{"r1", lockq.Read}, {"r2", lockq.Read}, {"w", lockq.Write}}, 1, []int{2}, 1, nil},
		{"a waiter not in the queue has no turn",
			[]node{{"a", lockq.Exclusive}}, 0, []int{-1}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, "")
			owner, waiter := dialRaw(t, s), dialRaw(t, s)
			owner.connect(wire.ConnectRequest{})
			waiter.connect(wire.ConnectRequest{})
			if r := owner.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/l"}); r.Err != 0 {
				t.Fatalf("create /l: %v", r.Err)
			}
			var names []string
			for i, n := range tc.queue {
				r := owner.call(wire.Request{Xid: int32(2 + i), Op: wire.OpCreate, Path: "/l/" + lockq.Prefix(n.id, n.kind), Mode: wire.ModeEphemeralSequential})
				if r.Err != 0 {
					t.Fatalf("create %s: %v", n.id, r.Err)
				}
				names = append(names, strings.TrimPrefix(r.Path, "/l/"))
			}
			name := func(i int) string {
				if i < 0 {
					return lockq.Prefix("x", lockq.Exclusive) + "0000000099"
				}
				return names[i]
			}
			for _, w := range tc.waiters {
				r := waiter.call(wire.Request{Xid: 20, Op: wire.OpGetData, Path: "/l/" + names[tc.watch], Watch: true, Waiter: name(w)})
				if r.Err != 0 {
					t.Fatalf("getData with waiter %s: %v", name(w), r.Err)
				}
			}
			if r := owner.call(wire.Request{Xid: 30, Op: wire.OpDelete, Path: "/l/" + names[tc.gone], Version: -1}); r.Err != 0 {
				t.Fatalf("delete: %v", r.Err)
			}
			ev, err := waiter.reply(wire.OpGetData)
			if err != nil || ev.Xid != wire.XidNotification || ev.EventType != wire.EventNodeDeleted {
				t.Fatalf("the waiters' notification: %+v, %v", ev, err)
			}
			var want []string
			for _, w := range tc.want {
				want = append(want, name(w))
			}
			if !slices.Equal(ev.Turns, want) {
				t.Errorf("turns %q, want %q", ev.Turns, want)
			}
		})
	}
}

func TestAWaiterThatIsNoNodeNameIsRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.MaxName = 64 })
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	for i, req := range []wire.Request{
		{Op: wire.OpGetData, Path: "/", Watch: true, Waiter: "a/b"},
		{Op: wire.OpExists, Path: "/x", Watch: true, Waiter: "a/b"},
		{Op: wire.OpGetData, Path: "/", Waiter: "a"}, // no watch
		{Op: wire.OpExists, Path: "/x", Watch: true, Waiter: strings.Repeat("n", 65)},
		{Op: wire.OpExists, Path: "/x", Watch: true, Waiter: "."},
	} {
		req.Xid = int32(i + 1)
		if r := c.call(req); r.Err != wire.CodeBadArguments {
			t.Errorf("%s %s waiter %.10q: error %v, want BadArguments", req.Op, req.Path, req.Waiter, r.Err)
		}
	}
	// The connection goes on.
	if r := c.call(wire.Request{Xid: 9, Op: wire.OpExists, Path: "/x", Watch: true, Waiter: "n1"}); r.Err != wire.CodeNoNode {
		t.Errorf("a waiter's exists of a missing node: %v", r.Err)
	}
}

// A create that asks (Request.TellTurn) learns its node's turn in the
// lock's queue with its reply: that it holds, or the node it waits for.
func TestACreateTellsTheNewLockNodesTurn(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	c.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/l"})
	xid := int32(1)
	create := func(name string, tell bool) wire.Reply {
		t.Helper()
		xid++
		r := c.call(wire.Request{Xid: xid, Op: wire.OpCreate, Path: "/l/" + name, Mode: wire.ModeEphemeralSequential, TellTurn: tell})
		if r.Err != 0 {
			t.Fatalf("create %s: %v", name, r.Err)
		}
		return r
	}
	base := func(r wire.Reply) string { return strings.TrimPrefix(r.Path, "/l/") }
	r1 := create(lockq.Prefix("r1", lockq.Read), true)
	r2 := create(lockq.Prefix("r2", lockq.Read), true)
	w := create(lockq.Prefix("w", lockq.Write), true)
	r3 := create(lockq.Prefix("r3", lockq.Read), true)
	plain := create("item-", true)
	untold := create(lockq.Prefix("x", lockq.Exclusive), false)
	for _, tc := range []struct {
		name string
		got  wire.LockTurn
		want wire.LockTurn
	}{
		{"the first reader holds", r1.Turn, wire.LockTurn{Known: true, Holds: true, Zxid: r1.Zxid}},
		{"a reader behind a reader holds", r2.Turn, wire.LockTurn{Known: true, Holds: true, Zxid: r2.Zxid}},
		{"a writer waits for the reader just ahead", w.Turn, wire.LockTurn{Known: true, Blocker: base(r2), Zxid: w.Zxid}},
		{"a reader behind a writer waits for it", r3.Turn, wire.LockTurn{Known: true, Blocker: base(w), Zxid: r3.Zxid}},
		{"a node that is no lock node has no turn", plain.Turn, wire.LockTurn{}},
		{"a create that did not ask is told nothing", untold.Turn, wire.LockTurn{}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: turn %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
}
