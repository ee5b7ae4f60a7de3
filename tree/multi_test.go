package tree_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

func TestMultiSucceeds(t *testing.T) {
	t.Run("a multi applies every op and reports each op's result", func(t *testing.T) {
		f := newFixture(t)
		f.create("/cfg", "v0")
		res, events := f.apply(multiTxn(
			createTxn("/m", "", wire.ModePersistent),
			createTxn("/m/a", "aa", wire.ModePersistent),
			setTxn("/cfg", "v1", 0),
			checkTxn("/cfg", 1),
			createTxn("/m/s-", "", wire.ModePersistentSequential),
			deleteTxn("/m/a", 0),
		))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		zxid := f.zxid
		cfg := f.stat("/cfg")
		wantOps := []wire.Op{wire.OpCreate, wire.OpCreate, wire.OpSetData, wire.OpCheck, wire.OpCreate, wire.OpDelete}
		wantPaths := []string{"/m", "/m/a", "", "", "/m/s-0000000001", ""}
		if len(res.Multi) != len(wantOps) {
			t.Fatalf("%d results, want %d", len(res.Multi), len(wantOps))
		}
		for i, r := range res.Multi {
			if r.Op != wantOps[i] || r.Err != wire.CodeOK || r.Path != wantPaths[i] {
				t.Errorf("result %d = {%s %v %q}, want {%s ok %q}", i, r.Op, r.Err, r.Path, wantOps[i], wantPaths[i])
			}
		}
		if st := res.Multi[0].Stat; st.Czxid != zxid || st.Mzxid != zxid {
			t.Errorf("create result Stat %+v, want zxids %d", st, zxid)
		}
		if st := res.Multi[1].Stat; st.DataLength != 2 {
			t.Errorf("create result Stat %+v, want DataLength 2", st)
		}
		if st := res.Multi[2].Stat; st != cfg {
			t.Errorf("setData result Stat %+v, node has %+v", st, cfg)
		}
		if st := res.Multi[4].Stat; st != f.stat("/m/s-0000000001") {
			t.Errorf("sequential create result Stat %+v, node has %+v", st, f.stat("/m/s-0000000001"))
		}
		checkEvents(t, events,
			created("/m"), children("/"),
			created("/m/a"), children("/m"),
			changed("/cfg"),
			created("/m/s-0000000001"), children("/m"),
			deleted("/m/a"), children("/m"),
		)
		if m := f.stat("/m"); m.Cversion != 3 || m.NumChildren != 1 || m.Pzxid != zxid {
			t.Errorf("/m Stat %+v, want cversion 3, one child, pzxid %d", m, zxid)
		}
	})
	t.Run("a multi can create a node and delete it again", func(t *testing.T) {
		f := newFixture(t)
		f.create("/p", "")
		before := f.stat("/p")
		res, events := f.apply(multiTxn(
			createTxn("/p/tmp", "", wire.ModePersistent),
			deleteTxn("/p/tmp", 0),
		))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if f.exists("/p/tmp") {
			t.Error("/p/tmp exists")
		}
		if st := f.stat("/p"); st.Cversion != before.Cversion+2 || st.NumChildren != 0 {
			t.Errorf("/p Stat %+v: cversion should have moved by 2", st)
		}
		checkEvents(t, events, created("/p/tmp"), children("/p"), deleted("/p/tmp"), children("/p"))
		if f.tr.Count() != 2+systemNodes {
			t.Errorf("Count = %d, want %d", f.tr.Count(), 2+systemNodes)
		}
	})
	t.Run("sequential creates in one multi get consecutive numbers", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(3)
		f.create("/q", "")
		f.create("/q/first", "")
		res := f.must(multiTxn(
			createTxn("/q/n-", "", wire.ModePersistentSequential),
			tree.Txn{Type: wire.OpCreate, Path: "/q/n-", Mode: wire.ModeEphemeralSequential, Session: 3},
			createTxn("/q/", "", wire.ModePersistentSequential),
		))
		got := []string{res.Multi[0].Path, res.Multi[1].Path, res.Multi[2].Path}
		want := []string{"/q/n-0000000001", "/q/n-0000000002", "/q/0000000003"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("created %v, want %v", got, want)
		}
		if eph := f.tr.Ephemerals(3); !reflect.DeepEqual(eph, []string{"/q/n-0000000002"}) {
			t.Errorf("Ephemerals = %v", eph)
		}
	})
	t.Run("a multi can set data on a node it created", func(t *testing.T) {
		f := newFixture(t)
		res := f.must(multiTxn(
			createTxn("/n", "a", wire.ModePersistent),
			setTxn("/n", "b", 0),
			checkTxn("/n", 1),
		))
		if res.Multi[1].Stat.Version != 1 {
			t.Errorf("setData result version %d", res.Multi[1].Stat.Version)
		}
	})
	t.Run("a multi can delete a node and create it anew", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(1)
		f.must(ephemeralTxn("/n", 1))
		f.must(multiTxn(
			deleteTxn("/n", -1),
			createTxn("/n", "persistent now", wire.ModePersistent),
		))
		if st := f.stat("/n"); st.EphemeralOwner != 0 {
			t.Errorf("EphemeralOwner = %#x", st.EphemeralOwner)
		}
		if eph := f.tr.Ephemerals(1); len(eph) != 0 {
			t.Errorf("Ephemerals = %v", eph)
		}
	})
	t.Run("an empty multi succeeds and does nothing", func(t *testing.T) {
		f := newFixture(t)
		before := dumpTree(f.tr)
		res, events := f.apply(multiTxn())
		if res.Err != nil || len(res.Multi) != 0 || len(events) != 0 {
			t.Errorf("result %+v, events %v", res, events)
		}
		if diff := before.diff(dumpTree(f.tr)); diff != "" {
			t.Error(diff)
		}
	})
	t.Run("a check guards the writes after it", func(t *testing.T) {
		f := newFixture(t)
		f.create("/leader", "me")
		f.create("/cfg", "")
		f.must(multiTxn(checkTxn("/leader", 0), setTxn("/cfg", "new", -1)))
		f.must(setTxn("/leader", "someone else", -1))
		f.mustFail(multiTxn(checkTxn("/leader", 0), setTxn("/cfg", "stale", -1)), wire.ErrBadVersion)
	})
}

