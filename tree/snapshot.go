package tree

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/arbor-coord/arbor/internal/msgp"
	"github.com/arbor-coord/arbor/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// Snapshot stream layout (msgpack values, one after another):
//
//	header   [magic "arbor-tree", version 3, zxid, znode count, session count, ACL count]
//	sessions [id, timeoutMs, password]                       (count times)
//	         or, for a lease, [id, timeoutMs, password, ttlMs, expires, version, parent, owner, maxUntil]
//	ACLs     [[perms, scheme, id], ...]                      (count times)
//	znodes   [path, data, czxid, mzxid, pzxid, ctime, mtime,
//	          version, cversion, aversion, owner, kind, ttl, acl] (count times, parents first)
//	trailer  [digest, zxid, version]                         (version 2 and 1: [digest, zxid])
//	         or, from version 4, [digest, zxid, version, annex]
//
// Sessions come first so that ephemerals find their owner; each distinct
// ACL other than the open one is written once, sorted, and a znode's acl
// is its position in that list counted from 1 (0 for the open ACL); znodes
// come in pre-order with children sorted by name, so equal trees give
// equal bytes.
//
// Version 1, from before ACLs, has no ACL count, no ACLs and no acl field
// in a znode: every znode of it is open. Version 2 has no leases. Version
// 4 is version 3 with an annex: bytes the layer above keeps beside the
// tree (the server's lock history), opaque to the tree and not covered by
// its digest. A snapshot without an annex is written as version 3, so its
// bytes are what they were. Restore reads all four.

const (
	snapshotMagic   = "arbor-tree"
	snapshotVersion = 3
	annexVersion    = 4 // version 3 with an annex in the trailer
	nodeFields      = 14
	nodeFieldsV1    = 13
)

// ErrCorruptSnapshot is returned by Restore for a stream that is not a
// well-formed snapshot or whose digest does not match its contents.
var ErrCorruptSnapshot = errors.New("tree: corrupt snapshot")

// WriteSnapshot writes the whole state to w.
func (t *Tree) WriteSnapshot(w io.Writer) error { return t.WriteSnapshotWith(w, nil) }

// WriteSnapshotWith writes the whole state to w with annex, which
// RestoreWith gives back (Restored.Annex).
func (t *Tree) WriteSnapshotWith(w io.Writer, annex []byte) error {
	return t.view().WriteSnapshot(w, annex)
}

// WriteSnapshot writes the state the view holds to w, as the tree's
// WriteSnapshotWith wrote it when the view was taken.
func (v *View) WriteSnapshot(w io.Writer, annex []byte) error {
	version := int64(snapshotVersion)
	if len(annex) > 0 {
		version = annexVersion
	}
	sw := snapWriter{w: w, buf: make([]byte, 0, snapChunk+4<<10)}
	sw.array(6)
	sw.str(snapshotMagic)
	sw.int(version)
	sw.int(v.zxid)
	sw.int(int64(v.count))
	sw.int(int64(len(v.sessions)))
	sw.int(int64(len(v.acls)))
	for _, s := range v.sessions {
		if l := s.Lease; l != nil {
			sw.array(9)
		} else {
			sw.array(3)
		}
		sw.int(s.ID)
		sw.int(int64(s.TimeoutMs))
		sw.bytes(s.Password)
		if l := s.Lease; l != nil {
			sw.int(l.TTLMs)
			sw.int(l.Expires)
			sw.int(l.Version)
			sw.int(l.Parent)
			sw.str(l.Owner)
			sw.int(l.MaxUntil)
		}
	}
	for _, acl := range v.acls {
		sw.array(len(acl))
		for _, a := range acl {
			sw.array(3)
			sw.int(int64(a.Perms))
			sw.str(a.Scheme)
			sw.str(a.ID)
		}
	}
	sw.path = append(sw.path, '/')
	v.writeNode(&sw, v.root)
	if len(annex) > 0 {
		sw.array(4)
	} else {
		sw.array(3)
	}
	sw.uint(v.digest)
	sw.int(v.zxid)  // again, as the digest does not cover the header's zxid
	sw.int(version) // nor its version
	if len(annex) > 0 {
		sw.bytes(annex)
	}
	sw.flush()
	return sw.err
}

