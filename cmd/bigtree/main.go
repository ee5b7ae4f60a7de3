// Command bigtree measures a server holding a large tree: fill creates
// PARENTS x CHILDREN persistent znodes, one create per request with many
// in flight, and wait measures how long a restarted server takes to serve
// a getData. scripts/bigtree.sh drives both against a real arbord.
//
//	bigtree fill --servers 127.0.0.1:2281 --parents 10 --children 100000 --size 32
//	bigtree wait --servers 127.0.0.1:2281 --path /big/p0/c0000000000 --since UNIX_NANOS
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbor-coord/arbor/client"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bigtree fill|wait [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "fill":
		err = fill(os.Args[2:])
	case "wait":
		err = wait(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want fill or wait", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bigtree:", err)
		os.Exit(1)
	}
}

// childPath is the path of child i of parent p under prefix.
func childPath(prefix string, p, i int) string {
	return fmt.Sprintf("%s/p%d/c%010d", prefix, p, i)
}

func fill(args []string) error {
	fs := flag.NewFlagSet("fill", flag.ExitOnError)
	servers := fs.String("servers", "127.0.0.1:2281", "comma-separated server addresses")
	prefix := fs.String("prefix", "/big", "the node the parents go under")
	parents := fs.Int("parents", 10, "parents under the prefix")
	children := fs.Int("children", 100000, "children of each parent")
	size := fs.Int("size", 32, "bytes of each child's data")
	conns := fs.Int("conns", 8, "sessions")
	inflight := fs.Int("inflight", 64, "requests in flight at once")
	limit := fs.Duration("limit", 20*time.Minute, "give up after this long")
	_ = fs.Parse(args)
	if *parents < 1 || *children < 1 || *conns < 1 || *inflight < 1 || *size < 0 {
		return errors.New("fill: counts must be positive")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *limit)
	defer cancel()
	cs, err := dialN(ctx, strings.Split(*servers, ","), *conns)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	if _, err := cs[0].Create(ctx, *prefix, nil, client.Persistent); err != nil {
		return fmt.Errorf("create %s: %w", *prefix, err)
	}
	for p := range *parents {
		if _, err := cs[0].Create(ctx, fmt.Sprintf("%s/p%d", *prefix, p), nil, client.Persistent); err != nil {
			return fmt.Errorf("create parent %d: %w", p, err)
		}
	}
	data := make([]byte, *size)
	for i := range data {
		data[i] = 'a' + byte(i%26)
	}
	total := int64(*parents) * int64(*children)
	var next, done, retried atomic.Int64
	var firstErr error
	var once sync.Once
	start := time.Now()
	stopProgress := progress(&done, total, start)
	var wg sync.WaitGroup
	for g := range *inflight {
		c := cs[g%len(cs)]
		wg.Go(func() {
			for {
				k := next.Add(1) - 1
				if k >= total || ctx.Err() != nil {
					return
				}
				path := childPath(*prefix, int(k)%*parents, int(k) / *parents)
				err := create(ctx, c, path, data, &retried)
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("create %s: %w", path, err); cancel() })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	stopProgress()
	if firstErr != nil {
		return firstErr
	}
	took := time.Since(start)
	fmt.Printf("created %d znodes of %d bytes in %.1f s: %.0f creates/s, %d failed and retried\n",
		total, *size, took.Seconds(), float64(total)/took.Seconds(), retried.Load())
	return nil
}

// create creates path, trying again a few times after an error that a
// leader change explains (a lost connection, no quorum, a timeout); a
// retried create that finds the node made it the first time.
func create(ctx context.Context, c *client.Client, path string, data []byte, retried *atomic.Int64) error {
	var err error
	for attempt := range 5 {
		if attempt > 0 {
			retried.Add(1)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = c.Create(rctx, path, data, client.Persistent)
		cancel()
		switch {
		case err == nil, attempt > 0 && errors.Is(err, client.ErrNodeExists):
			return nil
		case errors.Is(err, client.ErrNodeExists), errors.Is(err, client.ErrNoNode):
			return err
		}
	}
	return err
}

// progress prints how far fill is every 5 s until the returned func is
// called.
func progress(done *atomic.Int64, total int64, start time.Time) func() {
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				d := done.Load()
				fmt.Fprintf(os.Stderr, "%d/%d created, %.0f/s\n", d, total, float64(d)/time.Since(start).Seconds())
			case <-stop:
				return
			}
		}
	}()
	return func() { close(stop); <-finished }
}

func dialN(ctx context.Context, servers []string, n int) ([]*client.Client, error) {
	var cs []*client.Client
	for range n {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := client.Dial(dctx, servers)
		cancel()
		if err != nil {
			for _, c := range cs {
				c.Close()
			}
			return nil, fmt.Errorf("dial %v: %w", servers, err)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func wait(args []string) error {
	fs := flag.NewFlagSet("wait", flag.ExitOnError)
	servers := fs.String("servers", "127.0.0.1:2281", "comma-separated server addresses")
	path := fs.String("path", "/big/p0/c0000000000", "the znode to read")
	since := fs.Int64("since", 0, "when the server was started, in Unix nanoseconds (default: now)")
	limit := fs.Duration("limit", time.Minute, "give up after this long")
	_ = fs.Parse(args)
	start := time.Now()
	if *since != 0 {
		start = time.Unix(0, *since)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *limit)
	defer cancel()
	attempts := 0
	for {
		attempts++
		err := getOnce(ctx, strings.Split(*servers, ","), *path)
		if err == nil {
			fmt.Printf("served %s %.3f s after the start (%d attempts)\n", *path, time.Since(start).Seconds(), attempts)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no getData of %s within %v: %w", *path, *limit, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// getOnce dials a new session and reads path.
func getOnce(ctx context.Context, servers []string, path string) error {
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := client.Dial(dctx, servers)
	if err != nil {
		return err
	}
	defer c.Close()
	_, _, err = c.Get(dctx, path)
	return err
}
