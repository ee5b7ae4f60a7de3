package wire

// SnapshotRequest is the body of a snapshot request (OpSnapshot): a
// member's whole state, taken at one index and fetched in chunks.
//
// ID 0 asks the member to take a new snapshot: it catches up with the
// leader first, so that the snapshot holds every write acknowledged before
// the request, then writes its state aside and answers
// with the snapshot's ID, its description and its first chunk. A request
// with that ID then asks for the chunk at Offset (the bytes received so
// far; a chunk may be asked for again). Release ends the snapshot before
// its last chunk; the member ends one by itself once its last chunk was
// sent, and one nobody asked a chunk of for a minute.
type SnapshotRequest struct {
	ID      int64
	Offset  int64
	Release bool
}

// SnapshotChunk answers a snapshot request: the snapshot's description, the
// same in every chunk, and a chunk of its bytes.
type SnapshotChunk struct {
	ID       int64
	Member   int64    // the member that took it
	Index    int64    // the raft index (the zxid) of the state
	Size     int64    // bytes of the whole snapshot
	Sum      []byte   // their SHA-256
	Znodes   int64    // in the tree, the root included
	Sessions int64    // sessions and leases
	Members  []Member // the cluster's membership as the member knew it then
	Offset   int64    // where Data begins in the snapshot
	Data     []byte   // at most the chunk size; empty past the end
	// Shards (optional) are a sharded cluster's groups besides the meta
	// group, whose states follow the meta group's in the snapshot, in
	// this order; Index, Znodes and Sessions are then the meta group's.
	Shards []SnapshotShard
}

// SnapshotShard is one shard's state in a snapshot of a sharded cluster.
type SnapshotShard struct {
	Group  int64
	Index  int64 // of its own log
	Znodes int64
	Size   int64 // bytes of its state
}

const (
	snapshotRequestFields = 3
	snapshotChunkFields   = 10
)

func (enc *encoder) snapshotRequest(r *SnapshotRequest) {
	enc.array(snapshotRequestFields)
	enc.int(r.ID)
	enc.int(r.Offset)
	enc.bool(r.Release)
}

func (dec *decoder) snapshotRequest() SnapshotRequest {
	n := dec.array(snapshotRequestFields)
	r := SnapshotRequest{ID: dec.int64(), Offset: dec.int64(), Release: dec.bool()}
	dec.skip(n - snapshotRequestFields)
	return r
}

func (enc *encoder) snapshotChunk(c *SnapshotChunk) {
	if len(c.Shards) > 0 {
		enc.array(snapshotChunkFields + 1)
	} else {
		enc.array(snapshotChunkFields)
	}
	enc.int(c.ID)
	enc.int(c.Member)
	enc.int(c.Index)
	enc.int(c.Size)
	enc.bytes(c.Sum)
	enc.int(c.Znodes)
	enc.int(c.Sessions)
	enc.members(c.Members)
	enc.int(c.Offset)
	enc.bytes(c.Data)
	if len(c.Shards) > 0 {
		enc.array(len(c.Shards))
		for _, s := range c.Shards {
			enc.array(4)
			enc.int(s.Group)
			enc.int(s.Index)
			enc.int(s.Znodes)
			enc.int(s.Size)
		}
	}
}

// members are a list of members, each [id, peerAddr, learner].
func (enc *encoder) members(ms []Member) {
	enc.array(len(ms))
	for _, m := range ms {
		enc.array(3)
		enc.int(m.ID)
		enc.str(m.Addr)
		enc.bool(m.Learner)
	}
}

func (dec *decoder) members() []Member {
	var ms []Member
	n := dec.array(0)
	for i := 0; i < n && dec.err == nil; i++ {
		m := dec.array(3)
		ms = append(ms, Member{ID: dec.int64(), Addr: dec.str(), Learner: dec.bool()})
		dec.skip(m - 3)
	}
	return ms
}

func (dec *decoder) snapshotChunk() SnapshotChunk {
	n := dec.array(snapshotChunkFields)
	c := SnapshotChunk{ID: dec.int64(), Member: dec.int64(), Index: dec.int64(), Size: dec.int64(), Sum: dec.bytes(),
		Znodes: dec.int64(), Sessions: dec.int64()}
	c.Members = dec.members()
	c.Offset, c.Data = dec.int64(), dec.bytes()
	read := snapshotChunkFields
	if n > read && dec.err == nil {
		shards := dec.array(0)
		for i := 0; i < shards && dec.err == nil; i++ {
			m := dec.array(4)
			c.Shards = append(c.Shards, SnapshotShard{Group: dec.int64(), Index: dec.int64(), Znodes: dec.int64(), Size: dec.int64()})
			dec.skip(m - 4)
		}
		read++
	}
	dec.skip(n - read)
	return c
}
