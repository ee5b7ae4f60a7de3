package wire

// ZooKeeper's system nodes. Every tree has them from the start, as every
// ZooKeeper DataTree has: /zookeeper, and under it /zookeeper/quota (where
// quotas are set, see package quotas) and /zookeeper/config (the cluster's
// membership, as dynamic reconfiguration writes it; readable by anyone,
// writable by no one but the superuser). Their ACLs decide who may create
// under them or change them, as in ZooKeeper; none of them, nor the root,
// can be deleted.
const (
	ZooKeeperPath = "/zookeeper"
	QuotaPath     = "/zookeeper/quota"
	ConfigPath    = "/zookeeper/config"
	// ShardsPath holds the cluster's partition map (package shardmap) once
	// an operator first changes it (arbor shards): Arbor's, not
	// ZooKeeper's. Anyone may read and watch it; only the cluster writes
	// it, not even the superuser (tree.TxnSetShardMap).
	ShardsPath = "/zookeeper/shards"
)

// IsSystemNode reports whether path is the root or one of the system
// nodes (ZooKeeper's, and ShardsPath): the nodes a delete is refused for
// with BadArguments (ZooKeeper's DataTree.isSpecialPath), and that a
// recursive delete leaves in place.
func IsSystemNode(path string) bool {
	switch path {
	case "/", ZooKeeperPath, QuotaPath, ConfigPath, ShardsPath:
		return true
	}
	return false
}
