package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

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

// errLost is the error of a hold that ended by itself.
var errLost = errors.New("the hold is lost: someone else may hold it now")

// holdLost is errLost for the lock at path, with why it was lost.
func holdLost(path string, why error) error {
	if why == nil {
		return fmt.Errorf("%s: %w", path, errLost)
	}
	return fmt.Errorf("%s: %w (%w)", path, errLost, why)
}

// Bounds of lock --kill-after: the default, at most 2 s and a fifth of
// the hold's period (the session's timeout, or the lease's TTL if
// shorter), and the flag's ceiling, a fifth of the period too. The hold's
// stop-by deadline is taken that much early, so it must leave the
// renewals and pings room to keep moving it on.
const (
	defaultKillAfter  = 2 * time.Second
	killAfterFraction = 5
)

// killAfter is the grace between CMD's SIGTERM and its SIGKILL for a hold
// whose period is period: asked (if set) or the default.
func killAfter(asked time.Duration, set bool, period time.Duration) (time.Duration, error) {
	most := period / killAfterFraction
	if !set {
		return min(defaultKillAfter, most), nil
	}
	if asked > most {
		return 0, usagef("--kill-after %v is over a fifth of the hold's period (%v: the session's timeout, or the lease's TTL if shorter): at most %v", asked, period, most)
	}
	return asked, nil
}

func (e *env) lockCommand() *cobra.Command {
	var priority int
	var lease, grace, delay time.Duration
	cmd := &cobra.Command{
		Use:   "lock PATH [-- CMD [ARGS...]]",
		Short: "Hold a lock while a command runs, or until interrupted",
		Long: "Take the lock at PATH (a recipes.Mutex: waiters queue in order, and a release\n" +
			"wakes one). With CMD, run it while holding the lock, with ARBOR_LOCK_PATH and\n" +
			"ARBOR_LOCK_TOKEN (the fencing token) in its environment, and exit with its\n" +
			"status. Without CMD, print the token and hold until interrupted.\n\n" +
			"CMD is stopped before the lock can move on: it is sent SIGTERM --kill-after\n" +
			"(default 2s) before the hold's stop-by deadline, the last moment no one else\n" +
			"can hold the lock whatever happened meanwhile (the servers unreachable, this\n" +
			"process cut off), or when the hold is lost otherwise, and SIGKILL --kill-after\n" +
			"later; the exit status is then 1. --lease TTL binds the hold to a lease, whose\n" +
			"deadline holds whatever partition cuts the holder off (docs/locks.md).\n\n" +
			"--lock-delay D (at most 1m): if this hold is lost without a release, nobody\n" +
			"holds the lock for D, for resources that cannot check fencing tokens.\n\n" +
			"--priority (1 to 999) serves the wait before the waiters of lower priority still\n" +
			"waiting, never before the holder; no waiter is passed by more than 64 later ones\n" +
			"(docs/locks.md, Priorities).",
		Example: "  arbor lock /locks/deploy -- ./deploy.sh --prod\n" +
			"  arbor lock --lease 30s --kill-after 5s /locks/deploy -- ./deploy.sh\n" +
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
			if lease != 0 && (lease < time.Second || lease > time.Hour) {
				return fmt.Errorf("--lease %v is not 1s to 1h", lease)
			}
			if grace < 0 {
				return fmt.Errorf("--kill-after %v is negative", grace)
			}
			if delay < 0 || delay > lockq.MaxLockDelay {
				return fmt.Errorf("--lock-delay %v is not 0 to %v", delay, lockq.MaxLockDelay)
			}
			return nil
		}),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.path(args[0])
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				opts := []recipes.Option{recipes.WithPriority(priority), recipes.WithLockDelay(delay)}
				if lease != 0 {
					opts = append(opts, recipes.WithLease(lease))
				}
				if len(args) > 1 {
					period := c.SessionTimeout()
					if lease != 0 {
						period = min(period, lease)
					}
					var err error
					if grace, err = killAfter(grace, cmd.Flags().Changed("kill-after"), period); err != nil {
						return err
					}
					// CMD's SIGTERM comes grace before the hold's own
					// deadline, its SIGKILL at it.
					opts = append(opts, recipes.WithSafetyMargin(recipes.DefaultSafetyMargin+grace))
				}
				m := recipes.NewMutex(c, path, opts...)
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
					return e.runLocked(ctx, m, path, args[1:], grace)
				}
				if err := e.printHeld(path, m.Token(), "acquired"); err != nil {
					return err
				}
				select {
				case <-m.Lost():
					return holdLost(path, m.LostReason())
				case <-ctx.Done():
				}
				return e.printHeld(path, m.Token(), "released")
			})
		},
	}
	cmd.Flags().IntVar(&priority, "priority", 0, "serve the wait before waiters of lower priority (0 to 999; 0: first come, first served)")
	cmd.Flags().DurationVar(&delay, "lock-delay", 0, "if the hold is lost without a release, nobody holds the lock for this long (at most 1m; docs/locks.md, Lock-delay)")
	cmd.Flags().DurationVar(&lease, "lease", 0, "bind the hold to a lease of this TTL (1s to 1h), renewed while held; 0: the session's")
	cmd.Flags().DurationVar(&grace, "kill-after", defaultKillAfter, "with CMD: the grace between its SIGTERM and its SIGKILL, which comes at the hold's stop-by deadline (at most a fifth of the session timeout or lease TTL)")
	return cmd
}