// writeNode writes n, whose path is sw.path, and its subtree.
func (v *View) writeNode(sw *snapWriter, n *node) {
	sw.array(nodeFields)
	sw.strBytes(sw.path)
	sw.bytes(n.data)
	var ttl int64
	if n.kind == kindTTL {
		ttl = v.ttls[string(sw.path)]
	}
	var acl int
	if i := n.acl.index(); i != 0 {
		acl = v.positions[i]
	}
	for _, v := range [...]int64{n.czxid, n.mzxid, n.pzxid, n.ctime, n.mtime,
		int64(n.version), int64(n.cversion), int64(n.aversion), v.owner(n), int64(n.kind), ttl, int64(acl)} {
		sw.int(v)
	}
	if len(sw.buf) >= snapChunk {
		sw.flush()
	}
	if n.children.len() == 0 || sw.err != nil {
		return
	}
	prefix := len(sw.path)
	if prefix > 1 {
		sw.path = append(sw.path, '/')
	}
	// n's children, sorted by name, go on top of sw.kids, which the
	// children's own children go on top of in turn.
	start := len(sw.kids)
	for c := range n.children.all {
		sw.kids = append(sw.kids, c)
	}
	end := len(sw.kids)
	slices.SortFunc(sw.kids[start:end], func(a, b *node) int { return strings.Compare(a.name, b.name) })
	for i := start; i < end && sw.err == nil; i++ {
		c := sw.kids[i] // not a slice taken before: a child's children may move sw.kids
		sw.path = append(sw.path, c.name...)
		v.writeNode(sw, c)
		sw.path = sw.path[:len(sw.path)-len(c.name)]
	}
	sw.kids = sw.kids[:start]
	sw.path = sw.path[:prefix]
}

// snapChunk is how much a snapWriter gathers before it writes.
const snapChunk = 64 << 10

// snapWriter appends msgpack values to buf, each in its smallest format as
// msgpack's Encoder writes them (internal/msgp), writes buf to w in chunks
// and keeps the first write error, so that the layout reads as a list.
// Appending by hand rather than through an Encoder makes a snapshot several
// times faster.
type snapWriter struct {
	w    io.Writer
	buf  []byte
	err  error
	path []byte  // the path of the node being written
	kids []*node // the sorted children of the nodes on the path, a stack
}

func (w *snapWriter) flush() {
	if w.err == nil && len(w.buf) > 0 {
		_, w.err = w.w.Write(w.buf)
	}
	w.buf = w.buf[:0]
}

func (w *snapWriter) array(n int)       { w.buf = msgp.AppendArrayLen(w.buf, n) }
func (w *snapWriter) uint(v uint64)     { w.buf = msgp.AppendUint(w.buf, v) }
func (w *snapWriter) int(v int64)       { w.buf = msgp.AppendInt(w.buf, v) }
func (w *snapWriter) str(s string)      { w.buf = msgp.AppendString(w.buf, s) }
func (w *snapWriter) strBytes(s []byte) { w.buf = msgp.AppendStringBytes(w.buf, s) }

// bytes writes b as a bin, or nil as msgpack's nil, as the Encoder does.
func (w *snapWriter) bytes(b []byte) { w.buf = msgp.AppendBytes(w.buf, b) }

// Restore reads a snapshot written by WriteSnapshot and returns the tree it
// holds, with the system nodes a snapshot written before they existed
// lacks (see New). It checks the structure as it goes (parents before children, no
// duplicates, owners that exist) and the digest at the end; any mismatch
// returns an error matching ErrCorruptSnapshot.
func Restore(r io.Reader, opts ...Option) (*Tree, error) {
	t, _, err := RestoreWith(r, opts...)
	return t, err
}

// Restored is what RestoreWith tells of a snapshot besides its tree.
type Restored struct {
	Annex []byte // the snapshot's annex, nil if it has none
	// Znodes is the number of znodes the snapshot held: the tree's Count
	// less the system nodes that a snapshot from before them lacked and
	// the restore added. A header written beside the snapshot (a backup
	// file's) counts these.
	Znodes int
}

