package raftnode

import (
	"context"
	"encoding/binary"
	"fmt"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

// BenchmarkPropose proposes 8-byte entries to a single member from 64
// goroutines and waits for each to apply: the raft path of a write
// (propose, Ready, fsync, apply, answer), without a network. Its B/op and
// allocs/op are what raftnode costs per write, whatever the machine's load.
func BenchmarkPropose(b *testing.B) {
	n, err := Start(Config{ID: 1, Dir: b.TempDir(), TickInterval: 10 * time.Millisecond, Logger: zap.NewNop()}, &counter{})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Stop()
	payload := binary.BigEndian.AppendUint64(nil, 1)
	ctx := context.Background()
	b.SetParallelism(32) // 64 proposers on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if o := n.Propose(ctx, payload).Wait(ctx); o.Err != nil {
				b.Error(o.Err)
				return
			}
		}
	})
}

// BenchmarkIdleGroups runs 3 members of n raft groups each over one store
// and one transport per member, with the default tick (50 ms) and
// nothing to replicate, and reports the CPU the process spends per
// second on each idle group (cpu-ms/s/group, all three members together):
// what ticks and heartbeats cost, and what is left once groups go quiet
// (quiesce=true: the members' alive frames, and timers).
func BenchmarkIdleGroups(b *testing.B) {
	for _, c := range []struct {
		quiesce bool
		n       int
	}{{false, 1}, {false, 10}, {false, 100}, {true, 10}, {true, 100}, {true, 1000}} {
		n := c.n
		b.Run(fmt.Sprintf("quiesce=%v/groups=%d", c.quiesce, n), func(b *testing.B) {
			var nodes []*Node
			var closers []func() error
			defer func() {
				for _, nd := range nodes {
					nd.Stop()
				}
				for _, c := range closers {
					c()
				}
			}()
			trs := map[uint64]*TCPTransport{}
			addrs := map[uint64]string{}
			for id := uint64(1); id <= 3; id++ {
				tr, err := NewTCPTransport(id, "127.0.0.1:0", nil, zap.NewNop())
				if err != nil {
					b.Fatal(err)
				}
				trs[id], addrs[id] = tr, tr.Addr().String()
				closers = append(closers, tr.Close)
			}
			for id, tr := range trs {
				for pid, addr := range addrs {
					if pid != id {
						tr.AddPeer(pid, addr)
					}
				}
				store, err := OpenStore(b.TempDir(), zap.NewNop())
				if err != nil {
					b.Fatal(err)
				}
				closers = append(closers, store.Close)
				for g := range uint64(n) {
					nd, err := Start(Config{ID: id, Peers: addrs, Store: store, Group: g, Transport: tr.Group(g), Quiesce: c.quiesce, Logger: zap.NewNop()}, &counter{})
					if err != nil {
						b.Fatal(err)
					}
					tr.AttachGroup(g, nd)
					nodes = append(nodes, nd)
				}
			}
			for _, nd := range nodes {
				for nd.Leader() == 0 {
					time.Sleep(10 * time.Millisecond)
				}
			}
			time.Sleep(time.Second) // past the elections' writes
			for _, nd := range nodes {
				for c.quiesce && !nd.Quiescent() {
					time.Sleep(10 * time.Millisecond)
				}
			}
			before := cpuTime()
			start := time.Now()
			b.ResetTimer()
			for range b.N {
				time.Sleep(time.Second)
			}
			b.StopTimer()
			perSecond := float64((cpuTime() - before).Milliseconds()) / time.Since(start).Seconds()
			b.ReportMetric(perSecond/float64(n), "cpu-ms/s/group")
		})
	}
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
