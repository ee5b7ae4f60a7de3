package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/wire"
)

// TestThePartitionMapIsChangedByTheSuperuserAndSeenByEveryMember runs a
// cluster of three with a superuser: a change of the map is refused to
// anyone else, over the binary protocol and HTTP; the superuser's change
// fires a watch on the map's node at another member and every member
// reads the same map, whose version is the change's zxid; and no client,
// the superuser included, writes the node as a node.
func TestThePartitionMapIsChangedByTheSuperuserAndSeenByEveryMember(t *testing.T) {
	t.Parallel()
	if *flagShards >= 2 {
		t.Skip("it makes the map's first changes itself, from a cluster of one shard")
	}
	c := startCluster(t, 3, func(cfg *server.Config) {
		cfg.SuperDigest = client.DigestID("super", "test")
		cfg.HTTP = "127.0.0.1:0"
	})
	ctx := testCtx(t)
	root := dial(t, c.addr(1), client.WithAuth("digest", client.DigestCredential("super", "test")))
	alice := dial(t, c.addr(1), client.WithAuth("digest", client.DigestCredential("alice", "secret")))
	watcher := dial(t, c.addr(2))

	m, err := watcher.Shards(ctx)
	if err != nil || m.Version != 0 || m.IsPartitioned("/locks") || len(m.Shards) != 1 {
		t.Fatalf("the map before any change: %+v, %v; want one shard, version 0", m, err)
	}
	_, _, created, err := watcher.ExistsW(ctx, wire.ShardsPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.PartitionShards(ctx, "/locks"); !errors.Is(err, client.ErrNoAuth) {
		t.Fatalf("a partition by alice: %v, want ErrNoAuth", err)
	}
	if status, answer := postShards(t, c.servers[1], `{"parent": "/locks"}`, ""); status != http.StatusForbidden || answer["error"] == nil {
		t.Fatalf("a partition over HTTP without the superuser: %d %v", status, answer)
	}

	// The members' cards say that they know maps within a second of their
	// start; until then a change is refused.
	deadline := time.Now().Add(patience)
	for m, err = root.PartitionShards(ctx, "/locks"); errors.Is(err, client.ErrBadArguments) && time.Now().Before(deadline); m, err = root.PartitionShards(ctx, "/locks") {
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || !m.IsPartitioned("/locks") || m.Version == 0 {
		t.Fatalf("a partition by the superuser: %+v, %v", m, err)
	}
	if ev := waitEvent(t, created, 5*time.Second); ev.Type != client.EventNodeCreated || ev.Path != wire.ShardsPath {
		t.Fatalf("the watch on the map at member 2: %+v", ev)
	}
	if _, err := root.PartitionShards(ctx, "/locks/a"); !errors.Is(err, client.ErrBadArguments) {
		t.Fatalf("a partition below a partitioned parent: %v, want ErrBadArguments", err)
	}

	for id := uint64(1); id <= 3; id++ {
		cl := dial(t, c.addr(id))
		if err := cl.Sync(ctx, "/"); err != nil {
			t.Fatal(err)
		}
		got, err := cl.Shards(ctx)
		if err != nil || got.Version != m.Version || !slices.Equal(got.Partitioned, []string{"/locks"}) {
			t.Errorf("member %d's map: %+v, %v; want %+v", id, got, err, m)
		}
	}

	// Member 3 may not have heard the others' cards yet either.
	status, answer := postShards(t, c.servers[3], `{"parent": "/app/locks"}`, "super:test")
	for ; status == http.StatusBadRequest && strings.Contains(fmt.Sprint(answer["error"]), "have not said lately") && time.Now().Before(deadline); status, answer = postShards(t, c.servers[3], `{"parent": "/app/locks"}`, "super:test") {
		time.Sleep(50 * time.Millisecond)
	}
	if status != http.StatusOK {
		t.Fatalf("a partition over HTTP by the superuser: %d %v", status, answer)
	}
	// Member 2 reads the map as it has applied it: the change reaches it
	// within a moment.
	var view shardmap.View
	for getJSON(t, c.servers[2], "/api/v1/shards", &view); len(view.Partitioned) < 2 && time.Now().Before(deadline); getJSON(t, c.servers[2], "/api/v1/shards", &view) {
		time.Sleep(20 * time.Millisecond)
	}
	if !slices.Equal(view.Partitioned, []string{"/app/locks", "/locks"}) || view.Version <= m.Version || len(view.Shards) != 1 || len(view.Shards[0].Ranges) != 3 {
		t.Errorf("GET /api/v1/shards after two partitions: %+v", view)
	}
	if status, answer := postShards(t, c.servers[3], `{"parent": "/app/locks"}`, "super:test"); status != http.StatusBadRequest {
		t.Errorf("a partition of a partitioned parent over HTTP: %d %v, want 400", status, answer)
	}

	for name, write := range map[string]func() error{
		"set":    func() error { _, err := root.Set(ctx, wire.ShardsPath, []byte("x"), -1); return err },
		"delete": func() error { return root.Delete(ctx, wire.ShardsPath, -1) },
		"create": func() error { _, err := root.Create(ctx, wire.ShardsPath+"/x", nil, client.Persistent); return err },
	} {
		if err := write(); !errors.Is(err, client.ErrBadArguments) {
			t.Errorf("the superuser's %s of the map's node: %v, want ErrBadArguments", name, err)
		}
	}
	if err := root.Sync(ctx, wire.ShardsPath); err != nil {
		t.Fatal(err)
	}
	if after, err := root.Shards(ctx); err != nil || after.Version != view.Version {
		t.Errorf("the map after refused writes: %+v, %v", after, err)
	}
}

// postShards posts body to a member's POST /api/v1/shards/partition, as
// user:password with basic auth unless auth is empty.
func postShards(t *testing.T, s *server.Server, body, auth string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+s.HTTPAddr().String()+"/api/v1/shards/partition", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	if user, password, ok := bytes.Cut([]byte(auth), []byte(":")); ok {
		req.SetBasicAuth(string(user), string(password))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("POST /api/v1/shards/partition: %s, body not JSON: %v", resp.Status, err)
	}
	return resp.StatusCode, answer
}

// getJSON reads a member's GET path into v.
func getJSON(t *testing.T, s *server.Server, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr().String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
