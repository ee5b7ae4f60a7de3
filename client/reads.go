package client

import (
	"context"

	"github.com/arbor-coord/arbor/wire"
)

// Ephemerals returns the paths of this session's ephemeral nodes whose path
// starts with prefix, sorted (ZooKeeper's getEphemerals). The match is on
// the string, not the subtree: "/app" also matches "/app2/x", and "/" gives
// all of them. prefix must be a valid path.
func (c *Client) Ephemerals(ctx context.Context, prefix string) ([]string, error) {
	if err := wire.ValidatePath(prefix, false); err != nil {
		return nil, opError("ephemerals", prefix, err)
	}
	rep, err := c.do(ctx, "ephemerals", prefix, wire.Request{Op: wire.OpGetEphemerals, Path: prefix}, nil)
	if err != nil {
		return nil, err
	}
	return rep.Children, nil
}

// CountDescendants returns the number of nodes below path at any depth,
// path itself not counted (ZooKeeper's getAllChildrenNumber). The server
// walks the subtree to count it.
func (c *Client) CountDescendants(ctx context.Context, path string) (int, error) {
	if err := wire.ValidatePath(path, false); err != nil {
		return 0, opError("count", path, err)
	}
	rep, err := c.do(ctx, "count", path, wire.Request{Op: wire.OpGetAllChildrenNumber, Path: path}, nil)
	if err != nil {
		return 0, err
	}
	return int(rep.Descendants), nil
}
