package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/wire"
)

// quotaJSON is a quota's JSON: its limits (-1: none) and its usage.
type quotaJSON struct {
	Path   string         `json:"path"`
	Limits quotaLimitJSON `json:"limits"`
	Usage  quotaUsageJSON `json:"usage"`
}

type quotaLimitJSON struct {
	Count          int64 `json:"count"`
	Bytes          int64 `json:"bytes"`
	CountHardLimit int64 `json:"countHardLimit"`
	ByteHardLimit  int64 `json:"byteHardLimit"`
}

type quotaUsageJSON struct {
	Count int64 `json:"count"`
	Bytes int64 `json:"bytes"`
}

func quotaOf(q client.Quota) quotaJSON {
	ls := q.Limits.Limits()
	return quotaJSON{Path: q.Path,
		Limits: quotaLimitJSON{ls[quotas.Count], ls[quotas.Bytes], ls[quotas.CountHard], ls[quotas.BytesHard]},
		Usage:  quotaUsageJSON{q.Usage.Count(), q.Usage.Bytes()}}
}

// quotaFlags are the flags of setquota and delquota, zkCli's -n, -b, -N
// and -B, by quotas.Limit.
var quotaFlags = [...]struct{ name, short, usage string }{
	quotas.Count:     {"count", "n", "soft limit on the number of nodes"},
	quotas.Bytes:     {"bytes", "b", "soft limit on the bytes of data"},
	quotas.CountHard: {"count-hard", "N", "hard limit on the number of nodes"},
	quotas.BytesHard: {"bytes-hard", "B", "hard limit on the bytes of data"},
}

const quotaHelp = "A quota limits the subtree under PATH, PATH included: -n and -N its number of\n" +
	"nodes, -b and -B the bytes of their data. A soft limit (-n, -b) lets writes\n" +
	"through and the server logs and counts them (arbor_quota_exceeded_total); a hard\n" +
	"limit (-N, -B) refuses the create or setData that would pass it (QuotaExceeded).\n" +
	"Quotas live under /zookeeper/quota as ZooKeeper keeps them, so zkCli.sh and\n" +
	"ZooKeeper clients see and set the same ones."

func (e *env) setquotaCommand() *cobra.Command {
	var values quotas.Limits
	cmd := &cobra.Command{
		Use:   "setquota -n|-b|-N|-B VALUE PATH",
		Short: "Set a limit of the quota on a subtree",
		Long: "Set one limit of the quota on PATH, making the quota if there is none, as\n" +
			"zkCli.sh's setquota does. PATH must exist, and no path above or below it may\n" +
			"have a quota; the root and /zookeeper have none. A limit below what the subtree\n" +
			"holds already is set, with a warning on stderr. Prints nothing, or with -o json\n" +
			"the quota.\n\n" + quotaHelp,
		Example: "  arbor setquota -N 1000 /app    # at most 1000 nodes under /app, /app included\n" +
			"  arbor setquota -b 1048576 /app # warn past 1 MiB of data",
		Args:              usageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.path(args[0])
			var chosen []client.QuotaLimit
			for _, l := range quotas.AllLimits {
				if cmd.Flags().Changed(quotaFlags[l].name) {
					chosen = append(chosen, l)
				}
			}
			if len(chosen) != 1 {
				return usagef("give one of -n, -b, -N and -B")
			}
			limit, value := chosen[0], values[chosen[0]]
			switch {
			case !limit.OnBytes() && value <= 0:
				return usagef("the num quota must be greater than zero")
			case value < 0:
				return usagef("the bytes quota must be greater than or equal to zero")
			}
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				q, err := c.SetQuota(ctx, path, limit, value)
				if err != nil {
					return describeQuota(err, path)
				}
				for _, over := range q.Over() {
					kind, use := "count", q.Usage.Count()
					if over.OnBytes() {
						kind, use = "bytes", q.Usage.Bytes()
					}
					fmt.Fprintf(e.stderr, "arbor: warning: the %s quota you set is less than the existing %s: %d\n", kind, kind, use)
				}
				if e.json() {
					return e.printJSON(quotaOf(q))
				}
				return nil
			})
		},
	}
	for _, l := range quotas.AllLimits {
		cmd.Flags().Int64VarP(&values[l], quotaFlags[l].name, quotaFlags[l].short, 0, quotaFlags[l].usage)
	}
	return cmd
}

