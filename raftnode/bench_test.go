package raftnode

import (
	"context"
	"encoding/binary"
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
