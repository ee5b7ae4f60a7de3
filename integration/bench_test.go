package integration

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
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
				c := startCluster(b, 3, quiet)
				ctx := context.Background()
				cl, err := client.Dial(ctx, []string{c.addr(c.follower())}, client.WithLogger(zap.NewNop()))
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