// RestoreWith is Restore that also tells what the snapshot held besides
// its tree.
func RestoreWith(r io.Reader, opts ...Option) (*Tree, Restored, error) {
	t := newBare(opts...)
	dec := msgpack.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	annex, err := t.restore(dec)
	if err != nil {
		return nil, Restored{}, fmt.Errorf("%w: %w", ErrCorruptSnapshot, err)
	}
	held := t.count
	// A snapshot from before the system nodes lacks them: they are made
	// after its digest was checked, the same way on every replica.
	t.addSystemNodes()
	t.rebuildQuotas()
	if err := t.loadShardMap(); err != nil {
		return nil, Restored{}, fmt.Errorf("%w: %w", ErrCorruptSnapshot, err)
	}
	return t, Restored{Annex: annex, Znodes: held}, nil
}

func (t *Tree) restore(dec *msgpack.Decoder) (annex []byte, err error) {
	var magic string
	var version, zxid, count, nsessions, nacls int64
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	switch n {
	case 5:
		err = decodeFields(dec, &magic, &version, &zxid, &count, &nsessions)
	case 6:
		err = decodeFields(dec, &magic, &version, &zxid, &count, &nsessions, &nacls)
	default:
		err = fmt.Errorf("array of %d", n)
	}
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if magic != snapshotMagic || !(version == 1 && n == 5 || version >= 2 && version <= annexVersion && n == 6) {
		return nil, fmt.Errorf("header: magic %q version %d with %d fields", magic, version, n)
	}
	t.zxid = zxid
	for i := int64(0); i < nsessions; i++ {
		if err := t.restoreSession(dec, version); err != nil {
			return nil, fmt.Errorf("session %d: %w", i, err)
		}
	}
	for parent := range t.leases {
		if s := t.sessions[parent]; s == nil || s.lease != nil {
			return nil, fmt.Errorf("a lease of %#x, which is not a client session", parent)
		}
	}
	var acls [][]wire.ACL
	for i := int64(0); i < nacls; i++ {
		acl, err := restoreACL(dec)
		if err != nil {
			return nil, fmt.Errorf("ACL %d: %w", i, err)
		}
		acls = append(acls, acl)
	}
	fields := nodeFieldsV1
	if version >= 2 {
		fields = nodeFields
	}
	for i := int64(0); i < count; i++ {
		if err := t.restoreNode(dec, fields, acls, i == 0); err != nil {
			return nil, fmt.Errorf("znode %d: %w", i, err)
		}
	}
	var digest uint64
	var zxid2, version2 int64
	switch {
	case version < 3:
		err = decodeArray(dec, 2, &digest, &zxid2)
		version2 = version
	case version == 3:
		err = decodeArray(dec, 3, &digest, &zxid2, &version2)
	default:
		err = decodeArray(dec, 4, &digest, &zxid2, &version2, &annex)
	}
	if err != nil {
		return nil, fmt.Errorf("trailer: %w", err)
	}
	if version2 != version {
		return nil, fmt.Errorf("version %d in the header, %d in the trailer", version, version2)
	}
	if digest != t.digest {
		return nil, fmt.Errorf("digest %#x, contents hash to %#x", digest, t.digest)
	}
	if zxid2 != zxid {
		return nil, fmt.Errorf("zxid %d in the header, %d in the trailer", zxid, zxid2)
	}
	return annex, nil
}

