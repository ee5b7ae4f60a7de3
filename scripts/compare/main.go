// Command compare runs arbor bench's workloads set, get, lock and locks
// against Apache ZooKeeper and etcd, and renew against etcd (ZooKeeper has
// no lease to renew), measured the way arbor bench measures
// Arbor: a fixed number of sessions and workers, each issuing its next
// request as soon as the last was answered, for a duration after a warmup;
// ops/s and latency percentiles of what completed in the measured window.
//
// It is a module of its own, so that Arbor does not depend on either
// client. scripts/compare.sh starts the clusters and runs it;
// docs/performance.md ("Arbor, ZooKeeper and etcd on this machine") has
// the figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

type config struct {
	system, workload string
	servers          []string
	conns, workers   int
	contenders       int
	locks            int
	rate             float64 // renew: renewals per second of all leases together
	size, keys       int
	duration, warmup time.Duration
}

// A store is one session of the system under test.
type store interface {
	set(ctx context.Context, key int, value []byte) error
	get(ctx context.Context, key int) error
	close()
}

// A locker is one contender's lock, on a session of its own.
type locker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
	close()
}

func main() {
	var c config
	var servers string
	flag.StringVar(&c.system, "system", "zk", "zk or etcd")
	flag.StringVar(&servers, "servers", "", "comma-separated client addresses (zk) or endpoints (etcd)")
	flag.StringVar(&c.workload, "workload", "set", "set, get, lock, locks, hold or renew")
	flag.IntVar(&c.conns, "conns", 8, "sessions (set, get); clients the leases share (renew; hold, etcd)")
	flag.IntVar(&c.workers, "workers", 64, "workers over the sessions (set, get)")
	flag.IntVar(&c.contenders, "contenders", 16, "lock contenders, a session each (lock); holders of each lock, a session each (locks)")
	flag.IntVar(&c.locks, "locks", 64, "locks (locks; hold, a session each); leases, each with a key of its own (renew)")
	flag.Float64Var(&c.rate, "rate", 10000, "renewals per second of all leases together (renew)")
	flag.IntVar(&c.size, "size", 256, "value size in bytes")
	flag.IntVar(&c.keys, "keys", 1000, "keys written and read")
	flag.DurationVar(&c.duration, "duration", 8*time.Second, "measured time")
	flag.DurationVar(&c.warmup, "warmup", 2*time.Second, "time before measuring")
	flag.Parse()
	c.servers = strings.Split(servers, ",")
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.warmup+c.duration+time.Minute)
	defer cancel()
	var loops []func(ctx context.Context) (time.Duration, error)
	var closers []func()
	defer func() {
		for _, f := range closers {
			f()
		}
	}()
	switch c.workload {
	case "set", "get":
		stores := make([]store, c.conns)
		for i := range stores {
			s, err := dial(ctx, c)
			if err != nil {
				return err
			}
			stores[i] = s
			closers = append(closers, s.close)
		}
		value := make([]byte, c.size)
		for k := 0; k < c.keys; k++ { // every key exists before the run
			if err := stores[k%len(stores)].set(ctx, k, value); err != nil {
				return fmt.Errorf("prepare key %d: %w", k, err)
			}
		}
		for w := 0; w < c.workers; w++ {
			s, next := stores[w%len(stores)], w
			loops = append(loops, func(ctx context.Context) (time.Duration, error) {
				next = (next + c.workers) % c.keys
				t0 := time.Now()
				var err error
				if c.workload == "set" {
					err = s.set(ctx, next, value)
				} else {
					err = s.get(ctx, next)
				}
				return time.Since(t0), err
			})
		}
	case "lock", "locks":
		holders, locks := c.contenders, 1
		if c.workload == "locks" {
			holders, locks = c.locks*c.contenders, c.locks
		}
		for i := 0; i < holders; i++ {
			l, err := newLocker(ctx, c, fmt.Sprintf("/bench-lock-%d", i%locks))
			if err != nil {
				return err
			}
			closers = append(closers, l.close)
			loops = append(loops, func(ctx context.Context) (time.Duration, error) {
				t0 := time.Now()
				if err := l.lock(ctx); err != nil {
					return 0, err
				}
				d := time.Since(t0)
				return d, l.unlock(ctx)
			})
		}
	case "hold":
		return hold(ctx, c)
	case "renew":
		if c.system != "etcd" {
			return fmt.Errorf("renew runs against etcd only: ZooKeeper has no lease to renew")
		}
		clients := make([]*clientv3.Client, c.conns)
		for i := range clients {
			cl, err := clientv3.New(clientv3.Config{Endpoints: c.servers, DialTimeout: 5 * time.Second, Context: ctx})
			if err != nil {
				return err
			}
			clients[i] = cl
			closers = append(closers, func() { cl.Close() })
		}
		every := time.Duration(float64(c.locks) / c.rate * float64(time.Second))
		for i := 0; i < c.locks; i++ {
			loop, err := renewer(ctx, clients[i%len(clients)], i, every)
			if err != nil {
				return err
			}
			loops = append(loops, loop)
		}
	default:
		return fmt.Errorf("unknown workload %q", c.workload)
	}
	return measure(ctx, c, loops)
}

