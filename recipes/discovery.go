package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// ServicesRoot is where services register: /services/<service>/<instance id>.
const ServicesRoot = "/services"

// Instance is one instance of a service, stored as JSON in its node.
type Instance struct {
	ID       string            `json:"id"`
	Address  string            `json:"address"`
	Port     int               `json:"port"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

func servicePath(service string) (string, error) {
	if service == "" || strings.Contains(service, "/") {
		return "", fmt.Errorf("%w: service name %q (want a non-empty name without /)", client.ErrBadArguments, service)
	}
	return ServicesRoot + "/" + service, nil
}

// Registration keeps an instance registered: its ephemeral node exists
// while the session lives, and with a client dialed WithSessionRenewal it
// is made again in each new session.
type Registration struct {
	c    *client.Client
	path string
	data []byte
	acl  []client.CreateOption
	stop context.CancelFunc
	done chan struct{}
}

// Register makes inst's ephemeral node, /services/<service>/<inst.ID>,
// holding inst as JSON, and keeps it there until Close. If a node of the
// same ID belongs to another session (an earlier run of this instance
// whose session has not expired yet), Register waits, within ctx, for it
// to go: instance IDs must be unique among the live instances. Of the
// options, WithACL applies: to the instance's node, and to the service's
// node and /services if it creates them.
func Register(ctx context.Context, c *client.Client, service string, inst Instance, opts ...Option) (*Registration, error) {
	dir, err := servicePath(service)
	if err != nil {
		return nil, err
	}
	if inst.ID == "" || strings.Contains(inst.ID, "/") {
		return nil, fmt.Errorf("register %s: %w: instance ID %q", service, client.ErrBadArguments, inst.ID)
	}
	data, err := json.Marshal(inst)
	if err != nil {
		return nil, fmt.Errorf("register %s: %w", service, err)
	}
	r := &Registration{c: c, path: dir + "/" + inst.ID, data: data, acl: newOptions(opts).acl, done: make(chan struct{})}
	owner, err := r.register(ctx)
	if err != nil {
		return nil, opError("register", r.path, err)
	}
	bg, stop := context.WithCancel(context.Background())
	r.stop = stop
	go r.keep(bg, owner)
	return r, nil
}

// register makes the node in the current session and returns the session.
func (r *Registration) register(ctx context.Context) (int64, error) {
	for {
		_, st, err := r.c.CreateStat(ctx, r.path, r.data, client.Ephemeral, r.acl...)
		switch {
		case err == nil:
			return st.EphemeralOwner, nil
		case errors.Is(err, client.ErrNoNode):
			if err := makeDirs(ctx, r.c, parentOf(r.path), r.acl); err != nil {
				return 0, err
			}
			continue
		case errors.Is(err, client.ErrConnectionLoss):
			continue // the node may exist: the next create says so
		case !errors.Is(err, client.ErrNodeExists):
			return 0, err
		}
		// Ours (a create whose answer was lost), or another session's.
		ok, st, ev, err := r.c.ExistsW(ctx, r.path)
		switch {
		case errors.Is(err, client.ErrConnectionLoss):
			continue
		case err != nil:
			return 0, err
		case ok && st.EphemeralOwner == r.c.SessionID():
			_, err := r.c.Set(ctx, r.path, r.data, -1)
			return st.EphemeralOwner, err
		case ok:
			if err := waitEvent(ctx, ev); err != nil {
				return 0, err
			}
		}
	}
}

// keep registers again each time the session that holds the node ends,
// until Close.
func (r *Registration) keep(ctx context.Context, owner int64) {
	defer close(r.done)
	for {
		id, done := r.c.Session()
		if id == owner {
			select {
			case <-done:
			case <-ctx.Done():
				return
			}
		}
		for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
			if final(r.c) || sleep(ctx, delay) != nil {
				return
			}
			var err error
			if owner, err = r.register(ctx); err == nil {
				break
			}
		}
	}
}

// Close deregisters the instance: it stops keeping the node and deletes
// it.
func (r *Registration) Close(ctx context.Context) error {
	r.stop()
	<-r.done
	err := r.c.Delete(ctx, r.path, -1)
	if errors.Is(err, client.ErrNoNode) || errors.Is(err, client.ErrSessionExpired) || errors.Is(err, client.ErrClosed) {
		err = nil // gone with the session
	}
	return opError("deregister", r.path, err)
}

// ServiceCache follows the instances of a service, from a TreeCache of
// /services/<service>.
type ServiceCache struct {
	dir   string
	tc    *TreeCache
	next  atomic.Uint64
	watch chan []Instance
	done  chan struct{}

	mu        sync.Mutex // guards instances
	instances []Instance
}

// NewServiceCache starts following the instances of service on the
// session of c. Close stops it.
func NewServiceCache(c *client.Client, service string) (*ServiceCache, error) {
	dir, err := servicePath(service)
	if err != nil {
		return nil, err
	}
	sc := &ServiceCache{dir: dir, tc: NewTreeCache(c, dir), watch: make(chan []Instance, 1), done: make(chan struct{})}
	go sc.run()
	return sc, nil
}

func (sc *ServiceCache) run() {
	defer close(sc.done)
	defer close(sc.watch)
	ready := false
	for ev := range sc.tc.Events() {
		switch {
		case ev.Type == TreeInitialized, ev.Type == TreeRebuilt:
			ready = true
		case !ready || parentOf(ev.Path) != sc.dir:
			continue // the first load's events, or not an instance
		}
		list := sc.read()
		sc.mu.Lock()
		sc.instances = list
		sc.mu.Unlock()
		select { // keep only the latest list for a slow reader
		case <-sc.watch:
		default:
		}
		sc.watch <- list
	}
}

// read decodes the cached instances, sorted by ID; nodes that are not an
// Instance's JSON are left out.
func (sc *ServiceCache) read() []Instance {
	names, _ := sc.tc.Children(sc.dir)
	list := make([]Instance, 0, len(names))
	for _, name := range names {
		data, _, ok := sc.tc.Get(sc.dir + "/" + name)
		var inst Instance
		if ok && json.Unmarshal(data, &inst) == nil {
			list = append(list, inst)
		}
	}
	slices.SortFunc(list, func(a, b Instance) int { return strings.Compare(a.ID, b.ID) })
	return list
}

// Instances returns the live instances, sorted by ID (none before the
// cache's first load).
func (sc *ServiceCache) Instances() []Instance {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return slices.Clone(sc.instances)
}

// Pick returns the instances in turn (round-robin), or false if there is
// none.
func (sc *ServiceCache) Pick() (Instance, bool) {
	list := sc.Instances()
	if len(list) == 0 {
		return Instance{}, false
	}
	return list[(sc.next.Add(1)-1)%uint64(len(list))], true
}

// Watch returns a channel that receives the list of instances after the
// first load and after each change. It holds only the latest list: a slow
// reader skips lists, never the latest. It is closed by Close.
func (sc *ServiceCache) Watch() <-chan []Instance { return sc.watch }

// Close stops the cache.
func (sc *ServiceCache) Close() {
	sc.tc.Close()
	<-sc.done
}
