package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/spf13/cobra"
)

func (e *env) shardsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shards",
		Short: "Show and change the cluster's partition map",
		Long: "Show the cluster's partition map (docs/scale-out.md): which raft group serves\n" +
			"which part of the tree. A cluster that was never sharded has one shard, the\n" +
			"meta group (0), with every key. Changes take the rights of a membership\n" +
			"change (see arbor member) and every member of a version that knows maps.",
		Example: "  arbor shards list\n" +
			"  arbor shards partition /locks\n" +
			"  arbor shards split --parent /locks\n" +
			"  arbor shards lead 1 --on 3",
		Args: usageArgs(cobra.NoArgs), // an unknown subcommand
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	list := &cobra.Command{
		Use: "list", Short: "List the shards and the parts of the tree each serves", Example: "  arbor shards list\n  arbor shards list -o json",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.showShards(cmd, (*client.Client).Shards)
		},
	}
	partition := &cobra.Command{
		Use:   "partition PARENT",
		Short: "Route PARENT's children by the hash of their names, so that splits spread them",
		Long: "Declare PARENT partitioned: each of its children, with everything below it,\n" +
			"then routes by the hash of its name instead of with PARENT's subtree, so that\n" +
			"a split can spread them over shards (a lock service's /locks, say). Nothing\n" +
			"moves now: PARENT's hash range starts in the shard that serves its subtree.",
		Example: "  arbor shards partition /locks",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.showShards(cmd, func(c *client.Client, ctx context.Context) (*shardmap.Map, error) {
				return c.PartitionShards(ctx, args[0])
			})
		},
	}
	var parent, at string
	split := &cobra.Command{
		Use:   "split (--at NAME | --parent PARENT [--at HASH])",
		Short: "Move a shard's keys from a key on to a new shard",
		Long: "Move the keys of the shard that holds a key, from that key on in the range that\n" +
			"holds it, to a new shard: a raft group that every member then runs, led by one\n" +
			"of them in turn. It returns once the new shard serves them.\n" +
			"--at NAME splits the top-level names (a subtree moves whole); --parent\n" +
			"PARENT splits the hashes of a partitioned parent's children, at --at HASH (16\n" +
			"hex digits) or, without it, at the middle of the meta group's hashes there.\n" +
			"Requests then go to the shard of their paths; a multi across shards is\n" +
			"refused. Every shard's group follows the members (arbor member).",
		Example: "  arbor shards split --at m\n  arbor shards partition /locks && arbor shards split --parent /locks",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := shardmap.Key{Space: parent, Key: at}
			switch {
			case parent == "" && at == "":
				return usagef("split needs --at NAME, or --parent PARENT")
			case parent != "" && at != "":
				h, err := strconv.ParseUint(strings.TrimPrefix(at, "0x"), 16, 64)
				if err != nil {
					return usagef("--at %q is not a hash: 16 hex digits", at)
				}
				key.Key = shardmap.HashKey(h)
			}
			return e.showShards(cmd, func(c *client.Client, ctx context.Context) (*shardmap.Map, error) {
				return c.SplitShards(ctx, key)
			})
		},
	}
	split.Flags().StringVar(&parent, "parent", "", "split the hashes of this partitioned parent's children")
	split.Flags().StringVar(&at, "at", "", "the first key of the new shard: a top-level name, or with --parent a hash (16 hex digits)")
	var on uint64
	lead := &cobra.Command{
		Use:     "lead GROUP --on MEMBER",
		Aliases: []string{"move"},
		Short:   "Move a shard's leadership to a member, and keep it there",
		Long: "Make MEMBER, a voter, the preferred leader of shard GROUP in the map: the\n" +
			"group's leader hands it the leadership, and it takes it back whenever it can\n" +
			"(after a restart, say). --on 0 gives the shard back to the cluster, which\n" +
			"spreads the shards' leaderships over its voters in turn. Every member carries\n" +
			"every shard, so moving a shard (arbor shards move) is moving its leadership.",
		Example: "  arbor shards lead 2 --on 3\n  arbor shards lead 2 --on 0",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			group, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return usagef("GROUP %q is not a shard's group number", args[0])
			}
			if !cmd.Flags().Changed("on") {
				return usagef("lead needs --on MEMBER (0: none of its own)")
			}
			return e.showShards(cmd, func(c *client.Client, ctx context.Context) (*shardmap.Map, error) {
				return c.LeadShards(ctx, group, on)
			})
		},
	}
	lead.Flags().Uint64Var(&on, "on", 0, "the member to lead the shard (0: wherever the cluster spreads it)")
	cmd.AddCommand(list, partition, split, lead)
	return cmd
}

// showShards runs a call that returns the map, and prints the map.
func (e *env) showShards(cmd *cobra.Command, call func(c *client.Client, ctx context.Context) (*shardmap.Map, error)) error {
	return e.run(cmd, func(ctx context.Context, c *client.Client) error {
		m, err := call(c, ctx)
		if errors.Is(err, client.ErrNoAuth) {
			return errors.New("not allowed to change the shard map: that takes the superuser (--auth digest:USER:PASSWORD) " +
				"or an admin certificate (--tls-cert), on a loopback address unless the servers run with --remote-admin")
		}
		if err != nil {
			return err
		}
		v := m.View()
		if e.json() {
			return e.printJSON(v)
		}
		fmt.Fprintf(e.stdout, "version %d", v.Version)
		if len(v.Partitioned) > 0 {
			fmt.Fprintf(e.stdout, "; partitioned: %s", strings.Join(v.Partitioned, " "))
		}
		fmt.Fprintln(e.stdout)
		w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "GROUP\tSPACE\tFROM\tTO\tREPLICAS\tEPOCH\tLEADER")
		for _, s := range v.Shards {
			replicas, leader := "all", "(any)"
			if len(s.Replicas) > 0 {
				replicas = strings.Trim(fmt.Sprint(s.Replicas), "[]")
			}
			if s.Leader != 0 {
				leader = fmt.Sprint(s.Leader)
			}
			for i, r := range s.Ranges {
				if i > 0 {
					fmt.Fprintf(w, "\t%s\t%s\t%s\t\t\t\n", r.Space, shown(r.Start, "(start)"), shown(r.End, "(end)"))
					continue
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d.%d\t%s\n", s.Group, r.Space, shown(r.Start, "(start)"), shown(r.End, "(end)"), replicas, s.Epoch[0], s.Epoch[1], leader)
			}
			if len(s.Ranges) == 0 {
				fmt.Fprintf(w, "%d\t(none)\t\t\t%s\t%d.%d\t%s\n", s.Group, replicas, s.Epoch[0], s.Epoch[1], leader)
			}
		}
		return w.Flush()
	})
}

// shown is s, or instead when s is empty.
func shown(s, instead string) string {
	if s == "" {
		return instead
	}
	return s
}
