package integration

import (
	"errors"
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/client"
)

func TestEphemeralsListsTheSessionsOwnUnderAPrefix(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	a, b := dial(t, s.Addr().String()), dial(t, s.Addr().String())
	ctx := testCtx(t)
	for _, p := range []string{"/app", "/app2", "/locks"} {
		if _, err := a.Create(ctx, p, nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate := func(c *client.Client, path string, mode client.CreateMode) string {
		p, err := c.Create(ctx, path, nil, mode)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mustCreate(a, "/app/worker", client.Ephemeral)
	mustCreate(a, "/app2/x", client.Ephemeral)
	lockA := mustCreate(a, "/locks/lock-", client.EphemeralSequential)
	lockB := mustCreate(b, "/locks/lock-", client.EphemeralSequential)
	mustCreate(a, "/app/persistent", client.Persistent)

	for _, tc := range []struct {
		name   string
		c      *client.Client
		prefix string
		want   []string
	}{
		{"the root lists every ephemeral of the session, sorted", a, "/", []string{"/app/worker", "/app2/x", lockA}},
		{"a prefix matches as a string, so /app also takes /app2", a, "/app", []string{"/app/worker", "/app2/x"}},
		{"a prefix may end inside a name", a, "/locks/lock-", []string{lockA}},
		{"another session sees only its own", b, "/", []string{lockB}},
		{"no match is an empty list", b, "/app", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.c.Ephemerals(ctx, tc.prefix)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Ephemerals(%s) = %v, %v; want %v", tc.prefix, got, err, tc.want)
			}
		})
	}
	t.Run("an invalid prefix is refused before a round trip", func(t *testing.T) {
		if _, err := a.Ephemerals(ctx, "app/"); !errors.Is(err, client.ErrInvalidPath) {
			t.Fatalf("err = %v, want ErrInvalidPath", err)
		}
	})
	t.Run("a session's ephemerals leave the list with the node", func(t *testing.T) {
		if err := a.Delete(ctx, "/app/worker", -1); err != nil {
			t.Fatal(err)
		}
		if got, err := a.Ephemerals(ctx, "/app"); err != nil || !reflect.DeepEqual(got, []string{"/app2/x"}) {
			t.Fatalf("Ephemerals(/app) = %v, %v after the delete", got, err)
		}
	})
}

func TestCountDescendants(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	c := dial(t, s.Addr().String())
	ctx := testCtx(t)
	for _, p := range []string{"/a", "/a/b", "/a/b/c", "/a/d", "/ab"} {
		if _, err := c.Create(ctx, p, nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	// An ephemeral counts like any other node.
	if _, err := c.Create(ctx, "/a/d/e", nil, client.Ephemeral); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/": 9 + mapNode(), "/a": 4, "/a/b": 1, "/a/b/c": 0, "/ab": 0} {
		if got, err := c.CountDescendants(ctx, path); err != nil || got != want {
			t.Errorf("CountDescendants(%s) = %d, %v; want %d", path, got, err, want)
		}
	}
	if _, err := c.CountDescendants(ctx, "/missing"); !errors.Is(err, client.ErrNoNode) {
		t.Errorf("CountDescendants of a missing node: %v, want ErrNoNode", err)
	}
	if _, err := c.CountDescendants(ctx, "a"); !errors.Is(err, client.ErrInvalidPath) {
		t.Errorf("CountDescendants of an invalid path: %v, want ErrInvalidPath", err)
	}
}
