package tree

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"

	"github.com/arbor-coord/arbor/wire"
	"github.com/cespare/xxhash/v2"
)

// Every znode carries an access control list. Most trees have few distinct
// lists, so a node holds only a reference into the tree's aclTable, where
// each distinct list is stored once with a count of the nodes using it
// (ZooKeeper's ReferenceCountedACLCache); a list is dropped when its last
// node goes. Reference 0 is the open ACL, world:anyone:cdrwa, and is not
// stored: a tree that never sees another ACL pays nothing for them.

// aclRef is a node's reference into its tree's aclTable, in three bytes so
// that the node struct stays at 128 bytes: up to maxACLs distinct lists.
type aclRef [3]byte

// maxACLs is the number of distinct non-open ACLs a tree can hold.
const maxACLs = 1<<24 - 1

func (r aclRef) index() uint32 { return uint32(r[0]) | uint32(r[1])<<8 | uint32(r[2])<<16 }

func refOf(i uint32) aclRef { return aclRef{byte(i), byte(i >> 8), byte(i >> 16)} }

// aclEntry is one distinct ACL list.
type aclEntry struct {
	acl  []wire.ACL // immutable: shared with every reader
	key  string     // canonical form, the table's map key
	hash uint64     // covered by the digest of each node using it
	refs int
}

// aclTable interns ACL lists.
type aclTable struct {
	entries []aclEntry // by index; index 0 (the open ACL) is unused
	byKey   map[string]uint32
	free    []uint32 // indexes of dropped entries, reused first
}

func newACLTable() *aclTable {
	return &aclTable{entries: make([]aclEntry, 1), byKey: map[string]uint32{}}
}

// isOpen reports whether acl is the open ACL: empty (as in ZooKeeper, an
// empty list restricts nothing) or exactly world:anyone:cdrwa.
func isOpen(acl []wire.ACL) bool {
	return len(acl) == 0 || (len(acl) == 1 && acl[0] == wire.OpenACL[0])
}

// aclKey is the canonical form of a list: its entries in order.
func aclKey(acl []wire.ACL) string {
	var b []byte
	for _, a := range acl {
		b = binary.AppendUvarint(b, uint64(len(a.Scheme)))
		b = append(b, a.Scheme...)
		b = binary.AppendUvarint(b, uint64(len(a.ID)))
		b = append(b, a.ID...)
		b = binary.LittleEndian.AppendUint32(b, uint32(a.Perms))
	}
	return string(b)
}

// ref returns the reference for acl, adding one use of it. It fails only
// when the table is full.
func (at *aclTable) ref(acl []wire.ACL) (aclRef, error) {
	if isOpen(acl) {
		return aclRef{}, nil
	}
	key := aclKey(acl)
	if i, ok := at.byKey[key]; ok {
		at.entries[i].refs++
		return refOf(i), nil
	}
	var i uint32
	if n := len(at.free); n > 0 {
		i, at.free = at.free[n-1], at.free[:n-1]
	} else {
		if len(at.entries) > maxACLs {
			return aclRef{}, wire.Errorf(wire.CodeInvalidACL, "the tree holds %d distinct ACLs, its limit", maxACLs)
		}
		i = uint32(len(at.entries))
		at.entries = append(at.entries, aclEntry{})
	}
	at.entries[i] = aclEntry{acl: slices.Clone(acl), key: key, hash: xxhash.Sum64String(key), refs: 1}
	at.byKey[key] = i
	return refOf(i), nil
}

// retain adds a use of an existing reference (an undo giving a list back).
func (at *aclTable) retain(r aclRef) {
	if i := r.index(); i != 0 {
		at.entries[i].refs++
	}
}

// release drops one use of r, and the list with its last use.
func (at *aclTable) release(r aclRef) {
	i := r.index()
	if i == 0 {
		return
	}
	e := &at.entries[i]
	if e.refs--; e.refs > 0 {
		return
	}
	delete(at.byKey, e.key)
	*e = aclEntry{}
	at.free = append(at.free, i)
}

// list returns the ACL r refers to; the open ACL for 0. The slice is
// shared and must not be modified.
func (at *aclTable) list(r aclRef) []wire.ACL {
	if i := r.index(); i != 0 {
		return at.entries[i].acl
	}
	return wire.OpenACL
}

// hash is the digest contribution of r: 0 for the open ACL, so that the
// digest of a tree without ACLs is what it was before ACLs existed.
func (at *aclTable) hash(r aclRef) uint64 {
	if i := r.index(); i != 0 {
		return at.entries[i].hash
	}
	return 0
}

// SuperScheme is the scheme of the superuser's identity: a connection that
// has it passes every permission check. Only the server gives it.
const SuperScheme = "super"