// hold takes c.locks locks, each on a session of its own (ZooKeeper: a
// connection each; etcd: a lease each, over c.conns clients), 64 at a
// time, says how long that took, and holds them through the warmup and
// the duration, while scripts/compare.sh reads what the members hold
// for them.
func hold(ctx context.Context, c config) error {
	var clients []*clientv3.Client
	if c.system == "etcd" {
		for range c.conns {
			cl, err := clientv3.New(clientv3.Config{Endpoints: c.servers, DialTimeout: 5 * time.Second, Context: ctx})
			if err != nil {
				return err
			}
			defer cl.Close()
			clients = append(clients, cl)
		}
	}
	start := time.Now()
	held := make([]func(), c.locks)
	errs := make(chan error, c.locks)
	slots := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range held {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			path := fmt.Sprintf("/bench-hold/%06d", i)
			switch c.system {
			case "zk":
				conn, err := dialZK(c)
				if err != nil {
					errs <- err
					return
				}
				l := zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))
				if err := l.Lock(); err != nil {
					conn.Close()
					errs <- err
					return
				}
				held[i] = conn.Close
			case "etcd":
				s, err := concurrency.NewSession(clients[i%len(clients)], concurrency.WithTTL(10))
				if err != nil {
					errs <- err
					return
				}
				if err := concurrency.NewMutex(s, path).Lock(ctx); err != nil {
					s.Close()
					errs <- err
					return
				}
				held[i] = func() { s.Close() }
			}
		})
	}
	wg.Wait()
	defer func() {
		for _, release := range held {
			if release != nil {
				release()
			}
		}
	}()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("taking the locks: %w (%d failed)", err, len(errs)+1)
	}
	over := "a connection each"
	if c.system == "etcd" {
		over = fmt.Sprintf("a lease each over %d clients", c.conns)
	}
	fmt.Printf("%s hold: %d locks, a session each (%s), taken in %.1f s\n", c.system, c.locks, over, time.Since(start).Seconds())
	select {
	case <-time.After(c.warmup + c.duration):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// renewer grants lease i a TTL of 10 s with a key of its own on it, as a
// lock holder's, and returns a loop that renews it explicitly
// (KeepAliveOnce) every every, the first time at a random point of the
// first interval, timing each renewal.
func renewer(ctx context.Context, cl *clientv3.Client, i int, every time.Duration) (func(context.Context) (time.Duration, error), error) {
	g, err := cl.Grant(ctx, 10)
	if err != nil {
		return nil, fmt.Errorf("grant lease %d: %w", i, err)
	}
	if _, err := cl.Put(ctx, fmt.Sprintf("/bench-renew/%06d", i), "", clientv3.WithLease(g.ID)); err != nil {
		return nil, fmt.Errorf("put the key of lease %d: %w", i, err)
	}
	next := time.Now().Add(rand.N(every))
	return func(ctx context.Context) (time.Duration, error) {
		select {
		case <-time.After(time.Until(next)):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		next = next.Add(every)
		t0 := time.Now()
		_, err := cl.KeepAliveOnce(ctx, g.ID)
		return time.Since(t0), err
	}, nil
}

// measure runs every loop until the warmup and duration are over, and
// prints what completed in the measured window.
func measure(ctx context.Context, c config, loops []func(context.Context) (time.Duration, error)) error {
	start := time.Now()
	from, to := start.Add(c.warmup), start.Add(c.warmup+c.duration)
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for _, loop := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(to) {
				d, err := loop(ctx)
				end := time.Now()
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					if ctx.Err() != nil {
						return
					}
					continue
				}
				if end.After(from) && end.Before(to) {
					mine = append(mine, d)
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(lat) == 0 {
		return fmt.Errorf("nothing completed (%d errors, first: %v)", errs.Load(), firstErr.Load())
	}
	slices.Sort(lat)
	q := func(p float64) string {
		return strconv.FormatFloat(float64(lat[int(p*float64(len(lat)-1))])/1e6, 'f', 3, 64)
	}
	switch c.workload {
	case "locks":
		fmt.Printf("%s locks: %d locks × %d holders, a session each\n", c.system, c.locks, c.contenders)
	case "lock":
		fmt.Printf("%s lock: %d contenders\n", c.system, c.contenders)
	case "renew":
		fmt.Printf("%s renew: %d leases over %d clients, %.0f renewals/s asked\n", c.system, c.locks, c.conns, c.rate)
	default:
		fmt.Printf("%s %s: %d sessions, %d workers\n", c.system, c.workload, c.conns, c.workers)
	}
	fmt.Printf("throughput  %.0f ops/s (%d)\n", float64(len(lat))/c.duration.Seconds(), len(lat))
	fmt.Printf("latency     p50 %s, p90 %s, p99 %s, p99.9 %s ms\n", q(0.5), q(0.9), q(0.99), q(0.999))
	fmt.Printf("errors      %d", errs.Load())
	if e := firstErr.Load(); e != nil {
		fmt.Printf(" (first: %v)", e)
	}
	fmt.Println()
	return nil
}

func dial(ctx context.Context, c config) (store, error) {
	switch c.system {
	case "zk":
		conn, err := dialZK(c)
		return &zkStore{conn}, err
	case "etcd":
		cl, err := clientv3.New(clientv3.Config{Endpoints: c.servers, DialTimeout: 5 * time.Second, Context: ctx})
		return &etcdStore{cl}, err
	}
	return nil, fmt.Errorf("unknown system %q", c.system)
}

func newLocker(ctx context.Context, c config, path string) (locker, error) {
	switch c.system {
	case "zk":
		conn, err := dialZK(c)
		if err != nil {
			return nil, err
		}
		return &zkLocker{conn, zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))}, nil
	case "etcd":
		cl, err := clientv3.New(clientv3.Config{Endpoints: c.servers, DialTimeout: 5 * time.Second, Context: ctx})
		if err != nil {
			return nil, err
		}
		s, err := concurrency.NewSession(cl, concurrency.WithTTL(10))
		if err != nil {
			cl.Close()
			return nil, err
		}
		return &etcdLocker{cl, s, concurrency.NewMutex(s, path)}, nil
	}
	return nil, fmt.Errorf("unknown system %q", c.system)
}

// dialZK connects a session to a random server of the list, as ZooKeeper's
// clients do, and waits until it is established.
func dialZK(c config) (*zk.Conn, error) {
	conn, events, err := zk.Connect(c.servers, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-events:
			if e.State == zk.StateHasSession {
				go func() {
					for range events { // drain: go-zookeeper blocks on a full channel
					}
				}()
				return conn, nil
			}
		case <-timeout:
			conn.Close()
			return nil, errors.New("zookeeper: no session within 10s")
		}
	}
}

