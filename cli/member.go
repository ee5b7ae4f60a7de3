package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/arbor-coord/arbor/client"
	"github.com/spf13/cobra"
)

func (e *env) memberCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "member",
		Short: "List and change the cluster's members",
	}
	var learner bool
	add := &cobra.Command{
		Use:   "add [--learner] ID PEER_ADDR",
		Short: "Add a member (then start it with arbord --join)",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := memberID(args[0])
			if err != nil {
				return err
			}
			return e.changeMembers(cmd, func(c *client.Client, ctx context.Context) ([]client.Member, error) {
				return c.AddMember(ctx, id, args[1], learner)
			})
		},
	}
	add.Flags().BoolVar(&learner, "learner", false, "add a learner: it receives the log but does not vote until promoted")
	byID := func(use, short string, change func(c *client.Client, ctx context.Context, id uint64) ([]client.Member, error)) *cobra.Command {
		return &cobra.Command{
			Use: use + " ID", Short: short, Args: usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, args []string) error {
				id, err := memberID(args[0])
				if err != nil {
					return err
				}
				return e.changeMembers(cmd, func(c *client.Client, ctx context.Context) ([]client.Member, error) {
					return change(c, ctx, id)
				})
			},
		}
	}
	list := &cobra.Command{
		Use: "list", Short: "List the members", Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.changeMembers(cmd, (*client.Client).Members)
		},
	}
	cmd.AddCommand(list, add,
		byID("remove", "Remove a member (it stops serving)", (*client.Client).RemoveMember),
		byID("promote", "Make a learner a voter", (*client.Client).PromoteMember))
	return cmd
}

func memberID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usageError{fmt.Errorf("member id %q is not a number above 0", s)}
	}
	return id, nil
}

// changeMembers runs a membership call and prints the membership after it.
func (e *env) changeMembers(cmd *cobra.Command, call func(c *client.Client, ctx context.Context) ([]client.Member, error)) error {
	return e.run(cmd, func(ctx context.Context, c *client.Client) error {
		members, err := call(c, ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tPEER\tROLE")
		for _, m := range members {
			role := "voter"
			if m.Learner {
				role = "learner"
			}
			fmt.Fprintf(w, "%d\t%s\t%s\n", m.ID, m.Addr, role)
		}
		return w.Flush()
	})
}

func (e *env) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Print the status of the member the command reaches",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				st, err := c.ServerStatus(ctx)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "id = %d\nleader = %d\nterm = %d\napplied = %d\nzxid = %#x\ndigest = %016x\nsessions = %d\nznodes = %d\n",
					st.ID, st.Leader, st.Term, st.Applied, st.Zxid, st.Digest, st.Sessions, st.Znodes)
				return nil
			})
		},
	}
}
