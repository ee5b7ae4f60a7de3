package client

import (
	"context"
	"errors"
	"time"

	"github.com/arbor-coord/arbor/wire"
)

// A subtree is read and changed one node at a time: ZooKeeper has no
// request on a whole subtree but getAllChildrenNumber (CountDescendants).
// Walk and DeleteAll are ZooKeeper's ZKUtil.visitSubTreeDFS and
// deleteRecursive (zkCli's deleteall), with Go's fs.WalkDir for the shape
// of the callback. They are not atomic: other clients may change the
// subtree meanwhile, and each says what it does then.

// WalkFunc is called by Walk for each node: its path, its Stat and the
// names of its children, sorted, which Walk visits next (fn may keep the
// slice but must not change it). An error other than SkipChildren stops
// the walk, and Walk returns it.
type WalkFunc func(path string, stat Stat, children []string) error

// SkipChildren, returned by a WalkFunc, makes Walk go on without the
// node's children.
var SkipChildren = errors.New("skip the children")

// A SubtreeOption changes how Walk and DeleteAll make their requests.
type SubtreeOption func(*subtreeOptions)

type subtreeOptions struct {
	requestTimeout time.Duration
}

// WithRequestTimeout bounds each request of a Walk or DeleteAll by d, on
// top of the call's context. A subtree takes as many requests as it has
// nodes, so a deadline for the whole call would have to guess its size;
// this one still gives up soon when the servers stop answering.
func WithRequestTimeout(d time.Duration) SubtreeOption {
	return func(o *subtreeOptions) { o.requestTimeout = d }
}

func newSubtreeOptions(opts []SubtreeOption) subtreeOptions {
	var o subtreeOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// request returns the context of one request.
func (o subtreeOptions) request(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.requestTimeout > 0 {
		return context.WithTimeout(ctx, o.requestTimeout)
	}
	return context.WithCancel(ctx)
}

// Walk calls fn for path and for every node below it, depth first: a node
// before its children, the children in name order. Each node costs one
// Children request, made just before fn is called for it. A node deleted
// by another client before Walk reaches it is skipped; a missing path is
// an error matching ErrNoNode. A request's error is an *OpError naming the
// node.
func (c *Client) Walk(ctx context.Context, path string, fn WalkFunc, opts ...SubtreeOption) error {
	return c.walk(ctx, path, true, fn, newSubtreeOptions(opts))
}

func (c *Client) walk(ctx context.Context, path string, top bool, fn WalkFunc, o subtreeOptions) error {
	rctx, cancel := o.request(ctx)
	names, st, err := c.Children(rctx, path)
	cancel()
	switch {
	case !top && errors.Is(err, ErrNoNode):
		return nil // deleted since its parent was listed
	case err != nil:
		return err
	}
	switch err := fn(path, st, names); {
	case errors.Is(err, SkipChildren):
		return nil
	case err != nil:
		return err
	}
	for _, name := range names {
		if err := c.walk(ctx, childPath(path, name), false, fn, o); err != nil {
			return err
		}
	}
	return nil
}

// deleteAllRetries is how many times DeleteAll lists a node's children
// again when its delete finds new ones.
const deleteAllRetries = 10

// DeleteAll deletes path and everything below it, deepest nodes first, at
// any version, and returns how many nodes it deleted. A node another
// client deletes meanwhile is fine; one that gets a new child meanwhile is
// listed and emptied again (a few times, then ErrNotEmpty). The root and
// ZooKeeper's system nodes (/zookeeper, /zookeeper/quota and
// /zookeeper/config, see wire.IsSystemNode) always stay: DeleteAll of "/"
// deletes everything else, the quotas under /zookeeper/quota included. A missing path
// is an error matching ErrNoNode. On an error, the nodes counted are
// deleted and the others may or may not be; a request's error is an
// *OpError naming the node.
func (c *Client) DeleteAll(ctx context.Context, path string, opts ...SubtreeOption) (int, error) {
	return c.deleteAll(ctx, path, true, newSubtreeOptions(opts))
}

func (c *Client) deleteAll(ctx context.Context, path string, top bool, o subtreeOptions) (int, error) {
	deleted := 0
	for retries := 0; ; retries++ {
		rctx, cancel := o.request(ctx)
		names, _, err := c.Children(rctx, path)
		cancel()
		switch {
		case !top && errors.Is(err, ErrNoNode):
			return deleted, nil
		case err != nil:
			return deleted, err
		}
		for _, name := range names {
			n, err := c.deleteAll(ctx, childPath(path, name), false, o)
			deleted += n
			if err != nil {
				return deleted, err
			}
		}
		if wire.IsSystemNode(path) {
			return deleted, nil
		}
		rctx, cancel = o.request(ctx)
		err = c.Delete(rctx, path, -1)
		cancel()
		switch {
		case err == nil:
			return deleted + 1, nil
		case errors.Is(err, ErrNoNode):
			return deleted, nil
		case !errors.Is(err, ErrNotEmpty) || retries == deleteAllRetries:
			return deleted, err
		}
		// a child was created meanwhile: delete it too
	}
}

// childPath is the path of child name of parent.
func childPath(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}
