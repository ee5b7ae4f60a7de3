package tree_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// baseTime is the clock of the first txn a fixture applies; each later txn
// is one second later, so a txn's time follows from its zxid.
const baseTime = int64(1_700_000_000_000)

func timeOf(zxid int64) int64 { return baseTime + zxid*1000 }

// fixture is a tree plus the zxid counter a replica would feed it.
type fixture struct {
	t    testing.TB
	tr   *tree.Tree
	zxid int64
	log  []tree.Txn // the txns applied, as applied (zxid i+1 is log[i])
}

// systemNodes is the number of nodes a new tree has besides the root:
// /zookeeper, /zookeeper/quota and /zookeeper/config.
const systemNodes = 3

func newFixture(t testing.TB, opts ...tree.Option) *fixture {
	t.Helper()
	return &fixture{t: t, tr: tree.New(opts...)}
}

// apply applies txn at the next zxid. A zero Time becomes timeOf(zxid). The
// events are copied: the tree reuses its slice.
func (f *fixture) apply(txn tree.Txn) (tree.Result, []tree.Event) {
	f.t.Helper()
	f.zxid++
	if txn.Time == 0 {
		txn.Time = timeOf(f.zxid)
	}
	f.log = append(f.log, txn)
	res, ev := f.tr.Apply(f.zxid, &txn)
	if f.tr.Zxid() != f.zxid {
		f.t.Fatalf("Zxid() = %d after applying zxid %d", f.tr.Zxid(), f.zxid)
	}
	return res, slices.Clone(ev)
}

// must applies txn and fails the test if it does not succeed.
func (f *fixture) must(txn tree.Txn) tree.Result {
	f.t.Helper()
	res, _ := f.apply(txn)
	if res.Err != nil {
		f.t.Fatalf("%s: %v", describe(txn), res.Err)
	}
	return res
}

// mustFail applies txn, checks that it fails with want, fires nothing and
// changes nothing, and returns the result.
func (f *fixture) mustFail(txn tree.Txn, want error) tree.Result {
	f.t.Helper()
	before := dumpTree(f.tr)
	res, ev := f.apply(txn)
	if !errors.Is(res.Err, want) {
		f.t.Fatalf("%s: err = %v, want %v", describe(txn), res.Err, want)
	}
	if len(ev) != 0 {
		f.t.Errorf("%s failed but fired %v", describe(txn), ev)
	}
	if diff := before.diff(dumpTree(f.tr)); diff != "" {
		f.t.Errorf("%s failed but changed the tree:\n%s", describe(txn), diff)
	}
	return res
}

func (f *fixture) create(path, data string) string {
	f.t.Helper()
	return f.must(createTxn(path, data, wire.ModePersistent)).Path
}

func (f *fixture) stat(path string) wire.Stat {
	f.t.Helper()
	st, err := f.tr.Exists(path)
	if err != nil {
		f.t.Fatalf("Exists(%q): %v", path, err)
	}
	return st
}

func (f *fixture) exists(path string) bool {
	f.t.Helper()
	_, err := f.tr.Exists(path)
	if err != nil && !errors.Is(err, wire.ErrNoNode) {
		f.t.Fatalf("Exists(%q): %v", path, err)
	}
	return err == nil
}

func (f *fixture) openSession(id int64) {
	f.t.Helper()
	f.must(sessionTxn(id))
}

// Txn builders.

func createTxn(path, data string, mode wire.CreateMode) tree.Txn {
	return tree.Txn{Type: wire.OpCreate, Path: path, Data: []byte(data), Mode: mode}
}

func ephemeralTxn(path string, session int64) tree.Txn {
	return tree.Txn{Type: wire.OpCreate, Path: path, Mode: wire.ModeEphemeral, Session: session}
}

func ttlTxn(path string, mode wire.CreateMode, ttl int64) tree.Txn {
	return tree.Txn{Type: wire.OpCreate, Path: path, Mode: mode, TTL: ttl}
}

func deleteTxn(path string, version int32) tree.Txn {
	return tree.Txn{Type: wire.OpDelete, Path: path, Version: version}
}

func setTxn(path, data string, version int32) tree.Txn {
	return tree.Txn{Type: wire.OpSetData, Path: path, Data: []byte(data), Version: version}
}

func checkTxn(path string, version int32) tree.Txn {
	return tree.Txn{Type: wire.OpCheck, Path: path, Version: version}
}

