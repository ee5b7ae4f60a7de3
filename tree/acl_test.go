package tree_test

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// Identities and ACL entries the tests use. aliceID is a well-formed digest
// id; ZooKeeper's digest is checked by the server's tests.
const (
	aliceID = "alice:AAAAAAAAAAAAAAAAAAAAAAAAAAA="
	bobID   = "bob:AAAAAAAAAAAAAAAAAAAAAAAAAAA="
)

var (
	alice    = []wire.Identity{{Scheme: "ip", ID: "10.1.2.3"}, {Scheme: "digest", ID: aliceID}}
	bob      = []wire.Identity{{Scheme: "ip", ID: "192.168.0.9"}, {Scheme: "digest", ID: bobID}}
	superID  = []wire.Identity{{Scheme: "ip", ID: "127.0.0.1"}, {Scheme: tree.SuperScheme, ID: "root"}}
	nobody   []wire.Identity
	everyone = []wire.ACL{{Perms: wire.PermAll, Scheme: "world", ID: "anyone"}}
)

func aliceACL(p wire.Perms) []wire.ACL { return []wire.ACL{{Perms: p, Scheme: "digest", ID: aliceID}} }

// aclFixture has /p with parentACL and its child /p/c with nodeACL, both
// made by the superuser.
func aclFixture(t *testing.T, parentACL, nodeACL []wire.ACL) *fixture {
	t.Helper()
	f := newFixture(t)
	f.must(tree.Txn{Type: wire.OpCreate, Path: "/p", ACL: parentACL, Identities: superID})
	f.must(tree.Txn{Type: wire.OpCreate, Path: "/p/c", Data: []byte("secret"), ACL: nodeACL, Identities: superID})
	return f
}

func as(txn tree.Txn, ids []wire.Identity) tree.Txn {
	txn.Identities = ids
	return txn
}

