package tree_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

const randMaxData = 256

// randomTxns applies n generated txns to a fresh tree and returns the tree
// and the txns, for replaying them elsewhere.
func randomTree(r *rand.Rand, n int) (*tree.Tree, []tree.Txn) {
	tr := tree.New(tree.WithMaxDataSize(randMaxData))
	gen := randGen(r, randMaxData)
	txns := make([]tree.Txn, n)
	for i := range txns {
		txns[i] = gen.txn()
		_, events := tr.Apply(int64(i+1), &txns[i])
		gen.observe(events)
	}
	return tr, txns
}

// kitchenSink builds a tree with one of everything: sessions with and
// without ephemerals, every create mode, containers and TTL nodes in every
// housekeeping state, nil, empty and binary data, and with big set data at
// and near the 1 MiB limit.
func kitchenSink(tb testing.TB, big bool) *tree.Tree {
	tb.Helper()
	f := newFixture(tb)
	fillKitchenSink(f, big)
	return f.tr
}

// fillKitchenSink applies kitchenSink's txns to f, whose tree may lack
// the system nodes: none of them touches /zookeeper.
func fillKitchenSink(f *fixture, big bool) {
	f.t.Helper()
	f.openSession(1)
	f.openSession(2)
	f.must(tree.Txn{Type: tree.TxnCreateSession, Session: -77, TimeoutMs: 30_000}) // no password, no ephemerals
	f.must(setTxn("/", "root data", -1))
	f.create("/app", "")
	f.create("/app/config", "\x00\x01\x02\xff binary")
	f.must(tree.Txn{Type: wire.OpCreate, Path: "/app/nil"})
	f.must(tree.Txn{Type: wire.OpCreate, Path: "/app/empty", Data: []byte{}})
	f.must(ephemeralTxn("/app/worker-1", 1))
	f.must(ephemeralTxn("/app/worker-2", 2))
	f.create("/locks", "")
	for _, s := range []int64{1, 2, 1} {
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/locks/lock-", Mode: wire.ModeEphemeralSequential, Session: s})
	}
	f.must(createTxn("/locks/", "", wire.ModePersistentSequential))
	f.must(createTxn("/box-never-used", "", wire.ModeContainer))
	f.must(createTxn("/box-full", "", wire.ModeContainer))
	f.create("/box-full/item", "x")
	f.must(createTxn("/box-emptied", "", wire.ModeContainer))
	f.create("/box-emptied/item", "")
	f.must(deleteTxn("/box-emptied/item", -1))
	f.must(ttlTxn("/lease-short", wire.ModePersistentWithTTL, 1))
	f.must(ttlTxn("/lease-long", wire.ModePersistentWithTTL, tree.MaxTTL))
	f.must(ttlTxn("/lease-parent", wire.ModePersistentWithTTL, 2))
	f.create("/lease-parent/child", "")
	f.must(ttlTxn("/locks/ttl-", wire.ModePersistentSequentialWithTTL, 20_000))
	f.must(setTxn("/app/config", "\x00\x01\x02\xff binary, v1", 0))
	f.create("/a", "")
	f.create("/a/b", "")
	f.create("/a/b/c", "deep")
	f.create("/a/zürich", "unicode")
	if big {
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/big", Data: bytes.Repeat([]byte("0123456789abcdef"), tree.DefaultMaxDataSize/16)})
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/big-ish", Data: make([]byte, 300_000)})
	}
}

