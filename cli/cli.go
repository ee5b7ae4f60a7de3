// Package cli is the arbor command: browse, edit and watch an Arbor tree,
// from the command line or from its interactive shell.
//
// Intended output goes to stdout and diagnostics to stderr. Exit codes: 0
// success, 1 an error, 2 a usage mistake. docs/cli.md describes every
// command and the JSON that -o json prints.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/spf13/cobra"
)

// DefaultServers is used when neither --servers nor ARBOR_SERVERS is set.
const DefaultServers = "127.0.0.1:2281"

// defaultTimeout is the default of --timeout.
const defaultTimeout = 10 * time.Second

// env holds what every command shares. Each run of the command tree (one
// command line, or one line of the shell) has its own env, because cobra
// binds the flags to its fields.
type env struct {
	servers string
	auths   []string // --auth: SCHEME:CREDENTIAL each
	timeout time.Duration
	output  string   // "text" or "json"
	tls     tlsFlags // --tls-cert, --tls-key, --tls-ca

	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	interrupts *interrupts
	sh         *shell // inside the shell: its session and working directory
}

// usageError marks a mistake in the command line (exit status 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// Main runs the arbor command with args (without the program name) and
// returns the exit status. SIGINT and SIGTERM end a command that runs until
// interrupted (watch, the shell) with status 0.
func Main(args []string, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	in := newInterrupts()
	defer in.forward(sigs)()
	e := &env{stdin: os.Stdin, stdout: stdout, stderr: stderr, interrupts: in}
	return e.execute(in.base, args)
}

// execute runs the command tree on args and returns the exit status,
// having printed any error to stderr.
func (e *env) execute(ctx context.Context, args []string) int {
	root := e.rootCommand()
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	var status exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &status): // the shell's, its errors printed already
		return int(status)
	}
	fmt.Fprintln(e.stderr, "arbor:", err)
	if !isUsage(err) {
		return 1
	}
	if cmd != nil && cmd != root {
		fmt.Fprintf(e.stderr, "Run '%s --help' for usage.\n", e.commandPath(cmd))
	}
	return 2
}

// isUsage reports whether err is a mistake in the command line. cobra
// reports an unknown command with a plain error.
func isUsage(err error) bool {
	var ue usageError
	return errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command")
}

// commandPath is how the user calls cmd: without "arbor " in the shell.
func (e *env) commandPath(cmd *cobra.Command) string {
	if e.sh != nil {
		return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	}
	return cmd.CommandPath()
}

// usageArgs marks the errors of an argument check as usage errors.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func (e *env) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "arbor",
		Short: "Browse, edit and watch an Arbor coordination tree",
		Long: "arbor browses, edits and watches the znode tree of an Arbor cluster.\n\n" +
			"Every command takes -o json for output that scripts can rely on (see docs/cli.md).\n" +
			"Servers come from --servers, else $ARBOR_SERVERS, else " + DefaultServers + ".\n" +
			"Credentials come from --auth SCHEME:CREDENTIAL (repeatable), else $ARBOR_AUTH.\n" +
			"TLS is on with --tls-ca (or $ARBOR_TLS_CA), or with a client certificate.\n" +
			"Exit status: 0 success, 1 an error, 2 a usage mistake.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if e.output != "text" && e.output != "json" {
				return usagef("output format %q is neither text nor json", e.output)
			}
			if e.sh != nil && len(e.auths) > 0 {
				return usagef("the shell's session is open already: authenticate it with addauth")
			}
			return nil
		},
	}
	timeout := defaultTimeout
	if e.sh != nil {
		timeout = e.sh.timeout
	}
	flags := root.PersistentFlags()
	flags.StringVar(&e.servers, "servers", "", "servers as host:port,... (default $ARBOR_SERVERS, else "+DefaultServers+")")
	flags.StringArrayVar(&e.auths, "auth", nil,
		"authenticate the session as SCHEME:CREDENTIAL, such as digest:alice:secret (repeatable; default $ARBOR_AUTH)")
	flags.DurationVar(&e.timeout, "timeout", timeout, "how long to wait for the servers, per request")
	flags.StringVarP(&e.output, "output", "o", "text", "output format: text or json")
	e.tls.add(root)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		e.lsCommand(), e.getCommand(), e.setCommand(), e.createCommand(), e.deleteCommand(),
		e.deleteallCommand(), e.statCommand(), e.syncCommand(), e.countCommand(),
		e.ephemeralsCommand(), e.treeCommand(), e.watchCommand(),
		e.memberCommand(), e.statusCommand(), e.snapshotCommand(), e.shardsCommand(),
		e.lockCommand(), e.electCommand(), e.locksCommand(),
		e.servicesCommand(), e.configCommand(), e.benchCommand(),
		e.getaclCommand(), e.setaclCommand(), e.whoamiCommand(), e.addauthCommand(),
		e.setquotaCommand(), e.listquotaCommand(), e.delquotaCommand(),
	)
	if e.sh == nil {
		root.AddCommand(e.shellCommand())
	} else {
		root.AddCommand(e.sh.cdCommand(e), e.sh.pwdCommand(e))
		root.CompletionOptions.DisableDefaultCmd = true
	}
	return root
}