// runLocked runs argv while m is held and returns its exit status.
// Interrupts reach the command (Ctrl-C does by itself; SIGTERM is passed
// on). Losing the lock stops it: SIGTERM when m's Lost closes, which is
// grace before the hold's own deadline at the latest (m's margin has it),
// then SIGKILL grace later, so that it is gone before anyone else can
// hold the lock.
func (e *env) runLocked(ctx context.Context, m *recipes.Mutex, path string, argv []string, grace time.Duration) error {
	lost := m.Lost()
	if isClosed(lost) {
		return holdLost(path, m.LostReason()) // not started: the hold's time is up already
	}
	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = e.stdin, e.stdout, e.stderr
	child.Env = append(os.Environ(), "ARBOR_LOCK_PATH="+path, "ARBOR_LOCK_TOKEN="+strconv.FormatInt(m.Token(), 10))
	if err := child.Start(); err != nil {
		return fmt.Errorf("run %s: %w", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	var kill <-chan time.Time
	var err error
	var wasLost bool
	for done := false; !done; {
		select {
		case err = <-exited:
			done = true
		case <-lost:
			wasLost, lost = true, nil
			if grace == 0 {
				child.Process.Kill()
				continue
			}
			child.Process.Signal(syscall.SIGTERM)
			kill = time.After(grace)
		case <-kill:
			kill = nil
			fmt.Fprintf(e.stderr, "arbor: %s did not exit within --kill-after %v of SIGTERM: killed\n", argv[0], grace)
			child.Process.Kill()
		case <-ctx.Done():
			child.Process.Signal(syscall.SIGTERM)
			ctx = context.Background() // signalled once; now wait for it
		}
	}
	var exit *exec.ExitError
	switch {
	case wasLost:
		return holdLost(path, m.LostReason())
	case errors.As(err, &exit):
		return exitStatus(exit.ExitCode())
	}
	return err
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
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
					return e.followLeaders(ctx, el, path)
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

func (e *env) followLeaders(ctx context.Context, el *recipes.Election, path string) error {
	err := el.Follow(ctx, func(v []byte) error {
		if e.json() {
			return e.printJSON(leaderJSON{Path: path, Leader: dataOf(v)})
		}
		_, err := fmt.Fprintf(e.stdout, "%s\n", v)
		return err
	})
	return describe(err, path)
}