func TestDeterminism(t *testing.T) {
	t.Run("the same txns applied to two trees give the same results, digests and snapshot bytes", func(t *testing.T) {
		a, txns := randomTree(rand.New(rand.NewPCG(1, 2)), 3000)
		b := tree.New(tree.WithMaxDataSize(randMaxData))
		ref := tree.New(tree.WithMaxDataSize(randMaxData))
		var errs, nodes int
		for i := range txns {
			// Replay on ref alongside b to compare per txn results.
			r1, e1 := b.Apply(int64(i+1), &txns[i])
			e1 = append([]tree.Event(nil), e1...)
			r2, e2 := ref.Apply(int64(i+1), &txns[i])
			if !reflect.DeepEqual(r1, r2) || !reflect.DeepEqual(nilIfEmpty(e1), nilIfEmpty(e2)) {
				t.Fatalf("txn %d: results differ: %+v / %+v", i+1, r1, r2)
			}
			if b.Digest() != ref.Digest() {
				t.Fatalf("txn %d: digests differ", i+1)
			}
			if r1.Err != nil {
				errs++
			}
			nodes = max(nodes, b.Count())
		}
		if a.Digest() != b.Digest() || a.Count() != b.Count() {
			t.Fatalf("digest %#x / %#x, count %d / %d", a.Digest(), b.Digest(), a.Count(), b.Count())
		}
		if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatal("equal trees wrote different snapshots")
		}
		// The generator must make a tree worth comparing.
		if errs < len(txns)/10 || errs > len(txns)*9/10 || nodes < 20 {
			t.Errorf("%d of %d txns failed, at most %d znodes: the generator is off", errs, len(txns), nodes)
		}
		t.Logf("%d txns, %d failed, up to %d znodes, %d at the end", len(txns), errs, nodes, a.Count())
	})
	t.Run("a replica that restores a snapshot and replays the rest of the log catches up exactly", func(t *testing.T) {
		full, txns := randomTree(rand.New(rand.NewPCG(3, 4)), 2000)
		half := tree.New(tree.WithMaxDataSize(randMaxData))
		for i := range txns[:1000] {
			half.Apply(int64(i+1), &txns[i])
		}
		replica, err := tree.Restore(bytes.NewReader(snapshotBytes(t, half)), tree.WithMaxDataSize(randMaxData))
		if err != nil {
			t.Fatal(err)
		}
		for i := 1000; i < len(txns); i++ {
			r1, _ := replica.Apply(int64(i+1), &txns[i])
			r2, _ := half.Apply(int64(i+1), &txns[i])
			if !reflect.DeepEqual(r1, r2) {
				t.Fatalf("txn %d: restored replica got %+v, original %+v", i+1, r1, r2)
			}
		}
		if diff := dumpTree(full).diff(dumpTree(replica)); diff != "" {
			t.Fatalf("replica differs:\n%s", diff)
		}
		if !bytes.Equal(snapshotBytes(t, full), snapshotBytes(t, replica)) {
			t.Fatal("snapshots differ")
		}
	})
}

func TestSnapshotRoundTrip(t *testing.T) {
	random, _ := randomTree(rand.New(rand.NewPCG(5, 6)), 1500)
	trees := []struct {
		name string
		tr   *tree.Tree
	}{
		{"an empty tree", tree.New()},
		{"a tree with every kind of node, session and big data", kitchenSink(t, true)},
		{"a tree built by random txns", random},
	}
	for _, tt := range trees {
		t.Run(tt.name+" round-trips", func(t *testing.T) {
			snap := snapshotBytes(t, tt.tr)
			got, err := tree.Restore(bytes.NewReader(snap), tree.WithMaxDataSize(tt.tr.MaxDataSize()))
			if err != nil {
				t.Fatal(err)
			}
			if diff := dumpTree(tt.tr).diff(dumpTree(got)); diff != "" {
				t.Fatalf("restored tree differs:\n%s", diff)
			}
			if got.Zxid() != tt.tr.Zxid() || got.MaxDataSize() != tt.tr.MaxDataSize() {
				t.Errorf("zxid %d, max data %d; want %d, %d", got.Zxid(), got.MaxDataSize(), tt.tr.Zxid(), tt.tr.MaxDataSize())
			}
			if !bytes.Equal(snapshotBytes(t, got), snap) {
				t.Error("the restored tree writes a different snapshot")
			}
		})
	}
	t.Run("a restored tree behaves as the original under the same txns", func(t *testing.T) {
		orig := kitchenSink(t, false)
		restored, err := tree.Restore(bytes.NewReader(snapshotBytes(t, orig)))
		if err != nil {
			t.Fatal(err)
		}
		zxid := orig.Zxid()
		far := baseTime + 1<<42
		txns := []tree.Txn{
			createTxn("/locks/lock-", "", wire.ModePersistentSequential), // sequence counters
			createTxn("/app/worker-1/x", "", wire.ModePersistent),        // still ephemeral
			closeTxn(1),                     // the ephemeral index
			{Type: tree.TxnReap, Time: far}, // containers and TTLs
			closeTxn(2),
			ephemeralTxn("/e", -77),
			{Type: tree.TxnReap, Time: far},
			setTxn("/app/config", "v2", 1),
		}
		for i := range txns {
			zxid++
			r1, e1 := orig.Apply(zxid, &txns[i])
			e1 = append([]tree.Event(nil), e1...)
			r2, e2 := restored.Apply(zxid, &txns[i])
			if !reflect.DeepEqual(r1, r2) || !reflect.DeepEqual(nilIfEmpty(e1), nilIfEmpty(e2)) {
				t.Fatalf("%s: original %+v %v, restored %+v %v", describe(txns[i]), r1, e1, r2, e2)
			}
		}
		if diff := dumpTree(orig).diff(dumpTree(restored)); diff != "" {
			t.Fatalf("trees differ:\n%s", diff)
		}
	})
}

