package recipes

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/arbor-coord/arbor/client"
)

// TestRecipesGiveTheirNodesTheACL runs every recipe that creates nodes
// WithACL, and checks the ACL of every node it created: the path, the
// ancestors it made, and its own nodes.
func TestRecipesGiveTheirNodesTheACL(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dial(t, client.WithAuth("digest", client.DigestCredential("alice", "pw")))
	other := s.dial(t)
	acl := []client.ACL{client.DigestACL(client.PermAll, "alice", "pw"), client.WorldACL(client.PermRead)}
	opt := WithACL(acl...)
	ctx := ctxWait(t)

	// checkTree checks the ACL of root and of every node below it.
	checkTree := func(t *testing.T, root string) {
		t.Helper()
		err := c.Walk(ctx, root, func(p string, _ client.Stat, _ []string) error {
			got, _, err := c.GetACL(ctx, p)
			if err == nil && !slices.Equal(got, acl) {
				t.Errorf("%s has ACL %v, want %v", p, got, acl)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("mutex", func(t *testing.T) {
		m := NewMutex(c, "/acl/mutex/a", opt)
		must(t, m.Lock(ctx))
		checkTree(t, "/acl/mutex")
		// Without alice's identity, another session may not queue.
		if err := NewMutex(other, "/acl/mutex/a").Lock(ctx); !errors.Is(err, client.ErrNoAuth) {
			t.Errorf("another session's Lock: %v, want ErrNoAuth", err)
		}
		must(t, m.Unlock(ctx))
	})
	t.Run("rwmutex", func(t *testing.T) {
		rw := NewRWMutex(c, "/acl/rw", opt)
		must(t, rw.RLock(ctx))
		checkTree(t, "/acl/rw")
		must(t, rw.RUnlock(ctx))
	})
	t.Run("semaphore", func(t *testing.T) {
		l, err := NewSemaphore(c, "/acl/sem", 2, opt).Acquire(ctx)
		must(t, err)
		checkTree(t, "/acl/sem")
		must(t, l.Release(ctx))
	})
	t.Run("election", func(t *testing.T) {
		e := NewElection(c, "/acl/elect", opt)
		must(t, e.Campaign(ctx, []byte("me")))
		checkTree(t, "/acl/elect")
		must(t, e.Resign(ctx))
	})
	t.Run("barrier", func(t *testing.T) {
		must(t, NewBarrier(c, "/acl/barrier/b", opt).Set(ctx))
		checkTree(t, "/acl/barrier")
	})
	t.Run("double barrier", func(t *testing.T) {
		d := NewDoubleBarrier(c, "/acl/double", 1, opt)
		must(t, d.Enter(ctx))
		checkTree(t, "/acl/double")
		must(t, d.Leave(ctx))
	})
	t.Run("config", func(t *testing.T) {
		must(t, SetConfig(ctx, c, "/acl/config/db", []byte("v1"), -1, opt))
		checkTree(t, "/acl/config")
		cv := NewConfigValue(c, "/acl/config2/db", opt)
		defer cv.Close()
		must(t, cv.Set(ctx, []byte("v1"), -1))
		checkTree(t, "/acl/config2")
	})
	t.Run("service registration", func(t *testing.T) {
		r, err := Register(ctx, c, "acl-svc", Instance{ID: "i-1", Address: "10.0.0.7", Port: 80}, opt)
		must(t, err)
		defer r.Close(context.Background())
		checkTree(t, ServicesRoot+"/acl-svc")
	})
}
