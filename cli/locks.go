package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/recipes"
)

// partyJSON is a holder or a waiter that locks prints.
type partyJSON struct {
	Node    string `json:"node"`
	Mode    string `json:"mode"`
	Owner   string `json:"owner"`
	Holder  string `json:"holder,omitempty"`
	Session string `json:"session"`
	Lease   string `json:"lease,omitempty"`
	Token   int64  `json:"token"`
	Since   int64  `json:"since"` // ms since the Unix epoch: holding, or waiting, since
	ForMs   int64  `json:"forMs"` // how long it has held, or waited
	Expires int64  `json:"expires,omitempty"`
}

// lockJSON is one lock that locks prints.
type lockJSON struct {
	Path            string      `json:"path"`
	Holders         []partyJSON `json:"holders"`
	Waiters         []partyJSON `json:"waiters"`
	HeldForMs       int64       `json:"heldForMs"`    // the longest hold now
	OldestWaitMs    int64       `json:"oldestWaitMs"` // the longest wait now
	EstimatedWaitMs int64       `json:"estimatedWaitMs"`
	Flags           []string    `json:"flags"` // "long-hold", "long-queue"
}

func party(p client.LockParty, now time.Time) partyJSON {
	j := partyJSON{Node: p.Node, Mode: p.Mode, Owner: p.Owner, Holder: p.Holder, Session: sessionHex(p.Session),
		Token: p.Token, Since: p.Since, ForMs: now.Sub(time.UnixMilli(p.Since)).Milliseconds(), Expires: p.Expires}
	if p.Lease != 0 {
		j.Lease = sessionHex(p.Lease)
	}
	return j
}

// doctor is what locks prints of one lock, with the flags the thresholds
// raise.
func doctor(l client.LockInfo, now time.Time, holdOver time.Duration, queueOver int) lockJSON {
	j := lockJSON{Path: l.Path, Holders: []partyJSON{}, Waiters: []partyJSON{}, EstimatedWaitMs: l.EstimatedWaitMs, Flags: []string{}}
	for _, p := range l.Holders {
		h := party(p, now)
		j.Holders, j.HeldForMs = append(j.Holders, h), max(j.HeldForMs, h.ForMs)
	}
	for _, p := range l.Waiters {
		w := party(p, now)
		j.Waiters, j.OldestWaitMs = append(j.Waiters, w), max(j.OldestWaitMs, w.ForMs)
	}
	if time.Duration(j.HeldForMs)*time.Millisecond > holdOver {
		j.Flags = append(j.Flags, "long-hold")
	}
	if len(j.Waiters) > queueOver {
		j.Flags = append(j.Flags, "long-queue")
	}
	return j
}