func (t *Tree) restoreNode(dec *msgpack.Decoder, fields int, acls [][]wire.ACL, isRoot bool) error {
	var path string
	var data []byte
	var f [12]int64
	ptrs := []any{&path, &data, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11]}
	if err := decodeArray(dec, fields, ptrs[:fields]...); err != nil {
		return err
	}
	if f[11] < 0 || f[11] > int64(len(acls)) {
		return fmt.Errorf("%s: ACL %d of %d", path, f[11], len(acls))
	}
	n := &node{
		data: data, dataHash: hashData(data),
		czxid: f[0], mzxid: f[1], pzxid: f[2], ctime: f[3], mtime: f[4],
		version: int32(f[5]), cversion: int32(f[6]), aversion: int32(f[7]),
		kind: uint8(f[9]),
	}
	ttl, owner := f[10], f[8]
	if n.kind > kindTTL || (n.kind == kindEphemeral) != (owner != 0) {
		return fmt.Errorf("%s: kind %d with owner %#x", path, f[9], owner)
	}
	if (n.kind == kindTTL) != (ttl != 0) || ttl < 0 || ttl > MaxTTL {
		return fmt.Errorf("%s: kind %d with ttl %d", path, f[9], ttl) // the digest covers only a TTL node's ttl
	}
	if f[11] > 0 {
		ref, err := t.acls.ref(acls[f[11]-1])
		if err != nil {
			return err
		}
		n.acl = ref
	}
	if isRoot {
		if path != "/" || n.kind != kindPersistent {
			return fmt.Errorf("first znode is %q, not the root", path)
		}
		t.digest -= t.nodeDigest("/", t.root)
		t.dataSize -= nodeSize("/", t.root)
		n.children = nil
		*t.root = *n
		t.digest += t.nodeDigest("/", t.root)
		t.dataSize += nodeSize("/", t.root)
		return nil
	}
	if path == "/" || wire.ValidatePath(path, false) != nil {
		return fmt.Errorf("%q: bad path", path) // checked first: splitPath needs a '/'
	}
	parentPath, name := splitPath(path)
	parent, err := t.find(parentPath)
	if err != nil {
		return fmt.Errorf("%q: no parent", path)
	}
	if parent.children.get(name) != nil || parent.kind == kindEphemeral {
		return fmt.Errorf("%q: duplicate, or child of an ephemeral", path)
	}
	if n.kind == kindEphemeral {
		if _, ok := t.sessions[owner]; !ok {
			return fmt.Errorf("%q: owner %#x is not a session", path, owner)
		}
	}
	n.name = keptName(n.kind, name)
	addChild(parent, n)
	t.count++
	t.dataSize += nodeSize(path, n)
	t.index(n, path, ttl, owner)
	t.digest += t.nodeDigest(path, n)
	return nil
}

// decodeArray reads an array of exactly want values into fields, each an
// *int64, *uint64, *string or *[]byte.
func decodeArray(dec *msgpack.Decoder, want int, fields ...any) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("array of %d, want %d", n, want)
	}
	return decodeFields(dec, fields...)
}

// restoreSession reads one session: a lease's has five or six more
// fields, from version 3 on (and a later version may append more, which
// it skips).
func (t *Tree) restoreSession(dec *msgpack.Decoder, version int64) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != 3 && (n < 8 || version < 3) {
		return fmt.Errorf("array of %d", n)
	}
	var id, timeout int64
	s := &session{}
	if err := decodeFields(dec, &id, &timeout, &s.password); err != nil {
		return err
	}
	s.timeoutMs = int32(timeout)
	if n >= 8 {
		s.lease = &Lease{}
		if err := decodeFields(dec, &s.lease.TTLMs, &s.lease.Expires, &s.lease.Version, &s.lease.Parent, &s.lease.Owner); err != nil {
			return err
		}
		if n >= 9 { // from maximum holds on
			if err := decodeFields(dec, &s.lease.MaxUntil); err != nil {
				return err
			}
		}
		for range n - 9 { // fields a later version appended
			if err := dec.Skip(); err != nil {
				return err
			}
		}
	}
	if _, ok := t.sessions[id]; ok || id == 0 {
		return fmt.Errorf("session id %#x twice, or 0", id)
	}
	t.addSession(id, s)
	return nil
}

// restoreACL reads one ACL of the snapshot's list: a valid, non-empty one
// other than the open ACL, which is never written.
func restoreACL(dec *msgpack.Decoder) ([]wire.ACL, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	if n <= 0 || n > MaxACLEntries {
		return nil, fmt.Errorf("%d entries", n)
	}
	acl := make([]wire.ACL, n)
	for i := range acl {
		var perms int64
		if err := decodeArray(dec, 3, &perms, &acl[i].Scheme, &acl[i].ID); err != nil {
			return nil, err
		}
		acl[i].Perms = wire.Perms(perms)
	}
	if isOpen(acl) {
		return nil, fmt.Errorf("the open ACL")
	}
	return acl, nil
}

// decodeFields reads values into fields, each an *int64, *uint64, *string
// or *[]byte.
func decodeFields(dec *msgpack.Decoder, fields ...any) error {
	var err error
	for _, f := range fields {
		switch p := f.(type) {
		case *int64:
			*p, err = dec.DecodeInt64()
		case *uint64:
			*p, err = dec.DecodeUint64()
		case *string:
			*p, err = dec.DecodeString()
		case *[]byte:
			*p, err = dec.DecodeBytes()
		}
		if err != nil {
			return err
		}
	}
	return nil
}