func TestMultiFails(t *testing.T) {
	// setup: /a (version 0) with child /a/b, /c, session 1 with ephemeral
	// /e, container /box that never had a child, TTL node /lease.
	setup := func(t *testing.T) *fixture {
		f := newFixture(t)
		f.openSession(1)
		f.create("/a", "a")
		f.create("/a/b", "b")
		f.create("/c", "c")
		f.must(ephemeralTxn("/e", 1))
		f.must(createTxn("/box", "", wire.ModeContainer))
		f.must(ttlTxn("/lease", wire.ModePersistentWithTTL, 1000))
		return f
	}
	tests := []struct {
		name     string
		ops      []tree.Txn
		want     error
		wantCode []wire.Code
	}{
		{
			name: "the first op failing fails them all",
			ops: []tree.Txn{
				createTxn("/a", "", wire.ModePersistent),
				createTxn("/new", "", wire.ModePersistent),
				setTxn("/c", "x", -1),
			},
			want:     wire.ErrNodeExists,
			wantCode: []wire.Code{wire.CodeNodeExists, wire.CodeRuntimeInconsistency, wire.CodeRuntimeInconsistency},
		},
		{
			name: "a failing check in the middle undoes the ops before it",
			ops: []tree.Txn{
				createTxn("/new", "", wire.ModePersistent),
				setTxn("/c", "x", 0),
				checkTxn("/c", 0), // now at version 1
				deleteTxn("/a/b", -1),
			},
			want:     wire.ErrBadVersion,
			wantCode: []wire.Code{wire.CodeOK, wire.CodeOK, wire.CodeBadVersion, wire.CodeRuntimeInconsistency},
		},
		{
			name: "the last op failing undoes every op",
			ops: []tree.Txn{
				deleteTxn("/a/b", 0),
				createTxn("/a/s-", "", wire.ModePersistentSequential),
				createTxn("/a/s-", "", wire.ModePersistentSequential),
				setTxn("/a", "x", -1),
				deleteTxn("/a", -1),
			},
			want:     wire.ErrNotEmpty,
			wantCode: []wire.Code{wire.CodeOK, wire.CodeOK, wire.CodeOK, wire.CodeOK, wire.CodeNotEmpty},
		},
		{
			name: "deleting an ephemeral and failing keeps it in its session's index",
			ops: []tree.Txn{
				deleteTxn("/e", -1),
				deleteTxn("/missing", -1),
			},
			want:     wire.ErrNoNode,
			wantCode: []wire.Code{wire.CodeOK, wire.CodeNoNode},
		},
		{
			name: "creating an ephemeral and failing leaves the session's index as it was",
			ops: []tree.Txn{
				ephemeralTxn("/e2", 1),
				ephemeralTxn("/e3", 2),
			},
			want:     wire.ErrSessionExpired,
			wantCode: []wire.Code{wire.CodeOK, wire.CodeSessionExpired},
		},
		{
			name: "deleting a TTL node and failing keeps it reapable",
			ops: []tree.Txn{
				deleteTxn("/lease", -1),
				createTxn("relative", "", wire.ModePersistent),
			},
			want:     wire.ErrBadArguments,
			wantCode: []wire.Code{wire.CodeOK, wire.CodeBadArguments},
		},
		{
			name: "a container's child come and gone in a failed multi does not make it reapable",
			ops: []tree.Txn{
				createTxn("/box/x", "", wire.ModePersistent),
				deleteTxn("/box/x", -1),
				checkTxn("/box", 9),
			},
			want:     wire.ErrBadVersion,
			wantCode: []wire.Code{wire.CodeOK, wire.CodeOK, wire.CodeBadVersion},
		},
		{
			name: "recreating a deleted node and failing restores the original",
			ops: []tree.Txn{
				deleteTxn("/c", -1),
				createTxn("/c", "other", wire.ModeContainer),
				setTxn("/c", "x", 0),
				createTxn("/c/kid", "", wire.ModePersistent),
				createTxn("/c/kid", "", wire.ModePersistent),
			},
			want:     wire.ErrNodeExists,
			wantCode: []wire.Code{wire.CodeOK, wire.CodeOK, wire.CodeOK, wire.CodeOK, wire.CodeNodeExists},
		},
		{
			name: "data over the limit inside a multi fails it",
			ops: []tree.Txn{
				createTxn("/new", "", wire.ModePersistent),
				{Type: wire.OpSetData, Path: "/new", Data: make([]byte, tree.DefaultMaxDataSize+1), Version: -1},
			},
			want:     wire.ErrDataTooLarge,
			wantCode: []wire.Code{wire.CodeOK, wire.CodeDataTooLarge},
		},
		{
			name: "a nested multi is not allowed",
			ops: []tree.Txn{
				createTxn("/new", "", wire.ModePersistent),
				multiTxn(createTxn("/inner", "", wire.ModePersistent)),
			},
			want:     wire.ErrBadArguments,
			wantCode: []wire.Code{wire.CodeOK, wire.CodeBadArguments},
		},
		{
			name: "session txns are not allowed in a multi",
			ops: []tree.Txn{
				closeTxn(1),
				createTxn("/new", "", wire.ModePersistent),
			},
			want:     wire.ErrBadArguments,
			wantCode: []wire.Code{wire.CodeBadArguments, wire.CodeRuntimeInconsistency},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			res := f.mustFail(multiTxn(tt.ops...), tt.want)
			if len(res.Multi) != len(tt.ops) {
				t.Fatalf("%d results for %d ops", len(res.Multi), len(tt.ops))
			}
			for i, r := range res.Multi {
				if r.Err != tt.wantCode[i] {
					t.Errorf("op %d (%s): code %v, want %v", i, describe(tt.ops[i]), r.Err, tt.wantCode[i])
				}
				if r.Op != tt.ops[i].Type {
					t.Errorf("op %d: result names op %s, want %s", i, r.Op, tt.ops[i].Type)
				}
				if r.Path != "" || r.Stat != (wire.Stat{}) {
					t.Errorf("op %d of a failed multi carries path %q, Stat %+v", i, r.Path, r.Stat)
				}
			}
			if !errors.Is(res.Err, tt.want) {
				t.Errorf("Err = %v", res.Err)
			}
		})
	}
	t.Run("a failed multi does not use up sequence numbers", func(t *testing.T) {
		f := setup(t)
		f.mustFail(multiTxn(
			createTxn("/a/s-", "", wire.ModePersistentSequential),
			createTxn("/a/s-", "", wire.ModePersistentSequential),
			checkTxn("/a", 5),
		), wire.ErrBadVersion)
		if got := f.must(createTxn("/a/s-", "", wire.ModePersistentSequential)).Path; got != "/a/s-0000000001" {
			t.Errorf("created %q, want /a/s-0000000001", got)
		}
	})
	t.Run("a tree keeps working after a failed multi", func(t *testing.T) {
		f := setup(t)
		f.mustFail(multiTxn(createTxn("/x", "", wire.ModePersistent), checkTxn("/x", 3)), wire.ErrBadVersion)
		res, events := f.apply(createTxn("/x", "", wire.ModePersistent))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		checkEvents(t, events, created("/x"), children("/"))
		f.must(setTxn("/x", "y", 0)) // not recorded for undo: a later failure must not revert it
		f.mustFail(multiTxn(checkTxn("/x", 0)), wire.ErrBadVersion)
		if data, _, _ := f.tr.Get("/x"); string(data) != "y" {
			t.Errorf("data = %q", data)
		}
	})
}

