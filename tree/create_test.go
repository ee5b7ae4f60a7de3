package tree_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// TestCreateModes follows the programmer's guide's list of znode kinds: each
// mode is created under /app (which already saw three child changes, so a
// sequential name ends in 0000000003) by session 0x51, and the table says
// what the node looks like, whether it outlives the session and whether the
// housekeeping ever reaps it.
func TestCreateModes(t *testing.T) {
	const sess = int64(0x51)
	tests := []struct {
		name      string
		txn       tree.Txn
		wantPath  string
		ephemeral bool // owned by the session, deleted when it closes
		reapAt    int64
		// reapAt: the first instant (ms after the create) at which an
		// untouched, childless node is reapable; 0 means never.
	}{
		{
			name:     "a persistent node keeps its name and outlives its creator's session",
			txn:      tree.Txn{Type: wire.OpCreate, Path: "/app/node", Mode: wire.ModePersistent, Session: sess},
			wantPath: "/app/node",
		},
		{
			name:      "an ephemeral node belongs to its session and goes when the session closes",
			txn:       tree.Txn{Type: wire.OpCreate, Path: "/app/node", Mode: wire.ModeEphemeral, Session: sess},
			wantPath:  "/app/node",
			ephemeral: true,
		},
		{
			name:     "a persistent-sequential node gets the parent's cversion appended",
			txn:      tree.Txn{Type: wire.OpCreate, Path: "/app/lock-", Mode: wire.ModePersistentSequential, Session: sess},
			wantPath: "/app/lock-0000000003",
		},
		{
			name:      "an ephemeral-sequential node is both numbered and owned by its session",
			txn:       tree.Txn{Type: wire.OpCreate, Path: "/app/lock-", Mode: wire.ModeEphemeralSequential, Session: sess},
			wantPath:  "/app/lock-0000000003",
			ephemeral: true,
		},
		{
			name:     "a container is never reaped before it had a child",
			txn:      tree.Txn{Type: wire.OpCreate, Path: "/app/box", Mode: wire.ModeContainer, Session: sess},
			wantPath: "/app/box",
		},
		{
			name:     "a persistent-TTL node is reaped once childless and unchanged for longer than its ttl",
			txn:      tree.Txn{Type: wire.OpCreate, Path: "/app/lease", Mode: wire.ModePersistentWithTTL, TTL: 5000, Session: sess},
			wantPath: "/app/lease",
			reapAt:   5001,
		},
		{
			name:     "a sequential-TTL node is numbered and reaped like a TTL node",
			txn:      tree.Txn{Type: wire.OpCreate, Path: "/app/lease-", Mode: wire.ModePersistentSequentialWithTTL, TTL: 5000, Session: sess},
			wantPath: "/app/lease-0000000003",
			reapAt:   5001,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.openSession(sess)
			f.create("/app", "")
			f.create("/app/x", "")
			f.must(deleteTxn("/app/x", -1))
			f.create("/app/y", "")

			txn := tt.txn
			txn.Data = []byte("payload")
			res := f.must(txn)
			ctime := timeOf(f.zxid)
			if res.Path != tt.wantPath {
				t.Fatalf("created %q, want %q", res.Path, tt.wantPath)
			}
			data, st, err := f.tr.Get(tt.wantPath)
			if err != nil || string(data) != "payload" {
				t.Fatalf("Get(%q) = %q, %v", tt.wantPath, data, err)
			}
			if st != res.Stat {
				t.Errorf("create returned Stat %+v, Get says %+v", res.Stat, st)
			}
			wantOwner := int64(0)
			if tt.ephemeral {
				wantOwner = sess
			}
			if st.EphemeralOwner != wantOwner {
				t.Errorf("EphemeralOwner = %#x, want %#x", st.EphemeralOwner, wantOwner)
			}

			// Housekeeping: never before reapAt, from reapAt on.
			if tt.reapAt == 0 {
				if got := f.tr.Reapable(ctime + tree.MaxTTL + 1); len(got) != 0 {
					t.Errorf("Reapable long after = %v, want none", got)
				}
			} else {
				if got := f.tr.Reapable(ctime + tt.reapAt - 1); len(got) != 0 {
					t.Errorf("Reapable %d ms after = %v, want none", tt.reapAt-1, got)
				}
				if got := f.tr.Reapable(ctime + tt.reapAt); len(got) != 1 || got[0] != tt.wantPath {
					t.Errorf("Reapable %d ms after = %v, want [%s]", tt.reapAt, got, tt.wantPath)
				}
			}

			if got := f.tr.Ephemerals(sess); tt.ephemeral != (len(got) == 1 && got[0] == tt.wantPath) {
				t.Errorf("Ephemerals(%#x) = %v, ephemeral %v", sess, got, tt.ephemeral)
			}
			f.must(closeTxn(sess))
			if f.exists(tt.wantPath) == tt.ephemeral {
				t.Errorf("after the session closed, exists = %v, want %v", !tt.ephemeral, !tt.ephemeral)
			}
		})
	}
}