func (e *env) listquotaCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "listquota PATH",
		Short: "Print the quota on a subtree and its usage",
		Long: "Print the quota on PATH as zkCli.sh's listquota does: its limits, then what the\n" +
			"subtree holds, in ZooKeeper's StatsTrack form (-1 is no limit):\n\n" +
			"  Output quota for /app count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=1000\n" +
			"  Output stat for /app count=3,bytes=12\n\n" + quotaHelp,
		Example:           "  arbor listquota /app\n  arbor listquota -o json /app",
		Args:              e.pathArgs(),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.pathArg(args)
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				q, err := c.Quota(ctx, path)
				if err != nil {
					return describeQuota(err, path)
				}
				if e.json() {
					return e.printJSON(quotaOf(q))
				}
				fmt.Fprintf(e.stdout, "Output quota for %s %s\n", path, q.Limits)
				if q.Usage.Count() >= 0 {
					fmt.Fprintf(e.stdout, "Output stat for %s %s\n", path, q.Usage)
				}
				return nil
			})
		},
	}
}

func (e *env) delquotaCommand() *cobra.Command {
	var chosen [len(quotas.AllLimits)]bool
	cmd := &cobra.Command{
		Use:   "delquota [-n|-b|-N|-B] PATH",
		Short: "Delete the quota on a subtree, or one of its limits",
		Long: "Delete the quota on PATH, or with a flag only that limit of it, as zkCli.sh's\n" +
			"delquota does. Prints nothing, or with -o json the path.\n\n" + quotaHelp,
		Example:           "  arbor delquota /app\n  arbor delquota -N /app   # the hard limit on nodes only",
		Args:              usageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := e.path(args[0])
			var limits []client.QuotaLimit
			for _, l := range quotas.AllLimits {
				if chosen[l] {
					limits = append(limits, l)
				}
			}
			if len(limits) > 1 {
				return usagef("give at most one of -n, -b, -N and -B")
			}
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				if err := c.DeleteQuota(ctx, path, limits...); err != nil {
					return describeQuota(err, path)
				}
				if e.json() {
					return e.printJSON(pathJSON{Path: path})
				}
				return nil
			})
		},
	}
	for _, l := range quotas.AllLimits {
		cmd.Flags().BoolVarP(&chosen[l], quotaFlags[l].name, quotaFlags[l].short, false, "delete the "+quotaFlags[l].usage)
	}
	return cmd
}

// describeQuota says a quota command's error in zkCli's words.
func describeQuota(err error, path string) error {
	switch {
	case errors.Is(err, client.ErrNoQuota):
		return fmt.Errorf("quota for %s does not exist", path)
	case errors.Is(err, quotas.ErrNotAllowed) && strings.HasPrefix(path, wire.QuotaPath):
		return fmt.Errorf("cannot set a quota under the path: %s", wire.QuotaPath)
	case errors.Is(err, quotas.ErrNotAllowed) && (path == "/" || path == wire.ZooKeeperPath || strings.HasPrefix(path, wire.ZooKeeperPath+"/")):
		return fmt.Errorf("cannot set a quota on %s: the root and /zookeeper have none", path)
	case errors.Is(err, quotas.ErrNotAllowed):
		return fmt.Errorf("cannot set a quota on %s: a node on its path is named %s or %s, as a quota's own nodes are", path, quotas.LimitNode, quotas.StatNode)
	case errors.Is(err, client.ErrQuotaNested):
		_, msg, _ := strings.Cut(err.Error(), ": ")
		return errors.New(msg)
	case errors.Is(err, client.ErrNoNode) && !errors.Is(err, client.ErrNoQuota):
		return fmt.Errorf("%s does not exist", path)
	}
	return describe(err, path)
}
