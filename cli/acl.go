package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/arbor-coord/arbor/client"
)

// aclJSON is one ACL entry: its scheme, id and permissions in ZooKeeper's
// letters (cdrwa).
type aclJSON struct {
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
	Perms  string `json:"perms"`
}

// getACLJSON is the JSON of getacl.
type getACLJSON struct {
	Path string    `json:"path"`
	ACL  []aclJSON `json:"acl"`
	Stat *statJSON `json:"stat"`
}

// identityJSON is one identity of whoami.
type identityJSON struct {
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
}

type whoamiJSON struct {
	Identities []identityJSON `json:"identities"`
}

// addauthJSON is the JSON of addauth: the scheme, never the credential.
type addauthJSON struct {
	Scheme string `json:"scheme"`
}

func aclOf(acl []client.ACL) []aclJSON {
	out := make([]aclJSON, len(acl))
	for i, a := range acl {
		out[i] = aclJSON{Scheme: a.Scheme, ID: a.ID, Perms: a.Perms.String()}
	}
	return out
}

// aclHelp is the form of an ACL argument, for the help of the commands
// that take one.
const aclHelp = "An ACL is entries scheme:id:perms separated by commas, as zkCli.sh takes it:\n" +
	"world:anyone:r, digest:USER:HASH:cdrwa (HASH as arbor's client.DigestID computes it:\n" +
	"base64(sha1(USER:PASSWORD))), ip:10.0.0.0/8:rw, auth::cdrwa (the identities of the\n" +
	"session that runs the command), x509:CN=alice,O=Acme:r, sasl:alice:cdrwa (a ZooKeeper\n" +
	"client that logged in with SASL as alice). Permissions are letters of cdrwa: create\n" +
	"and delete children, read, write, admin (setacl)."

// parseACLArg reads an ACL argument; a bad one is a usage mistake.
func parseACLArg(s string) ([]client.ACL, error) {
	acl, err := client.ParseACL(s)
	if err != nil {
		return nil, usageError{err}
	}
	return acl, nil
}

// completeACL completes an ACL argument or flag with the schemes.
func completeACL(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	var out []string
	prefix := toComplete[:strings.LastIndexByte(toComplete, ',')+1]
	for _, s := range []string{"world:anyone:", "digest:", "ip:", "auth::", "x509:", "sasl:"} {
		if strings.HasPrefix(prefix+s, toComplete) {
			out = append(out, prefix+s)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

func (e *env) getaclCommand() *cobra.Command {
	var withStat bool
	cmd := &cobra.Command{
		Use:   "getacl [-s] PATH",
		Short: "Print a node's ACL",
		Long: "Print a node's ACL, one entry scheme:id:perms per line, in the form setacl and\n" +
			"create --acl take. With -s, then the node's Stat (aclVersion is what setacl -v\n" +
			"checks). It needs read permission; the hash of a digest entry is shown only\n" +
			"with admin permission too. The JSON always carries the Stat.",
		Example:           "  arbor getacl /app\n  arbor --auth digest:alice:secret getacl -o json /app",
		Args:              e.pathArgs(),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathArg(args)
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				acl, st, err := c.GetACL(ctx, path)
				if err != nil {
					return describe(err, path)
				}
				if e.json() {
					return e.printJSON(getACLJSON{Path: path, ACL: aclOf(acl), Stat: statOf(st)})
				}
				for _, a := range acl {
					fmt.Fprintln(e.stdout, a)
				}
				if withStat {
					writeStat(e.stdout, st)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&withStat, "stat", "s", false, "also print the node's Stat")
	return cmd
}

func (e *env) setaclCommand() *cobra.Command {
	var version int32
	var recursive bool
	cmd := &cobra.Command{
		Use:   "setacl [-v VERSION] [-R] PATH ACL",
		Short: "Replace a node's ACL",
		Long: "Replace a node's ACL; with -v, only if its ACL is at that version (the Stat's\n" +
			"aclVersion). With -R, PATH's and that of every node below it. It needs admin\n" +
			"permission on each node. Prints nothing, or with -o json the path and (without\n" +
			"-R) the node's new Stat.\n\n" + aclHelp,
		Example: "  arbor setacl /app world:anyone:r,digest:alice:HASH:cdrwa\n" +
			"  arbor setacl -v 1 /app ip:10.0.0.0/8:cdrwa\n" +
			"  arbor setacl -R /app world:anyone:cdrwa",
		Args: usageArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 1 {
				return completeACL(cmd, args, toComplete)
			}
			return e.completePathArg(cmd, args, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if recursive && cmd.Flags().Changed("version") {
				return usagef("setacl -R and -v do not go together")
			}
			path := e.path(args[0])
			acl, err := parseACLArg(args[1])
			if err != nil {
				return err
			}
			if recursive {
				return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
					return e.setACLRecursive(ctx, c, path, acl)
				})
			}
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				st, err := c.SetACL(ctx, path, acl, version)
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
	cmd.Flags().Int32VarP(&version, "version", "v", -1, "only if the node's ACL is at this version")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "also set the ACL of every node below PATH")
	return cmd
}

// setACLRecursive sets acl on path and on every node below it, parents
// first (each node is listed before its ACL changes, so a new ACL that
// takes away read does not hide its children).
func (e *env) setACLRecursive(ctx context.Context, c *client.Client, path string, acl []client.ACL) error {
	err := e.walk(ctx, c, path, func(p string, _ client.Stat, _ []string) error {
		rctx, cancel := e.req(ctx)
		defer cancel()
		_, err := c.SetACL(rctx, p, acl, -1) // walk describes its error by p
		return err
	})
	if err != nil {
		return err
	}
	if e.json() {
		return e.printJSON(pathJSON{Path: path})
	}
	return nil
}

func (e *env) whoamiCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Print the identities of the session",
		Long: "Print the identities the session has on the server, one scheme:id per line:\n" +
			"its address (ip) and the users it authenticated as (--auth, $ARBOR_AUTH, and in\n" +
			"the shell addauth).",
		Example: "  arbor whoami\n  arbor --auth digest:alice:secret whoami",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				ids, err := c.WhoAmI(ctx)
				if err != nil {
					return err
				}
				if e.json() {
					out := whoamiJSON{Identities: []identityJSON{}}
					for _, id := range ids {
						out.Identities = append(out.Identities, identityJSON{Scheme: id.Scheme, ID: id.ID})
					}
					return e.printJSON(out)
				}
				for _, id := range ids {
					fmt.Fprintf(e.stdout, "%s:%s\n", id.Scheme, id.ID)
				}
				return nil
			})
		},
	}
}

