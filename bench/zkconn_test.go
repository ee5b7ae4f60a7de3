package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
	"github.com/arbor-coord/arbor/zkwire"
	"go.uber.org/zap/zaptest"
)

// startZKServer runs a server with a ZooKeeper port on loopback and returns
// the addresses of its two ports.
func startZKServer(t *testing.T) (arbor, zk string) {
	t.Helper()
	s, err := server.New(server.Config{
		Listen: "127.0.0.1:0", ZKListen: "127.0.0.1:0", HTTP: "-", DataDir: t.TempDir(),
		TickInterval: 10 * time.Millisecond, Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.Addr().String(), s.ZKAddr().String()
}

func TestTheZooKeeperLoadRunsEachOfItsWorkloads(t *testing.T) {
	addr, zkAddr := startZKServer(t)
	for _, workload := range zkWorkloads {
		t.Run(workload, func(t *testing.T) {
			cfg := config(addr, workload)
			cfg.Protocol, cfg.ZKServers = "zk", []string{zkAddr}
			rep, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Ops == 0 || rep.Errors != 0 || rep.Protocol != "zk" {
				t.Errorf("ops %d, errors %d %v (first %q), protocol %q: want ops, no errors, zk",
					rep.Ops, rep.Errors, rep.ErrorKinds, rep.FirstError, rep.Protocol)
			}
		})
	}
}

func TestAZooKeeperConnWritesReadsAndCreatesThroughTheZooKeeperPort(t *testing.T) {
	addr, zkAddr := startZKServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dialZK(ctx, []string{zkAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if err := c.createSequential(ctx, "/n-", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := c.set(ctx, "/n-0000000000", []byte("b")); err != nil {
		t.Fatal(err)
	}
	rep, err := c.call(ctx, &zkwire.Request{Op: zkwire.OpGetData, Path: "/n-0000000000"})
	if err != nil || string(rep.Data) != "b" || rep.Stat.Version != 1 {
		t.Fatalf("getData: %+v, %v; want b at version 1", rep, err)
	}
	if err := c.get(ctx, "/missing"); !errors.Is(err, client.ErrNoNode) {
		t.Errorf("getData of a missing node: %v, want %v", err, client.ErrNoNode)
	}

	// What it wrote is what Arbor's client reads.
	ac, err := client.Dial(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	if data, _, err := ac.Get(ctx, "/n-0000000000"); err != nil || string(data) != "b" {
		t.Errorf("Arbor's client reads %q, %v; want b", data, err)
	}
}

func TestAClosedZooKeeperConnFailsItsCalls(t *testing.T) {
	_, zkAddr := startZKServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dialZK(ctx, []string{zkAddr})
	if err != nil {
		t.Fatal(err)
	}
	c.close()
	if err := c.get(ctx, "/"); !errors.Is(err, client.ErrConnectionLoss) {
		t.Errorf("a call after close: %v, want %v", err, client.ErrConnectionLoss)
	}
}