func TestAMultiOpWithIdentitiesOfItsOwnIsCheckedWithThem(t *testing.T) {
	tr := tree.New()
	closed := []wire.ACL{{Perms: wire.PermAll, Scheme: "digest", ID: "alice:x"}}
	apply := func(txn tree.Txn) error { res, _ := tr.Apply(tr.Zxid()+1, &txn); return res.Err }
	if err := apply(tree.Txn{Type: wire.OpCreate, Path: "/a", ACL: closed, Identities: []wire.Identity{{Scheme: "digest", ID: "alice:x"}}}); err != nil {
		t.Fatal(err)
	}
	bob := []wire.Identity{{Scheme: "digest", ID: "bob:y"}}
	if err := apply(tree.Txn{Type: wire.OpMulti, Identities: bob, Ops: []tree.Txn{{Type: wire.OpCreate, Path: "/a/b"}}}); !errors.Is(err, wire.ErrNoAuth) {
		t.Fatalf("bob's multi created under alice's node: %v", err)
	}
	if err := apply(tree.Txn{Type: wire.OpMulti, Identities: bob, Ops: []tree.Txn{
		{Type: wire.OpCreate, Path: "/a/b", Identities: []wire.Identity{{Scheme: tree.SuperScheme}}},
	}}); err != nil {
		t.Errorf("an op with the superuser's identity of its own, in bob's multi: %v", err)
	}
}
