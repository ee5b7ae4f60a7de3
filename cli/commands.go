package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/spf13/cobra"
)

// pathJSON is the JSON of commands that name one node.
type pathJSON struct {
	Path string    `json:"path"`
	Stat *statJSON `json:"stat,omitempty"`
}

func (e *env) createCommand() *cobra.Command {
	var ephemeral, sequential, container bool
	var ttl time.Duration
	var aclText string
	cmd := &cobra.Command{
		Use:   "create [-e] [-s] [-c] [-t TTL] [-a ACL] PATH [DATA]",
		Short: "Create a node and print its path",
		Long: "Create a node and print the path created (with its sequence number for -s).\n\n" +
			"An ephemeral node (-e) lives as long as the session that made it: on the command\n" +
			"line that is the command itself, so the node is gone when it exits; in the shell\n" +
			"it is the shell's session. A container (-c) is deleted by the server once it has\n" +
			"had children and has none left. A TTL node (-t) is deleted once it has had no\n" +
			"children and no change for TTL (a duration such as 30s or 1h). With -a, the\n" +
			"node gets ACL, else the server's default ACL.\n\n" + aclHelp,
		Example: "  arbor create /app '{\"mode\":\"blue\"}'\n" +
			"  arbor create -s /app/job-        # prints /app/job-0000000000\n" +
			"  arbor create -c /queues\n" +
			"  arbor create -t 1h /cache/item data\n" +
			"  arbor --auth digest:alice:secret create -a auth::cdrwa,world:anyone:r /private",
		Args:              usageArgs(cobra.RangeArgs(1, 2)),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			var data []byte
			if len(args) == 2 {
				data = []byte(args[1])
			}
			withTTL := cmd.Flags().Changed("ttl")
			switch {
			case container && (ephemeral || sequential || withTTL):
				return usagef("a container (-c) cannot also be ephemeral, sequential or have a TTL")
			case ephemeral && withTTL:
				return usagef("an ephemeral node (-e) cannot have a TTL")
			case withTTL && (ttl < time.Millisecond || ttl.Milliseconds() > 1<<40-1):
				return usagef("TTL %v is out of range (1ms to about 34 years)", ttl)
			}
			var opts []client.CreateOption
			if cmd.Flags().Changed("acl") {
				acl, err := parseACLArg(aclText)
				if err != nil {
					return err
				}
				opts = append(opts, client.WithACL(acl...))
			}
			path := e.path(args[0])
			if sequential && strings.HasSuffix(args[0], "/") && !strings.HasSuffix(path, "/") {
				path += "/" // the sequence number alone is the name
			}
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				var p string
				var err error
				switch {
				case withTTL:
					mode := client.PersistentTTL
					if sequential {
						mode = client.PersistentSequentialTTL
					}
					p, err = c.CreateTTL(ctx, path, data, mode, ttl, opts...)
				case container:
					p, err = c.Create(ctx, path, data, client.Container, opts...)
				default:
					p, err = c.Create(ctx, path, data, createMode(ephemeral, sequential), opts...)
				}
				if err != nil {
					return describe(err, path)
				}
				if e.json() {
					return e.printJSON(pathJSON{Path: p})
				}
				_, err = fmt.Fprintln(e.stdout, p)
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&ephemeral, "ephemeral", "e", false, "ephemeral node: deleted when its session ends")
	cmd.Flags().BoolVarP(&sequential, "sequential", "s", false, "append a sequence number to the name")
	cmd.Flags().BoolVarP(&container, "container", "c", false, "container node: deleted once its last child is")
	cmd.Flags().DurationVarP(&ttl, "ttl", "t", 0, "time to live of a persistent node without changes or children")
	cmd.Flags().StringVarP(&aclText, "acl", "a", "", "the node's ACL, as scheme:id:perms,... (default: the server's)")
	cmd.RegisterFlagCompletionFunc("acl", completeACL)
	return cmd
}

func createMode(ephemeral, sequential bool) client.CreateMode {
	switch {
	case ephemeral && sequential:
		return client.EphemeralSequential
	case ephemeral:
		return client.Ephemeral
	case sequential:
		return client.PersistentSequential
	}
	return client.Persistent
}

// getJSON is the JSON of get.
type getJSON struct {
	Path string `json:"path"`
	dataJSON
	Stat *statJSON `json:"stat"`
}