func (e *env) locksCommand() *cobra.Command {
	var holdOver time.Duration
	var queueOver int
	cmd := &cobra.Command{
		Use:   "locks [PATH]",
		Short: "The lock doctor: every lock, who holds it, for how long, and who waits",
		Long: "List every lock at or under PATH (default: every lock the server knows),\n" +
			"whoever took it (a Go recipe, an HTTP client): its holders (owner, mode, for how\n" +
			"long), the length of its queue and its oldest wait. A hold longer than\n" +
			"--hold-over is flagged long-hold, a queue longer than --queue-over long-queue.\n" +
			"It reads linearizably: no holder that has left shows.",
		Example: "  arbor locks\n  arbor locks /locks/payments --hold-over 1m\n  arbor locks -o json",
		Args:    usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathOrRoot(args)
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				locks, err := c.Locks(ctx, path, true)
				if err != nil {
					return describe(err, path)
				}
				now := time.Now()
				out := make([]lockJSON, len(locks))
				for i, l := range locks {
					out[i] = doctor(l, now, holdOver, queueOver)
				}
				if e.json() {
					return e.printJSON(out)
				}
				tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PATH\tMODE\tHOLDER\tHELD FOR\tQUEUE\tOLDEST WAIT\tFLAGS")
				for _, l := range out {
					mode, holder := "-", "-"
					if len(l.Holders) > 0 {
						mode, holder = l.Holders[0].Mode, l.Holders[0].Owner
						if n := len(l.Holders); n > 1 {
							holder += fmt.Sprintf(" (+%d)", n-1)
						}
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", l.Path, mode, holder, ms(l.HeldForMs),
						len(l.Waiters), ms(l.OldestWaitMs), strings.Join(l.Flags, ","))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().DurationVar(&holdOver, "hold-over", 5*time.Minute, "flag holds longer than this")
	cmd.Flags().IntVar(&queueOver, "queue-over", 100, "flag queues longer than this")
	cmd.AddCommand(e.locksQueueCommand(), e.deadlocksCommand(), e.breakCommand(), e.historyCommand(), e.checkCommand())
	return cmd
}

// pathOrRoot is the path the optional argument names, "/" without one.
func (e *env) pathOrRoot(args []string) string {
	if len(args) == 1 {
		return e.path(args[0])
	}
	return "/"
}

// ms shows a duration in ms rounded to the second, "-" for none.
func ms(v int64) string {
	if v <= 0 {
		return "-"
	}
	return (time.Duration(v) * time.Millisecond).Round(time.Second).String()
}

// waitJSON is one wait of a deadlock that deadlocks prints.
type waitJSON struct {
	Waiter partyJSON `json:"waiter"`
	Lock   string    `json:"lock"`
	Holder partyJSON `json:"holder"`
}

func (e *env) deadlocksCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "deadlocks",
		Short: "Print every cycle of holders that wait for each other's locks",
		Long: "Print every deadlock: holders (an owner's Mutex, RWMutex or MultiLock value,\n" +
			"or an HTTP client) each waiting for a lock another of the cycle holds. Each\n" +
			"cycle starts with its youngest wait, the one to end to break it. Exits 0 with\n" +
			"no cycles, 1 with some.",
		Example: "  arbor locks deadlocks\n  arbor locks deadlocks -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			var found bool
			err := e.run(cmd, func(ctx context.Context, c *client.Client) error {
				cycles, err := c.Deadlocks(ctx, true)
				if err != nil {
					return err
				}
				found = len(cycles) > 0
				now := time.Now()
				out := make([][]waitJSON, len(cycles))
				for i, cycle := range cycles {
					for _, w := range cycle {
						out[i] = append(out[i], waitJSON{Waiter: party(w.Waiter, now), Lock: w.Lock, Holder: party(w.Holder, now)})
					}
				}
				if e.json() {
					return e.printJSON(map[string]any{"cycles": out})
				}
				for i, cycle := range out {
					fmt.Fprintf(e.stdout, "cycle %d:\n", i+1)
					for _, w := range cycle {
						fmt.Fprintf(e.stdout, "  %s waits %s for %s, held by %s\n",
							who(w.Waiter), ms(w.Waiter.ForMs), w.Lock, who(w.Holder))
					}
				}
				if !found {
					fmt.Fprintln(e.stdout, "no deadlocks")
				}
				return nil
			})
			if err == nil && found {
				return errDeadlocks
			}
			return err
		},
	}
}

// errDeadlocks makes deadlocks exit 1 when it found some.
var errDeadlocks = errors.New("deadlocks found")

// who names a party: its owner, and its holder id when it has one.
func who(p partyJSON) string {
	if p.Holder == "" {
		return p.Owner
	}
	return p.Owner + " (holder " + p.Holder + ")"
}

// contenderJSON is one node that locks queue prints.
type contenderJSON struct {
	Node     string `json:"node"`
	Kind     string `json:"kind"`
	Role     string `json:"role"`               // "holder" or "waiter"; "-" for kinds a queue cannot tell
	Priority int    `json:"priority,omitempty"` // a lock waiter's priority; none: 0, left out
	Session  string `json:"session"`
	Ctime    int64  `json:"ctime"` // ms since the Unix epoch
	AgeMs    int64  `json:"ageMs"`
	Owner    string `json:"owner,omitempty"`  // a lock's: who holds or waits
	Holder   string `json:"holder,omitempty"` // a lock's: which holder of the owner
	dataJSON
}

