package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/arbor-coord/arbor/client"
	"github.com/spf13/cobra"
)

func (e *env) watchCommand() *cobra.Command {
	var count int
	var recursive bool
	var from string
	cmd := &cobra.Command{
		Use:   "watch [-R] [-n COUNT] [--from ZXID] PATH",
		Short: "Print changes to a node (or a subtree) until interrupted",
		Long: "Print one line per change to PATH's data, existence or children, until\n" +
			"interrupted (Ctrl-C or SIGTERM: exit status 0) or, with -n, after COUNT events.\n" +
			"With -R, print the creates, deletes and data changes of PATH and of every node\n" +
			"below it (a child's NodeCreated and NodeDeleted stand for its parent's\n" +
			"NodeChildrenChanged, which -R does not print).\n\n" +
			"The watch is a persistent one (-R: recursive) that the server keeps: every\n" +
			"change is printed, in the order the cluster made them. If the output is read\n" +
			"so slowly that the client drops the watch, watch says so and exits with 1.\n\n" +
			"With --from ZXID, every change after that zxid is printed first (without\n" +
			"data), then the live ones, with no gap and no duplicate: a watch that ended\n" +
			"can resume from the zxid of the last event it printed (-o json shows it).\n" +
			"If the servers' change history no longer goes back that far, watch says\n" +
			"from which zxid it could resume and exits with 1.",
		Example: "  arbor watch /app\n  arbor watch -R /app\n  arbor watch -n 1 -o json /app\n" +
			"  arbor watch -R --from 0x1f4 /app",
		Args:              e.pathArgs(),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathArg(args)
			var opts []client.WatchOption
			if from != "" {
				z, err := strconv.ParseInt(from, 0, 64)
				if err != nil || z <= 0 {
					return usagef("--from %q is not a zxid (a positive number, decimal or 0x hex)", from)
				}
				opts = append(opts, client.FromZxid(z))
			}
			mode := client.WatchPersistent
			if recursive {
				mode = client.WatchPersistentRecursive
			}
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				seen := 0
				return e.follow(ctx, c, path, mode, nil, func(ev client.Event) (bool, error) {
					if err := e.printEvent(ev); err != nil {
						return false, err
					}
					seen++
					return count == 0 || seen < count, nil
				}, opts...)
			})
		},
	}
	cmd.Flags().IntVarP(&count, "count", "n", 0, "stop after this many events (0: never)")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "watch the whole subtree")
	cmd.Flags().StringVar(&from, "from", "", "first print every change after this zxid (decimal or 0x hex)")
	return cmd
}

// follow leaves a watch of mode on path and passes its events, in order,
// to emit until emit returns false or an error, ctx ends (nil error), or
// the watch ends: with the session, or dropped because events were lost
// (an error saying so). The watch is removed when follow returns: in the
// shell, the session goes on. If ready is not nil, follow calls it once the
// watch is in place, before passing on any event: a read made then misses
// no change that follows it.
func (e *env) follow(ctx context.Context, c *client.Client, path string, mode client.AddWatchMode,
	ready func() error, emit func(client.Event) (bool, error), opts ...client.WatchOption) error {
	rctx, cancel := e.req(ctx)
	events, err := c.AddWatch(rctx, path, mode, opts...)
	cancel()
	var hc *client.HistoryCompactedError
	switch {
	case errors.As(err, &hc):
		return ctxOr(ctx, fmt.Errorf("the server's change history no longer goes back that far: the watch of %s can resume from zxid %d (%#x) on", path, hc.Oldest, hc.Oldest))
	case errors.Is(err, client.ErrUnsupported):
		return ctxOr(ctx, fmt.Errorf("the server is too old to resume a watch from a zxid: %w", err))
	case err != nil:
		return ctxOr(ctx, describe(err, path))
	}
	defer func() {
		rctx, cancel := e.req(context.WithoutCancel(ctx))
		defer cancel()
		_ = c.RemoveWatch(rctx, path, mode) // gone already if the watch was dropped
	}()
	if ready != nil {
		if err := ready(); err != nil {
			return ctxOr(ctx, err)
		}
	}
	for {
		var ev client.Event
		var open bool
		select {
		case ev, open = <-events:
		case <-ctx.Done():
			return nil
		}
		switch {
		case !open:
			return fmt.Errorf("the watch of %s ended", path)
		case ev.Type == client.EventSession:
			return ev.Err
		case ev.Type == client.EventWatchRemoved:
			return lostError(path, ev)
		}
		more, err := emit(ev)
		if err != nil || !more {
			return err
		}
	}
}

// lostError is the error of a watch that the client dropped because events
// were lost: the reader fell too far behind, or the server no longer had
// what a reconnect missed.
func lostError(path string, ev client.Event) error {
	return fmt.Errorf("the watch of %s was dropped, so changes from then on were not printed: %w", path, ev.Err)
}

// ctxOr is nil once ctx has ended (an interrupt is not an error), else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
