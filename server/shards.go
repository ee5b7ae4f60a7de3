package server

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// The partition map (docs/scale-out.md) lives in the meta group as the
// data of /zookeeper/shards, which only tree.TxnSetShardMap writes: a
// change is read, made and proposed at the version read, so two changes
// at once cannot both apply. A cluster whose map was never changed has no
// node, and its map is shardmap.New(): one shard, the meta group.

// featureShardMap, in a member's card, says that the member applies
// tree.TxnSetShardMap. A member of an older version would refuse the txn
// that the others apply, and its tree would part from theirs: the map
// changes only once every member says it knows it.
const featureShardMap = "shardmap"

// features are what this member's version knows that a cluster may only
// use once every member knows it (memberCard.Features).
var features = []string{featureShardMap}

// ShardMap is the cluster's partition map as this member has applied it,
// its Version the zxid of the txn that last changed it (0 for none), and
// the version of its node for the next change (-1: none yet).
func (s *Server) ShardMap() (m *shardmap.Map, nodeVersion int32) {
	var st wire.Stat
	s.fsm.read(func(t *tree.Tree) {
		m, _ = t.ShardMap()
		st, _ = t.Exists(wire.ShardsPath)
	})
	if m == nil {
		return shardmap.New(), -1
	}
	m = m.Clone() // the tree's own
	m.Version = uint64(st.Mzxid)
	return m, st.Version
}

// changeShardMap proposes the map that change makes of the current one,
// once every member knows partition maps, and returns the map's node as
// it applied.
func (s *Server) changeShardMap(ctx context.Context, change func(*shardmap.Map) (*shardmap.Map, error)) ([]byte, wire.Stat, error) {
	if err := s.everyMemberKnows(featureShardMap); err != nil {
		return nil, wire.Stat{}, err
	}
	if err := s.node.ReadIndex(ctx); err != nil { // change the map as of now, not as this member last applied it
		return nil, wire.Stat{}, s.writeError(err)
	}
	cur, version := s.ShardMap()
	next, err := change(cur)
	if err != nil {
		return nil, wire.Stat{}, wire.Errorf(wire.CodeBadArguments, "%v", err)
	}
	next.Version = 0 // the node's mzxid says it
	data, err := next.Encode()
	if err != nil {
		return nil, wire.Stat{}, err
	}
	res, err := s.write(ctx, &tree.Txn{Type: tree.TxnSetShardMap, Data: data, Version: version, Time: time.Now().UnixMilli()})
	if err != nil {
		return nil, wire.Stat{}, err
	}
	return data, res.Stat, nil
}

// everyMemberKnows refuses, with an error that names them, while a member
// of the configuration has not said lately (its card, within heardWithin)
// that its version knows feature.
func (s *Server) everyMemberKnows(feature string) error {
	now := time.Now()
	var missing []uint64
	for _, m := range s.node.Members() {
		if m.ID == s.cfg.ID {
			continue
		}
		var h heardCard
		var ok bool
		if s.cards != nil {
			s.cards.mu.Lock()
			h, ok = s.cards.heard[m.ID]
			s.cards.mu.Unlock()
		}
		if !ok || now.Sub(h.at) > heardWithin || !slices.Contains(h.card.Features, feature) {
			missing = append(missing, m.ID)
		}
	}
	if len(missing) > 0 {
		return wire.Errorf(wire.CodeBadArguments, "members %v have not said lately that they know %s (upgrade them, or wait for them to be heard from)", missing, feature)
	}
	return nil
}

