package tree

import (
	"strings"

	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/wire"
)

// A tree holds the partition map (docs/scale-out.md) as the data of
// /zookeeper/shards: in the meta group (0) it is the cluster's map, which
// TxnSetShardMap and the meta group's own splits write; in any other
// shard's group it is the map as that shard last changed it (its split),
// which no request reaches, as /zookeeper routes to the meta group. Either
// way the tree takes a client's write only for a path its map says its
// group serves, and refuses the others with WrongShard, the same on every
// replica: a write routed by a stale map never applies in the wrong shard.

// setShardMap applies a TxnSetShardMap: /zookeeper/shards is made with
// txn.Data, or its data becomes txn.Data, as a create or a setData by the
// cluster would (the events fire, the Stat moves).
func (t *Tree) setShardMap(zxid int64, txn *Txn) (wire.Stat, error) {
	m, err := shardmap.Decode(txn.Data)
	if err != nil {
		return wire.Stat{}, wire.Errorf(wire.CodeBadArguments, "%v", err)
	}
	n := t.lookup(wire.ShardsPath)
	switch {
	case n == nil && txn.Version != -1:
		return wire.Stat{}, wire.ErrNoNode
	case n != nil && txn.Version != n.version:
		return wire.Stat{}, wire.ErrBadVersion
	}
	if err := t.checkSpread(m); err != nil {
		return wire.Stat{}, err
	}
	return t.writeShardMap(zxid, m, txn.Data, txn.Time)
}

// checkSpread refuses (BadArguments) next, a map to replace the tree's,
// if it would spread over several shards the subtree of a quota the tree
// holds (shardmap's Spreads): a quota counts in one shard. The first such
// quota in byte order is named, the same on every replica.
func (t *Tree) checkSpread(next *shardmap.Map) error {
	cur, first := t.shardMap(), ""
	for p := range t.quotas {
		if next.Spreads(p) && !cur.Spreads(p) && (first == "" || p < first) {
			first = p
		}
	}
	if first != "" {
		return wire.Errorf(wire.CodeBadArguments, "the quota on %s counts a subtree this change would spread over several shards, where each counts its own part: delete it first, or set quotas below it", first)
	}
	return nil
}

// splitShard applies a TxnSplit: the tree's group, which must be the
// split's (a shardmap.SplitSpec in txn.Data), hands the keys from its At
// on, in the range that holds them, to the new group Into
// (shardmap.Map.Split), and the tree's map says so. Nothing else changes here: the server seeds the
// new group's replicas with this tree as of the split (raftnode's
// SeedGroup), and each side then serves only its own keys.
func (t *Tree) splitShard(zxid int64, txn *Txn) (wire.Stat, error) {
	sp, err := shardmap.DecodeSplit(txn.Data)
	if err != nil {
		return wire.Stat{}, wire.Errorf(wire.CodeBadArguments, "%v", err)
	}
	if sp.Group != t.group {
		return wire.Stat{}, wire.Errorf(wire.CodeBadArguments, "a split of shard %d proposed to shard %d", sp.Group, t.group)
	}
	cur := t.shardMap()
	if s := cur.Group(t.group); s == nil || !s.Holds(sp.At) {
		return wire.Stat{}, wire.Errorf(wire.CodeWrongShard, "shard %d does not hold %s", t.group, sp.At)
	}
	next, err := cur.Split(sp.Group, sp.At, sp.Into)
	if err != nil {
		return wire.Stat{}, wire.Errorf(wire.CodeBadArguments, "%v", err)
	}
	if err := t.checkSpread(next); err != nil {
		return wire.Stat{}, err
	}
	next.Version = 0 // the node's mzxid says it
	data, err := next.Encode()
	if err != nil {
		return wire.Stat{}, err
	}
	return t.writeShardMap(zxid, next, data, txn.Time)
}

// stub applies a TxnStub: the ancestors a shard's nodes need, made as
// the cluster, each only if the tree lacks it and does not serve it.
func (t *Tree) stub(zxid int64, txn *Txn) error {
	for _, op := range txn.Ops {
		if t.Serves(op.Path, false) {
			return wire.Errorf(wire.CodeBadArguments, "shard %d serves %s: it is no stub", t.group, op.Path)
		}
	}
	cluster := []wire.Identity{{Scheme: SuperScheme, ID: "cluster"}}
	for _, op := range txn.Ops {
		if t.lookup(op.Path) != nil {
			continue
		}
		if _, _, err := t.create(zxid, &Txn{Type: wire.OpCreate, Path: op.Path, ACL: op.ACL, Time: txn.Time}, cluster); err != nil {
			return err
		}
	}
	return nil
}

