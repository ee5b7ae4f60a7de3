package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/recipes"
)

// heldJSON is what lock and elect print once they hold.
type heldJSON struct {
	Path  string `json:"path"`
	Token int64  `json:"token"`
	Event string `json:"event"` // "acquired", "released", "elected" or "resigned"
}

func (e *env) printHeld(path string, token int64, event string) error {
	if e.json() {
		return e.printJSON(heldJSON{Path: path, Token: token, Event: event})
	}
	_, err := fmt.Fprintf(e.stdout, "%s %s (token %d)\n", event, path, token)
	return err
}

// errLost is the error of a hold that ended with the session.
var errLost = errors.New("the session ended: the hold is lost, someone else may hold it now")

func (e *env) lockCommand() *cobra.Command {
	var priority int
	cmd := &cobra.Command{
		Use:   "lock PATH [-- CMD [ARGS...]]",
		Short: "Hold a lock while a command runs, or until interrupted",
		Long: "Take the lock at PATH (a recipes.Mutex: waiters queue in order, and a release\n" +
			"wakes one). With CMD, run it while holding the lock, with ARBOR_LOCK_PATH and\n" +
			"ARBOR_LOCK_TOKEN (the fencing token) in its environment, and exit with its\n" +
			"status. Without CMD, print the token and hold until interrupted.\n\n" +
			"If the session ends while the lock is held, CMD is sent SIGTERM and the exit\n" +
			"status is 1: another process may hold the lock from then on.\n\n" +
			"--priority (1 to 999) serves the wait before the waiters of lower priority still\n" +
			"waiting, never before the holder; no waiter is passed by more than 64 later ones\n" +
			"(docs/locks.md, Priorities).",
		Example: "  arbor lock /locks/deploy -- ./deploy.sh --prod\n" +
			"  arbor lock /locks/maintenance      # hold until Ctrl-C\n" +
			"  arbor lock --priority 9 /locks/payments -- ./refund.sh",
		Args: usageArgs(func(cmd *cobra.Command, args []string) error {
			if n := cmd.ArgsLenAtDash(); n > 1 || (n < 0 && len(args) != 1) || n == 0 {
				return errors.New("want PATH, then optionally -- CMD [ARGS...]")
			}
			if n := cmd.ArgsLenAtDash(); n == 1 && len(args) == 1 {
				return errors.New("no command after --")
			}
			if priority < 0 || priority > lockq.MaxPriority {
				return fmt.Errorf("--priority %d is not 0 to %d", priority, lockq.MaxPriority)
			}
			return nil
		}),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.path(args[0])
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				m := recipes.NewMutex(c, path, recipes.WithPriority(priority))
				if err := m.Lock(ctx); err != nil {
					if ctx.Err() != nil {
						return fmt.Errorf("interrupted while waiting for %s", path)
					}
					return describe(err, path)
				}
				defer func() {
					rctx, cancel := e.req(context.WithoutCancel(ctx))
					defer cancel()
					m.Unlock(rctx)
				}()
				if len(args) > 1 {
					return e.runLocked(ctx, m, path, args[1:])
				}
				if err := e.printHeld(path, m.Token(), "acquired"); err != nil {
					return err
				}
				select {
				case <-m.Lost():
					return errLost
				case <-ctx.Done():
				}
				return e.printHeld(path, m.Token(), "released")
			})
		},
	}
	cmd.Flags().IntVar(&priority, "priority", 0, "serve the wait before waiters of lower priority (0 to 999; 0: first come, first served)")
	return cmd
}

// runLocked runs argv while m is held and returns its exit status.
// Interrupts reach the command (Ctrl-C does by itself; SIGTERM is passed
// on); losing the lock stops it with SIGTERM.
func (e *env) runLocked(ctx context.Context, m *recipes.Mutex, path string, argv []string) error {
	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = e.stdin, e.stdout, e.stderr
	child.Env = append(os.Environ(), "ARBOR_LOCK_PATH="+path, "ARBOR_LOCK_TOKEN="+strconv.FormatInt(m.Token(), 10))
	if err := child.Start(); err != nil {
		return fmt.Errorf("run %s: %w", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	var lost bool
	var err error
	for done := false; !done; {
		select {
		case err = <-exited:
			done = true
		case <-m.Lost():
			lost = true
			child.Process.Signal(syscall.SIGTERM)
		case <-ctx.Done():
			child.Process.Signal(syscall.SIGTERM)
			ctx = context.Background() // signalled once; now wait for it
		}
	}
	var exit *exec.ExitError
	switch {
	case lost:
		return errLost
	case errors.As(err, &exit):
		return exitStatus(exit.ExitCode())
	}
	return err
}

func (e *env) electCommand() *cobra.Command {
	var listen bool
	cmd := &cobra.Command{
		Use:   "elect PATH VALUE | elect -l PATH",
		Short: "Campaign in a leader election, or follow its leaders",
		Long: "Campaign in the election at PATH with VALUE (an address, a name), print when\n" +
			"elected, and lead until interrupted, then resign. With -l, print the value of\n" +
			"each leader as leadership changes, until interrupted. If the session ends while\n" +
			"leading, the exit status is 1: another candidate may lead from then on.",
		Example: "  arbor elect /service/leader 10.0.0.7:8080\n  arbor elect -l /service/leader",
		Args: usageArgs(func(cmd *cobra.Command, args []string) error {
			if listen {
				return cobra.ExactArgs(1)(cmd, args)
			}
			return cobra.ExactArgs(2)(cmd, args)
		}),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.path(args[0])
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				el := recipes.NewElection(c, path)
				if listen {
					return e.followLeaders(ctx, c, el, path)
				}
				if err := el.Campaign(ctx, []byte(args[1])); err != nil {
					if ctx.Err() != nil {
						return nil // interrupted before being elected
					}
					return describe(err, path)
				}
				if err := e.printHeld(path, el.Token(), "elected"); err != nil {
					return err
				}
				select {
				case <-el.Lost():
					return errLost
				case <-ctx.Done():
				}
				token := el.Token()
				rctx, cancel := e.req(context.WithoutCancel(ctx))
				defer cancel()
				if err := el.Resign(rctx); err != nil {
					return err
				}
				return e.printHeld(path, token, "resigned")
			})
		},
	}
	cmd.Flags().BoolVarP(&listen, "listen", "l", false, "follow the leaders instead of campaigning")
	return cmd
}

// leaderJSON is one leader that elect -l prints.
type leaderJSON struct {
	Path   string   `json:"path"`
	Leader dataJSON `json:"leader"`
}

func (e *env) followLeaders(ctx context.Context, c *client.Client, el *recipes.Election, path string) error {
	for v := range el.Observe(ctx) {
		var err error
		if e.json() {
			err = e.printJSON(leaderJSON{Path: path, Leader: dataOf(v)})
		} else {
			_, err = fmt.Fprintf(e.stdout, "%s\n", v)
		}
		if err != nil {
			return err
		}
	}
	if ctx.Err() == nil {
		return c.Err() // the session ended
	}
	return nil
}
