package tree_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

const (
	fuzzMaxData = 64 // small, so DataTooLarge comes up, but over zkCli's limits (see genLimits)
	fuzzMaxTxns = 64
)

// FuzzApply decodes the input into txns (see txnGen), applies each to a
// Tree and to the reference model, and compares the results, the events and
// everything the tree exposes after every txn. The digest must move exactly
// when the state does, and a snapshot of the final state must restore to
// the same digest and contents. Views taken on the way (Freeze) must
// still write the snapshot of the moment they were taken when released.
func FuzzApply(f *testing.F) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 0))
		b := make([]byte, 40+int(seed)*60)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		gen, more := byteGen(b, fuzzMaxData)
		tr := tree.New(tree.WithMaxDataSize(fuzzMaxData))
		m := newModel(fuzzMaxData)
		var views frozenViews
		defer views.check(t, 0)
		for zxid := int64(1); zxid <= fuzzMaxTxns && more(); zxid++ {
			views.step(t, tr, zxid)
			txn := gen.txn()
			reapAt := []int64{gen.now, gen.now + 20, gen.now + 70}
			before := m.dump(reapAt)
			digest := tr.Digest()

			res, events := tr.Apply(zxid, &txn)
			events = append([]tree.Event(nil), events...)
			want, wantEvents := m.apply(zxid, &txn)
			gen.observe(events)

			compareResult(t, zxid, &txn, res, want)
			if !reflect.DeepEqual(typesAndPaths(events), typesAndPaths(wantEvents)) {
				t.Fatalf("txn %d %s: events %v, model %v", zxid, describe(txn), events, wantEvents)
			}
			checkEventNodes(t, tr, events)
			got := dumpTreeAt(tr, reapAt)
			after := m.dump(reapAt)
			after.Digest = got.Digest
			if diff := after.diff(got); diff != "" {
				t.Fatalf("txn %d %s: tree differs from the model (model -> tree):\n%s", zxid, describe(txn), diff)
			}
			before.Digest = digest
			unchanged := before.diff(after) == ""
			if unchanged != (digest == tr.Digest()) {
				t.Fatalf("txn %d %s: state unchanged %v but digest %#x -> %#x", zxid, describe(txn), unchanged, digest, tr.Digest())
			}
		}

		var buf bytes.Buffer
		if err := tr.WriteSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		snap := bytes.Clone(buf.Bytes())
		restored, err := tree.Restore(&buf, tree.WithMaxDataSize(fuzzMaxData))
		if err != nil {
			t.Fatalf("Restore: %v", err)
		}
		reapAt := []int64{gen.now, gen.now + 20, gen.now + 70}
		if diff := dumpTreeAt(tr, reapAt).diff(dumpTreeAt(restored, reapAt)); diff != "" {
			t.Fatalf("restored tree differs:\n%s", diff)
		}
		if restored.Zxid() != tr.Zxid() {
			t.Fatalf("restored zxid %d, want %d", restored.Zxid(), tr.Zxid())
		}
		if again := snapshotBytes(t, restored); !bytes.Equal(again, snap) {
			t.Fatal("the restored tree's snapshot differs from the snapshot it came from")
		}
	})
}

func compareResult(t *testing.T, zxid int64, txn *tree.Txn, res tree.Result, want modelResult) {
	t.Helper()
	if code := wire.CodeOf(res.Err); code != want.code {
		t.Fatalf("txn %d %s: code %v (%v), model says %v", zxid, describe(*txn), code, res.Err, want.code)
	}
	if res.Err != nil && !errors.Is(res.Err, want.code.Err()) {
		t.Fatalf("txn %d %s: %v does not match the sentinel of its code", zxid, describe(*txn), res.Err)
	}
	if res.Path != want.path || res.Stat != want.stat {
		t.Fatalf("txn %d %s: path %q Stat %+v, model says %q %+v", zxid, describe(*txn), res.Path, res.Stat, want.path, want.stat)
	}
	if !reflect.DeepEqual(nilIfEmpty(res.Multi), nilIfEmpty(want.multi)) {
		t.Fatalf("txn %d %s: multi results\n%+v\nmodel says\n%+v", zxid, describe(*txn), res.Multi, want.multi)
	}
}

// FuzzRestore feeds Restore arbitrary bytes, seeded with real snapshots: it
// must return a tree or an error matching ErrCorruptSnapshot, never panic,
// and a tree it returns must snapshot and restore to itself.
func FuzzRestore(f *testing.F) {
	for _, snap := range seedSnapshots(f) {
		f.Add(snap)
		f.Add(snap[:len(snap)/2])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := tree.Restore(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, tree.ErrCorruptSnapshot) {
				t.Fatalf("Restore error %v does not match ErrCorruptSnapshot", err)
			}
			return
		}
		again, err := tree.Restore(bytes.NewReader(snapshotBytes(t, tr)))
		if err != nil {
			t.Fatalf("a restored tree's own snapshot does not restore: %v", err)
		}
		if diff := dumpTree(tr).diff(dumpTree(again)); diff != "" {
			t.Fatalf("a restored tree's snapshot restores differently:\n%s", diff)
		}
	})
}

// seedSnapshots returns snapshots of a few small trees.
func seedSnapshots(tb testing.TB) [][]byte {
	var out [][]byte
	out = append(out, snapshotBytes(tb, tree.New()))
	out = append(out, snapshotBytes(tb, kitchenSink(tb, false)))
	q := newFixture(tb)
	q.create("/app", "x")
	q.setQuota("/app", "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=3")
	out = append(out, snapshotBytes(tb, q.tr))
	for seed := range uint64(3) {
		tr, _ := randomTree(rand.New(rand.NewPCG(seed, 7)), 60)
		out = append(out, snapshotBytes(tb, tr))
	}
	return out
}

// FuzzApply's txns must reach what they are meant to: quotas in zkCli's
// own form (the longest limits), nested ones refused, and a member's
// exempt lock-delays. This checks the generator over a few seeds.
func TestTheFuzzersTxnsSetQuotasAsZkCliWritesThem(t *testing.T) {
	var zkCli, refused, exempt int
	for seed := range uint64(200) {
		gen := randGen(rand.New(rand.NewPCG(seed, 3)), fuzzMaxData)
		tr := tree.New(tree.WithMaxDataSize(fuzzMaxData))
		for zxid := int64(1); zxid <= fuzzMaxTxns; zxid++ {
			txn := gen.txn()
			res, events := tr.Apply(zxid, &txn)
			gen.observe(events)
			if res.Err != nil && strings.Contains(res.Err.Error(), "do not nest") {
				refused++
			}
			for _, b := range res.Quota {
				if b.Exempt {
					exempt++
				}
			}
		}
		for _, q := range tr.Quotas() {
			if data, _, _ := tr.Get(quotas.LimitPath(q.Path)); strings.HasPrefix(string(data), "count=-1,bytes=-1=;") {
				zkCli++
			}
		}
	}
	t.Logf("%d quotas in zkCli's form, %d nestings refused, %d exempt breaches", zkCli, refused, exempt)
	if zkCli == 0 || refused == 0 {
		t.Errorf("%d quotas in zkCli's form, %d nestings refused: the generator is off", zkCli, refused)
	}
}