func (e *env) getCommand() *cobra.Command {
	var withStat, watch, lin bool
	cmd := &cobra.Command{
		Use:   "get [-s] [-w] [--linearizable] PATH",
		Short: "Print a node's data",
		Long: "Print a node's data, followed by a newline. With -s, also its Stat; with -w,\n" +
			"then wait for the next change to the node and print it (NodeDataChanged or\n" +
			"NodeDeleted). The JSON always carries the Stat. With --linearizable, the\n" +
			"member answers only once it has applied every write committed before the\n" +
			"read, on any member.",
		Example:           "  arbor get /app\n  arbor get -s /app\n  arbor get -w /app       # waits for the next change\n  arbor get --linearizable /app\n  arbor get -o json /app",
		Args:              e.pathArgs(),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathArg(args)
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				rctx, cancel := e.req(ctx)
				defer cancel()
				var data []byte
				var st client.Stat
				var events <-chan client.Event
				var err error
				if watch {
					data, st, events, err = c.GetW(rctx, path, readOptions(lin)...)
				} else {
					data, st, err = c.Get(rctx, path, readOptions(lin)...)
				}
				if err != nil {
					return describe(err, path)
				}
				if e.json() {
					err = e.printJSON(getJSON{Path: path, dataJSON: dataOf(data), Stat: statOf(st)})
				} else {
					_, err = e.stdout.Write(append(data, '\n'))
					if withStat {
						writeStat(e.stdout, st)
					}
				}
				if err != nil || !watch {
					return err
				}
				return e.awaitEvent(ctx, events)
			})
		},
	}
	cmd.Flags().BoolVarP(&withStat, "stat", "s", false, "also print the node's Stat")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "then wait for the next change to the node and print it")
	linearizableFlag(cmd, &lin)
	return cmd
}

// linearizableFlag adds --linearizable to a read command.
func linearizableFlag(cmd *cobra.Command, lin *bool) {
	cmd.Flags().BoolVar(lin, "linearizable", false, "read only what every write committed before the read is in (a raft read index)")
}

// readOptions are the options of a read, linearizable or not.
func readOptions(linearizable bool) []client.ReadOption {
	if linearizable {
		return []client.ReadOption{client.Linearizable()}
	}
	return nil
}

// awaitEvent waits for one event and prints it. An interrupt ends the wait
// without an error.
func (e *env) awaitEvent(ctx context.Context, events <-chan client.Event) error {
	select {
	case ev := <-events:
		if ev.Type == client.EventSession {
			return ev.Err
		}
		return e.printEvent(ev)
	case <-ctx.Done():
		return nil
	}
}

func (e *env) setCommand() *cobra.Command {
	var version int32
	cmd := &cobra.Command{
		Use:   "set [-v VERSION] PATH DATA",
		Short: "Replace a node's data",
		Long: "Replace a node's data; with -v, only if the node is at that version (its Stat's\n" +
			"version), which makes a read-modify-write safe. Prints nothing, or with -o json\n" +
			"the node's new Stat.",
		Example:           "  arbor set /app '{\"mode\":\"green\"}'\n  arbor set -v 3 /app v4",
		Args:              usageArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.path(args[0])
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				st, err := c.Set(ctx, path, []byte(args[1]), version)
				if err != nil {
					return describe(err, path)
				}
				if e.json() {
					return e.printJSON(pathJSON{Path: path, Stat: statOf(st)})
				}
				return nil
			})
		},
	}
	cmd.Flags().Int32VarP(&version, "version", "v", -1, "only if the node is at this version")
	return cmd
}

// lsJSON is the JSON of ls; lsRecursiveJSON of ls -R.
type lsJSON struct {
	Path     string    `json:"path"`
	Children []string  `json:"children"`
	Stat     *statJSON `json:"stat,omitempty"`
}

type lsRecursiveJSON struct {
	Path  string    `json:"path"`
	Paths []string  `json:"paths"`
	Stat  *statJSON `json:"stat,omitempty"`
}