func TestRestoreCorrupt(t *testing.T) {
	snap := snapshotBytes(t, kitchenSink(t, false))
	restore := func(b []byte) error {
		tr, err := tree.Restore(bytes.NewReader(b))
		if err == nil && tr == nil {
			t.Fatal("Restore returned neither a tree nor an error")
		}
		return err
	}
	if err := restore(snap); err != nil {
		t.Fatalf("the intact snapshot does not restore: %v", err)
	}
	t.Run("every truncation is ErrCorruptSnapshot", func(t *testing.T) {
		for n := range len(snap) {
			if err := restore(snap[:n]); !errors.Is(err, tree.ErrCorruptSnapshot) {
				t.Fatalf("first %d of %d bytes: err = %v", n, len(snap), err)
			}
		}
	})
	t.Run("every single bit flip is ErrCorruptSnapshot", func(t *testing.T) {
		b := bytes.Clone(snap)
		var missed int
		for i := range b {
			for bit := range 8 {
				b[i] ^= 1 << bit
				if err := restore(b); !errors.Is(err, tree.ErrCorruptSnapshot) {
					if missed++; missed <= 10 {
						t.Errorf("bit %d of byte %d (of %d): err = %v", bit, i, len(b), err)
					}
				}
				b[i] ^= 1 << bit
			}
		}
		if missed > 0 {
			t.Errorf("%d of %d bit flips went unnoticed", missed, 8*len(b))
		}
	})
	tests := []struct {
		name string
		b    []byte
	}{
		{"an empty stream", nil},
		{"a stream that is not msgpack", []byte("hello, world")},
		{"another magic", bytes.Replace(snap, []byte("arbor-tree"), []byte("arbor-tref"), 1)},
		{"a huge byte string length", []byte{0x95, 0xaa, 'a', 'r', 'b', 'o', 'r', '-', 't', 'r', 'e', 'e', 0x01, 0x01, 0x01, 0x00, 0x93, 0x01, 0x01, 0xc6, 0xff, 0xff, 0xff, 0xf0}},
		{"a huge znode count", []byte{0x95, 0xaa, 'a', 'r', 'b', 'o', 'r', '-', 't', 'r', 'e', 'e', 0x01, 0x01, 0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is ErrCorruptSnapshot", func(t *testing.T) {
			if err := restore(tt.b); !errors.Is(err, tree.ErrCorruptSnapshot) {
				t.Errorf("err = %v", err)
			}
		})
	}
}

