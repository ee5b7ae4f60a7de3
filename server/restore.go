package server

import (
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/snapfile"
	"github.com/arbor-coord/arbor/tree"
)

// Disaster recovery, for operators (docs/reliability.md): a new cluster
// from a backup file (Restore, arbord --restore), from the data of a
// survivor (Config.ForceNewCluster, arbord --force-new-cluster), and what a
// stopped member's data holds, to choose that survivor (ReadState, arbord
// --print-state).

// StoreState is what a member's data directory holds (raftnode.StoreState).
type StoreState = raftnode.StoreState

// ReadState reads what the data directory dir of a stopped member holds.
func ReadState(dir string) (StoreState, error) { return raftnode.ReadState(dir) }

// Restore makes cfg.DataDir the data directory of member cfg.ID of a new
// cluster whose members are cfg.Peers (cfg.ID alone when empty), holding
// the state in the backup file at path: its tree, sessions, leases and
// lock history, at the backup's zxid plus bump; the new cluster's log, and
// so its zxids, begin after that. A bump past every zxid the old cluster
// reached keeps the new cluster from handing out again a zxid the old one
// did (as a fencing token, or a client's last zxid); etcd's restore has
// --bump-revision for the same. Each member of the new cluster is
// restored from the same file with the same peers and bump; or one is,
// alone, and the others are added to it.
//
// Restore reads the whole file and checks it (its checksum, then the
// tree's structure and digest) before it writes anything, and the data
// directory must not exist or be empty: a file that is cut short,
// damaged or of another version is refused with nothing written.
func Restore(path string, bump uint64, cfg Config) (snapfile.Header, error) {
	cfg.setDefaults()
	var h snapfile.Header
	peers := cfg.Peers
	if len(peers) == 0 {
		peers = map[uint64]string{cfg.ID: cfg.PeerAddr}
	}
	if _, ok := peers[cfg.ID]; !ok {
		return h, fmt.Errorf("--peers does not name this member (%d)", cfg.ID)
	}
	f, err := os.Open(path)
	if err != nil {
		return h, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return h, err
	}
	h, whole, err := snapfile.Read(f, fi.Size())
	if err != nil {
		return h, fmt.Errorf("%s: %w", path, err)
	}
	// A sharded cluster's: the meta group's state, then each shard's.
	state := io.NewSectionReader(whole, 0, h.MetaSize())
	var groups []raftnode.RestoredGroup
	at := h.MetaSize()
	for _, sh := range h.Shards {
		data := io.NewSectionReader(whole, at, sh.Size)
		at += sh.Size
		_, snap, err := tree.RestoreWith(data, tree.WithMaxDataSize(cfg.MaxDataSize), tree.WithGroup(sh.Group))
		if err != nil {
			return h, fmt.Errorf("%s: the checksum matches, but shard %d's state does not read: %w", path, sh.Group, err)
		}
		if int64(snap.Znodes) != sh.Znodes {
			return h, fmt.Errorf("%s: the header counts %d znodes in shard %d, its state holds %d", path, sh.Znodes, sh.Group, snap.Znodes)
		}
		if h.Index+bump < h.Index || sh.Index+bump < sh.Index {
			return h, fmt.Errorf("a bump of %d past zxid %d overflows", bump, max(h.Index, sh.Index))
		}
		groups = append(groups, raftnode.RestoredGroup{Group: sh.Group, Index: sh.Index + bump, Data: io.NewSectionReader(whole, at-sh.Size, sh.Size)})
	}
	t, snap, err := tree.RestoreWith(state, tree.WithMaxDataSize(cfg.MaxDataSize))
	if err != nil {
		return h, fmt.Errorf("%s: the checksum matches, but the state does not read: %w", path, err)
	}
	if m, ok := t.ShardMap(); ok {
		for _, sh := range m.Shards {
			if sh.Group != shardmap.MetaGroup && !slices.ContainsFunc(h.Shards, func(s snapfile.Shard) bool { return s.Group == sh.Group }) {
				return h, fmt.Errorf("%s: its map names shard %d, whose state it does not hold", path, sh.Group)
			}
		}
	}
	// The header counts what the state held when it was written: a
	// backup from before the system nodes gains them at restore.
	if int64(snap.Znodes) != h.Znodes {
		return h, fmt.Errorf("%s: the header counts %d znodes, the state holds %d", path, h.Znodes, snap.Znodes)
	}
	if _, err := state.Seek(0, io.SeekStart); err != nil {
		return h, err
	}
	if h.Index+bump < h.Index {
		return h, fmt.Errorf("a bump of %d past zxid %d overflows", bump, h.Index)
	}
	if err := raftnode.RestoreStore(cfg.DataDir, h.Index+bump, peers, state, groups...); err != nil {
		return h, fmt.Errorf("restore into %s: %w", cfg.DataDir, err)
	}
	return h, nil
}