type zkStore struct{ c *zk.Conn }

func zkPath(key int) string { return fmt.Sprintf("/bench-%06d", key) }

func (s *zkStore) set(_ context.Context, key int, value []byte) error {
	_, err := s.c.Set(zkPath(key), value, -1)
	if errors.Is(err, zk.ErrNoNode) {
		_, err = s.c.Create(zkPath(key), value, 0, zk.WorldACL(zk.PermAll))
	}
	return err
}

func (s *zkStore) get(_ context.Context, key int) error {
	_, _, err := s.c.Get(zkPath(key))
	return err
}

func (s *zkStore) close() { s.c.Close() }

type zkLocker struct {
	c *zk.Conn
	l *zk.Lock
}

func (l *zkLocker) lock(context.Context) error   { return l.l.Lock() }
func (l *zkLocker) unlock(context.Context) error { return l.l.Unlock() }
func (l *zkLocker) close()                       { l.c.Close() }

type etcdStore struct{ c *clientv3.Client }

func etcdKey(key int) string { return fmt.Sprintf("/bench/%06d", key) }

func (s *etcdStore) set(ctx context.Context, key int, value []byte) error {
	_, err := s.c.Put(ctx, etcdKey(key), string(value))
	return err
}

// get is a linearizable read, etcd's default.
func (s *etcdStore) get(ctx context.Context, key int) error {
	_, err := s.c.Get(ctx, etcdKey(key))
	return err
}

func (s *etcdStore) close() { s.c.Close() }

type etcdLocker struct {
	c *clientv3.Client
	s *concurrency.Session
	m *concurrency.Mutex
}

func (l *etcdLocker) lock(ctx context.Context) error   { return l.m.Lock(ctx) }
func (l *etcdLocker) unlock(ctx context.Context) error { return l.m.Unlock(ctx) }
func (l *etcdLocker) close() {
	l.s.Close()
	l.c.Close()
}
