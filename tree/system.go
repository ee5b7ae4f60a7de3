package tree

import "github.com/arbor-coord/arbor/wire"

// ZooKeeper's system nodes, which every tree has from the start, in the
// order they are made (parents first). As in ZooKeeper's DataTree
// constructor they are made with no txn: czxid, mzxid and pzxid 0, no
// data, and the root's cversion and pzxid untouched. /zookeeper/config
// is readable by anyone and writable by no one but the superuser
// (ZooKeeper's READ_ACL_UNSAFE, since 3.5); the others are open, so that
// clients can set quotas under /zookeeper/quota.
var systemNodes = [...]struct {
	path string
	acl  []wire.ACL
}{
	{wire.ZooKeeperPath, nil},
	{wire.QuotaPath, nil},
	{wire.ConfigPath, wire.ReadACL},
}

// addSystemNodes makes the system nodes t lacks: all of them in a new
// tree, and those a snapshot from before they existed did not hold. The
// result depends on the tree alone, so every replica that restores the
// same snapshot reaches the same tree and digest. A system node such a
// snapshot held as a client made it keeps its data, Stat and ACL, but an
// ephemeral, container or TTL one becomes persistent, so that it stays
// (and can have children).
func (t *Tree) addSystemNodes() {
	for _, s := range systemNodes {
		parentPath, name := splitPath(s.path)
		parent := t.lookup(parentPath)
		if n := parent.children.get(name); n != nil {
			t.makePersistent(s.path, n)
			continue
		}
		ref, err := t.acls.ref(s.acl)
		if err != nil {
			ref = aclRef{} // a table full of distinct ACLs: the open ACL rather than no node
		}
		n := &node{name: name, dataHash: hashData(nil), acl: ref}
		addChild(parent, n)
		t.count++
		t.digest += t.nodeDigest(s.path, n)
		t.dataSize += nodeSize(s.path, n)
	}
}

// makePersistent makes n, at path, a persistent node.
func (t *Tree) makePersistent(path string, n *node) {
	if n.kind == kindPersistent {
		return
	}
	n = t.own(path, n)
	t.digest -= t.nodeDigest(path, n) // before unindex: the hash covers the ttl and the owner
	t.unindex(n, path)
	n.kind = kindPersistent
	t.digest += t.nodeDigest(path, n)
}

// setConfig applies a TxnSetConfig: /zookeeper/config's data becomes
// txn.Data, with no permission check (the member writes it), as a
// setData does: the version moves, mzxid and mtime are the txn's, and
// NodeDataChanged fires.
func (t *Tree) setConfig(zxid int64, txn *Txn) (wire.Stat, error) {
	n := t.lookup(wire.ConfigPath)
	if n == nil {
		return wire.Stat{}, wire.ErrNoNode // every tree has it; never reached
	}
	if err := t.checkData(txn.Data); err != nil {
		return wire.Stat{}, err
	}
	if txn.Version != -1 && txn.Version != n.version {
		return wire.Stat{}, wire.ErrBadVersion
	}
	n = t.writeData(zxid, wire.ConfigPath, n, txn.Data, txn.Time)
	return t.stat(n), nil
}
