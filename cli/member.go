package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/arbor-coord/arbor/client"
	"github.com/spf13/cobra"
)

// memberJSON is one member in the JSON of member.
type memberJSON struct {
	ID   uint64 `json:"id"`
	Peer string `json:"peer"`
	Role string `json:"role"` // "voter" or "learner"
}

type membersJSON struct {
	Members []memberJSON `json:"members"`
}

func (e *env) memberCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "member",
		Short: "List and change the cluster's members",
		Long: "List the cluster's members, or change them one at a time. Each subcommand prints\n" +
			"the membership after it. Changes are accepted only from a loopback address\n" +
			"unless the servers run with --remote-admin; and once the servers have a\n" +
			"superuser or require client certificates, only from the superuser (--auth\n" +
			"digest:USER:PASSWORD) or a certificate they name in --admin-identities.",
		Example: "  arbor member list\n" +
			"  arbor member add --learner 4 127.0.0.1:2384\n" +
			"  arbor member promote 4\n" +
			"  arbor member remove 3\n" +
			"  arbor --auth digest:admin:s3cret member remove 3   # servers with a superuser",
		Args: usageArgs(cobra.NoArgs), // an unknown subcommand
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	var learner bool
	add := &cobra.Command{
		Use:     "add [--learner] ID PEER_ADDR",
		Short:   "Add a member (then start it with arbord --join)",
		Example: "  arbor member add 4 127.0.0.1:2384\n  arbor member add --learner 4 127.0.0.1:2384",
		Args:    usageArgs(cobra.ExactArgs(2)),
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
	byID := func(use, short, example string, change func(c *client.Client, ctx context.Context, id uint64) ([]client.Member, error)) *cobra.Command {
		return &cobra.Command{
			Use: use + " ID", Short: short, Example: example, Args: usageArgs(cobra.ExactArgs(1)),
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
		Use: "list", Short: "List the members", Example: "  arbor member list\n  arbor member list -o json",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.changeMembers(cmd, (*client.Client).Members)
		},
	}
	cmd.AddCommand(list, add,
		byID("remove", "Remove a member (it stops serving)", "  arbor member remove 3", (*client.Client).RemoveMember),
		byID("promote", "Make a learner a voter", "  arbor member promote 4", (*client.Client).PromoteMember))
	return cmd
}

func memberID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usagef("member id %q is not a number above 0", s)
	}
	return id, nil
}

// changeMembers runs a membership call and prints the membership after it.
func (e *env) changeMembers(cmd *cobra.Command, call func(c *client.Client, ctx context.Context) ([]client.Member, error)) error {
	return e.run(cmd, func(ctx context.Context, c *client.Client) error {
		members, err := call(c, ctx)
		if errors.Is(err, client.ErrNoAuth) {
			return errors.New("not allowed to change the members: that takes the superuser (--auth digest:USER:PASSWORD, " +
				"or addauth in the shell) or an admin certificate (--tls-cert), on a loopback address unless the servers run with --remote-admin")
		}
		if err != nil {
			return err
		}
		out := membersJSON{Members: []memberJSON{}}
		for _, m := range members {
			role := "voter"
			if m.Learner {
				role = "learner"
			}
			out.Members = append(out.Members, memberJSON{ID: uint64(m.ID), Peer: m.Addr, Role: role})
		}
		if e.json() {
			return e.printJSON(out)
		}
		w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tPEER\tROLE")
		for _, m := range out.Members {
			fmt.Fprintf(w, "%d\t%s\t%s\n", m.ID, m.Peer, m.Role)
		}
		return w.Flush()
	})
}

// statusJSON is the JSON of status. The digest is hex, as in the text: it
// uses all 64 bits.
type statusJSON struct {
	ID       int64  `json:"id"`
	Leader   int64  `json:"leader"` // 0 if none is known
	Term     int64  `json:"term"`
	Applied  int64  `json:"applied"`
	Zxid     int64  `json:"zxid"`
	Digest   string `json:"digest"`
	Sessions int64  `json:"sessions"`
	Znodes   int64  `json:"znodes"`
}

func (e *env) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Print the status of the member the command reaches",
		Long: "Print the status of the member this command is connected to: its id, the\n" +
			"leader it knows (0: none), the raft term, the last raft entry it applied, the\n" +
			"zxid and digest of its tree (two members at the same zxid have the same\n" +
			"digest), and its sessions and znodes. Ask each member with --servers.",
		Example: "  arbor status\n  arbor --servers 127.0.0.1:2282 status -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				st, err := c.ServerStatus(ctx)
				if err != nil {
					return err
				}
				if e.json() {
					return e.printJSON(statusJSON{ID: st.ID, Leader: st.Leader, Term: st.Term, Applied: st.Applied,
						Zxid: st.Zxid, Digest: fmt.Sprintf("%016x", st.Digest), Sessions: st.Sessions, Znodes: st.Znodes})
				}
				fmt.Fprintf(e.stdout, "id = %d\nleader = %d\nterm = %d\napplied = %d\nzxid = %#x\ndigest = %016x\nsessions = %d\nznodes = %d\n",
					st.ID, st.Leader, st.Term, st.Applied, st.Zxid, st.Digest, st.Sessions, st.Znodes)
				return nil
			})
		},
	}
}
