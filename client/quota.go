package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/wire"
)

// Quotas, as ZooKeeper's zkCli.sh sets, lists and deletes them: a quota on
// PATH is the node /zookeeper/quota/PATH/zookeeper_limits, which these
// calls write with ordinary creates and setData, and
// /zookeeper/quota/PATH/zookeeper_stats, which the server keeps up to
// date. A ZooKeeper client writing the same nodes sets the same quota.
// Like zkCli's, the calls are several requests, not one atomic step.

// QuotaLimit names one of a quota's four limits (quotas.Limit).
type QuotaLimit = quotas.Limit

// The limits: soft ones are reported when passed (the server logs and
// counts it); hard ones refuse the write that would pass them with
// ErrQuotaExceeded.
const (
	QuotaCount     = quotas.Count     // soft: nodes in the subtree, its root included (zkCli's -n)
	QuotaBytes     = quotas.Bytes     // soft: bytes of data in the subtree (-b)
	QuotaCountHard = quotas.CountHard // hard: nodes (-N)
	QuotaBytesHard = quotas.BytesHard // hard: bytes (-B)
)

// Quota is a quota as its two nodes say it.
type Quota struct {
	Path   string            // the path it is on
	Limits quotas.StatsTrack // -1: no such limit
	Usage  quotas.StatsTrack // Count and Bytes of the subtree; -1 if there is no stats node
}

// Over lists the limits the subtree is over already.
func (q Quota) Over() []QuotaLimit { return q.Limits.Limits().Over(q.Usage.Count(), q.Usage.Bytes()) }

// ErrQuotaNested is the error of SetQuota on a path with a quota on an
// ancestor or on a descendant: ZooKeeper's zkCli refuses to nest them.
var ErrQuotaNested = errors.New("quotas cannot be nested")

// ErrNoQuota is the error of Quota and DeleteQuota for a path without a
// quota; it matches ErrNoNode too.
var ErrNoQuota = fmt.Errorf("%w: no quota", ErrNoNode)

// SetQuota sets limit of the quota on path to value, making the quota if
// there is none (its other limits none), and returns the quota as it is
// then. It refuses, as zkCli's setquota does: a path that cannot have a
// quota (the root, /zookeeper and below, and one with a segment named as
// a quota's nodes, such as /app/zookeeper_limits: quotas.ErrNotAllowed), one that
// does not exist (ErrNoNode), one with a quota above or below it
// (ErrQuotaNested), a count limit below 1 or a byte limit below 0
// (ErrBadArguments). A limit below what the subtree holds already is set
// (see Quota.Over): it refuses only the writes that would grow it.
func (c *Client) SetQuota(ctx context.Context, path string, limit QuotaLimit, value int64) (Quota, error) {
	switch {
	case !limit.Valid():
		return Quota{}, fmt.Errorf("%w: unknown quota limit %d", ErrBadArguments, int(limit))
	case (limit == QuotaCount || limit == QuotaCountHard) && value <= 0:
		return Quota{}, fmt.Errorf("%w: the num quota must be greater than zero", ErrBadArguments)
	case value < 0:
		return Quota{}, fmt.Errorf("%w: the bytes quota must be greater than or equal to zero", ErrBadArguments)
	}
	if err := quotas.Check(path); err != nil {
		return Quota{}, err
	}
	if ok, _, err := c.Exists(ctx, path); err != nil {
		return Quota{}, err
	} else if !ok {
		return Quota{}, fmt.Errorf("%w: %s does not exist", ErrNoNode, path)
	}
	if err := c.checkQuotaNesting(ctx, path); err != nil {
		return Quota{}, err
	}
	open := WithACL(wire.OpenACL...) // as zkCli makes them
	p := wire.QuotaPath
	for _, seg := range strings.Split(path[1:], "/") {
		p += "/" + seg
		if _, err := c.Create(ctx, p, nil, Persistent, open); err != nil && !errors.Is(err, ErrNodeExists) {
			return Quota{}, err
		}
	}
	for range 5 { // another client may set a limit of the same quota meanwhile
		data, st, err := c.Get(ctx, quotas.LimitPath(path))
		if errors.Is(err, ErrNoNode) {
			var limits quotas.StatsTrack
			limits.SetLimits(quotas.NoLimits)
			limits.SetLimit(limit, value)
			_, err = c.Multi(ctx,
				CreateOp(quotas.LimitPath(path), []byte(limits.String()), Persistent, open),
				CreateOp(quotas.StatPath(path), []byte(quotas.Usage(0, 0)), Persistent, open))
			if errors.Is(err, ErrNodeExists) {
				continue
			}
			if err != nil {
				return Quota{}, err
			}
			return c.Quota(ctx, path)
		}
		if err != nil {
			return Quota{}, err
		}
		limits, err := quotas.Parse(string(data))
		if err != nil {
			limits = quotas.StatsTrack{} // the server refuses such limits: a node from before it checked them
			limits.SetLimits(quotas.NoLimits)
		}
		limits.SetLimit(limit, value)
		if _, err := c.Set(ctx, quotas.LimitPath(path), []byte(limits.String()), st.Version); errors.Is(err, ErrBadVersion) || errors.Is(err, ErrNoNode) {
			continue
		} else if err != nil {
			return Quota{}, err
		}
		return c.Quota(ctx, path)
	}
	return Quota{}, fmt.Errorf("%w: the quota on %s kept changing", ErrBadVersion, path)
}