// writeShardMap makes m, encoded as data, the tree's map: the data of
// /zookeeper/shards, made if missing (readable by anyone).
func (t *Tree) writeShardMap(zxid int64, m *shardmap.Map, data []byte, time int64) (wire.Stat, error) {
	if err := t.checkData(data); err != nil {
		return wire.Stat{}, err
	}
	n := t.lookup(wire.ShardsPath)
	var stat wire.Stat
	if n == nil {
		cluster := []wire.Identity{{Scheme: SuperScheme, ID: "cluster"}}
		var err error
		if _, stat, err = t.create(zxid, &Txn{Type: wire.OpCreate, Path: wire.ShardsPath, Data: data, ACL: wire.ReadACL, Time: time}, cluster); err != nil {
			return wire.Stat{}, err
		}
	} else {
		stat = t.stat(t.writeData(zxid, wire.ShardsPath, n, data, time))
	}
	t.shards = m
	return stat, nil
}

// shardMap is the tree's map: the map of a cluster never sharded while it
// holds none.
func (t *Tree) shardMap() *shardmap.Map {
	if t.shards == nil {
		return shardmap.New()
	}
	return t.shards
}

// loadShardMap reads the tree's map from its node, after a restore.
func (t *Tree) loadShardMap() error {
	t.shards = nil
	n := t.lookup(wire.ShardsPath)
	if n == nil {
		return nil
	}
	m, err := shardmap.Decode(n.data)
	if err != nil {
		return err
	}
	t.shards = m
	return nil
}

// ShardMap is the partition map the tree holds, and whether it holds one
// (a cluster never sharded does not). The caller must not change it.
func (t *Tree) ShardMap() (*shardmap.Map, bool) { return t.shards, t.shards != nil }

// Serves reports whether the tree's group serves path (with sequential,
// a sequential create's prefix) by the map it holds: every path while it
// holds none.
func (t *Tree) Serves(path string, sequential bool) bool {
	return t.shards == nil || t.shards.Serves(t.group, path, sequential)
}

// ServesEvent reports whether ev, an event of the last txn applied, is one
// the group's clients should see: an event of a path the group serves, or
// a change of the children of a path of no shard ("/", a partitioned
// parent), whose children the shards share. An event of a node the tree
// holds only on the way to its own (a partitioned parent's stub, made or
// gone) is not: the shard that serves the node sends its own.
func (t *Tree) ServesEvent(ev Event) bool {
	if t.Serves(ev.Path, false) {
		return true
	}
	_, meta := t.shards.KeyOf(ev.Path)
	return meta && ev.Type == wire.EventNodeChildrenChanged
}

// checkWrite refuses a client's write that this tree must not take: one
// of /zookeeper/shards or below it (BadArguments: the partition map is the
// cluster's to write, and a map its members could not read would strand
// every request), a sequential create directly under a partitioned parent
// (BadArguments), and one of a path its group does not serve
// (WrongShard).
func (t *Tree) checkWrite(txn *Txn) error {
	switch txn.Type {
	case wire.OpCreate, wire.OpDelete, wire.OpSetData, wire.OpSetACL, wire.OpCheck:
	default:
		return nil
	}
	if txn.Type != wire.OpCheck && (txn.Path == wire.ShardsPath || strings.HasPrefix(txn.Path, wire.ShardsPath+"/")) {
		return wire.Errorf(wire.CodeBadArguments, "%s is the cluster's partition map: change it with arbor shards", wire.ShardsPath)
	}
	if t.shards == nil {
		return nil // a tree of a cluster never sharded serves every path
	}
	sequential := txn.Type == wire.OpCreate && txn.Mode.IsSequential()
	if wire.ValidatePath(txn.Path, sequential) != nil {
		return nil // the op refuses it, as it would on any tree
	}
	if sequential {
		if err := t.shards.CheckSequential(txn.Path); err != nil {
			return err
		}
	}
	if !t.Serves(txn.Path, sequential) {
		return wire.Errorf(wire.CodeWrongShard, "shard %d does not serve %s", t.group, txn.Path)
	}
	if (txn.Type == wire.OpSetACL || txn.Type == wire.OpDelete) && len(t.shards.Shards) > 1 {
		// Its children are spread over the shards, each of which holds
		// the parent's ACL as of its first child there (TxnStub).
		if t.shards.IsPartitioned(txn.Path) {
			return wire.Errorf(wire.CodeBadArguments, "%s is a partitioned parent of a sharded cluster: its ACL stays, and it stays", txn.Path)
		}
		if t.shards.IsPartitionedQuota(txn.Path) && t.shards.Spreads(strings.TrimPrefix(txn.Path, wire.QuotaPath)) {
			if txn.Type == wire.OpDelete {
				// Empty here, it may not be in the shards: a delquota,
				// which deletes the directories its quota leaves empty,
				// stops here.
				return wire.Errorf(wire.CodeNotEmpty, "%s holds the quotas of a partitioned parent's children, which are in their shards: it stays", txn.Path)
			}
			return wire.Errorf(wire.CodeBadArguments, "%s holds the quotas of a partitioned parent's children, which are in their shards: its ACL stays", txn.Path)
		}
	}
	return nil
}