func role(ct recipes.Contender) string {
	switch {
	case ct.Holds:
		return "holder"
	case lockq.Kind(ct.Kind).Ordered():
		return "waiter"
	}
	return "-"
}

func (e *env) locksQueueCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "queue PATH",
		Short: "Show the queue of a lock or an election, node by node",
		Long: "List the contenders of the lock, read/write lock or election at PATH in queue\n" +
			"order: each one's role (holder or waiter), kind (lock, read, write, or n for a\n" +
			"candidate), session id, age and owner (a lock's owner, host:pid unless its\n" +
			"client named another; a candidate's value).",
		Example:           "  arbor locks queue /locks/deploy\n  arbor locks queue -o json /service/leader",
		Args:              e.pathArgs(),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathArg(args)
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				cts, err := recipes.Contenders(ctx, c, path)
				if err != nil {
					return describe(err, path)
				}
				now := time.Now()
				if e.json() {
					out := make([]contenderJSON, len(cts))
					for i, ct := range cts {
						out[i] = contenderJSON{
							Node: ct.Node, Kind: ct.Kind, Role: role(ct), Priority: ct.Priority, Session: sessionHex(ct.Session),
							Ctime: ct.Created.UnixMilli(), AgeMs: now.Sub(ct.Created).Milliseconds(),
							Owner: ct.Owner, Holder: ct.Holder, dataJSON: dataOf(ct.Data),
						}
					}
					return e.printJSON(out)
				}
				tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ROLE\tKIND\tSESSION\tAGE\tOWNER\tNODE")
				for _, ct := range cts {
					owner := ct.Owner
					if !lockq.Kind(ct.Kind).IsLock() {
						owner = preview(ct.Data) // a candidate's value
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", role(ct), ct.Kind, sessionHex(ct.Session),
						now.Sub(ct.Created).Round(time.Second), owner, ct.Node)
				}
				return tw.Flush()
			})
		},
	}
}

func (e *env) breakCommand() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "break PATH",
		Short: "Free a stuck lock: its holders' nodes go, the next waiter holds",
		Long: "Free the lock at PATH: delete the nodes of whoever holds it, so that the next\n" +
			"waiter holds, with a higher fencing token. A holder bound to a lease is told\n" +
			"(LostReason: the node was deleted); the server logs who broke the lock and\n" +
			"--reason. It needs ADMIN and DELETE on PATH (docs/locks.md).",
		Example:           "  arbor locks break /locks/deploy --reason 'build-3 hung since 09:12'",
		Args:              e.pathArgs(),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathArg(args)
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				nodes, err := c.BreakLock(ctx, path, reason)
				if err != nil {
					return describe(err, path)
				}
				if e.json() {
					return e.printJSON(map[string]any{"path": path, "broken": nodes})
				}
				_, err = fmt.Fprintf(e.stdout, "broke %s: %s\n", path, strings.Join(nodes, ", "))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the server's log and the lock history")
	return cmd
}

// errStaleToken makes check exit 1 when the token is not current.
var errStaleToken = errors.New("the token is not a current holder's")

func (e *env) checkCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check PATH TOKEN",
		Short: "Say whether TOKEN is the fencing token of a current holder of the lock at PATH",
		Long: "Ask the cluster, linearizably (the server syncs with the leader first), whether\n" +
			"TOKEN is the fencing token of a current holder of the lock at PATH: what a\n" +
			"resource guarded by the lock asks before it acts for a holder. Exits 0 when it\n" +
			"is, 1 when it is not (the lock moved on, or nobody holds it).",
		Example: "  arbor locks check /locks/deploy 4294967331\n  arbor locks check /locks/deploy 4294967331 -o json",
		Args:    usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.path(args[0])
			token, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil || token <= 0 {
				return usagef("TOKEN %q is not a fencing token (a number above 0)", args[1])
			}
			var current bool
			err = e.run(cmd, func(ctx context.Context, c *client.Client) error {
				v, err := c.CheckToken(ctx, path, token)
				if err != nil {
					return describe(err, path)
				}
				current = v.Current
				if e.json() {
					return e.printJSON(map[string]any{"path": path, "token": token, "current": v.Current, "holders": append([]int64{}, v.Holders...)})
				}
				switch {
				case v.Current:
					_, err = fmt.Fprintf(e.stdout, "%d holds %s\n", token, path)
				case len(v.Holders) == 0:
					_, err = fmt.Fprintf(e.stdout, "%d does not hold %s: nobody holds it\n", token, path)
				default:
					_, err = fmt.Fprintf(e.stdout, "%d does not hold %s: %s holds it\n", token, path, joinInts(v.Holders))
				}
				return err
			})
			if err == nil && !current {
				return errStaleToken
			}
			return err
		},
	}
}

