package client_test

import (
	"context"
	"errors"
	"flag"
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/internal/shardtest"
	"github.com/arbor-coord/arbor/server"
)

// These tests run Walk and DeleteAll against a real server on loopback.

const subtreeWait = 20 * time.Second

// startServer starts a one-member server on a loopback port and returns it
// with its address.
func startServer(t *testing.T) (*server.Server, string) {
	t.Helper()
	s := newServer(t, server.Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		TickInterval: 10 * time.Millisecond, MinSessionTimeout: 200 * time.Millisecond,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	})
	return s, s.Addr().String()
}

// flagShards runs the tests' servers sharded: their top-level names split
// over this many shards at start (docs/scale-out.md): go test ./client
// -client.shards=4.
var flagShards = flag.Int("client.shards", 0, "split every test's server's top-level names over this many shards at start")

// mapNode and mapPaths are the map's node of a sharded server
// (shardtest.MapNodes), when -client.shards splits the tests' servers.
func mapNode() int       { return shardtest.MapNodes(*flagShards) }
func mapPaths() []string { return shardtest.MapPaths(*flagShards) }

// newServer starts a server with cfg, stopped when the test ends, and
// sharded as -client.shards asks.
func newServer(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	return shardtest.NewServer(t, cfg, *flagShards)
}

