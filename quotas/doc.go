// Package quotas is ZooKeeper's quota nodes, written once: where a path's
// quota lives, and the StatsTrack text its limits and its usage are
// written in. It is pure (no I/O): the tree uses it to keep the usage and
// enforce the limits at apply, the client library and the CLI to set,
// list and delete quotas the way zkCli.sh does.
//
// A quota on /app lives under /zookeeper/quota/app: its limits in the
// node zookeeper_limits, which clients write ("count=10,bytes=-1" for a
// soft limit of 10 nodes; ZooKeeper 3.7 added the hard limits,
// "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=10"), and its usage
// in zookeeper_stats ("count=3,bytes=42"), which the tree keeps up to date
// itself. Count is the nodes of the subtree, /app included; bytes the
// length of their data.
package quotas