// Prune drops the subtrees the tree holds but its group does not serve,
// which a split leaves behind: in the group split, what moved to the new
// shard; in the new shard, seeded with the whole state, everything else;
// and a shard's tree keeps only its part of the map (keepOwnMap).
// It keeps the ways (the system nodes, and the nodes on the way to each
// partitioned parent), whose children it looks at instead. Nothing fires,
// and no Stat of what stays moves: to the cluster's clients nothing
// changed, as the other shard serves what goes. It returns how many nodes
// went.
func (t *Tree) Prune() int {
	if t.shards == nil || len(t.shards.Shards) < 2 {
		return 0
	}
	ways := t.ways()
	before := t.count
	t.pruneUnder("/", ways)
	t.keepOwnMap()
	return before - t.count
}

// keepOwnMap makes the map of a shard's tree the part of it the shard's
// group needs (shardmap's For), in its node's data too, silently, as the
// prune itself is: the node is the meta group's to serve.
func (t *Tree) keepOwnMap() {
	own := t.shards.For(t.group)
	n := t.lookup(wire.ShardsPath)
	if own == t.shards || n == nil {
		return
	}
	data, err := own.Encode()
	if err != nil {
		return // a map encodes, or it could not have been decoded
	}
	n = t.own(wire.ShardsPath, n)
	t.digest -= t.nodeDigest(wire.ShardsPath, n)
	t.dataSize -= nodeSize(wire.ShardsPath, n)
	n.data, n.dataHash = data, hashData(data)
	t.digest += t.nodeDigest(wire.ShardsPath, n)
	t.dataSize += nodeSize(wire.ShardsPath, n)
	t.shards = own
}

// pruneUnder prunes the children of the node at path.
func (t *Tree) pruneUnder(path string, ways map[string]bool) {
	n := t.lookup(path)
	if n == nil {
		return
	}
	var down, gone []string
	for c := range n.children.all {
		p := childPath(path, c.name)
		switch {
		case ways[p]:
			down = append(down, p)
		case !t.Serves(p, false):
			gone = append(gone, p)
		}
	}
	for _, p := range gone {
		t.dropSubtree(p)
	}
	for _, p := range down {
		t.pruneUnder(p, ways)
	}
}

// dropSubtree takes the node at path and all below it out of the tree,
// silently (Prune). Only its parent changes: a view may hold the nodes
// that go, which stay as they are.
func (t *Tree) dropSubtree(path string) {
	parentPath, name := splitPath(path)
	parent := t.own(parentPath, t.lookup(parentPath))
	type at struct {
		path string
		n    *node
	}
	stack := []at{{path, parent.children.get(name)}}
	for len(stack) > 0 {
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for c := range top.n.children.all {
			stack = append(stack, at{childPath(top.path, c.name), c})
		}
		t.count--
		t.dataSize -= nodeSize(top.path, top.n)
		t.digest -= t.nodeDigest(top.path, top.n) // before unindex: the hash covers the ttl
		t.unindex(top.n, top.path)
		t.acls.release(top.n.acl)
		t.chargeQuota(top.path, -1, -int64(len(top.n.data)))
		t.quotaNodeRemoved(top.path)
	}
	removeChild(parent, name)
}

// childPath is the path of parent's child name.
func childPath(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}

// Served is the number of nodes the tree serves and their DataSize: its
// Count and DataSize less what it holds only on the way to its own (a
// shard's root and /zookeeper, a partitioned parent's stub and the way to
// it). Over every group of a cluster, pruned after its splits, these add
// up to the cluster's.
func (t *Tree) Served() (nodes int, size int64) {
	nodes, size = t.count, t.dataSize
	if t.shards == nil || len(t.shards.Shards) < 2 {
		return nodes, size
	}
	ways := t.ways()
	ways["/"] = true
	for p := range ways {
		if n := t.lookup(p); n != nil && !t.Serves(p, false) {
			nodes--
			size -= nodeSize(p, n)
		}
	}
	return nodes, size
}

// ways are the nodes every shard's tree keeps, whoever serves them, but
// the root: the system nodes a tree has from its start, and each
// partitioned parent with its ancestors, and their quotas' likewise, as
// the way to the nodes below them.
func (t *Tree) ways() map[string]bool {
	ways := map[string]bool{wire.ZooKeeperPath: true, wire.QuotaPath: true, wire.ConfigPath: true, wire.ShardsPath: true}
	for _, p := range t.shards.Partitioned {
		for _, p := range []string{p, wire.QuotaPath + p} {
			for ; p != "/" && !ways[p]; p, _ = splitPath(p) {
				ways[p] = true
			}
		}
	}
	return ways
}