func (e *env) lsCommand() *cobra.Command {
	var recursive, withStat, watch, lin bool
	cmd := &cobra.Command{
		Use:   "ls [-R] [-s] [-w] [--linearizable] PATH",
		Short: "List a node's children",
		Long: "List a node's children, one name per line, sorted. With -R, the full path of\n" +
			"PATH and of every node below it, parents first. With -s, also PATH's Stat; with\n" +
			"-w, then wait for the next change to PATH's children and print it.",
		Example:           "  arbor ls /app\n  arbor ls -R /app\n  arbor ls -s /app\n  arbor ls -w /app     # waits for a child to come or go",
		Args:              e.pathArgs(),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if recursive && watch {
				return usagef("ls -R and -w do not go together (see watch -R)")
			}
			path := e.pathArg(args)
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				if recursive {
					if lin {
						// The walk's reads all come after the sync.
						if err := c.Sync(ctx, path); err != nil {
							return describe(err, path)
						}
					}
					return e.lsRecursive(ctx, c, path, withStat)
				}
				rctx, cancel := e.req(ctx)
				defer cancel()
				var names []string
				var st client.Stat
				var events <-chan client.Event
				var err error
				if watch {
					names, st, events, err = c.ChildrenW(rctx, path, readOptions(lin)...)
				} else {
					names, st, err = c.Children(rctx, path, readOptions(lin)...)
				}
				if err != nil {
					return describe(err, path)
				}
				if e.json() {
					out := lsJSON{Path: path, Children: append([]string{}, names...)}
					if withStat {
						out.Stat = statOf(st)
					}
					err = e.printJSON(out)
				} else {
					for _, n := range names {
						fmt.Fprintln(e.stdout, n)
					}
					if withStat {
						writeStat(e.stdout, st)
					}
				}
				if err != nil || !watch {
					return err
				}
				return e.awaitEvent(ctx, events)
			})
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "list the whole subtree, as full paths")
	cmd.Flags().BoolVarP(&withStat, "stat", "s", false, "also print PATH's Stat")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "then wait for the next change to the children and print it")
	linearizableFlag(cmd, &lin)
	return cmd
}

// lsRecursive prints the paths of path's subtree, parents first.
func (e *env) lsRecursive(ctx context.Context, c *client.Client, path string, withStat bool) error {
	out := lsRecursiveJSON{Path: path, Paths: []string{}}
	var st client.Stat
	err := e.walk(ctx, c, path, func(p string, pst client.Stat, _ []string) error {
		if p == path {
			st = pst
		}
		out.Paths = append(out.Paths, p)
		return nil
	})
	if err != nil {
		return err
	}
	if e.json() {
		if withStat {
			out.Stat = statOf(st)
		}
		return e.printJSON(out)
	}
	for _, p := range out.Paths {
		fmt.Fprintln(e.stdout, p)
	}
	if withStat {
		writeStat(e.stdout, st)
	}
	return nil
}

func (e *env) statCommand() *cobra.Command {
	var lin bool
	cmd := &cobra.Command{
		Use:   "stat [--linearizable] PATH",
		Short: "Print a node's Stat",
		Long: "Print a node's Stat, one field per line as zkCli does: zxids in hex, times in\n" +
			"UTC, ephemeralOwner the owning session in hex (0x0 for a node that is not\n" +
			"ephemeral).",
		Example:           "  arbor stat /app\n  arbor stat -o json /app",
		Args:              e.pathArgs(),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathArg(args)
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				ok, st, err := c.Exists(ctx, path, readOptions(lin)...)
				if err == nil && !ok {
					err = client.ErrNoNode
				}
				if err != nil {
					return describe(err, path)
				}
				if e.json() {
					return e.printJSON(pathJSON{Path: path, Stat: statOf(st)})
				}
				writeStat(e.stdout, st)
				return nil
			})
		},
	}
	linearizableFlag(cmd, &lin)
	return cmd
}

func (e *env) deleteCommand() *cobra.Command {
	var version int32
	cmd := &cobra.Command{
		Use:   "delete [-v VERSION] PATH",
		Short: "Delete a node (it must have no children)",
		Long: "Delete a node that has no children; with -v, only if it is at that version.\n" +
			"deleteall removes a whole subtree.",
		Example:           "  arbor delete /app/job-0000000000\n  arbor delete -v 2 /app/config",
		Args:              usageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.path(args[0])
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				if err := c.Delete(ctx, path, version); err != nil {
					return describe(err, path)
				}
				if e.json() {
					return e.printJSON(pathJSON{Path: path})
				}
				return nil
			})
		},
	}
	cmd.Flags().Int32VarP(&version, "version", "v", -1, "only if the node is at this version")
	return cmd
}

func (e *env) syncCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "sync PATH",
		Short: "Wait until the server has every write committed so far",
		Long: "Wait until the server this command reached has applied every write committed\n" +
			"anywhere before the call, so that the reads after it see them. Most useful in\n" +
			"the shell, where the reads that follow use the same session.",
		Example:           "  arbor sync /\n  arbor shell  # then: sync /app, get /app",
		Args:              e.pathArgs(),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathArg(args)
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				if err := c.Sync(ctx, path); err != nil {
					return describe(err, path)
				}
				if e.json() {
					return e.printJSON(pathJSON{Path: path})
				}
				return nil
			})
		},
	}
}
