package cli

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/arbor-coord/arbor/client"
	"github.com/spf13/cobra"
)

// watchFunc delivers the events of a watch on path to emit until emit
// returns false (nil error), ctx ends (nil error) or the session ends.
type watchFunc func(ctx context.Context, c *client.Client, path string, emit func(client.Event) bool) error

func (e *env) watchCommand() *cobra.Command {
	var count int
	var recursive bool
	cmd := &cobra.Command{
		Use:   "watch [-R] [-n COUNT] PATH",
		Short: "Print changes to a node (or a subtree) until interrupted",
		Long: "Print one line per change to PATH's data, existence or children, re-arming the\n" +
			"one-shot watches after each, until interrupted (Ctrl-C or SIGTERM: exit status\n" +
			"0) or, with -n, after COUNT events. With -R, watch PATH and every node below it,\n" +
			"including the nodes created while it runs.\n\n" +
			"Watches are one-shot: a change made between an event and the re-arming of its\n" +
			"watch is not printed on its own line (the next read sees it).",
		Example:           "  arbor watch /app\n  arbor watch -R /app\n  arbor watch -n 1 -o json /app",
		Args:              e.pathArgs(),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathArg(args)
			watch := e.watchNode
			if recursive {
				watch = e.watchSubtree
			}
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				seen := 0
				var printErr error
				err := watch(ctx, c, path, func(ev client.Event) bool {
					if printErr = e.printEvent(ev); printErr != nil {
						return false
					}
					seen++
					return count == 0 || seen < count
				})
				if err == nil {
					err = printErr
				}
				return err
			})
		},
	}
	cmd.Flags().IntVarP(&count, "count", "n", 0, "stop after this many events (0: never)")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "watch the whole subtree")
	return cmd
}

// watchNode watches one node: a data watch armed with ExistsW (so a
// missing node is watched for its creation) and, while the node exists, a
// child watch, each re-armed after it fires.
func (e *env) watchNode(ctx context.Context, c *client.Client, path string, emit func(client.Event) bool) error {
	var dataCh, childCh <-chan client.Event
	for {
		if dataCh == nil {
			rctx, cancel := e.req(ctx)
			_, _, ch, err := c.ExistsW(rctx, path)
			cancel()
			if err != nil {
				return ctxOr(ctx, describe(err, path))
			}
			dataCh = ch
		}
		if childCh == nil {
			rctx, cancel := e.req(ctx)
			_, _, ch, err := c.ChildrenW(rctx, path)
			cancel()
			switch {
			case errors.Is(err, client.ErrNoNode): // armed again once the node exists
			case err != nil:
				return ctxOr(ctx, describe(err, path))
			default:
				childCh = ch
			}
		}
		var ev client.Event
		select {
		case ev = <-dataCh:
			dataCh = nil
		case ev = <-childCh:
			childCh = nil
		case <-ctx.Done():
			return nil
		}
		if ev.Type == client.EventSession {
			return ev.Err
		}
		if !emit(ev) {
			return nil
		}
	}
}

// ctxOr is nil once ctx has ended (an interrupt is not an error), else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// watchSubtree watches root and every node below it with one-shot watches:
// a data watch and a child watch on each node, re-armed after each event,
// and new nodes armed as the child watches reveal them. It is the one
// place that knows how a subtree is watched: once the server has
// recursive watches, it becomes a single recursive watch.
func (e *env) watchSubtree(ctx context.Context, c *client.Client, root string, emit func(client.Event) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	w := &subtreeWatch{env: e, c: c, root: root, ctx: ctx, nodes: map[string]*watchedNode{}, fired: make(chan firing)}
	defer func() {
		cancel()
		w.wg.Wait()
	}()
	if err := w.add(root); err != nil {
		return ctxOr(ctx, err)
	}
	for {
		var f firing
		select {
		case f = <-w.fired:
		case <-ctx.Done():
			return nil
		}
		n, ok := w.nodes[f.path]
		if !ok || n.gen != f.gen {
			continue // a watch of a node since deleted
		}
		n.armed[f.kind] = false
		if f.ev.Type == client.EventSession {
			return f.ev.Err
		}
		if !emit(f.ev) {
			return nil
		}
		if err := w.handle(f); err != nil {
			return ctxOr(ctx, err)
		}
	}
}

