package quotas

import (
	"errors"
	"fmt"
	"strings"

	"github.com/arbor-coord/arbor/wire"
)

// The names of a quota's two nodes (ZooKeeper's Quotas.limitNode and
// Quotas.statNode).
const (
	LimitNode = "zookeeper_limits"
	StatNode  = "zookeeper_stats"
)

// QuotaPath is the node under which path's quota lives:
// /zookeeper/quota + path.
func QuotaPath(path string) string { return wire.QuotaPath + path }

// LimitPath is the node that holds path's limits.
func LimitPath(path string) string { return wire.QuotaPath + path + "/" + LimitNode }

// StatPath is the node that holds path's usage.
func StatPath(path string) string { return wire.QuotaPath + path + "/" + StatNode }

// ErrNotAllowed is the error of Check for a path that cannot have a quota.
var ErrNotAllowed = errors.New("quotas: no quota on this path")

// Check returns nil if path may have a quota: any valid path but the
// root, ZooKeeper's own subtree (/zookeeper and below), and a path with a
// segment named as a quota's nodes, such as /app/zookeeper_limits, whose
// quota's directory would be the node of /app's limits or usage.
// ZooKeeper keeps no quota on the root either; it lets zkCli set one on
// /zookeeper (not below /zookeeper/quota), and then counts the quota
// nodes themselves, and on /app/zookeeper_limits, which makes /app's
// limits node the parent of its own.
func Check(path string) error {
	if err := wire.ValidatePath(path, false); err != nil {
		return err
	}
	if path == "/" || path == wire.ZooKeeperPath || strings.HasPrefix(path, wire.ZooKeeperPath+"/") {
		return fmt.Errorf("%w: %s is the root or ZooKeeper's own", ErrNotAllowed, path)
	}
	for _, seg := range strings.Split(path[1:], "/") {
		if seg == LimitNode || seg == StatNode {
			return fmt.Errorf("%w: %s has a node named %s, as a quota's own nodes are", ErrNotAllowed, path, seg)
		}
	}
	return nil
}

// Split tells whether the node at nodePath is one of a quota's nodes: it
// returns the path the quota is on and the node's name (LimitNode or
// StatNode), and ok. A node named so that sits at a path which cannot
// have a quota (see Check) is not one.
func Split(nodePath string) (path, name string, ok bool) {
	rest, found := strings.CutPrefix(nodePath, wire.QuotaPath)
	if !found || !strings.HasPrefix(rest, "/") {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	path, name = rest[:i], rest[i+1:]
	if name != LimitNode && name != StatNode || path == "" || Check(path) != nil {
		return "", "", false
	}
	return path, name, true
}
