package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/spf13/cobra"
)

func (e *env) createCommand() *cobra.Command {
	var ephemeral, sequential bool
	cmd := &cobra.Command{
		Use:   "create [-e] [-s] PATH [DATA]",
		Short: "Create a node and print its path",
		Long: "Create a node and print the path created (with its sequence number for -s).\n" +
			"An ephemeral node (-e) lives as long as this command's session: it is gone when the command exits.",
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var data []byte
			if len(args) == 2 {
				data = []byte(args[1])
			}
			mode := createMode(ephemeral, sequential)
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				p, err := c.Create(ctx, args[0], data, mode)
				if err != nil {
					return describe(err, args[0])
				}
				fmt.Fprintln(e.stdout, p)
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&ephemeral, "ephemeral", "e", false, "ephemeral node")
	cmd.Flags().BoolVarP(&sequential, "sequential", "s", false, "append a sequence number to the name")
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

func (e *env) getCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get PATH",
		Short: "Print a node's data",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				data, _, err := c.Get(ctx, args[0])
				if err != nil {
					return describe(err, args[0])
				}
				_, err = e.stdout.Write(append(data, '\n'))
				return err
			})
		},
	}
}

func (e *env) setCommand() *cobra.Command {
	var version int32
	cmd := &cobra.Command{
		Use:   "set [-v VERSION] PATH DATA",
		Short: "Replace a node's data",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				_, err := c.Set(ctx, args[0], []byte(args[1]), version)
				return describe(err, args[0])
			})
		},
	}
	cmd.Flags().Int32VarP(&version, "version", "v", -1, "only if the node is at this version")
	return cmd
}

func (e *env) lsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "ls PATH",
		Short: "List a node's children, one per line",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				names, _, err := c.Children(ctx, args[0])
				if err != nil {
					return describe(err, args[0])
				}
				for _, n := range names {
					fmt.Fprintln(e.stdout, n)
				}
				return nil
			})
		},
	}
}

func (e *env) statCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "stat PATH",
		Short: "Print a node's Stat",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				ok, st, err := c.Exists(ctx, args[0])
				if err == nil && !ok {
					err = client.ErrNoNode
				}
				if err != nil {
					return describe(err, args[0])
				}
				writeStat(e.stdout, st)
				return nil
			})
		},
	}
}

// writeStat prints a Stat the way zkCli does, one field per line.
func writeStat(w io.Writer, st client.Stat) {
	ms := func(v int64) string { return time.UnixMilli(v).UTC().Format(time.RFC3339Nano) }
	hex := func(v int64) string { return "0x" + strconv.FormatUint(uint64(v), 16) }
	fmt.Fprintf(w, "czxid = %s\nctime = %s\nmzxid = %s\nmtime = %s\npzxid = %s\n",
		hex(st.Czxid), ms(st.Ctime), hex(st.Mzxid), ms(st.Mtime), hex(st.Pzxid))
	fmt.Fprintf(w, "cversion = %d\ndataVersion = %d\naclVersion = %d\nephemeralOwner = %s\ndataLength = %d\nnumChildren = %d\n",
		st.Cversion, st.Version, st.Aversion, hex(st.EphemeralOwner), st.DataLength, st.NumChildren)
}

func (e *env) deleteCommand() *cobra.Command {
	var version int32
	cmd := &cobra.Command{
		Use:   "delete [-v VERSION] PATH",
		Short: "Delete a node (it must have no children)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				return describe(c.Delete(ctx, args[0], version), args[0])
			})
		},
	}
	cmd.Flags().Int32VarP(&version, "version", "v", -1, "only if the node is at this version")
	return cmd
}

func (e *env) watchCommand() *cobra.Command {
	var count int
	cmd := &cobra.Command{
		Use:   "watch PATH",
		Short: "Print changes to a node and its children until interrupted",
		Long: "Print one line per change to PATH's data, existence or children, re-arming\n" +
			"the one-shot watches after each. Stops on interrupt, or after -n events.",
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			return e.watch(cmd.Context(), c, args[0], count)
		},
	}
	cmd.Flags().IntVarP(&count, "count", "n", 0, "stop after this many events (0: never)")
	return cmd
}

// watch arms a data watch (ExistsW, so a missing node is watched for its
// creation) and, while the node exists, a child watch; it prints each
// event and arms the watch that fired again.
func (e *env) watch(ctx context.Context, c *client.Client, path string, count int) error {
	var dataCh, childCh <-chan client.Event
	for seen := 0; count == 0 || seen < count; seen++ {
		if dataCh == nil {
			_, _, ch, err := c.ExistsW(ctx, path)
			if err != nil {
				return describe(err, path)
			}
			dataCh = ch
		}
		if childCh == nil {
			_, _, ch, err := c.ChildrenW(ctx, path)
			switch {
			case errors.Is(err, client.ErrNoNode): // armed again once the node exists
			case err != nil:
				return describe(err, path)
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
		fmt.Fprintf(e.stdout, "%s %s\n", ev.Type, ev.Path)
	}
	return nil
}
