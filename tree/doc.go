// Package tree is the znode tree as a pure, deterministic state machine.
//
// Apply takes one replicated change (a Txn) and returns its result and the
// watch events it fired. Everything non-deterministic (the time, session ids
// and passwords) travels inside the Txn, decided by whoever proposed it, so
// every replica that applies the same txns in the same order reaches the same
// state and the same Digest. The package does no I/O, starts no goroutines
// and never reads the clock.
//
// The semantics are ZooKeeper's: create modes (persistent, ephemeral,
// sequential, container, TTL), Stat and its update rules, conditional
// writes, the error codes, multi as all-or-nothing, and the events that
// one-shot watches fire on. The tree stores no watches; the server keeps them
// and matches the events Apply returns.
//
// Every znode carries an ACL, and Apply checks ZooKeeper's permissions with
// the identities the txn carries (create and delete on the parent, setData,
// check and setACL on the node); the server checks reads with Check. What
// the identities are, and whether an ACL is well formed, the proposer
// decided (see ResolveACL): Apply only compares.
//
// A Tree is not safe for concurrent use: the owner serializes Apply against
// the reads (the server holds a read-write lock around it). A View (Freeze)
// is the exception: a copy-on-write view of the tree as it was, which
// another goroutine may write as a snapshot while Apply goes on.
package tree