// subtreeWatch is the state of watchSubtree, owned by its goroutine; the
// forwarding goroutines only send on fired.
type subtreeWatch struct {
	*env
	c     *client.Client
	root  string
	ctx   context.Context
	nodes map[string]*watchedNode
	next  uint64 // the last generation handed out
	fired chan firing
	wg    sync.WaitGroup
}

type watchKind int

const (
	dataWatch watchKind = iota
	childWatch
)

// watchedNode is a node whose watches are armed. Its events count only
// while gen is the generation they were armed under: a node deleted and
// created again gets a new one.
type watchedNode struct {
	gen   uint64
	armed [2]bool // by watchKind
}

// firing is an event of one of the watches of a node.
type firing struct {
	path string
	kind watchKind
	gen  uint64
	ev   client.Event
}

// add watches path and everything below it under a new generation.
func (w *subtreeWatch) add(path string) error {
	w.next++
	w.nodes[path] = &watchedNode{gen: w.next}
	exists, err := w.armData(path)
	if err != nil || !exists {
		return err
	}
	return w.armChildren(path)
}

// armData arms path's data watch: ExistsW for the root, so that its
// creation is seen; GetW below it. It reports whether the node exists.
func (w *subtreeWatch) armData(path string) (bool, error) {
	ctx, cancel := w.req(w.ctx)
	defer cancel()
	var ch <-chan client.Event
	var err error
	exists := true
	if path == w.root {
		exists, _, ch, err = w.c.ExistsW(ctx, path)
	} else {
		_, _, ch, err = w.c.GetW(ctx, path)
	}
	if errors.Is(err, client.ErrNoNode) {
		w.missing(path)
		return false, nil
	}
	if err != nil {
		return false, describe(err, path)
	}
	w.forward(path, dataWatch, ch)
	return exists, nil
}

// armChildren arms path's child watch and adds the children not yet
// watched.
func (w *subtreeWatch) armChildren(path string) error {
	ctx, cancel := w.req(w.ctx)
	names, _, ch, err := w.c.ChildrenW(ctx, path)
	cancel()
	if errors.Is(err, client.ErrNoNode) {
		w.missing(path)
		return nil
	}
	if err != nil {
		return describe(err, path)
	}
	w.forward(path, childWatch, ch)
	for _, name := range names {
		child := joinPath(path, name)
		if _, ok := w.nodes[child]; !ok {
			if err := w.add(child); err != nil {
				return err
			}
		}
	}
	return nil
}

// missing handles a node found deleted while arming one of its watches. A
// watch of it still armed reports the delete; without one, the node is
// forgotten (the root stays, watched for its creation).
func (w *subtreeWatch) missing(path string) {
	n := w.nodes[path]
	if path != w.root && !n.armed[dataWatch] && !n.armed[childWatch] {
		delete(w.nodes, path)
	}
}

// forward arms one watch of path: it passes the event of ch, under path's
// current generation, to the watching goroutine.
func (w *subtreeWatch) forward(path string, kind watchKind, ch <-chan client.Event) {
	n := w.nodes[path]
	n.armed[kind] = true
	gen := n.gen
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			select {
			case w.fired <- firing{path: path, kind: kind, gen: gen, ev: ev}:
			case <-w.ctx.Done():
			}
		case <-w.ctx.Done():
		}
	}()
}

// handle re-arms what an event used up.
func (w *subtreeWatch) handle(f firing) error {
	switch f.ev.Type {
	case client.EventNodeDataChanged:
		_, err := w.armData(f.path)
		return err
	case client.EventNodeCreated: // of the root
		return w.add(f.path)
	case client.EventNodeChildrenChanged:
		return w.armChildren(f.path)
	case client.EventNodeDeleted:
		// Both watches of the node fire; the other one's event is now
		// stale. The root is watched for its creation again. A node below
		// may have been created again already, with its parent's child
		// event handled first: add finds it, or forgets it again.
		delete(w.nodes, f.path)
		if _, parentWatched := w.nodes[parentPath(f.path)]; f.path == w.root || parentWatched {
			return w.add(f.path)
		}
	}
	return nil
}

// parentPath is the parent of a path other than the root.
func parentPath(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}
