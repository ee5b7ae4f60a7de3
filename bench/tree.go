package bench

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// makeRunNode makes the run's node, Prefix/WORKLOAD-NNNNNNNNNN, and the
// missing ones of Prefix and its ancestors, as containers (which the
// server deletes once they are empty). It returns the nodes it made,
// deepest last.
func makeRunNode(ctx context.Context, c *client.Client, cfg Config) (made []string, run string, err error) {
	// A container that another run empties can go between our steps: try again.
	for range 3 {
		var more []string
		more, err = makeAncestors(ctx, c, cfg.Prefix+"/x", cfg.Timeout)
		made = append(made, more...)
		if err != nil {
			return made, "", err
		}
		rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		run, err = c.Create(rctx, cfg.Prefix+"/"+cfg.Workload+"-", nil, client.PersistentSequential)
		cancel()
		if !errors.Is(err, client.ErrNoNode) {
			break
		}
	}
	return made, run, err
}

// makeAncestors creates the missing ancestors of path as containers and
// returns those it created, shallowest first.
func makeAncestors(ctx context.Context, c *client.Client, path string, timeout time.Duration) ([]string, error) {
	var made []string
	for i := 1; i < len(path); i++ {
		j := strings.IndexByte(path[i:], '/')
		if j < 0 {
			break
		}
		i += j
		rctx, cancel := context.WithTimeout(ctx, timeout)
		_, err := c.Create(rctx, path[:i], nil, client.Container)
		cancel()
		switch {
		case err == nil:
			made = append(made, path[:i])
		case !errors.Is(err, client.ErrNodeExists):
			return made, err
		}
	}
	return made, nil
}

// removeRun deletes the run's node and everything below it, with the
// sessions of pool, then the nodes of made that are empty, deepest first.
func removeRun(ctx context.Context, pool []*client.Client, cfg Config, run string, made []string) error {
	if run != "" {
		if err := removeTree(ctx, pool, run, cfg.Timeout); err != nil {
			return err
		}
	}
	for i := len(made) - 1; i >= 0; i-- {
		rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		err := pool[0].Delete(rctx, made[i], -1)
		cancel()
		switch {
		case errors.Is(err, client.ErrNotEmpty):
			return nil // another run's, or someone's: the server deletes the container when it empties
		case err != nil && !errors.Is(err, client.ErrNoNode):
			return err
		}
	}
	return nil
}

// removeTree deletes root and everything below it, deepest first, in
// multis of up to 500 deletes spread over pool. Nodes deleted by someone
// else meanwhile are fine; a node that has new children (a create that
// was in flight when its connection broke can still be applied) is tried
// again.
func removeTree(ctx context.Context, pool []*client.Client, root string, timeout time.Duration) error {
	var err error
	for range 3 {
		if err = removeOnce(ctx, pool, root, timeout); !errors.Is(err, client.ErrNotEmpty) {
			break
		}
	}
	return err
}

func removeOnce(ctx context.Context, pool []*client.Client, root string, timeout time.Duration) error {
	levels := [][]string{{root}}
	for {
		parents := levels[len(levels)-1]
		children := make([][]string, len(parents))
		err := inParallel(pool, len(parents), func(c *client.Client, i int) error {
			rctx, cancel := context.WithTimeout(ctx, timeout)
			names, _, err := c.Children(rctx, parents[i])
			cancel()
			if err != nil && !errors.Is(err, client.ErrNoNode) {
				return err
			}
			for _, name := range names {
				children[i] = append(children[i], parents[i]+"/"+name)
			}
			return nil
		})
		if err != nil {
			return err
		}
		next := slices.Concat(children...)
		if len(next) == 0 {
			break
		}
		levels = append(levels, next)
	}
	var kept []string
	for i := len(levels) - 1; i >= 0; i-- {
		// The ancestors of a node that stays stay too.
		paths := slices.DeleteFunc(levels[i], func(p string) bool {
			return slices.ContainsFunc(kept, func(k string) bool { return strings.HasPrefix(k, p+"/") })
		})
		stays, err := deleteAll(ctx, pool, paths, timeout)
		if err != nil {
			return err
		}
		kept = append(kept, stays...)
	}
	return nil
}

// deleteAll deletes the nodes of paths, which have no children, and
// returns those that stay: a partitioned parent of a sharded cluster,
// which the cluster keeps (BadArguments, docs/scale-out.md), as a run's
// locks' parent is when an operator spread its locks over shards.
func deleteAll(ctx context.Context, pool []*client.Client, paths []string, timeout time.Duration) ([]string, error) {
	const per = 500
	var mu sync.Mutex
	var stays []string
	err := inParallel(pool, (len(paths)+per-1)/per, func(c *client.Client, i int) error {
		batch := paths[i*per : min((i+1)*per, len(paths))]
		ops := make([]client.Op, len(batch))
		for j, p := range batch {
			ops[j] = client.DeleteOp(p, -1)
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		_, err := c.Multi(rctx, ops...)
		cancel()
		if err == nil {
			return nil
		}
		// One is gone already, or could not go: one at a time then.
		for _, p := range batch {
			rctx, cancel := context.WithTimeout(ctx, timeout)
			err := c.Delete(rctx, p, -1)
			cancel()
			switch {
			case errors.Is(err, client.ErrBadArguments):
				mu.Lock()
				stays = append(stays, p)
				mu.Unlock()
			case err != nil && !errors.Is(err, client.ErrNoNode):
				return err
			}
		}
		return nil
	})
	return stays, err
}