// TestDigest: the digest is a function of the state, so it must move on
// every change and come back when the change is undone.
func TestDigest(t *testing.T) {
	setup := func(t *testing.T) *fixture {
		f := newFixture(t)
		f.openSession(1)
		f.create("/a", "data")
		f.create("/a/b", "")
		f.must(ephemeralTxn("/e", 1))
		f.must(ttlTxn("/lease", wire.ModePersistentWithTTL, 500))
		f.must(createTxn("/box", "", wire.ModeContainer))
		return f
	}
	changes := []struct {
		name string
		txn  tree.Txn
	}{
		{"a persistent create", createTxn("/n", "", wire.ModePersistent)},
		{"an ephemeral create", ephemeralTxn("/n", 1)},
		{"a sequential create", createTxn("/a/s-", "", wire.ModePersistentSequential)},
		{"a container create", createTxn("/n", "", wire.ModeContainer)},
		{"a TTL create", ttlTxn("/n", wire.ModePersistentWithTTL, 5)},
		{"a delete", deleteTxn("/a/b", -1)},
		{"an ephemeral's delete", deleteTxn("/e", -1)},
		{"a setData", setTxn("/a", "other", -1)},
		{"a setData with the same data", setTxn("/a", "data", -1)},
		{"a setData of the root", setTxn("/", "", -1)},
		{"a session's creation", sessionTxn(2)},
		{"a session's close", closeTxn(1)},
		{"a reap", reapTxn(baseTime + 1<<41)},
		{"a multi", multiTxn(checkTxn("/a", 0), createTxn("/n", "", wire.ModePersistent))},
	}
	for _, c := range changes {
		t.Run("the digest moves on "+c.name, func(t *testing.T) {
			f := setup(t)
			d := f.tr.Digest()
			f.must(c.txn)
			if f.tr.Digest() == d {
				t.Error("digest unchanged")
			}
		})
	}
	t.Run("the digest does not move on a check", func(t *testing.T) {
		f := setup(t)
		d := f.tr.Digest()
		f.must(checkTxn("/a", 0))
		if f.tr.Digest() != d {
			t.Error("digest moved")
		}
	})
	t.Run("the digest comes back after a failed multi undid its ops", func(t *testing.T) {
		f := setup(t)
		d := f.tr.Digest()
		f.mustFail(multiTxn(
			createTxn("/n", "", wire.ModePersistent),
			setTxn("/a", "x", -1),
			deleteTxn("/e", -1),
			deleteTxn("/lease", -1),
			createTxn("/box/x", "", wire.ModePersistent),
			checkTxn("/a", 0),
		), wire.ErrBadVersion)
		if f.tr.Digest() != d {
			t.Error("digest did not come back")
		}
	})
	t.Run("the digest comes back when a session opens and closes", func(t *testing.T) {
		f := setup(t)
		d := f.tr.Digest()
		f.openSession(9)
		f.must(closeTxn(9))
		if f.tr.Digest() != d {
			t.Error("digest did not come back")
		}
	})

	// Trees that differ in one detail only must have different digests.
	pairs := []struct {
		name string
		a, b tree.Txn
	}{
		{"TTL nodes with different ttls", ttlTxn("/n", wire.ModePersistentWithTTL, 100), ttlTxn("/n", wire.ModePersistentWithTTL, 200)},
		{"a container and a persistent node", createTxn("/n", "", wire.ModeContainer), createTxn("/n", "", wire.ModePersistent)},
		{"a TTL node and a persistent node", ttlTxn("/n", wire.ModePersistentWithTTL, 100), createTxn("/n", "", wire.ModePersistent)},
		{"ephemerals of different sessions", ephemeralTxn("/n", 1), ephemeralTxn("/n", 2)},
		{"nodes with different data of one length", createTxn("/n", "abc", wire.ModePersistent), createTxn("/n", "abd", wire.ModePersistent)},
		{"nodes with different names", createTxn("/n", "", wire.ModePersistent), createTxn("/m", "", wire.ModePersistent)},
		{"nodes created at different times", tree.Txn{Type: wire.OpCreate, Path: "/n", Time: 1}, tree.Txn{Type: wire.OpCreate, Path: "/n", Time: 2}},
		{"sessions with different passwords", tree.Txn{Type: tree.TxnCreateSession, Session: 3, Password: []byte("x")}, tree.Txn{Type: tree.TxnCreateSession, Session: 3, Password: []byte("y")}},
		{"sessions with different timeouts", tree.Txn{Type: tree.TxnCreateSession, Session: 3, TimeoutMs: 1}, tree.Txn{Type: tree.TxnCreateSession, Session: 3, TimeoutMs: 2}},
	}
	for _, p := range pairs {
		t.Run("the digest tells apart "+p.name, func(t *testing.T) {
			fa, fb := newFixture(t), newFixture(t)
			for _, f := range []*fixture{fa, fb} {
				f.openSession(1)
				f.openSession(2)
			}
			fa.must(p.a)
			fb.must(p.b)
			if fa.tr.Digest() == fb.tr.Digest() {
				t.Error("equal digests")
			}
		})
	}
}