func TestSequentialNames(t *testing.T) {
	t.Run("the first sequential child of a fresh parent is numbered 0000000000", func(t *testing.T) {
		f := newFixture(t)
		f.create("/q", "")
		if got := f.must(createTxn("/q/job-", "", wire.ModePersistentSequential)).Path; got != "/q/job-0000000000" {
			t.Errorf("created %q", got)
		}
	})
	t.Run("the number is the parent's cversion, so it counts plain children too", func(t *testing.T) {
		f := newFixture(t)
		f.create("/q", "")
		for i := range 7 {
			f.create(fmt.Sprintf("/q/plain%d", i), "")
		}
		if got := f.must(createTxn("/q/lock-", "", wire.ModePersistentSequential)).Path; got != "/q/lock-0000000007" {
			t.Errorf("created %q, want /q/lock-0000000007", got)
		}
	})
	t.Run("a lock node created after seven children changes is lock-0000000007", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(1)
		f.create("/lock", "")
		for i := range 4 {
			f.create(fmt.Sprintf("/lock/x%d", i), "")
		}
		for i := range 3 {
			f.must(deleteTxn(fmt.Sprintf("/lock/x%d", i), -1))
		}
		if cv := f.stat("/lock").Cversion; cv != 7 {
			t.Fatalf("cversion = %d, want 7: deletes count too", cv)
		}
		txn := tree.Txn{Type: wire.OpCreate, Path: "/lock/lock-", Mode: wire.ModeEphemeralSequential, Session: 1}
		if got := f.must(txn).Path; got != "/lock/lock-0000000007" {
			t.Errorf("created %q, want /lock/lock-0000000007", got)
		}
	})
	t.Run("numbers keep rising across prefixes in the same parent", func(t *testing.T) {
		f := newFixture(t)
		f.create("/rw", "")
		var got []string
		for _, prefix := range []string{"read-", "write-", "read-", "write-"} {
			got = append(got, f.must(createTxn("/rw/"+prefix, "", wire.ModePersistentSequential)).Path)
		}
		want := []string{"/rw/read-0000000000", "/rw/write-0000000001", "/rw/read-0000000002", "/rw/write-0000000003"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("created %v, want %v", got, want)
		}
	})
	t.Run("a prefix ending in a slash makes the number the whole name", func(t *testing.T) {
		f := newFixture(t)
		f.create("/q", "")
		f.create("/q/a", "")
		if got := f.must(createTxn("/q/", "", wire.ModePersistentSequential)).Path; got != "/q/0000000001" {
			t.Errorf("created %q, want /q/0000000001", got)
		}
	})
	t.Run("a sequential create under the root numbers the root's children", func(t *testing.T) {
		f := newFixture(t)
		if got := f.must(createTxn("/", "", wire.ModePersistentSequential)).Path; got != "/0000000000" {
			t.Errorf("created %q, want /0000000000", got)
		}
		if got := f.must(createTxn("/n-", "", wire.ModePersistentSequential)).Path; got != "/n-0000000001" {
			t.Errorf("created %q, want /n-0000000001", got)
		}
	})
	t.Run("a number is ten digits even past 9", func(t *testing.T) {
		f := newFixture(t)
		f.create("/q", "")
		var last string
		for range 13 {
			last = f.must(createTxn("/q/item-", "", wire.ModePersistentSequential)).Path
		}
		if last != "/q/item-0000000012" {
			t.Errorf("13th item is %q, want /q/item-0000000012", last)
		}
	})
	t.Run("a failed create does not use up a number", func(t *testing.T) {
		f := newFixture(t)
		f.create("/q", "")
		f.mustFail(tree.Txn{Type: wire.OpCreate, Path: "/q/e-", Mode: wire.ModeEphemeralSequential, Session: 99}, wire.ErrSessionExpired)
		if got := f.must(createTxn("/q/e-", "", wire.ModePersistentSequential)).Path; got != "/q/e-0000000000" {
			t.Errorf("created %q, want /q/e-0000000000", got)
		}
	})
	t.Run("a generated name that is already taken is NodeExists", func(t *testing.T) {
		f := newFixture(t)
		f.create("/q", "")
		f.create("/q/x-0000000001", "") // cversion is now 1
		f.mustFail(createTxn("/q/x-", "", wire.ModePersistentSequential), wire.ErrNodeExists)
	})
}

