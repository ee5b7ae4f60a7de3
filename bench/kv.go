package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// prepareKV makes the sessions and nodes of set, get, create and mixed:
// Keys nodes holding Size bytes (a parent per worker for create), and
// Workers loops over Conns sessions.
func prepareKV(ctx context.Context, r *runner) (*plan, error) {
	cfg := r.cfg
	conns, err := dialN(ctx, cfg, cfg.Conns)
	if err != nil {
		return nil, err
	}
	p := &plan{cleaners: conns}
	value := valueOf(cfg.Size)
	var nodes []string
	if cfg.Workload == "create" {
		for i := range cfg.Workers {
			nodes = append(nodes, fmt.Sprintf("%s/w%04d", r.path, i))
		}
		err = createAll(ctx, conns, nodes, nil, cfg.Timeout)
	} else {
		for i := range cfg.Keys {
			nodes = append(nodes, fmt.Sprintf("%s/k%07d", r.path, i))
		}
		err = createAll(ctx, conns, nodes, value, cfg.Timeout)
	}
	if err != nil {
		return p, err
	}
	switch cfg.Workload {
	case "set":
		p.primary = []opKind{opSet}
	case "get":
		p.primary = []opKind{opGet}
	case "create":
		p.primary = []opKind{opCreate}
	case "mixed":
		p.primary = []opKind{opGet, opSet}
	}
	if cfg.Protocol == "zk" {
		if p.zk, err = dialNZK(ctx, cfg, cfg.Conns); err != nil {
			return p, err
		}
	}
	for i := range cfg.Workers {
		w := &kvWorker{r: r, c: conns[i%len(conns)], value: value, keys: nodes,
			next: i % len(nodes), step: cfg.Workers,
			rand: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))}
		if cfg.Workload == "create" {
			w.parent = nodes[i] + "/n-"
		}
		if p.zk != nil {
			w.zk = p.zk[i%len(p.zk)]
		}
		if cfg.Linearizable {
			w.readOpts = []client.ReadOption{client.Linearizable()}
		}
		p.loops = append(p.loops, w.loop)
	}
	return p, nil
}

// valueOf returns n bytes of printable data.
func valueOf(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// kvWorker is one loop of set, get, create or mixed.
type kvWorker struct {
	r      *runner
	c      *client.Client
	zk     *zkConn  // Protocol "zk": the load goes here, not to c
	value  []byte   // read only: shared by the workers
	keys   []string // set, get, mixed: the nodes, shared
	next   int      // the next key
	step   int      // how far the next key is from the last
	parent string   // create: the prefix of the worker's nodes
	rand   *rand.Rand
	// readOpts: the options of each getData
	readOpts []client.ReadOption
}

func (w *kvWorker) loop(rec *recorder) {
	r := w.r
	for {
		measured, ok := r.begin(1)
		if !ok {
			return
		}
		op := w.pick()
		key := w.keys[w.next]
		w.next = (w.next + w.step) % len(w.keys)
		t0 := time.Now()
		var err error
		switch {
		case w.zk != nil:
			err = w.zkOp(op, key)
		case op == opGet:
			_, _, err = w.c.Get(r.hard, key, w.readOpts...)
		case op == opSet:
			_, err = w.c.Set(r.hard, key, w.value, -1)
		case op == opCreate:
			_, err = w.c.Create(r.hard, w.parent, w.value, client.PersistentSequential)
		}
		if !r.done(rec, op, measured, t0, err) {
			return
		}
	}
}

// zkOp runs op on key through the ZooKeeper port.
func (w *kvWorker) zkOp(op opKind, key string) error {
	switch op {
	case opGet:
		return w.zk.get(w.r.hard, key)
	case opCreate:
		return w.zk.createSequential(w.r.hard, w.parent, w.value)
	}
	return w.zk.set(w.r.hard, key, w.value)
}

// pick says what the next op is.
func (w *kvWorker) pick() opKind {
	switch w.r.cfg.Workload {
	case "get":
		return opGet
	case "create":
		return opCreate
	case "mixed":
		if w.rand.Float64() < w.r.cfg.ReadRatio {
			return opGet
		}
	}
	return opSet
}

// createAll creates the persistent nodes paths with data, in multis of up
// to about 256 KiB, spread over conns.
func createAll(ctx context.Context, conns []*client.Client, paths []string, data []byte, timeout time.Duration) error {
	per := min(100, max(1, (256<<10)/(len(data)+64)))
	var batches [][]client.Op
	for i := 0; i < len(paths); i += per {
		var ops []client.Op
		for _, p := range paths[i:min(i+per, len(paths))] {
			ops = append(ops, client.CreateOp(p, data, client.Persistent))
		}
		batches = append(batches, ops)
	}
	return inParallel(conns, len(batches), func(c *client.Client, i int) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		_, err := c.Multi(ctx, batches[i]...)
		return err
	})
}

// inParallel calls fn(c, i) for i from 0 to n-1, at most 16 calls on each
// of conns at once, and returns the first error; no call begins after it.
func inParallel(conns []*client.Client, n int, fn func(c *client.Client, i int) error) error {
	work := make(chan int)
	quit := make(chan struct{})
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for g := range 16 * len(conns) {
		c := conns[g%len(conns)]
		wg.Go(func() {
			for i := range work {
				if err := fn(c, i); err != nil {
					once.Do(func() { first = err; close(quit) })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case work <- i:
		case <-quit:
			break feed
		}
	}
	close(work)
	wg.Wait()
	return first
}