// serverList resolves --servers, then ARBOR_SERVERS, then the default.
func (e *env) serverList() []string {
	s := e.servers
	if s == "" {
		s = os.Getenv("ARBOR_SERVERS")
	}
	if s == "" {
		s = DefaultServers
	}
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// clientOptions are the options of every session a command opens: TLS
// (see tlsOptions) and credentials (see authOptions).
func (e *env) clientOptions() ([]client.Option, error) {
	opts, err := e.tlsOptions()
	if err != nil {
		return nil, err
	}
	auth, err := e.authOptions()
	if err != nil {
		return nil, err
	}
	return append(opts, auth...), nil
}

// connect dials the servers within --timeout and starts a session.
func (e *env) connect(ctx context.Context) (*client.Client, error) {
	opts, err := e.clientOptions()
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	c, err := client.Dial(dctx, e.serverList(), opts...)
	if isAuthFailed(err) {
		return nil, fmt.Errorf("the servers refused the credentials: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %w", strings.Join(e.serverList(), ","), err)
	}
	return c, nil
}

// session returns the client a command runs on: the shell's, or a new
// session that release closes.
func (e *env) session(ctx context.Context) (c *client.Client, release func(), err error) {
	if e.sh != nil {
		return e.sh.c, func() {}, nil
	}
	c, err = e.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c, func() { c.Close() }, nil
}

// run runs fn on a session, with a deadline of --timeout for all of it.
func (e *env) run(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
		ctx, cancel := e.req(ctx)
		defer cancel()
		return fn(ctx, c)
	})
}

// runLong runs fn on a session with no deadline: for commands that wait
// for events or walk a subtree, which give each request its own deadline
// with req.
func (e *env) runLong(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	c, release, err := e.session(cmd.Context())
	if err != nil {
		return err
	}
	defer release()
	return fn(cmd.Context(), c)
}

// req bounds one request by --timeout.
func (e *env) req(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.timeout)
}

// path resolves a PATH argument: as it is on the command line; in the
// shell, against the working directory, with "." and ".." resolved and a
// trailing "/" dropped (create -s puts it back).
func (e *env) path(arg string) string {
	if e.sh == nil {
		return arg
	}
	return resolvePath(e.sh.cwd, arg)
}

// pathArgs is the argument check of a command whose only argument is a
// PATH: required on the command line, the working directory by default in
// the shell.
func (e *env) pathArgs() cobra.PositionalArgs {
	if e.sh != nil {
		return usageArgs(cobra.RangeArgs(0, 1))
	}
	return usageArgs(cobra.ExactArgs(1))
}

// pathArg is args' PATH, or the shell's working directory.
func (e *env) pathArg(args []string) string {
	if len(args) == 0 {
		return e.sh.cwd
	}
	return e.path(args[0])
}

// resolvePath joins p to cwd unless it is absolute, and resolves "." and
// ".." (which are never znode names).
func resolvePath(cwd, p string) string {
	if !strings.HasPrefix(p, "/") {
		p = cwd + "/" + p
	}
	var segs []string
	for _, s := range strings.Split(p, "/") {
		switch s {
		case "", ".":
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
		default:
			segs = append(segs, s)
		}
	}
	return "/" + strings.Join(segs, "/")
}

// describe turns a client error into the plain sentence the user sees.
func describe(err error, path string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, client.ErrNoNode):
		return fmt.Errorf("no node at %s", path)
	case errors.Is(err, client.ErrNodeExists):
		return fmt.Errorf("%s already exists", path)
	case errors.Is(err, client.ErrNotEmpty):
		return fmt.Errorf("%s has children", path)
	case errors.Is(err, client.ErrBadVersion):
		return fmt.Errorf("%s is not at the expected version", path)
	case errors.Is(err, client.ErrNoChildrenForEphemerals):
		return fmt.Errorf("%s: ephemeral nodes cannot have children", path)
	case errors.Is(err, client.ErrInvalidPath):
		return fmt.Errorf("invalid path %q", path)
	case errors.Is(err, client.ErrDataTooLarge):
		return fmt.Errorf("data for %s is too large", path)
	case errors.Is(err, client.ErrNoAuth):
		return fmt.Errorf("%s: not allowed by the ACL (see getacl; authenticate with --auth, or addauth in the shell)", path)
	case errors.Is(err, client.ErrInvalidACL):
		return fmt.Errorf("%s: invalid ACL: %w", path, err)
	case errors.Is(err, client.ErrQuotaExceeded):
		return fmt.Errorf("%s: quota exceeded: over a hard limit of a quota above it (see listquota), or of the session's ephemeral nodes", path)
	}
	return err
}

// isAuthFailed reports whether err is a refused credential.
func isAuthFailed(err error) bool { return errors.Is(err, client.ErrAuthFailed) }
