package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/wire"
)

// Shards returns the cluster's partition map (docs/scale-out.md), as the
// member this client is connected to has applied it: the data of
// /zookeeper/shards, or, before anything changed it, the map of a cluster
// never sharded (one shard, the meta group, with every key). Its Version
// is the zxid of the change that made it; GetW on wire.ShardsPath
// watches for the next.
func (c *Client) Shards(ctx context.Context) (*shardmap.Map, error) {
	data, st, err := c.Get(ctx, wire.ShardsPath)
	if errors.Is(err, ErrNoNode) {
		return shardmap.New(), nil
	}
	if err != nil {
		return nil, err
	}
	return shardMapOf(data, st)
}

// PartitionShards declares parent partitioned: its children then route
// by the hash of their names, each to the shard whose hash range holds
// it, instead of with parent's subtree. Nothing moves at once: parent's
// whole hash range starts in the shard that serves parent's subtree now.
// It needs the rights of a membership change, and every member of a
// version that knows partition maps. It returns the new map.
//
// A change the map refuses (a parent partitioned already, or below one)
// fails with ErrBadArguments and a message that says why: the client
// tries it on the map it reads first, since the member's refusal carries
// only the code.
func (c *Client) PartitionShards(ctx context.Context, parent string) (*shardmap.Map, error) {
	cur, err := c.Shards(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := cur.Partition(parent); err != nil {
		return nil, opError("partition", parent, fmt.Errorf("%w: %v", ErrBadArguments, err))
	}
	rep, err := c.do(ctx, "partition", parent, wire.Request{Op: wire.OpShardPartition, Path: parent}, nil)
	if err != nil {
		return nil, err
	}
	return shardMapOf(rep.Data, rep.Stat)
}

// shardMapOf is the map of /zookeeper/shards' data and Stat.
func shardMapOf(data []byte, st Stat) (*shardmap.Map, error) {
	m, err := shardmap.Decode(data)
	if err != nil {
		return nil, err
	}
	m.Version = uint64(st.Mzxid)
	return m, nil
}

// LeadShards makes member the preferred leader of shard group (0: none of
// its own; the cluster spreads the shards' leaderships over its voters),
// which then takes the group's leadership while it can: a move of the
// leadership an operator asks for, which stays (docs/scale-out.md). It
// needs the rights of a membership change, and returns the new map.
func (c *Client) LeadShards(ctx context.Context, group, member uint64) (*shardmap.Map, error) {
	// What the server would refuse, said here in words (a refusal carries
	// only its code).
	cur, err := c.Shards(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := cur.Lead(group, member); err != nil {
		return nil, opError("lead", fmt.Sprint(group), fmt.Errorf("%w: %v", ErrBadArguments, err))
	}
	if member != 0 {
		members, err := c.Members(ctx)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(members, func(m Member) bool { return uint64(m.ID) == member && !m.Learner }) {
			return nil, opError("lead", fmt.Sprint(group), fmt.Errorf("%w: member %d is not a voter of the cluster", ErrBadArguments, member))
		}
	}
	rep, err := c.do(ctx, "lead", fmt.Sprint(group), wire.Request{Op: wire.OpShardLead, Shard: group, Member: wire.Member{ID: int64(member)}}, nil)
	if err != nil {
		return nil, err
	}
	return shardMapOf(rep.Data, rep.Stat)
}

// SplitShards moves the keys of the shard that holds at, from at on, in
// the range that holds at, to a new shard, whose raft group every member
// then runs (docs/scale-out.md): at is a top-level name (Space ""), or a
// hash of a partitioned parent's children (Space the parent, Key its 8
// bytes, shardmap.HashKey), whose empty Key splits at the middle of the
// meta group's hashes there. It needs the rights of a membership change, and
// every member of a version that knows maps. It returns the new map.
func (c *Client) SplitShards(ctx context.Context, at shardmap.Key) (*shardmap.Map, error) {
	cur, err := c.Shards(ctx)
	if err != nil {
		return nil, err
	}
	group := cur.SplitGroup(at)
	key, err := cur.SplitKey(group, at.Space, at.Key)
	if err == nil {
		_, err = cur.Split(group, key, cur.Shards[len(cur.Shards)-1].Group+1)
	}
	if err != nil {
		return nil, opError("split", cmp.Or(at.Space, at.Key), fmt.Errorf("%w: %v", ErrBadArguments, err))
	}
	space := cmp.Or(at.Space, "/")
	rep, err := c.do(ctx, "split", key.String(), wire.Request{Op: wire.OpShardSplit, Path: space, Data: []byte(key.Key)}, nil)
	if err != nil {
		return nil, err
	}
	return shardMapOf(rep.Data, rep.Stat)
}