// addauthCommand authenticates the shell's session. On the command line
// there is no session to keep the identity, so it only says to use --auth.
func (e *env) addauthCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "addauth SCHEME CREDENTIAL",
		Short: "Authenticate the shell's session (shell only; else use --auth)",
		Long: "Add an identity to the shell's session: authenticate in SCHEME with CREDENTIAL,\n" +
			"for digest USER:PASSWORD. It lasts until the shell exits, also across\n" +
			"reconnects. A refused credential is an error and is not kept. On the command\n" +
			"line each command has its own session: give --auth SCHEME:CREDENTIAL (or set\n" +
			"$ARBOR_AUTH) instead.",
		Example: "  addauth digest alice:secret",
		Args:    usageArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return []string{"digest"}, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if e.sh == nil {
				return usagef("addauth lasts for a session, and each command line has its own: " +
					"use --auth SCHEME:CREDENTIAL or $ARBOR_AUTH, or addauth in arbor shell")
			}
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				if err := c.AddAuth(ctx, args[0], []byte(args[1])); err != nil {
					return describeAuth(err, args[0])
				}
				if e.json() {
					return e.printJSON(addauthJSON{Scheme: args[0]})
				}
				return nil
			})
		},
	}
	return cmd
}

// describeAuth says that the servers refused a credential in scheme.
func describeAuth(err error, scheme string) error {
	if err != nil && isAuthFailed(err) {
		return fmt.Errorf("the servers refused the %s credential: %w", scheme, err)
	}
	return err
}

// authOptions turns --auth, else $ARBOR_AUTH, into Dial options: each a
// SCHEME:CREDENTIAL, such as digest:alice:secret.
func (e *env) authOptions() ([]client.Option, error) {
	auths := e.auths
	if len(auths) == 0 {
		if env := os.Getenv("ARBOR_AUTH"); env != "" {
			auths = []string{env}
		}
	}
	var opts []client.Option
	for _, a := range auths {
		scheme, cred, ok := strings.Cut(a, ":")
		if !ok || scheme == "" {
			// The value is not repeated: it may be a password.
			return nil, usagef("an --auth or $ARBOR_AUTH value is not SCHEME:CREDENTIAL (such as digest:alice:secret)")
		}
		opts = append(opts, client.WithAuth(scheme, []byte(cred)))
	}
	return opts, nil
}
