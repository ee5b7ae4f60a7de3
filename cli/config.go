package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
)

// configJSON is a configuration value: what config get prints, and config
// watch for each value. Data, Encoding and Version are null when there is
// no node.
type configJSON struct {
	Path     string  `json:"path"`
	Data     *string `json:"data"`
	Encoding *string `json:"encoding"` // "utf8" or "base64"
	Version  *int32  `json:"version"`  // the node's data version, for config set -v
}

// printConfig prints a value: the data and a newline (an empty line for no
// node, st.Czxid 0), or its JSON.
func (e *env) printConfig(path string, data []byte, st client.Stat) error {
	if !e.json() {
		_, err := e.stdout.Write(append(data, '\n'))
		return err
	}
	out := configJSON{Path: path}
	if st.Czxid != 0 {
		d := dataOf(data)
		out.Data, out.Encoding, out.Version = &d.Data, &d.Encoding, &st.Version
	}
	return e.printJSON(out)
}

func (e *env) configCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Read, write and follow a configuration value",
		Long: "A configuration value is one node's data, as recipes.ConfigValue keeps it:\n" +
			"config set creates the node (and its missing parents, as containers) when\n" +
			"needed, and config watch prints every value the node takes, in order.",
		Example: "  arbor config set /app/config/db 'postgres://db-1/app'\n" +
			"  arbor config get /app/config/db\n" +
			"  arbor config watch /app/config/db",
		Args: usageArgs(cobra.NoArgs), // an unknown subcommand
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(e.configGetCommand(), e.configSetCommand(), e.configWatchCommand())
	return cmd
}

func (e *env) configGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get PATH",
		Short: "Print a configuration value",
		Long: "Print the value at PATH and a newline, as get does. With -o json, the value\n" +
			"and its version (for config set -v). A missing node is an error.",
		Example:           "  arbor config get /app/config/db\n  arbor config get -o json /app/config/db",
		Args:              e.pathArgs(),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathArg(args)
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				data, st, err := c.Get(ctx, path)
				if err != nil {
					return describe(err, path)
				}
				return e.printConfig(path, data, st)
			})
		},
	}
}

func (e *env) configSetCommand() *cobra.Command {
	var version int32
	cmd := &cobra.Command{
		Use:   "set [-v VERSION] PATH VALUE",
		Short: "Write a configuration value, creating its node if needed",
		Long: "Write VALUE at PATH (recipes.SetConfig). Without -v, create the node if it\n" +
			"does not exist, and its missing parents as containers (removed by the server\n" +
			"once their last child is). With -v, write only if the node exists at that\n" +
			"version (see config get -o json). Prints nothing, or with -o json the path.",
		Example:           "  arbor config set /app/config/db 'postgres://db-1/app'\n  arbor config set -v 3 /app/config/db 'postgres://db-2/app'",
		Args:              usageArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.path(args[0])
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				if err := recipes.SetConfig(ctx, c, path, []byte(args[1]), version); err != nil {
					return describe(err, path)
				}
				if e.json() {
					return e.printJSON(pathJSON{Path: path})
				}
				return nil
			})
		},
	}
	cmd.Flags().Int32VarP(&version, "version", "v", -1, "only if the node exists at this version")
	return cmd
}

func (e *env) configWatchCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "watch PATH",
		Short: "Print a configuration value, then each new one",
		Long: "Print the value at PATH, then every value it takes, in order, one per line, until\n" +
			"interrupted (Ctrl-C or SIGTERM: exit status 0). A missing or deleted node prints\n" +
			"an empty line (with -o json, null data and version). Every write prints a line,\n" +
			"also one that writes the same value again. If the session ends, or the output\n" +
			"is read so slowly that the client drops the watch, the exit status is 1.",
		Example:           "  arbor config watch /app/config/db\n  arbor config watch -o json /app/config/db",
		Args:              e.pathArgs(),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathArg(args)
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				return e.watchConfig(ctx, c, path)
			})
		},
	}
}

// watchConfig prints the value at path, then each new one. Like
// recipes.ConfigValue, it reads the node once its persistent watch is in
// place and then takes each value from the watch's events, which carry
// the node's data and Stat; it does not use ConfigValue itself because it
// prints each value's version too, and must say when the watch is
// dropped.
func (e *env) watchConfig(ctx context.Context, c *client.Client, path string) error {
	var cur client.Stat // the node as last printed; Czxid 0: no node
	ready := func() error {
		rctx, cancel := e.req(ctx)
		data, st, err := c.Get(rctx, path)
		cancel()
		switch {
		case errors.Is(err, client.ErrNoNode):
			data, st = nil, client.Stat{}
		case err != nil:
			return describe(err, path)
		}
		cur = st
		return e.printConfig(path, data, st)
	}
	return e.follow(ctx, c, path, client.WatchPersistent, ready, func(ev client.Event) (bool, error) {
		switch {
		case cur.Czxid != 0 && ev.Zxid <= cur.Mzxid:
			// The read came after this event's change: it printed it,
			// or a later state.
		case ev.Type == client.EventNodeCreated, ev.Type == client.EventNodeDataChanged:
			if ev.Stat.Czxid == 0 {
				return false, fmt.Errorf("the %s event of %s came without the node's data", ev.Type, path)
			}
			cur = ev.Stat
			return true, e.printConfig(path, ev.Data, ev.Stat)
		case ev.Type == client.EventNodeDeleted && cur.Czxid != 0:
			cur = client.Stat{}
			return true, e.printConfig(path, nil, cur)
		}
		return true, nil
	})
}
