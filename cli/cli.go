// Package cli is the arbor command: browse and edit an Arbor tree.
//
// Intended output goes to stdout and diagnostics to stderr. Exit codes: 0
// success, 1 an error, 2 a usage mistake.
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

// env holds what every command shares.
type env struct {
	servers string
	timeout time.Duration
	stdout  io.Writer
	stderr  io.Writer
}

// usageError marks a mistake in the command line (exit status 2).
type usageError struct{ error }

// Main runs the arbor command with args (without the program name) and
// returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	e := &env{stdout: stdout, stderr: stderr}
	root := e.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "arbor:", err)
	var ue usageError
	// cobra reports an unknown command with a plain error.
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		return 2
	}
	return 1
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
		Use:           "arbor",
		Short:         "Browse and edit an Arbor coordination tree",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&e.servers, "servers", "", "servers as host:port,... (default $ARBOR_SERVERS, else "+DefaultServers+")")
	root.PersistentFlags().DurationVar(&e.timeout, "timeout", 10*time.Second, "how long to wait for the servers")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(e.createCommand(), e.getCommand(), e.setCommand(), e.lsCommand(),
		e.statCommand(), e.deleteCommand(), e.watchCommand(), e.memberCommand(), e.statusCommand())
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

// connect dials the servers within --timeout.
func (e *env) connect(ctx context.Context) (*client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	c, err := client.Dial(dctx, e.serverList())
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %w", strings.Join(e.serverList(), ","), err)
	}
	return c, nil
}

// run connects, runs fn with a deadline of --timeout, and closes.
func (e *env) run(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	c, err := e.connect(cmd.Context())
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), e.timeout)
	defer cancel()
	return fn(ctx, c)
}

// describe turns a client error into the plain sentence the user sees.
func describe(err error, path string) error {
	switch {
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
	}
	return err
}
