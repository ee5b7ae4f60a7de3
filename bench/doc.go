// Package bench puts load on an Arbor cluster and measures it: the
// throughput and latency of one workload, as `arbor bench` prints them.
//
//	rep, err := bench.Run(ctx, bench.Config{
//		Servers: []string{"127.0.0.1:2281"}, Workload: "set",
//		Conns: 8, Workers: 64, Size: 256, Keys: 1000,
//		Warmup: 2 * time.Second, Duration: 10 * time.Second,
//		Prefix: "/bench", Timeout: 10 * time.Second,
//	})
//	fmt.Printf("%.0f ops/s, p99 %v\n", rep.OpsPerSec, rep.Latency.P99)
//
// # Workloads
//
//   - set: setData of Size bytes on Keys nodes, Workers goroutines sharing
//     Conns sessions (worker i uses session i mod Conns).
//   - get: getData of the same.
//   - create: persistent sequential creates of Size bytes, each worker
//     under a parent of its own.
//   - mixed: getData with probability ReadRatio, else setData.
//   - lock: Contenders sessions, each with its own recipes.Mutex on one
//     path, take it, release it and queue again: an op is an acquisition
//     (a handoff), its latency the wait in Lock.
//   - watch: Watchers sessions, each with a persistent watch on one node,
//     and one writer session setting it again and again: an op is a
//     notification received, its latency the time from the write's send
//     to the receipt (the writer stamps the send time into the value).
//   - session: Workers goroutines each open a session (client.Dial) and
//     close it, again and again: an op is a session opened and closed.
//
// # Reconnect storms
//
// The locks workload (a lock service's load: Locks locks, each taken in
// turn by Contenders holders over Conns sessions) can kill a member during
// the measured phase (Config.Storm) and report, in Report.Storm, how long
// the sessions that were on it took to come back on the other members and
// whether any session, hold or lease was lost meanwhile.
//
// # Method
//
// The workload's goroutines run for Warmup, which is not counted, and then
// for the measured phase: Duration, or until Ops operations have begun.
// An operation counts when it begins in the measured phase; the phase ends
// when the last goroutine has finished the operation it had begun, and
// throughput is the operations that succeeded divided by that time.
// Latencies go to a log-linear histogram per goroutine (exact to within
// 1/128 of each value, fixed in size) and are merged at the end. Failed
// operations are counted by kind and not timed.
//
// Every node a run makes is under Prefix, below a node of the run's own
// (Prefix/WORKLOAD-NNNNNNNNNN), which is deleted at the end with
// everything in it, unless Keep; so is Prefix and any of its ancestors the
// run created (as containers, which the server also deletes once empty).
package bench
