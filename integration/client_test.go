package integration

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

func TestClientMethods(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	c := dial(t, s.Addr().String())
	ctx := testCtx(t)

	t.Run("create makes each kind of node and returns its path", func(t *testing.T) {
		cases := []struct {
			path, want string
			mode       client.CreateMode
		}{
			{"/p", "/p", client.Persistent},
			{"/p/e", "/p/e", client.Ephemeral},
			{"/p/s-", "/p/s-0000000001", client.PersistentSequential},
			{"/p/es-", "/p/es-0000000002", client.EphemeralSequential},
			{"/p/c", "/p/c", client.Container},
		}
		for _, tc := range cases {
			got, err := c.Create(ctx, tc.path, []byte("d"), tc.mode)
			if err != nil || got != tc.want {
				t.Fatalf("Create(%s, %s) = %q, %v; want %q", tc.path, tc.mode, got, err, tc.want)
			}
		}
		_, st, err := c.Get(ctx, "/p/e")
		if err != nil || st.EphemeralOwner != c.SessionID() {
			t.Fatalf("ephemeral owner %#x, %v; want the session %#x", st.EphemeralOwner, err, c.SessionID())
		}
		if p, err := c.CreateTTL(ctx, "/ttl", nil, client.PersistentTTL, time.Hour); err != nil || p != "/ttl" {
			t.Fatalf("CreateTTL = %q, %v", p, err)
		}
	})
	t.Run("get returns data and Stat", func(t *testing.T) {
		data, st, err := c.Get(ctx, "/p")
		if err != nil || string(data) != "d" || st.DataLength != 1 || st.NumChildren != 4 {
			t.Fatalf("Get = %q %+v %v", data, st, err)
		}
	})
	t.Run("set bumps the version and checks the expected one", func(t *testing.T) {
		st, err := c.Set(ctx, "/p", []byte("d2"), 0)
		if err != nil || st.Version != 1 {
			t.Fatalf("Set = %+v, %v", st, err)
		}
		if _, err := c.Set(ctx, "/p", []byte("d3"), 0); !errors.Is(err, client.ErrBadVersion) {
			t.Fatalf("Set at a stale version: %v, want ErrBadVersion", err)
		}
		if _, err := c.Set(ctx, "/p", []byte("d3"), -1); err != nil {
			t.Fatalf("Set at any version: %v", err)
		}
	})
	t.Run("exists tells present from missing without an error", func(t *testing.T) {
		if ok, st, err := c.Exists(ctx, "/p"); !ok || err != nil || st.Version != 2 {
			t.Fatalf("Exists(/p) = %v %+v %v", ok, st, err)
		}
		if ok, _, err := c.Exists(ctx, "/missing"); ok || err != nil {
			t.Fatalf("Exists(/missing) = %v %v", ok, err)
		}
	})
	t.Run("children are sorted", func(t *testing.T) {
		names, st, err := c.Children(ctx, "/p")
		want := []string{"c", "e", "es-0000000002", "s-0000000001"}
		if err != nil || !slices.Equal(names, want) || st.NumChildren != 4 {
			t.Fatalf("Children = %v %+v %v, want %v", names, st, err, want)
		}
	})
	t.Run("errors match the sentinels", func(t *testing.T) {
		cases := []struct {
			name string
			err  error
			want error
		}{
			{"get of a missing node", third(c.Get(ctx, "/missing")), client.ErrNoNode},
			{"create under a missing parent", second(c.Create(ctx, "/missing/x", nil, client.Persistent)), client.ErrNoNode},
			{"create of an existing node", second(c.Create(ctx, "/p", nil, client.Persistent)), client.ErrNodeExists},
			{"create under an ephemeral", second(c.Create(ctx, "/p/e/x", nil, client.Persistent)), client.ErrNoChildrenForEphemerals},
			{"delete of a node with children", c.Delete(ctx, "/p", -1), client.ErrNotEmpty},
			{"delete at a stale version", c.Delete(ctx, "/p/c", 5), client.ErrBadVersion},
			{"an invalid path", third(c.Get(ctx, "no-slash")), client.ErrInvalidPath},
			{"data over the limit", second(c.Set(ctx, "/p", make([]byte, 1<<20+1), -1)), client.ErrDataTooLarge},
		}
		for _, tc := range cases {
			if !errors.Is(tc.err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
			}
		}
	})
	t.Run("delete removes the node", func(t *testing.T) {
		if err := c.Delete(ctx, "/p/s-0000000001", -1); err != nil {
			t.Fatal(err)
		}
		if ok, _, _ := c.Exists(ctx, "/p/s-0000000001"); ok {
			t.Fatal("still there")
		}
	})
	t.Run("multi applies all or nothing", func(t *testing.T) {
		res, err := c.Multi(ctx,
			client.CreateOp("/m", []byte("1"), client.Persistent),
			client.SetOp("/m", []byte("2"), 0),
			client.CheckOp("/m", 1))
		if err != nil || len(res) != 3 {
			t.Fatalf("Multi = %+v, %v", res, err)
		}
		_, err = c.Multi(ctx,
			client.SetOp("/m", []byte("3"), -1),
			client.CheckOp("/m", 7))
		var me *client.MultiError
		if !errors.Is(err, client.ErrBadVersion) || !errors.As(err, &me) || me.Index != 1 {
			t.Fatalf("failing Multi: %v, want ErrBadVersion at op 1", err)
		}
		if data, _, err := c.Get(ctx, "/m"); err != nil || string(data) != "2" {
			t.Fatalf("after a failed multi /m = %q, %v", data, err)
		}
	})
	t.Run("sync succeeds", func(t *testing.T) {
		if err := c.Sync(ctx, "/p"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("another client sees the writes", func(t *testing.T) {
		other := dial(t, s.Addr().String())
		data, _, err := other.Get(ctx, "/m")
		if err != nil || string(data) != "2" {
			t.Fatalf("other client: %q %v", data, err)
		}
	})
	t.Run("closing the client deletes its ephemerals at once", func(t *testing.T) {
		other := dial(t, s.Addr().String())
		if _, err := other.Create(ctx, "/bye", nil, client.Ephemeral); err != nil {
			t.Fatal(err)
		}
		if err := other.Close(); err != nil {
			t.Fatal(err)
		}
		if ok, _, _ := c.Exists(ctx, "/bye"); ok {
			t.Fatal("ephemeral survived Close")
		}
		if _, _, err := other.Get(ctx, "/p"); !errors.Is(err, client.ErrClosed) {
			t.Fatalf("call after Close: %v, want ErrClosed", err)
		}
	})
}

func second[T any](_ T, err error) error { return err }

func third[T, U any](_ T, _ U, err error) error { return err }

func TestPipelinedRequestsAreAnsweredInOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	c := dial(t, s.Addr().String())
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/seq", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	// 64 callers share one connection; each writes then reads its own
	// node, and must read its own write.
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		go func() {
			p, err := c.Create(ctx, "/seq/n-", []byte{byte(i)}, client.PersistentSequential)
			if err == nil {
				var data []byte
				data, _, err = c.Get(ctx, p)
				if err == nil && (len(data) != 1 || data[0] != byte(i)) {
					err = errors.New("read another caller's data at " + p)
				}
			}
			errs <- err
		}()
	}
	for i := 0; i < 64; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	names, _, err := c.Children(ctx, "/seq")
	if err != nil || len(names) != 64 || !strings.HasPrefix(names[63], "n-0000000063") {
		t.Fatalf("children: %d %v", len(names), err)
	}
}

func TestMultiCreatesEphemeralAndTTLNodesOfTheSession(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	c := dial(t, s.Addr().String())
	ctx := testCtx(t)
	before := time.Now().UnixMilli()
	// Under one root: a multi across shards of a sharded cluster is refused.
	_, err := c.Multi(ctx,
		client.CreateOp("/multi", nil, client.Persistent),
		client.CreateOp("/multi/me", nil, client.Ephemeral),
		client.CreateTTLOp("/multi/ttl", nil, client.PersistentTTL, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_, st, err := c.Get(ctx, "/multi/me")
	if err != nil || st.EphemeralOwner != c.SessionID() || st.Ctime < before {
		t.Fatalf("ephemeral made by a multi: %+v, %v; want owner %#x and ctime >= %d", st, err, c.SessionID(), before)
	}
	time.Sleep(1500 * time.Millisecond) // past a reap, which must spare a TTL node an hour old at most
	if _, st, err := c.Get(ctx, "/multi/ttl"); err != nil || st.Mtime < before {
		t.Fatalf("TTL node made by a multi: %+v, %v", st, err)
	}
}
