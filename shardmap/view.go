package shardmap

import "fmt"

// View is a map in a form for people and JSON (arbor shards, GET
// /api/v1/shards): ranges readable, and no nil lists.
type View struct {
	Version     uint64      `json:"version"`
	Partitioned []string    `json:"partitioned"`
	Shards      []ShardView `json:"shards"`
}

// ShardView is one shard of View.
type ShardView struct {
	Group    uint64      `json:"group"`
	Ranges   []RangeView `json:"ranges"`
	Replicas []uint64    `json:"replicas"` // empty: every member
	Epoch    [2]uint64   `json:"epoch"`    // range, replicas
	Leader   uint64      `json:"leader,omitempty"`
	// SplitFrom is the group the shard is being split off, until it runs.
	SplitFrom uint64 `json:"split_from,omitempty"`
}

// RangeView is a range: of top-level names ("space": "/"), or of the
// hashes of a partitioned parent's children, as 16 hex digits; an empty
// start is the space's first key, an empty end has no end.
type RangeView struct {
	Space string `json:"space"`
	Start string `json:"start"`
	End   string `json:"end"`
}

// View is m in its readable form.
func (m *Map) View() View {
	v := View{Version: m.Version, Partitioned: append([]string{}, m.Partitioned...), Shards: []ShardView{}}
	for _, s := range m.Shards {
		sv := ShardView{Group: s.Group, Ranges: []RangeView{}, Replicas: append([]uint64{}, s.Replicas...),
			Epoch: [2]uint64{s.Epoch.Range, s.Epoch.Replicas}, Leader: s.Leader, SplitFrom: s.SplitFrom}
		for _, r := range s.Ranges {
			sv.Ranges = append(sv.Ranges, viewRange(r))
		}
		v.Shards = append(v.Shards, sv)
	}
	return v
}

func viewRange(r Range) RangeView {
	if r.Space == "" {
		return RangeView{Space: "/", Start: r.Start, End: r.End}
	}
	hex := func(k string) string {
		if k == "" {
			return ""
		}
		return fmt.Sprintf("%x", k)
	}
	return RangeView{Space: r.Space, Start: hex(r.Start), End: hex(r.End)}
}
