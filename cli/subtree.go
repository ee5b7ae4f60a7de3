package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/arbor-coord/arbor/client"
	"github.com/spf13/cobra"
)

// walk runs client.Walk on path's subtree, each request bounded by
// --timeout, and describes a request that failed by its node.
func (e *env) walk(ctx context.Context, c *client.Client, path string, fn client.WalkFunc) error {
	return describeAt(c.Walk(ctx, path, fn, client.WithRequestTimeout(e.timeout)), path)
}

// describeAt describes err by the node its request was on, else by path.
func describeAt(err error, path string) error {
	var oe *client.OpError
	if errors.As(err, &oe) {
		path = oe.Path
	}
	return describe(err, path)
}

// joinPath is the path of child name of parent.
func joinPath(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}

// deleteallJSON is the JSON of deleteall.
type deleteallJSON struct {
	Path    string `json:"path"`
	Deleted int    `json:"deleted"` // nodes this command deleted
}

func (e *env) deleteallCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "deleteall PATH",
		Short: "Delete a node and everything below it",
		Long: "Delete a node and its whole subtree, deepest nodes first. A node that another\n" +
			"client deletes meanwhile is fine; one that gets a new child meanwhile is tried\n" +
			"again. The root and ZooKeeper's system nodes (/zookeeper, /zookeeper/quota,\n" +
			"/zookeeper/config) always stay: deleteall / deletes everything else.",
		Example:           "  arbor deleteall /app\n  arbor deleteall -o json /app   # {\"path\":\"/app\",\"deleted\":3}",
		Args:              usageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.path(args[0])
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				n, err := c.DeleteAll(ctx, path, client.WithRequestTimeout(e.timeout))
				if err != nil {
					return describeAt(err, path)
				}
				if e.json() {
					return e.printJSON(deleteallJSON{Path: path, Deleted: n})
				}
				return nil
			})
		},
	}
}

// ephemeralJSON is one node of ephemerals' JSON.
type ephemeralJSON struct {
	Path  string `json:"path"`
	Owner string `json:"owner"` // the owning session, hex
}

type ephemeralsJSON struct {
	Ephemerals []ephemeralJSON `json:"ephemerals"`
}

func (e *env) ephemeralsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "ephemerals [PATH]",
		Short: "List ephemeral nodes: this session's, or all under PATH",
		Long: "Without PATH, list the ephemeral nodes of this command's own session (in the\n" +
			"shell: the shell's session; a new command-line session has none). With PATH,\n" +
			"list every ephemeral node at or below PATH, of any session, with the owning\n" +
			"session's id.",
		Example:           "  arbor ephemerals /locks\n  arbor shell   # then: create -e /me, ephemerals",
		Args:              usageArgs(cobra.RangeArgs(0, 1)),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				out := ephemeralsJSON{Ephemerals: []ephemeralJSON{}}
				if len(args) == 0 {
					rctx, cancel := e.req(ctx)
					paths, err := c.Ephemerals(rctx, "/")
					cancel()
					if err != nil {
						return err
					}
					for _, p := range paths {
						out.Ephemerals = append(out.Ephemerals, ephemeralJSON{Path: p, Owner: sessionHex(c.SessionID())})
					}
				} else {
					err := e.walk(ctx, c, e.path(args[0]), func(p string, st client.Stat, _ []string) error {
						if st.EphemeralOwner != 0 {
							out.Ephemerals = append(out.Ephemerals, ephemeralJSON{Path: p, Owner: sessionHex(st.EphemeralOwner)})
						}
						return nil
					})
					if err != nil {
						return err
					}
				}
				if e.json() {
					return e.printJSON(out)
				}
				if len(args) == 0 {
					for _, eph := range out.Ephemerals {
						fmt.Fprintln(e.stdout, eph.Path)
					}
					return nil
				}
				w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				for _, eph := range out.Ephemerals {
					fmt.Fprintf(w, "%s\t%s\n", eph.Path, eph.Owner)
				}
				return w.Flush()
			})
		},
	}
}

// countJSON is the JSON of count.
type countJSON struct {
	Path  string `json:"path"`
	Count int    `json:"count"`
}

func (e *env) countCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "count PATH",
		Short: "Print the number of nodes below a node",
		Long: "Print the number of nodes below PATH at any depth, PATH itself not counted\n" +
			"(ZooKeeper's getAllChildrenNumber).",
		Example:           "  arbor count /app\n  arbor count /     # every node but the root",
		Args:              e.pathArgs(),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathArg(args)
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				n, err := c.CountDescendants(ctx, path)
				if err != nil {
					return describe(err, path)
				}
				if e.json() {
					return e.printJSON(countJSON{Path: path, Count: n})
				}
				_, err = fmt.Fprintln(e.stdout, n)
				return err
			})
		},
	}
}