func multiTxn(ops ...tree.Txn) tree.Txn {
	return tree.Txn{Type: wire.OpMulti, Ops: ops}
}

func sessionTxn(id int64) tree.Txn {
	return tree.Txn{Type: tree.TxnCreateSession, Session: id, TimeoutMs: 10_000, Password: []byte(fmt.Sprintf("pw-%d", id))}
}

func closeTxn(id int64) tree.Txn {
	return tree.Txn{Type: tree.TxnCloseSession, Session: id}
}

func reapTxn(now int64) tree.Txn {
	return tree.Txn{Type: tree.TxnReap, Time: now}
}

func describe(txn tree.Txn) string {
	switch txn.Type {
	case wire.OpMulti:
		parts := make([]string, len(txn.Ops))
		for i, op := range txn.Ops {
			parts[i] = describe(op)
		}
		return "multi(" + strings.Join(parts, ", ") + ")"
	case tree.TxnCreateSession:
		return fmt.Sprintf("createSession(%#x)", txn.Session)
	case tree.TxnCloseSession:
		return fmt.Sprintf("closeSession(%#x)", txn.Session)
	case tree.TxnReap:
		return fmt.Sprintf("reap(%d)", txn.Time)
	case wire.OpCreate:
		return fmt.Sprintf("create(%q, %s)", txn.Path, txn.Mode)
	}
	return fmt.Sprintf("%s(%q, v%d)", txn.Type, txn.Path, txn.Version)
}

func ev(typ wire.EventType, path string) tree.Event { return tree.Event{Type: typ, Path: path} }

func created(path string) tree.Event  { return ev(wire.EventNodeCreated, path) }
func deleted(path string) tree.Event  { return ev(wire.EventNodeDeleted, path) }
func changed(path string) tree.Event  { return ev(wire.EventNodeDataChanged, path) }
func children(path string) tree.Event { return ev(wire.EventNodeChildrenChanged, path) }

// checkEvents compares the types and paths of events (their Data and Stat
// are checked by TestEventsCarryTheNodeRightAfterTheChange and FuzzApply).
func checkEvents(t testing.TB, got []tree.Event, want ...tree.Event) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(typesAndPaths(got), typesAndPaths(want)) {
		t.Errorf("events = %v, want %v", typesAndPaths(got), typesAndPaths(want))
	}
}

// typesAndPaths is events without their Data and Stat.
func typesAndPaths(events []tree.Event) []tree.Event {
	var out []tree.Event
	for _, ev := range events {
		out = append(out, tree.Event{Type: ev.Type, Path: ev.Path})
	}
	return out
}

// checkEventNodes checks that each NodeCreated and NodeDataChanged that is
// its path's last event in the txn carries the node as the tree now has it.
func checkEventNodes(t testing.TB, tr *tree.Tree, events []tree.Event) {
	t.Helper()
	for i, ev := range events {
		if _, name, ok := quotas.Split(ev.Path); ok && name == quotas.StatNode {
			continue // its data changes later without an event, as in ZooKeeper
		}
		if ev.Type != wire.EventNodeCreated && ev.Type != wire.EventNodeDataChanged {
			if ev.Data != nil || ev.Stat != (wire.Stat{}) {
				t.Errorf("%s %s carries data %q and Stat %+v", ev.Type, ev.Path, ev.Data, ev.Stat)
			}
			continue
		}
		last := true
		for _, later := range events[i+1:] {
			if later.Path == ev.Path {
				last = false
			}
		}
		data, st, err := tr.Get(ev.Path)
		if last && (err != nil || !bytes.Equal(data, ev.Data) || st != ev.Stat) {
			t.Errorf("%s %s carries %q %+v; the tree has %q %+v (%v)", ev.Type, ev.Path, ev.Data, ev.Stat, data, st, err)
		}
	}
}

// treeDump is everything a tree exposes through its read API.
type treeDump struct {
	Digest     uint64
	Count      int
	Nodes      map[string]nodeDump
	Sessions   []tree.Session
	Ephemerals map[int64][]string
	Reapable   [][]string // at a few instants, see reapTimes
	Quotas     []tree.Quota
}

type nodeDump struct {
	Data        string
	Stat        wire.Stat
	Children    []string
	Descendants int
	ACL         []wire.ACL
}

// reapTimes are the instants at which dumpTree asks for Reapable: before,
// during and long after the fixtures' txns.
var reapTimes = []int64{0, baseTime + 5_000, baseTime + 50_000, baseTime + 1<<41}