// goldenSnapshotSHA256 is the SHA-256 of pinnedSnapshotTree's snapshot.
const goldenSnapshotSHA256 = "fabf9fa3a3a2ab19eeea2d5952910a87682da0cc6b54d0a7c92721f6de9bd8ca"

// pinnedSnapshotTree is kitchenSink's tree and a node of each encoding the
// kitchen sink lacks: an int16 and a uint8, a lease, an ACL, data in a
// bin16 and a path in a str8.
func pinnedSnapshotTree(t *testing.T) *tree.Tree {
	tr := kitchenSink(t, false)
	for _, txn := range []tree.Txn{
		{Type: tree.TxnCreateSession, Session: -300, TimeoutMs: 200, Password: []byte("pw")}, // int16, uint8
		{Type: tree.TxnCreateSession, Session: 301, Password: []byte("lease"), LeaseTTL: 10_000, LeaseParent: -300, LeaseOwner: "w1", LeaseMaxHold: 60_000},
		{Type: wire.OpCreate, Path: "/secret", Data: []byte("s"), ACL: aliceACL(wire.PermAll)},
		{Type: wire.OpCreate, Path: "/a/a-name-long-enough-for-a-str8-header", Data: bytes.Repeat([]byte{0xab}, 300)},
	} {
		zxid := tr.Zxid() + 1
		txn.Time = timeOf(zxid)
		if res, _ := tr.Apply(zxid, &txn); res.Err != nil {
			t.Fatalf("%s: %v", txn.Path, res.Err)
		}
	}
	return tr
}

// TestSnapshotBytesArePinned: a fixed tree writes fixed bytes, so that a
// change to the snapshot's encoding is a deliberate edit here rather than
// a side effect (members restore each other's snapshots, and equal trees
// must give equal bytes).
func TestSnapshotBytesArePinned(t *testing.T) {
	b := snapshotBytes(t, pinnedSnapshotTree(t))
	if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != goldenSnapshotSHA256 {
		t.Errorf("the snapshot's SHA-256 is %s, want %s (%d bytes)", got, goldenSnapshotSHA256, len(b))
	}
	if _, err := tree.Restore(bytes.NewReader(b)); err != nil {
		t.Fatalf("Restore of the pinned snapshot: %v", err)
	}
}

// An annex comes back as it was written, beside the same tree; a snapshot
// without one is written as before (version 3, the same bytes).
func TestSnapshotAnnex(t *testing.T) {
	tr := kitchenSink(t, false)
	plain := snapshotBytes(t, tr)
	var none bytes.Buffer
	if err := tr.WriteSnapshotWith(&none, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(none.Bytes(), plain) {
		t.Fatal("a snapshot with an empty annex differs from one without")
	}
	annex := []byte(`{"lock history":[1,2,3]}`)
	var with bytes.Buffer
	if err := tr.WriteSnapshotWith(&with, annex); err != nil {
		t.Fatal(err)
	}
	got, snap, err := tree.RestoreWith(bytes.NewReader(with.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap.Annex, annex) || snap.Znodes != tr.Count() {
		t.Fatalf("annex %q, %d znodes; want %q, %d", snap.Annex, snap.Znodes, annex, tr.Count())
	}
	if diff := dumpTree(tr).diff(dumpTree(got)); diff != "" {
		t.Fatalf("restored tree differs:\n%s", diff)
	}
	if _, a, err := tree.RestoreWith(bytes.NewReader(plain)); err != nil || a.Annex != nil {
		t.Fatalf("a snapshot without an annex: annex %q, err %v", a.Annex, err)
	}
	b := with.Bytes()
	for n := range len(b) {
		if _, _, err := tree.RestoreWith(bytes.NewReader(b[:n])); !errors.Is(err, tree.ErrCorruptSnapshot) {
			t.Fatalf("first %d of %d bytes: err = %v", n, len(b), err)
		}
	}
}
