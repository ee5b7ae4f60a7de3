package tree_test

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/tree"
)

// frozenViews are views of a tree under test, each with the snapshot the
// tree wrote when it was taken.
type frozenViews struct {
	views []*tree.View
	want  [][]byte
}

// step freezes a view of tr before some txns and checks and releases the
// oldest before others, so that views overlap and some outlive many txns.
func (fv *frozenViews) step(t *testing.T, tr *tree.Tree, zxid int64) {
	t.Helper()
	if zxid%4 == 1 {
		fv.views = append(fv.views, tr.Freeze())
		fv.want = append(fv.want, snapshotBytes(t, tr))
	}
	if zxid%6 == 0 {
		fv.check(t, len(fv.views)-1)
	}
}

// check checks the views but the last keep of them, oldest first, and
// releases them.
func (fv *frozenViews) check(t *testing.T, keep int) {
	t.Helper()
	for len(fv.views) > max(keep, 0) {
		var buf bytes.Buffer
		if err := fv.views[0].WriteSnapshot(&buf, nil); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), fv.want[0]) {
			t.Fatalf("a view taken at zxid %d writes another snapshot than the tree wrote then", fv.views[0].Zxid())
		}
		fv.views[0].Release()
		fv.views, fv.want = fv.views[1:], fv.want[1:]
	}
}

// TestViewsLeaveTheTreeAsItWould applies the same txns to two trees, one
// with views taken and released on the way: the results, the events and
// the final snapshots are the same, and each view keeps its snapshot.
func TestViewsLeaveTheTreeAsItWould(t *testing.T) {
	for seed := range uint64(4) {
		plain := tree.New(tree.WithMaxDataSize(randMaxData))
		viewed := tree.New(tree.WithMaxDataSize(randMaxData))
		gen := randGen(rand.New(rand.NewPCG(seed, 11)), randMaxData)
		var views frozenViews
		for zxid := int64(1); zxid <= 3000; zxid++ {
			views.step(t, viewed, zxid)
			txn := gen.txn()
			want, wantEvents := plain.Apply(zxid, &txn)
			wantEvents = append([]tree.Event(nil), wantEvents...)
			got, events := viewed.Apply(zxid, &txn)
			events = append([]tree.Event(nil), events...)
			gen.observe(events)
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(events, wantEvents) {
				t.Fatalf("txn %d %s: %+v %+v, without views %+v %+v", zxid, describe(txn), got, events, want, wantEvents)
			}
		}
		views.check(t, 0)
		if !bytes.Equal(snapshotBytes(t, viewed), snapshotBytes(t, plain)) {
			t.Fatalf("seed %d: the tree that had views snapshots differently", seed)
		}
	}
}

// TestViewIsWrittenWhileTheTreeChanges writes a view's snapshot on
// another goroutine while txns go on (run with -race).
func TestViewIsWrittenWhileTheTreeChanges(t *testing.T) {
	tr, _ := randomTree(rand.New(rand.NewPCG(9, 9)), 2000)
	want := snapshotBytes(t, tr)
	v := tr.Freeze()
	got := make(chan []byte, 1)
	go func() {
		defer v.Release()
		var buf bytes.Buffer
		if err := v.WriteSnapshot(&buf, nil); err != nil {
			t.Error(err)
		}
		got <- buf.Bytes()
	}()
	gen := randGen(rand.New(rand.NewPCG(9, 10)), randMaxData)
	from := tr.Zxid() + 1
	for zxid := from; zxid < from+2000; zxid++ {
		txn := gen.txn()
		_, events := tr.Apply(zxid, &txn)
		gen.observe(events)
	}
	if !bytes.Equal(<-got, want) {
		t.Fatal("the view's snapshot changed while the tree did")
	}
	if _, err := tree.Restore(bytes.NewReader(snapshotBytes(t, tr)), tree.WithMaxDataSize(randMaxData)); err != nil {
		t.Fatalf("the tree after the view: %v", err)
	}
}