func TestPermissionChecksFollowZooKeeper(t *testing.T) {
	all := wire.PermAll
	cases := []struct {
		name             string
		parent, node     []wire.ACL
		txn              tree.Txn
		ids              []wire.Identity
		want             error // nil: the txn succeeds
		wantMultiResults []wire.Code
	}{
		{"create needs CREATE on the parent", aliceACL(wire.PermCreate), aliceACL(0), createTxn("/p/new", "", wire.ModePersistent), alice, nil, nil},
		{"create without CREATE on the parent is refused", aliceACL(all &^ wire.PermCreate), aliceACL(all), createTxn("/p/new", "", wire.ModePersistent), alice, wire.ErrNoAuth, nil},
		{"a sequential create needs CREATE too", aliceACL(all &^ wire.PermCreate), aliceACL(all), createTxn("/p/s-", "", wire.ModePersistentSequential), alice, wire.ErrNoAuth, nil},
		{"NoAuth comes before NodeExists", aliceACL(all &^ wire.PermCreate), aliceACL(all), createTxn("/p/c", "", wire.ModePersistent), alice, wire.ErrNoAuth, nil},
		{"NoNode comes before NoAuth", aliceACL(0), aliceACL(0), createTxn("/p/missing/x", "", wire.ModePersistent), alice, wire.ErrNoNode, nil},
		{"delete needs DELETE on the parent", aliceACL(wire.PermDelete), aliceACL(0), deleteTxn("/p/c", -1), alice, nil, nil},
		{"delete without DELETE on the parent is refused, whatever the node grants", aliceACL(all &^ wire.PermDelete), aliceACL(all), deleteTxn("/p/c", -1), alice, wire.ErrNoAuth, nil},
		{"NoAuth comes before BadVersion on delete", aliceACL(0), aliceACL(all), deleteTxn("/p/c", 9), alice, wire.ErrNoAuth, nil},
		{"NoAuth comes before NoNode on delete, as in ZooKeeper", aliceACL(all &^ wire.PermDelete), aliceACL(all), deleteTxn("/p/missing", -1), alice, wire.ErrNoAuth, nil},
		{"a delete under a missing parent is NoNode", aliceACL(0), aliceACL(0), deleteTxn("/p/missing/x", -1), alice, wire.ErrNoNode, nil},
		{"setData needs WRITE on the node", aliceACL(0), aliceACL(wire.PermWrite), setTxn("/p/c", "v", -1), alice, nil, nil},
		{"setData without WRITE is refused", aliceACL(all), aliceACL(all &^ wire.PermWrite), setTxn("/p/c", "v", -1), alice, wire.ErrNoAuth, nil},
		{"NoAuth comes before BadVersion on setData", aliceACL(all), aliceACL(wire.PermRead), setTxn("/p/c", "v", 9), alice, wire.ErrNoAuth, nil},
		{"check in a multi needs READ", aliceACL(0), aliceACL(wire.PermRead), multiTxn(checkTxn("/p/c", 0)), alice, nil, nil},
		{"check in a multi without READ fails the multi", aliceACL(0), aliceACL(all &^ wire.PermRead), multiTxn(checkTxn("/p/c", 0)), alice, wire.ErrNoAuth, []wire.Code{wire.CodeNoAuth}},
		{"a multi fails at its first refused op", everyone, aliceACL(wire.PermRead),
			multiTxn(createTxn("/p/x", "", wire.ModePersistent), setTxn("/p/c", "v", -1), deleteTxn("/p/x", -1)),
			alice, wire.ErrNoAuth, []wire.Code{wire.CodeOK, wire.CodeNoAuth, wire.CodeRuntimeInconsistency}},
		{"setACL needs ADMIN", aliceACL(0), aliceACL(wire.PermAdmin), tree.Txn{Type: wire.OpSetACL, Path: "/p/c", Version: -1, ACL: everyone}, alice, nil, nil},
		{"setACL without ADMIN is refused", aliceACL(all), aliceACL(all &^ wire.PermAdmin), tree.Txn{Type: wire.OpSetACL, Path: "/p/c", Version: -1, ACL: everyone}, alice, wire.ErrNoAuth, nil},
		{"another digest identity is granted nothing", aliceACL(all), aliceACL(all), setTxn("/p/c", "v", -1), bob, wire.ErrNoAuth, nil},
		{"no identities are granted nothing but world's", aliceACL(all), aliceACL(all), setTxn("/p/c", "v", -1), nobody, wire.ErrNoAuth, nil},
		{"no identities are granted world:anyone's", aliceACL(0), everyone, setTxn("/p/c", "v", -1), nobody, nil, nil},
		{"world:anyone grants only its permissions", []wire.ACL{{Perms: wire.PermRead, Scheme: "world", ID: "anyone"}}, everyone, deleteTxn("/p/c", -1), bob, wire.ErrNoAuth, nil},
		{"the entries of a list add up", []wire.ACL{{Perms: wire.PermRead, Scheme: "world", ID: "anyone"}, {Perms: wire.PermDelete, Scheme: "digest", ID: aliceID}}, everyone, deleteTxn("/p/c", -1), alice, nil, nil},
		{"the superuser passes every check", aliceACL(0), aliceACL(0), deleteTxn("/p/c", -1), superID, nil, nil},
		{"the superuser may set any ACL", aliceACL(0), aliceACL(0), tree.Txn{Type: wire.OpSetACL, Path: "/p/c", Version: -1, ACL: everyone}, superID, nil, nil},
		{"an ip entry grants the addresses of its network", aliceACL(0), []wire.ACL{{Perms: wire.PermWrite, Scheme: "ip", ID: "10.0.0.0/8"}}, setTxn("/p/c", "v", -1), alice, nil, nil},
		{"an ip entry refuses other addresses", aliceACL(0), []wire.ACL{{Perms: wire.PermWrite, Scheme: "ip", ID: "10.0.0.0/8"}}, setTxn("/p/c", "v", -1), bob, wire.ErrNoAuth, nil},
		{"an ip entry of one address grants it", aliceACL(0), []wire.ACL{{Perms: wire.PermWrite, Scheme: "ip", ID: "192.168.0.9"}}, setTxn("/p/c", "v", -1), bob, nil, nil},
		{"an x509 entry grants the same subject", aliceACL(0), []wire.ACL{{Perms: wire.PermWrite, Scheme: "x509", ID: "CN=alice"}}, setTxn("/p/c", "v", -1), []wire.Identity{{Scheme: "x509", ID: "CN=alice"}}, nil, nil},
		{"an x509 entry refuses another subject", aliceACL(0), []wire.ACL{{Perms: wire.PermWrite, Scheme: "x509", ID: "CN=alice"}}, setTxn("/p/c", "v", -1), []wire.Identity{{Scheme: "x509", ID: "CN=bob"}}, wire.ErrNoAuth, nil},
		{"an identity of another scheme with the same id is refused", aliceACL(0), []wire.ACL{{Perms: wire.PermWrite, Scheme: "x509", ID: aliceID}}, setTxn("/p/c", "v", -1), alice, wire.ErrNoAuth, nil},
		{"a sasl entry grants the same user", aliceACL(0), []wire.ACL{{Perms: wire.PermWrite, Scheme: "sasl", ID: "alice"}}, setTxn("/p/c", "v", -1), []wire.Identity{{Scheme: "sasl", ID: "alice"}}, nil, nil},
		{"a sasl entry refuses another user", aliceACL(0), []wire.ACL{{Perms: wire.PermWrite, Scheme: "sasl", ID: "alice"}}, setTxn("/p/c", "v", -1), []wire.Identity{{Scheme: "sasl", ID: "bob"}}, wire.ErrNoAuth, nil},
		{"a sasl entry refuses a user named super, whom ZooKeeper lets through", aliceACL(0), []wire.ACL{{Perms: wire.PermWrite, Scheme: "sasl", ID: "alice"}}, setTxn("/p/c", "v", -1), []wire.Identity{{Scheme: "sasl", ID: "super"}}, wire.ErrNoAuth, nil},
		{"a sasl entry refuses a digest identity of the same name", aliceACL(0), []wire.ACL{{Perms: wire.PermWrite, Scheme: "sasl", ID: "alice"}}, setTxn("/p/c", "v", -1), []wire.Identity{{Scheme: "digest", ID: "alice"}}, wire.ErrNoAuth, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := aclFixture(t, tc.parent, tc.node)
			txn := as(tc.txn, tc.ids)
			var res tree.Result
			if tc.want == nil {
				res = f.must(txn)
			} else {
				res = f.mustFail(txn, tc.want)
			}
			if tc.wantMultiResults != nil {
				var got []wire.Code
				for _, r := range res.Multi {
					got = append(got, r.Err)
				}
				if !reflect.DeepEqual(got, tc.wantMultiResults) {
					t.Errorf("multi results %v, want %v", got, tc.wantMultiResults)
				}
			}
		})
	}
}

