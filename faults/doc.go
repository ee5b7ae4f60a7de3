// Package faults is Arbor's fault suite, in the manner of Jepsen and etcd's
// robustness tests. Its tests run clusters of real arbord processes on
// loopback, put a TCP proxy on every directed peer link, inject faults on a
// schedule drawn from a seed (kill -9, SIGSTOP pauses longer than a session
// timeout, partitions, one-way cuts, message loss and delay, a crash of the
// whole cluster) while clients run workloads, and then check what the
// clients saw: linearizability of the register workload (with
// github.com/anishathalye/porcupine), lock safety with fencing tokens,
// session and ephemeral lifetimes, watch delivery, durability of
// acknowledged writes, and equal replicas.
//
// The package has only tests. `go test ./faults` runs a short pass; see
// docs/reliability.md for the long mode, replaying a seed and fuzzing.
package faults