func TestCreateStat(t *testing.T) {
	f := newFixture(t)
	f.openSession(7)
	f.create("/parent", "parent data")
	parentBefore := f.stat("/parent")

	txn := tree.Txn{Type: wire.OpCreate, Path: "/parent/child", Data: []byte("12345"), Mode: wire.ModeEphemeral, Session: 7, Time: 1234567}
	res := f.must(txn)
	zxid := f.zxid
	st := res.Stat
	parent := f.stat("/parent")

	checks := []struct {
		name      string
		got, want int64
	}{
		{"create sets czxid to the txn's zxid", st.Czxid, zxid},
		{"create sets mzxid to the txn's zxid", st.Mzxid, zxid},
		{"create sets pzxid to the txn's zxid", st.Pzxid, zxid},
		{"create sets ctime to the txn's time", st.Ctime, 1234567},
		{"create sets mtime to the txn's time", st.Mtime, 1234567},
		{"a new node has version 0", int64(st.Version), 0},
		{"a new node has cversion 0", int64(st.Cversion), 0},
		{"a new node has aversion 0", int64(st.Aversion), 0},
		{"a new node has no children", int64(st.NumChildren), 0},
		{"DataLength is the length of the data", int64(st.DataLength), 5},
		{"EphemeralOwner is the owning session", st.EphemeralOwner, 7},
		{"a child's create bumps the parent's cversion", int64(parent.Cversion), int64(parentBefore.Cversion) + 1},
		{"a child's create sets the parent's pzxid", parent.Pzxid, zxid},
		{"a child's create leaves the parent's version alone", int64(parent.Version), int64(parentBefore.Version)},
		{"a child's create leaves the parent's mzxid alone", parent.Mzxid, parentBefore.Mzxid},
		{"a child's create leaves the parent's mtime alone", parent.Mtime, parentBefore.Mtime},
		{"a child's create leaves the parent's czxid alone", parent.Czxid, parentBefore.Czxid},
		{"a child's create counts in the parent's NumChildren", int64(parent.NumChildren), 1},
		{"a child's create leaves the parent's DataLength alone", int64(parent.DataLength), int64(len("parent data"))},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("got %d, want %d", c.got, c.want)
			}
		})
	}
	t.Run("the Stat create returns is the node's Stat", func(t *testing.T) {
		if got := f.stat("/parent/child"); got != st {
			t.Errorf("Exists = %+v, create returned %+v", got, st)
		}
	})
	t.Run("a node that is not ephemeral has EphemeralOwner 0", func(t *testing.T) {
		if o := parent.EphemeralOwner; o != 0 {
			t.Errorf("EphemeralOwner = %#x", o)
		}
	})
	t.Run("NumChildren counts direct children only", func(t *testing.T) {
		f := newFixture(t)
		f.create("/a", "")
		f.create("/a/b", "")
		f.create("/a/c", "")
		f.create("/a/b/d", "")
		if n := f.stat("/a").NumChildren; n != 2 {
			t.Errorf("NumChildren = %d, want 2", n)
		}
		if n := f.stat("/").NumChildren; n != 2 {
			t.Errorf("root NumChildren = %d, want 2 (/a and /zookeeper)", n)
		}
	})
}