// joinInts is ints as "1, 2, 3".
func joinInts(ints []int64) string {
	s := make([]string, len(ints))
	for i, n := range ints {
		s[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(s, ", ")
}

// lockEventJSON is one event that locks history prints.
type lockEventJSON struct {
	Zxid     int64  `json:"zxid"`
	Time     int64  `json:"time"` // ms since the Unix epoch
	Lock     string `json:"lock"`
	Event    string `json:"event"` // acquired, released, expired, session-ended, broken, deadlock
	Node     string `json:"node"`
	Mode     string `json:"mode"`
	Owner    string `json:"owner"`
	Holder   string `json:"holder,omitempty"`
	Session  string `json:"session"`
	Lease    string `json:"lease,omitempty"`
	Token    int64  `json:"token"`
	WaitedMs int64  `json:"waitedMs,omitempty"`
	HeldMs   int64  `json:"heldMs,omitempty"`
	By       string `json:"by,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

func (e *env) historyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "history [PATH]",
		Short: "Recent acquisitions, releases, expiries and breaks of the locks at or under PATH",
		Long: "Print the lock history the servers keep (the same on every member, bounded by\n" +
			"arbord --lock-history) for the locks at or under PATH, oldest first: who\n" +
			"acquired (with its fencing token and how long it waited), and how each hold\n" +
			"ended (released, expired, session-ended, broken: by whom and why) after how\n" +
			"long; and each wait the server ended for a deadlock. It reads linearizably.",
		Example:           "  arbor locks history /locks/deploy\n  arbor locks history -o json",
		Args:              usageArgs(cobra.MaximumNArgs(1)),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathOrRoot(args)
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				evs, err := c.LockHistory(ctx, path, true)
				if err != nil {
					return describe(err, path)
				}
				out := make([]lockEventJSON, len(evs))
				for i, ev := range evs {
					out[i] = lockEventJSON{Zxid: ev.Zxid, Time: ev.Time, Lock: ev.Lock, Event: ev.Kind, Node: ev.Node, Mode: ev.Mode,
						Owner: ev.Owner, Holder: ev.Holder, Session: sessionHex(ev.Session), Token: ev.Token,
						WaitedMs: ev.WaitedMs, HeldMs: ev.HeldMs, By: ev.By, Reason: ev.Reason}
					if ev.Lease != 0 {
						out[i].Lease = sessionHex(ev.Lease)
					}
				}
				if e.json() {
					return e.printJSON(out)
				}
				tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "TIME\tLOCK\tEVENT\tOWNER\tTOKEN\tWAITED\tHELD\tBY\tREASON")
				for _, ev := range out {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n",
						time.UnixMilli(ev.Time).Format("2006-01-02 15:04:05.000"), ev.Lock, ev.Event,
						who(partyJSON{Owner: ev.Owner, Holder: ev.Holder}), ev.Token,
						msPrecise(ev.WaitedMs), msPrecise(ev.HeldMs), dash(ev.By), dash(ev.Reason))
				}
				return tw.Flush()
			})
		},
	}
}

// msPrecise shows a duration in ms to the millisecond, "-" for none: a
// history's waits and holds are often shorter than a second.
func msPrecise(v int64) string {
	if v <= 0 {
		return "-"
	}
	return (time.Duration(v) * time.Millisecond).String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
