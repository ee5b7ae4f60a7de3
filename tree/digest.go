package tree

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// The digest is the sum (mod 2^64) of one hash per znode and one per
// session. A sum does not depend on order, so every change updates it in
// O(1): subtract the hash of what goes, add the hash of what comes. Two
// replicas with equal state have equal digests; a replica that diverged
// shows a different digest at the same zxid.

// Digest returns the digest of the whole state.
func (t *Tree) Digest() uint64 { return t.digest }

func hashData(data []byte) uint64 { return xxhash.Sum64(data) }

// nodeDigest hashes a node's path, Stat, kind, the hash of its data, for
// a TTL node its ttl (read from t.ttls, so the index must hold it whenever
// a TTL node's hash is added or removed) and, unless it is open, the hash
// of its ACL (so the digest of a tree without ACLs is what it was before
// they existed). NumChildren is left out: each child has its own hash.
func (t *Tree) nodeDigest(path string, n *node) uint64 {
	var buf [10*8 + 3*4 + 1]byte
	b := buf[:0]
	b = binary.LittleEndian.AppendUint64(b, uint64(n.czxid))
	b = binary.LittleEndian.AppendUint64(b, uint64(n.mzxid))
	b = binary.LittleEndian.AppendUint64(b, uint64(n.pzxid))
	b = binary.LittleEndian.AppendUint64(b, uint64(n.ctime))
	b = binary.LittleEndian.AppendUint64(b, uint64(n.mtime))
	b = binary.LittleEndian.AppendUint64(b, uint64(t.owner(n)))
	b = binary.LittleEndian.AppendUint64(b, n.dataHash)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(n.data)))
	b = binary.LittleEndian.AppendUint32(b, uint32(n.version))
	b = binary.LittleEndian.AppendUint32(b, uint32(n.cversion))
	b = binary.LittleEndian.AppendUint32(b, uint32(n.aversion))
	b = append(b, n.kind)
	if n.kind == kindTTL {
		b = binary.LittleEndian.AppendUint64(b, uint64(t.ttls[path]))
	}
	if n.acl.index() != 0 {
		b = binary.LittleEndian.AppendUint64(b, t.acls.hash(n.acl))
	}
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(path)
	_, _ = d.Write(b)
	return d.Sum64()
}

// digest is session id's part of the tree's digest: its id, timeout and
// password, and for a lease all of its fields.
func (s *session) digest(id int64) uint64 {
	var buf [12]byte
	binary.LittleEndian.PutUint64(buf[:], uint64(id))
	binary.LittleEndian.PutUint32(buf[8:], uint32(s.timeoutMs))
	var d xxhash.Digest
	d.Reset()
	_, _ = d.Write(buf[:])
	_, _ = d.Write(s.password)
	if l := s.lease; l != nil {
		var lb [40]byte
		binary.LittleEndian.PutUint64(lb[:], uint64(l.TTLMs))
		binary.LittleEndian.PutUint64(lb[8:], uint64(l.Expires))
		binary.LittleEndian.PutUint64(lb[16:], uint64(l.Version))
		binary.LittleEndian.PutUint64(lb[24:], uint64(l.Parent))
		binary.LittleEndian.PutUint64(lb[32:], uint64(l.MaxUntil))
		_, _ = d.Write(lb[:])
		_, _ = d.WriteString(l.Owner)
	}
	return d.Sum64()
}