func TestCreateErrors(t *testing.T) {
	const maxData = 64
	setup := func(t *testing.T) *fixture {
		f := newFixture(t, tree.WithMaxDataSize(maxData))
		f.openSession(1)
		f.create("/a", "")
		f.create("/a/b", "")
		f.must(ephemeralTxn("/eph", 1))
		return f
	}
	tests := []struct {
		name string
		txn  tree.Txn
		want error
	}{
		{"creating an existing node is NodeExists", createTxn("/a", "", wire.ModePersistent), wire.ErrNodeExists},
		{"creating the root is NodeExists", createTxn("/", "", wire.ModePersistent), wire.ErrNodeExists},
		{"creating the root as a container is NodeExists", createTxn("/", "", wire.ModeContainer), wire.ErrNodeExists},
		{"an existing node is NodeExists whatever the new mode", ephemeralTxn("/a/b", 1), wire.ErrNodeExists},
		{"creating under a missing parent is NoNode", createTxn("/missing/child", "", wire.ModePersistent), wire.ErrNoNode},
		{"creating under a missing grandparent is NoNode", createTxn("/missing/deeper/child", "", wire.ModePersistent), wire.ErrNoNode},
		{"a sequential create under a missing parent is NoNode", createTxn("/missing/", "", wire.ModePersistentSequential), wire.ErrNoNode},
		{"an ephemeral cannot have children", createTxn("/eph/child", "", wire.ModePersistent), wire.ErrNoChildrenForEphemerals},
		{"an ephemeral cannot have sequential children either", createTxn("/eph/c-", "", wire.ModePersistentSequential), wire.ErrNoChildrenForEphemerals},
		{"an ephemeral cannot have ephemeral children", ephemeralTxn("/eph/child", 1), wire.ErrNoChildrenForEphemerals},
		{"data over the limit is refused", createTxn("/big", strings.Repeat("x", maxData+1), wire.ModePersistent), wire.ErrDataTooLarge},
		{"an ephemeral for an unknown session is SessionExpired", ephemeralTxn("/e2", 2), wire.ErrSessionExpired},
		{"an ephemeral for session 0 is SessionExpired", ephemeralTxn("/e2", 0), wire.ErrSessionExpired},
		{"an ephemeral-sequential for an unknown session is SessionExpired",
			tree.Txn{Type: wire.OpCreate, Path: "/a/e-", Mode: wire.ModeEphemeralSequential, Session: 2}, wire.ErrSessionExpired},
		{"an unknown create mode is BadArguments", createTxn("/m", "", wire.CreateMode(7)), wire.ErrBadArguments},
		{"a negative create mode is BadArguments", createTxn("/m", "", wire.CreateMode(-1)), wire.ErrBadArguments},
		{"a TTL node needs a ttl", ttlTxn("/t", wire.ModePersistentWithTTL, 0), wire.ErrBadArguments},
		{"a negative ttl is BadArguments", ttlTxn("/t", wire.ModePersistentWithTTL, -5), wire.ErrBadArguments},
		{"a ttl over MaxTTL is BadArguments", ttlTxn("/t", wire.ModePersistentWithTTL, tree.MaxTTL+1), wire.ErrBadArguments},
		{"a sequential-TTL node needs a ttl", ttlTxn("/t-", wire.ModePersistentSequentialWithTTL, 0), wire.ErrBadArguments},
		{"a ttl on a persistent node is BadArguments", ttlTxn("/t", wire.ModePersistent, 1000), wire.ErrBadArguments},
		{"a ttl on an ephemeral node is BadArguments", tree.Txn{Type: wire.OpCreate, Path: "/t", Mode: wire.ModeEphemeral, Session: 1, TTL: 1000}, wire.ErrBadArguments},
		{"a ttl on a container is BadArguments", ttlTxn("/t", wire.ModeContainer, 1000), wire.ErrBadArguments},
		{"a ttl on a persistent-sequential node is BadArguments", ttlTxn("/t-", wire.ModePersistentSequential, 1000), wire.ErrBadArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := setup(t).mustFail(tt.txn, tt.want)
			if res.Path != "" {
				t.Errorf("failed create returned path %q", res.Path)
			}
		})
	}
	t.Run("data exactly at the limit is accepted", func(t *testing.T) {
		f := setup(t)
		f.must(createTxn("/big", strings.Repeat("x", maxData), wire.ModePersistent))
		if st := f.stat("/big"); st.DataLength != maxData {
			t.Errorf("DataLength = %d", st.DataLength)
		}
	})
	t.Run("the default data limit is 1 MiB", func(t *testing.T) {
		f := newFixture(t)
		if f.tr.MaxDataSize() != 1<<20 {
			t.Fatalf("MaxDataSize = %d", f.tr.MaxDataSize())
		}
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/ok", Data: make([]byte, 1<<20)})
		f.mustFail(tree.Txn{Type: wire.OpCreate, Path: "/big", Data: make([]byte, 1<<20+1)}, wire.ErrDataTooLarge)
	})
	t.Run("a ttl of exactly MaxTTL is accepted", func(t *testing.T) {
		setup(t).must(ttlTxn("/t", wire.ModePersistentWithTTL, tree.MaxTTL))
	})
}

