package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
	"github.com/arbor-coord/arbor/server"
	"go.uber.org/zap"
)

// benchServer runs a quiet single node and one client for a benchmark.
func benchServer(b *testing.B) (*client.Client, context.Context) {
	b.Helper()
	s := startServer(b, "", "", func(c *server.Config) { c.Logger = zap.NewNop() })
	ctx := context.Background()
	c, err := client.Dial(ctx, []string{s.Addr().String()}, client.WithLogger(zap.NewNop()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c, ctx
}

// BenchmarkClient measures setData and getData of 256-byte values through
// the real client against a single node, with 1 and with 64 concurrent
// callers on one connection. Every setData is fsynced before its reply.
func BenchmarkClient(b *testing.B) {
	value := make([]byte, 256)
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("setData/callers=%d", callers), func(b *testing.B) {
			c, ctx := benchServer(b)
			mustBenchCreate(b, c, ctx)
			runParallel(b, callers, func() error {
				_, err := c.Set(ctx, "/bench", value, -1)
				return err
			})
		})
		b.Run(fmt.Sprintf("getData/callers=%d", callers), func(b *testing.B) {
			c, ctx := benchServer(b)
			mustBenchCreate(b, c, ctx)
			runParallel(b, callers, func() error {
				_, _, err := c.Get(ctx, "/bench")
				return err
			})
		})
	}
}

func mustBenchCreate(b *testing.B, c *client.Client, ctx context.Context) {
	b.Helper()
	if _, err := c.Create(ctx, "/bench", make([]byte, 256), client.Persistent); err != nil {
		b.Fatal(err)
	}
}

// runParallel runs op b.N times in all, spread over callers goroutines.
func runParallel(b *testing.B, callers int, op func() error) {
	b.ReportAllocs()
	var left atomic.Int64
	left.Store(int64(b.N))
	errs := make(chan error, callers)
	b.ResetTimer()
	for i := 0; i < callers; i++ {
		go func() {
			for left.Add(-1) >= 0 {
				if err := op(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for i := 0; i < callers; i++ {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
}

// BenchmarkCluster3 measures the same through one client connected to a
// member of a 3-member loopback cluster (all members on this machine).
func BenchmarkCluster3(b *testing.B) {
	value := make([]byte, 256)
	quiet := func(c *server.Config) { c.Logger = zap.NewNop(); c.TickInterval = 100 * time.Millisecond }
	for _, callers := range []int{1, 64} {
		for _, op := range []string{"setData", "getData"} {
			b.Run(fmt.Sprintf("%s/callers=%d", op, callers), func(b *testing.B) {
				c := startCluster(b, 3, quiet, overTCP)
				ctx := context.Background()
				member := c.follower()
				if os.Getenv("BENCH_LEADER") != "" {
					member = c.leader()
				}
				cl, err := client.Dial(ctx, []string{c.addr(member)}, client.WithLogger(zap.NewNop()))
				if err != nil {
					b.Fatal(err)
				}
				defer cl.Close()
				mustBenchCreate(b, cl, ctx)
				runParallel(b, callers, func() error {
					if op == "setData" {
						_, err := cl.Set(ctx, "/bench", value, -1)
						return err
					}
					_, _, err := cl.Get(ctx, "/bench")
					return err
				})
			})
		}
	}
}

// BenchmarkMutexHandoff measures how fast a recipes.Mutex passes between 16
// contenders, each with its own session, that take it, release it and
// queue again at once: handoffs per second and the time from Lock to
// holding (which, with 16 in line, is about 16 handoffs). On the 3-member
// cluster the contenders spread over the members.
func BenchmarkMutexHandoff(b *testing.B) {
	const contenders = 16
	quiet := func(c *server.Config) { c.Logger = zap.NewNop(); c.TickInterval = 100 * time.Millisecond }
	b.Run("node=1", func(b *testing.B) {
		s := startServer(b, "", "", quiet)
		benchHandoffs(b, contenders, []string{s.Addr().String()})
	})
	b.Run("nodes=3", func(b *testing.B) {
		benchHandoffs(b, contenders, startCluster(b, 3, quiet, overTCP).addrs())
	})
}

func benchHandoffs(b *testing.B, contenders int, addrs []string) {
	ctx := context.Background()
	mutexes := make([]*recipes.Mutex, contenders)
	for i := range mutexes {
		c, err := client.Dial(ctx, addrs[i%len(addrs):i%len(addrs)+1], client.WithLogger(zap.NewNop()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		mutexes[i] = recipes.NewMutex(c, "/bench/lock")
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	var mu sync.Mutex
	var waits []time.Duration
	var wg sync.WaitGroup
	errs := make(chan error, contenders)
	b.ResetTimer()
	start := time.Now()
	for _, m := range mutexes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				if err := m.Lock(ctx); err != nil {
					errs <- err
					return
				}
				d := time.Since(t0)
				mu.Lock()
				waits = append(waits, d)
				mu.Unlock()
				if err := m.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	slices.Sort(waits)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "handoffs/s")
	b.ReportMetric(float64(waits[len(waits)/2].Microseconds())/1000, "p50-acquire-ms")
	b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "p99-acquire-ms")
}