// handleShardsAPI registers GET /api/v1/shards (open to every client, as
// the map's node is readable by anyone) and the changes of the map, POST
// /api/v1/shards/partition, split and lead, which need the superuser: an
// operator's acts.
func (s *Server) handleShardsAPI(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/shards", answering(func(context.Context, http.ResponseWriter, *http.Request) (any, error) {
		m, _ := s.ShardMap()
		return m.View(), nil
	}))
	mux.HandleFunc("/api/v1/shards", methodNotAllowed("GET"))
	mux.HandleFunc("POST /api/v1/shards/partition", answering(func(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
		var body struct {
			Parent string `json:"parent"`
		}
		if err := decodeBody(w, r, &body); err != nil {
			return nil, err
		}
		if err := s.mayChangeShardsOverHTTP(r); err != nil {
			return nil, err
		}
		return s.shardView(s.changeShardMap(ctx, func(m *shardmap.Map) (*shardmap.Map, error) { return m.Partition(body.Parent) }))
	}))
	mux.HandleFunc("/api/v1/shards/partition", methodNotAllowed("POST"))
	mux.HandleFunc("POST /api/v1/shards/split", answering(func(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
		var body struct {
			Parent string `json:"parent"` // "" or "/": the top-level names
			At     string `json:"at"`     // a name, or a hash as 16 hex digits
		}
		if err := decodeBody(w, r, &body); err != nil {
			return nil, err
		}
		if err := s.mayChangeShardsOverHTTP(r); err != nil {
			return nil, err
		}
		at := []byte(body.At)
		if body.Parent != "" && body.Parent != "/" && body.At != "" {
			h, err := strconv.ParseUint(body.At, 16, 64)
			if err != nil {
				return nil, badRequest("at %q is not a hash of 16 hex digits", body.At)
			}
			at = []byte(shardmap.HashKey(h))
		}
		return s.shardView(s.splitShards(ctx, cmp.Or(body.Parent, "/"), at))
	}))
	mux.HandleFunc("/api/v1/shards/split", methodNotAllowed("POST"))
	mux.HandleFunc("POST /api/v1/shards/lead", answering(func(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
		var body struct {
			Group  *uint64 `json:"group"`
			Member uint64  `json:"member"` // 0: back to where the cluster spreads leaderships
		}
		if err := decodeBody(w, r, &body); err != nil {
			return nil, err
		}
		if body.Group == nil {
			return nil, badRequest("group is required")
		}
		if err := s.mayChangeShardsOverHTTP(r); err != nil {
			return nil, err
		}
		return s.shardView(s.leadShard(ctx, *body.Group, body.Member))
	}))
	mux.HandleFunc("/api/v1/shards/lead", methodNotAllowed("POST"))
}

// mayChangeShardsOverHTTP refuses a change of the map to any HTTP client
// but the superuser.
func (s *Server) mayChangeShardsOverHTTP(r *http.Request) error {
	if !super(s.HTTPIdentities(r)) {
		return &apiError{http.StatusForbidden, "changing the shard map over HTTP needs the superuser (--super-digest), logged in or by basic auth"}
	}
	return nil
}

// leadShard makes member the preferred leader of shard group in the map
// (0: none of its own), and returns the map's node as the change left it.
// Every member then prefers it for the group (runGroups), and the group's
// leader hands it the leadership: a move an operator makes stays, as the
// map says where the leadership goes.
func (s *Server) leadShard(ctx context.Context, group, member uint64) ([]byte, wire.Stat, error) {
	if member != 0 && !slices.Contains(voters(s.node.Members()), member) {
		return nil, wire.Stat{}, wire.Errorf(wire.CodeBadArguments, "member %d is not a voter of the cluster: it cannot lead", member)
	}
	return s.changeShardMap(ctx, func(m *shardmap.Map) (*shardmap.Map, error) { return m.Lead(group, member) })
}

// preferredLeader is the member that group's leadership goes to: the
// map's choice, while it is a voter, else for a shard the one the
// cluster's voters take in turn (spreadLeader), and none for the meta
// group.
func (s *Server) preferredLeader(group uint64) uint64 {
	members := s.node.Members()
	m, _ := s.ShardMap()
	if sh := m.Group(group); sh != nil && sh.Leader != 0 && slices.Contains(voters(members), sh.Leader) {
		return sh.Leader
	}
	if group == shardmap.MetaGroup || s.transport == nil {
		return 0
	}
	return spreadLeader(group, members)
}

// preferLeaders gives each of the member's groups its preferred leader,
// after the map changed.
func (s *Server) preferLeaders() {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	for _, g := range append([]*group{s.metaGroup}, s.runningGroups()...) {
		if err := g.node.SetPreferredLeader(ctx, s.preferredLeader(g.id)); err != nil {
			s.log.Info("could not set a group's preferred leader", zap.Uint64("group", g.id), zap.Error(err))
		}
	}
}

// shardView answers a change of the map with the map's node as it left it.
func (s *Server) shardView(data []byte, stat wire.Stat, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	m, err := shardmap.Decode(data)
	if err != nil {
		return nil, err
	}
	m.Version = uint64(stat.Mzxid)
	return m.View(), nil
}