func dial(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), subtreeWait)
	defer cancel()
	c, err := client.Dial(ctx, []string{addr}, append([]client.Option{client.WithSessionTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testContext is the context of a test's calls: done at the test's end,
// or when the test has hung.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), subtreeWait)
	t.Cleanup(cancel)
	return ctx
}

// makeTree creates the paths, in order, as persistent nodes.
func makeTree(t *testing.T, c *client.Client, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := c.Create(testContext(t), p, nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
}

// appTree is the subtree most tests walk: /app has children a, b and c
// (created out of order), and /app/a has x.
var appTree = []string{"/app", "/app/c", "/app/a", "/app/b", "/app/a/x"}

// visit is one call of a WalkFunc.
type visit struct {
	path        string
	numChildren int32
	children    []string
}

// recordWalk walks path and returns the visits, and Walk's error; then
// is called for each node after it is recorded, and its error returned.
func recordWalk(t *testing.T, c *client.Client, path string, then func(path string) error) ([]visit, error) {
	var got []visit
	err := c.Walk(testContext(t), path, func(p string, st client.Stat, children []string) error {
		got = append(got, visit{p, st.NumChildren, children})
		if then == nil {
			return nil
		}
		return then(p)
	})
	return got, err
}

func TestWalkVisitsEachNodeBeforeItsChildrenAndTheChildrenInNameOrder(t *testing.T) {
	_, addr := startServer(t)
	c := dial(t, addr)
	makeTree(t, c, appTree...)
	got, err := recordWalk(t, c, "/app", nil)
	want := []visit{
		{"/app", 3, []string{"a", "b", "c"}},
		{"/app/a", 1, []string{"x"}},
		{"/app/a/x", 0, nil},
		{"/app/b", 0, nil},
		{"/app/c", 0, nil},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Walk(/app) visited\n  %v, %v\nwant\n  %v", got, err, want)
	}
	got, err = recordWalk(t, c, "/", nil)
	if err != nil || len(got) != 9+mapNode() || got[0].path != "/" || got[1].path != "/app" || got[6].path != "/zookeeper" {
		t.Fatalf("Walk(/) visited %v, %v; want /, the 5 nodes of /app, then /zookeeper and its %d children", got, err, 2+mapNode())
	}
}

func TestWalkFuncsDecideWhatIsVisited(t *testing.T) {
	errStop := errors.New("stop here")
	tests := []struct {
		name    string
		then    func(c *client.Client) func(string) error
		want    []string
		wantErr error
	}{
		{"SkipChildren leaves out a node's subtree", func(*client.Client) func(string) error {
			return func(p string) error {
				if p == "/app/a" {
					return client.SkipChildren
				}
				return nil
			}
		}, []string{"/app", "/app/a", "/app/b", "/app/c"}, nil},
		{"SkipChildren at the top ends the walk without an error", func(*client.Client) func(string) error {
			return func(string) error { return client.SkipChildren }
		}, []string{"/app"}, nil},
		{"any other error stops the walk and is returned", func(*client.Client) func(string) error {
			return func(p string) error {
				if p == "/app/a/x" {
					return errStop
				}
				return nil
			}
		}, []string{"/app", "/app/a", "/app/a/x"}, errStop},
		{"a node deleted before the walk reaches it is skipped", func(c *client.Client) func(string) error {
			return func(p string) error {
				if p == "/app" {
					return c.Delete(context.Background(), "/app/b", -1)
				}
				return nil
			}
		}, []string{"/app", "/app/a", "/app/a/x", "/app/c"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := startServer(t)
			c := dial(t, addr)
			makeTree(t, c, appTree...)
			visits, err := recordWalk(t, c, "/app", tc.then(c))
			var got []string
			for _, v := range visits {
				got = append(got, v.path)
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("visited %v, %v; want %v, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// aliceOnly makes /app with /app/a and /app/a/x open to all, and /app/b,
// with its child /app/b/y, open to alice only; it returns a client that is
// not alice.
func aliceOnly(t *testing.T, addr string) *client.Client {
	t.Helper()
	alice := dial(t, addr, client.WithAuth("digest", client.DigestCredential("alice", "secret")))
	makeTree(t, alice, "/app", "/app/a", "/app/a/x")
	only := client.WithACL(client.DigestACL(client.PermAll, "alice", "secret"))
	if _, err := alice.Create(testContext(t), "/app/b", nil, client.Persistent, only); err != nil {
		t.Fatal(err)
	}
	makeTree(t, alice, "/app/b/y")
	return dial(t, addr)
}

// checkOpError checks that err is an *OpError of op on path matching want.
func checkOpError(t *testing.T, err error, op, path string, want error) {
	t.Helper()
	var oe *client.OpError
	if !errors.As(err, &oe) || oe.Op != op || oe.Path != path || !errors.Is(err, want) {
		t.Fatalf("err = %v (%#v), want an *OpError of %s %s matching %v", err, oe, op, path, want)
	}
}

func TestWalkAndDeleteAllNameTheNodeWhoseRequestFailed(t *testing.T) {
	_, addr := startServer(t)
	c := aliceOnly(t, addr)
	err := c.Walk(testContext(t), "/app", func(string, client.Stat, []string) error { return nil })
	checkOpError(t, err, "children", "/app/b", client.ErrNoAuth)

	n, err := c.DeleteAll(testContext(t), "/app")
	checkOpError(t, err, "children", "/app/b", client.ErrNoAuth)
	if n != 2 {
		t.Errorf("DeleteAll deleted %d nodes before the error, want 2 (/app/a/x and /app/a)", n)
	}
	if ok, _, err := c.Exists(testContext(t), "/app/a"); ok || err != nil {
		t.Errorf("/app/a after DeleteAll: exists %v, %v; want deleted", ok, err)
	}
}

func TestWalkAndDeleteAllOfAMissingNodeFailWithErrNoNode(t *testing.T) {
	_, addr := startServer(t)
	c := dial(t, addr)
	err := c.Walk(testContext(t), "/nothing", func(string, client.Stat, []string) error {
		t.Error("the WalkFunc was called")
		return nil
	})
	checkOpError(t, err, "children", "/nothing", client.ErrNoNode)
	n, err := c.DeleteAll(testContext(t), "/nothing")
	checkOpError(t, err, "children", "/nothing", client.ErrNoNode)
	if n != 0 {
		t.Errorf("DeleteAll of a missing node deleted %d", n)
	}
}

func TestDeleteAllDeletesTheSubtreeAndCountsIt(t *testing.T) {
	_, addr := startServer(t)
	c := dial(t, addr)
	makeTree(t, c, appTree...)
	makeTree(t, c, "/other")
	n, err := c.DeleteAll(testContext(t), "/app")
	if err != nil || n != len(appTree) {
		t.Fatalf("DeleteAll(/app) = %d, %v; want %d", n, err, len(appTree))
	}
	names, _, err := c.Children(testContext(t), "/")
	if err != nil || !reflect.DeepEqual(names, []string{"other", "zookeeper"}) {
		t.Fatalf("children of / after DeleteAll(/app): %v, %v; want [other zookeeper]", names, err)
	}
}

func TestDeleteAllOfTheRootKeepsTheRootAndTheSystemNodes(t *testing.T) {
	_, addr := startServer(t)
	c := dial(t, addr)
	makeTree(t, c, appTree...)
	makeTree(t, c, "/other", "/zookeeper/mine", "/zookeeper/quota/app")
	n, err := c.DeleteAll(testContext(t), "/")
	if err != nil || n != len(appTree)+3 {
		t.Fatalf("DeleteAll(/) = %d, %v; want %d", n, err, len(appTree)+3)
	}
	var left []string
	if err := c.Walk(testContext(t), "/", func(path string, _ client.Stat, _ []string) error {
		left = append(left, path)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := append([]string{"/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"}, mapPaths()...); !reflect.DeepEqual(left, want) {
		t.Fatalf("after DeleteAll(/): %v; want %v", left, want)
	}
	if n, err := c.DeleteAll(testContext(t), "/zookeeper"); err != nil || n != 0 {
		t.Fatalf("DeleteAll(/zookeeper) = %d, %v; want 0, nil", n, err)
	}
}

func TestWithRequestTimeoutBoundsEachRequest(t *testing.T) {
	s, addr := startServer(t)
	c := dial(t, addr) // its session outlives the test
	makeTree(t, c, appTree...)
	s.Close()
	// A request sent before the client saw the close would fail with the
	// connection instead.
	for deadline := time.Now().Add(subtreeWait); c.State() == client.StateConnected; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client never saw its server close")
		}
	}
	// No deadline on the calls: only the request timeout can end them
	// while no server answers.
	err := c.Walk(context.Background(), "/app", func(string, client.Stat, []string) error { return nil },
		client.WithRequestTimeout(10*time.Millisecond))
	checkOpError(t, err, "children", "/app", context.DeadlineExceeded)
	_, err = c.DeleteAll(context.Background(), "/app", client.WithRequestTimeout(10*time.Millisecond))
	checkOpError(t, err, "children", "/app", context.DeadlineExceeded)
}