// Permitted reports whether one of ids is granted perm by acl. An
// identity of scheme super is granted everything; world:anyone grants
// everyone; digest, x509 and sasl entries grant an identity of the same
// scheme and id; an ip entry grants an ip identity whose address it matches (an
// address, or a network in CIDR form). An empty acl grants everything, as
// in ZooKeeper.
func Permitted(acl []wire.ACL, ids []wire.Identity, perm wire.Perms) bool {
	if len(acl) == 0 {
		return true
	}
	for _, id := range ids {
		if id.Scheme == SuperScheme {
			return true
		}
	}
	for _, a := range acl {
		if a.Perms&perm == 0 {
			continue
		}
		if a.Scheme == "world" && a.ID == "anyone" {
			return true
		}
		for _, id := range ids {
			if id.Scheme == a.Scheme && idMatches(a, id.ID) {
				return true
			}
		}
	}
	return false
}

func idMatches(a wire.ACL, id string) bool {
	switch a.Scheme {
	case "ip":
		return IPMatches(a.ID, id)
	case "digest", "x509", "sasl":
		return a.ID == id
	}
	return false
}

// IPMatches reports whether the address addr is pattern, an IP address or
// a network in CIDR form ("10.0.0.0/8"). An IPv4 address matches whether
// written as IPv4 or as IPv4-mapped IPv6. A pattern or an address that
// does not parse matches nothing.
func IPMatches(pattern, addr string) bool {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	if strings.Contains(pattern, "/") {
		p, err := netip.ParsePrefix(pattern)
		if err != nil {
			return false
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.IsValid() && p.Contains(ip)
	}
	want, err := netip.ParseAddr(pattern)
	return err == nil && want.Unmap() == ip
}

// allowed checks perm on n for ids: nil, or ErrNoAuth.
func (t *Tree) allowed(n *node, ids []wire.Identity, perm wire.Perms) error {
	if n.acl.index() == 0 || Permitted(t.acls.list(n.acl), ids, perm) {
		return nil
	}
	return wire.ErrNoAuth
}

// Check reports whether ids may do what perm names on the node at path:
// nil, ErrNoNode, ErrNoAuth or a path error. The server calls it, under
// the lock that serializes it with Apply, before a read.
func (t *Tree) Check(path string, ids []wire.Identity, perm wire.Perms) error {
	n, err := t.find(path)
	if err != nil {
		return err
	}
	return t.allowed(n, ids, perm)
}

// ACL returns the ACL of the node at path and its Stat. The list is shared
// with the tree and must not be modified; the tree never modifies it
// either.
func (t *Tree) ACL(path string) ([]wire.ACL, wire.Stat, error) {
	n, err := t.find(path)
	if err != nil {
		return nil, wire.Stat{}, err
	}
	return t.acls.list(n.acl), t.stat(n), nil
}

// setACL replaces a node's ACL (ADMIN on the node, and the aversion check).
// As in ZooKeeper it moves the aversion only, and fires no watch.
func (t *Tree) setACL(txn *Txn) (wire.Stat, error) {
	n, err := t.find(txn.Path)
	if err != nil {
		return wire.Stat{}, err
	}
	if err := t.allowed(n, txn.Identities, wire.PermAdmin); err != nil {
		return wire.Stat{}, err
	}
	if txn.Version != -1 && txn.Version != n.aversion {
		return wire.Stat{}, wire.ErrBadVersion
	}
	ref, err := t.acls.ref(txn.ACL)
	if err != nil {
		return wire.Stat{}, err
	}
	n = t.own(txn.Path, n)
	t.digest -= t.nodeDigest(txn.Path, n)
	t.acls.release(n.acl)
	n.acl = ref
	n.aversion++
	t.digest += t.nodeDigest(txn.Path, n)
	return t.stat(n), nil
}

// sorted returns the table's lists sorted by their canonical form, and
// each one's position in that order counted from 1, by table index (0, the
// open ACL, maps to 0): the snapshot's ACL list, the same for equal trees
// whatever their history.
func (at *aclTable) sorted() ([][]wire.ACL, map[uint32]int) {
	idx := make([]uint32, 0, len(at.byKey))
	for _, i := range at.byKey {
		idx = append(idx, i)
	}
	slices.SortFunc(idx, func(a, b uint32) int { return strings.Compare(at.entries[a].key, at.entries[b].key) })
	lists := make([][]wire.ACL, len(idx))
	positions := make(map[uint32]int, len(idx))
	for p, i := range idx {
		lists[p] = at.entries[i].acl
		positions[i] = p + 1
	}
	return lists, positions
}