// badPaths are paths ZooKeeper refuses for any op, with why.
var badPaths = []struct{ why, path string }{
	{"an empty path", ""},
	{"a relative path", "a"},
	{"a relative path with a slash", "a/b"},
	{"a trailing slash", "/a/"},
	{"an empty segment", "/a//b"},
	{"a double slash", "//"},
	{"a '.' segment", "/a/."},
	{"a '..' segment", "/a/.."},
	{"a leading '.' segment", "/./a"},
	{"a NUL character", "/a\x00b"},
	{"a control character \\x01", "/a\x01"},
	{"a control character \\x1f", "/\x1f"},
	{"DEL, \\u007f", "/a\u007f"},
	{"a C1 control character, \\u0085", "/a\u0085"},
	{"a private-use character, \\uf000", "/a\uf000"},
	{"a specials-block character, \\ufff0", "/a\ufff0"},
	{"the non-character \\uffff", "/a\uffff"},
	{"invalid UTF-8", "/a\xff"},
}

func TestPathValidation(t *testing.T) {
	setup := func(t *testing.T) *fixture {
		f := newFixture(t)
		f.create("/a", "")
		f.create("/a/b", "")
		return f
	}
	for _, bp := range badPaths {
		t.Run("create refuses "+bp.why, func(t *testing.T) {
			setup(t).mustFail(createTxn(bp.path, "", wire.ModePersistent), wire.ErrBadArguments)
		})
		t.Run("delete refuses "+bp.why, func(t *testing.T) {
			setup(t).mustFail(deleteTxn(bp.path, -1), wire.ErrBadArguments)
		})
		t.Run("setData refuses "+bp.why, func(t *testing.T) {
			setup(t).mustFail(setTxn(bp.path, "x", -1), wire.ErrBadArguments)
		})
		t.Run("check refuses "+bp.why, func(t *testing.T) {
			setup(t).mustFail(checkTxn(bp.path, -1), wire.ErrBadArguments)
		})
		t.Run("the readers refuse "+bp.why, func(t *testing.T) {
			tr := setup(t).tr
			if _, _, err := tr.Get(bp.path); !errors.Is(err, wire.ErrBadArguments) {
				t.Errorf("Get: %v", err)
			}
			if _, err := tr.Exists(bp.path); !errors.Is(err, wire.ErrBadArguments) {
				t.Errorf("Exists: %v", err)
			}
			if _, _, err := tr.Children(bp.path); !errors.Is(err, wire.ErrBadArguments) {
				t.Errorf("Children: %v", err)
			}
		})
	}
	t.Run("a sequential create refuses an empty segment before the prefix", func(t *testing.T) {
		setup(t).mustFail(createTxn("/a//", "", wire.ModePersistentSequential), wire.ErrBadArguments)
	})
	t.Run("a sequential create refuses a control character in the prefix", func(t *testing.T) {
		setup(t).mustFail(createTxn("/a/x\x01-", "", wire.ModePersistentSequential), wire.ErrBadArguments)
	})
	t.Run("names may hold dots, spaces and non-ASCII letters", func(t *testing.T) {
		f := setup(t)
		for _, p := range []string{"/a/.hidden", "/a/...", "/a/v1.2", "/a/with space", "/a/zürich", "/a/日本"} {
			f.must(createTxn(p, "", wire.ModePersistent))
		}
	})
}