func TestOldTxnsWithoutACLsFindEverythingOpen(t *testing.T) {
	b, err := os.ReadFile("testdata/txn-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	txn, err := tree.DecodeTxn(b)
	if err != nil {
		t.Fatal(err)
	}
	if txn.Identities != nil || txn.Ops[0].ACL != nil {
		t.Fatalf("a txn from before ACLs decoded with identities %v and ACL %v", txn.Identities, txn.Ops[0].ACL)
	}
	f := newFixture(t)
	f.openSession(7)
	f.create("/app", "v0")
	f.must(setTxn("/app", "v1", -1))
	f.must(txn)
	if acl, _, _ := f.tr.ACL("/m"); !reflect.DeepEqual(acl, wire.OpenACL) {
		t.Errorf("ACL of a node made by an old txn: %v, want the open ACL", acl)
	}
}

func TestSetACL(t *testing.T) {
	restricted := aliceACL(wire.PermRead | wire.PermAdmin)
	t.Run("it checks the aversion, not the version", func(t *testing.T) {
		f := aclFixture(t, everyone, everyone)
		f.must(setTxn("/p/c", "v", -1)) // version 1, aversion 0
		f.mustFail(tree.Txn{Type: wire.OpSetACL, Path: "/p/c", Version: 1, ACL: restricted}, wire.ErrBadVersion)
		f.must(tree.Txn{Type: wire.OpSetACL, Path: "/p/c", Version: 0, ACL: restricted})
	})
	t.Run("version -1 takes any aversion", func(t *testing.T) {
		f := aclFixture(t, everyone, everyone)
		f.must(tree.Txn{Type: wire.OpSetACL, Path: "/p/c", Version: -1, ACL: restricted, Identities: alice})
		f.must(tree.Txn{Type: wire.OpSetACL, Path: "/p/c", Version: -1, ACL: everyone, Identities: alice})
		if st := f.stat("/p/c"); st.Aversion != 2 {
			t.Errorf("aversion %d after two setACLs, want 2", st.Aversion)
		}
	})
	t.Run("it moves the aversion only and fires nothing", func(t *testing.T) {
		f := aclFixture(t, everyone, everyone)
		before := f.stat("/p/c")
		res, events := f.apply(tree.Txn{Type: wire.OpSetACL, Path: "/p/c", Version: -1, ACL: restricted})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		want := before
		want.Aversion++
		if res.Stat != want || f.stat("/p/c") != want {
			t.Errorf("Stat after setACL: reply %+v, tree %+v, want %+v", res.Stat, f.stat("/p/c"), want)
		}
		if len(events) != 0 {
			t.Errorf("setACL fired %v", events)
		}
		acl, st, err := f.tr.ACL("/p/c")
		if err != nil || !reflect.DeepEqual(acl, restricted) || st != want {
			t.Errorf("ACL = %v %+v %v, want %v %+v", acl, st, err, restricted, want)
		}
	})
	t.Run("a missing node is NoNode", func(t *testing.T) {
		f := aclFixture(t, everyone, everyone)
		f.mustFail(tree.Txn{Type: wire.OpSetACL, Path: "/p/none", Version: -1, ACL: restricted}, wire.ErrNoNode)
	})
	t.Run("the root's ACL can be set", func(t *testing.T) {
		f := newFixture(t)
		f.must(tree.Txn{Type: wire.OpSetACL, Path: "/", Version: -1, ACL: restricted})
		f.mustFail(as(createTxn("/x", "", wire.ModePersistent), bob), wire.ErrNoAuth)
	})
}

func TestCheckAndACLReads(t *testing.T) {
	f := aclFixture(t, everyone, aliceACL(wire.PermRead))
	for _, tc := range []struct {
		path string
		ids  []wire.Identity
		perm wire.Perms
		want error
	}{
		{"/p/c", alice, wire.PermRead, nil},
		{"/p/c", bob, wire.PermRead, wire.ErrNoAuth},
		{"/p/c", alice, wire.PermWrite, wire.ErrNoAuth},
		{"/p/c", alice, wire.PermRead | wire.PermAdmin, nil}, // any of the bits
		{"/p/c", superID, wire.PermAdmin, nil},
		{"/p", nobody, wire.PermAll, nil},
		{"/p/none", alice, wire.PermRead, wire.ErrNoNode},
		{"bad", alice, wire.PermRead, wire.ErrBadArguments},
	} {
		if err := f.tr.Check(tc.path, tc.ids, tc.perm); !errors.Is(err, tc.want) && !(err == nil && tc.want == nil) {
			t.Errorf("Check(%s, %v, %s) = %v, want %v", tc.path, tc.ids, tc.perm, err, tc.want)
		}
	}
}

func TestEventsCarryTheNodesACL(t *testing.T) {
	f := aclFixture(t, everyone, everyone)
	secret := aliceACL(wire.PermAll)
	_, events := f.apply(tree.Txn{Type: wire.OpCreate, Path: "/p/s", ACL: secret})
	// NodeCreated of /p/s carries its ACL; NodeChildrenChanged of /p, open, none.
	if len(events) != 2 || !reflect.DeepEqual(events[0].ACL, secret) || events[1].ACL != nil {
		t.Fatalf("create events %+v", events)
	}
	_, events = f.apply(as(setTxn("/p/s", "x", -1), alice))
	if len(events) != 1 || !reflect.DeepEqual(events[0].ACL, secret) {
		t.Fatalf("setData events %+v", events)
	}
	_, events = f.apply(as(deleteTxn("/p/s", -1), alice))
	if len(events) != 2 || !reflect.DeepEqual(events[0].ACL, secret) || events[1].ACL != nil {
		t.Fatalf("delete events %+v", events)
	}
}

func TestDigestCoversACLs(t *testing.T) {
	build := func(acl []wire.ACL) uint64 {
		f := newFixture(t)
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/a", ACL: acl})
		return f.tr.Digest()
	}
	open, explicitOpen := build(nil), build(everyone)
	readOnly := build([]wire.ACL{{Perms: wire.PermRead, Scheme: "world", ID: "anyone"}})
	aliceAll := build(aliceACL(wire.PermAll))
	if open != explicitOpen {
		t.Errorf("the open ACL given or not hashes differently: %#x, %#x", open, explicitOpen)
	}
	if open == readOnly || open == aliceAll || readOnly == aliceAll {
		t.Errorf("different ACLs, equal digests: %#x %#x %#x", open, readOnly, aliceAll)
	}
}

func TestSnapshotKeepsACLs(t *testing.T) {
	build := func(detour bool) *tree.Tree {
		f := newFixture(t)
		f.openSession(1)
		f.must(tree.Txn{Type: wire.OpSetACL, Path: "/", Version: -1, ACL: []wire.ACL{{Perms: wire.PermAll &^ wire.PermDelete, Scheme: "world", ID: "anyone"}}})
		if detour {
			// A list made and dropped before: the table's indexes differ.
			f.must(tree.Txn{Type: wire.OpCreate, Path: "/tmp", ACL: aliceACL(wire.PermCreate)})
		}
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/a", ACL: aliceACL(wire.PermAll)})
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/a/b", ACL: aliceACL(wire.PermAll), Identities: alice})
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/ip", ACL: []wire.ACL{{Perms: wire.PermRead, Scheme: "ip", ID: "10.0.0.0/8"}, {Perms: wire.PermAll, Scheme: "x509", ID: "CN=x"}}})
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/e", Mode: wire.ModeEphemeral, Session: 1, ACL: aliceACL(wire.PermRead)})
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/open"})
		if detour {
			f.must(as(deleteTxn("/tmp", -1), superID))
		}
		return f.tr
	}
	a, b := build(false), build(true)
	snapA := snapshotBytes(t, a)
	restored, err := tree.Restore(bytes.NewReader(snapA))
	if err != nil {
		t.Fatal(err)
	}
	if diff := dumpTree(a).diff(dumpTree(restored)); diff != "" {
		t.Fatalf("restored tree differs:\n%s", diff)
	}
	// b's zxids differ from a's: only the ACLs are compared.
	rb, err := tree.Restore(bytes.NewReader(snapshotBytes(t, b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/a", "/a/b", "/ip", "/e"} {
		x, _, _ := restored.ACL(p)
		y, _, _ := rb.ACL(p)
		if !reflect.DeepEqual(x, y) {
			t.Errorf("ACL of %s: %v and %v", p, x, y)
		}
	}
	if !bytes.Equal(snapshotBytes(t, restored), snapA) {
		t.Error("a restored tree writes different snapshot bytes")
	}
}

func TestRestoreReadsTheSnapshotFormatBeforeACLs(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshot-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tree.Restore(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	data, st, err := tr.Get("/app")
	if err != nil || string(data) != "v2" || st.Version != 1 {
		t.Fatalf("/app: %q %+v %v", data, st, err)
	}
	for _, p := range []string{"/", "/app", "/app/worker", "/box", "/lease"} {
		if acl, _, err := tr.ACL(p); err != nil || !reflect.DeepEqual(acl, wire.OpenACL) {
			t.Errorf("ACL(%s) = %v, %v; want the open ACL", p, acl, err)
		}
	}
	again, err := tree.Restore(bytes.NewReader(snapshotBytes(t, tr)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := dumpTree(tr).diff(dumpTree(again)); diff != "" {
		t.Fatalf("rewritten in the new format, the tree differs:\n%s", diff)
	}
}

func TestRestoreRefusesBadACLSections(t *testing.T) {
	tr := newFixture(t)
	tr.must(tree.Txn{Type: wire.OpCreate, Path: "/a", ACL: aliceACL(wire.PermAll)})
	good := snapshotBytes(t, tr.tr)
	// The ACL's permission byte sits right after the header and the ACL
	// array headers; change the list and the digest no longer matches.
	i := bytes.Index(good, []byte("digest"))
	if i < 2 {
		t.Fatal("no ACL in the snapshot")
	}
	bad := bytes.Clone(good)
	bad[i-2] ^= 0x01 // the permissions fixint before the scheme string header
	if _, err := tree.Restore(bytes.NewReader(bad)); !errors.Is(err, tree.ErrCorruptSnapshot) {
		t.Errorf("Restore of a snapshot with a changed ACL: %v, want ErrCorruptSnapshot", err)
	}
}