// dumpTree walks the tree through its public API only.
func dumpTree(tr *tree.Tree) treeDump { return dumpTreeAt(tr, reapTimes) }

// dumpTreeAt is dumpTree asking for Reapable at the instants reapAt. Empty
// lists become nil, so that dumps compare with reflect.DeepEqual.
func dumpTreeAt(tr *tree.Tree, reapAt []int64) treeDump {
	d := treeDump{
		Digest:     tr.Digest(),
		Count:      tr.Count(),
		Nodes:      map[string]nodeDump{},
		Sessions:   nilIfEmpty(tr.Sessions()),
		Ephemerals: map[int64][]string{},
		Quotas:     nilIfEmpty(tr.Quotas()),
	}
	var walk func(path string)
	walk = func(path string) {
		data, st, err := tr.Get(path)
		if err != nil {
			panic(fmt.Sprintf("Get(%q) of a listed child: %v", path, err))
		}
		names, cst, err := tr.Children(path)
		if err != nil {
			panic(fmt.Sprintf("Children(%q) of a listed child: %v", path, err))
		}
		if cst != st {
			panic(fmt.Sprintf("Children(%q) Stat %+v, Get Stat %+v", path, cst, st))
		}
		descendants, err := tr.Descendants(path)
		if err != nil {
			panic(fmt.Sprintf("Descendants(%q) of a listed child: %v", path, err))
		}
		acl, ast, err := tr.ACL(path)
		if err != nil || ast != st {
			panic(fmt.Sprintf("ACL(%q) of a listed child: Stat %+v, %v", path, ast, err))
		}
		d.Nodes[path] = nodeDump{Data: string(data), Stat: st, Children: nilIfEmpty(names), Descendants: descendants, ACL: acl}
		for _, name := range names {
			walk(join(path, name))
		}
	}
	walk("/")
	var size int64
	for path, n := range d.Nodes {
		size += int64(len(path) + len(n.Data))
	}
	if tr.DataSize() != size {
		panic(fmt.Sprintf("DataSize() = %d, the nodes' paths and data add up to %d", tr.DataSize(), size))
	}
	for _, s := range d.Sessions {
		d.Ephemerals[s.ID] = nilIfEmpty(tr.Ephemerals(s.ID))
	}
	for _, now := range reapAt {
		d.Reapable = append(d.Reapable, nilIfEmpty(tr.Reapable(now)))
	}
	return d
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func join(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}

// diff describes how b differs from d, or returns "".
func (d treeDump) diff(b treeDump) string {
	var out []string
	if d.Digest != b.Digest {
		out = append(out, fmt.Sprintf("digest %#x -> %#x", d.Digest, b.Digest))
	}
	if d.Count != b.Count {
		out = append(out, fmt.Sprintf("count %d -> %d", d.Count, b.Count))
	}
	for _, p := range sortedPaths(d.Nodes, b.Nodes) {
		x, inD := d.Nodes[p]
		y, inB := b.Nodes[p]
		switch {
		case !inB:
			out = append(out, fmt.Sprintf("%s: gone", p))
		case !inD:
			out = append(out, fmt.Sprintf("%s: appeared", p))
		case !reflect.DeepEqual(x, y):
			out = append(out, fmt.Sprintf("%s: %+v -> %+v", p, x, y))
		}
	}
	if !reflect.DeepEqual(d.Sessions, b.Sessions) {
		out = append(out, fmt.Sprintf("sessions %v -> %v", d.Sessions, b.Sessions))
	}
	if !reflect.DeepEqual(d.Ephemerals, b.Ephemerals) {
		out = append(out, fmt.Sprintf("ephemerals %v -> %v", d.Ephemerals, b.Ephemerals))
	}
	if !reflect.DeepEqual(d.Reapable, b.Reapable) {
		out = append(out, fmt.Sprintf("reapable %v -> %v", d.Reapable, b.Reapable))
	}
	if !reflect.DeepEqual(d.Quotas, b.Quotas) {
		out = append(out, fmt.Sprintf("quotas %+v -> %+v", d.Quotas, b.Quotas))
	}
	return strings.Join(out, "\n")
}

func sortedPaths(a, b map[string]nodeDump) []string {
	var paths []string
	for p := range a {
		paths = append(paths, p)
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

func snapshotBytes(t testing.TB, tr *tree.Tree) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := tr.WriteSnapshot(&buf); err != nil {
		t.Fatalf("WriteSnapshot: %v", err)
	}
	return buf.Bytes()
}