// checkQuotaNesting refuses a quota on path if an ancestor or a
// descendant of path has one (zkCli's checkIfParentQuota and
// checkIfChildQuota).
func (c *Client) checkQuotaNesting(ctx context.Context, path string) error {
	for p := path; ; {
		i := strings.LastIndexByte(p, '/')
		if i <= 0 {
			break
		}
		p = p[:i]
		if ok, _, err := c.Exists(ctx, quotas.LimitPath(p)); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("%w: %s has a parent %s which has a quota", ErrQuotaNested, path, p)
		}
	}
	own := quotas.LimitPath(path)
	err := c.Walk(ctx, quotas.QuotaPath(path), func(p string, _ Stat, children []string) error {
		for _, name := range children {
			if name == quotas.LimitNode && p+"/"+name != own {
				return fmt.Errorf("%w: %s has a child %s which has a quota", ErrQuotaNested, path, strings.TrimPrefix(p, wire.QuotaPath))
			}
		}
		return nil
	})
	if errors.Is(err, ErrNoNode) {
		return nil
	}
	return err
}

// Quota returns the quota on path (zkCli's listquota), or ErrNoQuota.
func (c *Client) Quota(ctx context.Context, path string) (Quota, error) {
	if err := wire.ValidatePath(path, false); err != nil {
		return Quota{}, fmt.Errorf("%w: %w", ErrInvalidPath, err)
	}
	data, _, err := c.Get(ctx, quotas.LimitPath(path))
	if errors.Is(err, ErrNoNode) {
		return Quota{}, fmt.Errorf("%w on %s", ErrNoQuota, path)
	}
	if err != nil {
		return Quota{}, err
	}
	q := Quota{Path: path}
	if q.Limits, err = quotas.Parse(string(data)); err != nil {
		return Quota{}, fmt.Errorf("%w: the limits of %s: %w", ErrBadArguments, path, err)
	}
	data, _, err = c.Get(ctx, quotas.StatPath(path))
	switch {
	case errors.Is(err, ErrNoNode):
	case err != nil:
		return Quota{}, err
	default:
		q.Usage, _ = quotas.Parse(string(data)) // the server writes it: it parses
	}
	return q, nil
}

// DeleteQuota deletes limits of the quota on path, or without limits the
// whole quota: its nodes, and the nodes above them under /zookeeper/quota
// that no other quota needs (zkCli's delquota). A quota without limits
// stays a quota, whose usage the server keeps. It fails with ErrNoQuota if
// path has none.
func (c *Client) DeleteQuota(ctx context.Context, path string, limits ...QuotaLimit) error {
	if err := wire.ValidatePath(path, false); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidPath, err)
	}
	if len(limits) > 0 {
		for range 5 {
			data, st, err := c.Get(ctx, quotas.LimitPath(path))
			if errors.Is(err, ErrNoNode) {
				return fmt.Errorf("%w on %s", ErrNoQuota, path)
			}
			if err != nil {
				return err
			}
			q, err := quotas.Parse(string(data))
			if err != nil {
				q = quotas.StatsTrack{}
				q.SetLimits(quotas.NoLimits)
			}
			for _, l := range limits {
				q.SetLimit(l, -1)
			}
			_, err = c.Set(ctx, quotas.LimitPath(path), []byte(q.String()), st.Version)
			switch {
			case errors.Is(err, ErrBadVersion):
				continue
			case errors.Is(err, ErrNoNode): // deleted since the Get
				return fmt.Errorf("%w on %s", ErrNoQuota, path)
			}
			return err
		}
		return fmt.Errorf("%w: the quota on %s kept changing", ErrBadVersion, path)
	}
	if err := c.Delete(ctx, quotas.LimitPath(path), -1); errors.Is(err, ErrNoNode) {
		return fmt.Errorf("%w on %s", ErrNoQuota, path)
	} else if err != nil {
		return err
	}
	if err := c.Delete(ctx, quotas.StatPath(path), -1); err != nil && !errors.Is(err, ErrNoNode) {
		return err
	}
	for p := quotas.QuotaPath(path); p != wire.QuotaPath; p = p[:strings.LastIndexByte(p, '/')] {
		err := c.Delete(ctx, p, -1)
		if errors.Is(err, ErrNotEmpty) {
			return nil
		}
		if err != nil && !errors.Is(err, ErrNoNode) {
			return err
		}
	}
	return nil
}
