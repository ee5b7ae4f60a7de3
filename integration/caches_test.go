package integration

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
)

// treeState reads the subtree at root from the server: path -> data.
func treeState(t *testing.T, c *client.Client, root string) map[string]string {
	t.Helper()
	ctx := testCtx(t)
	out := map[string]string{}
	var walk func(p string)
	walk = func(p string) {
		data, _, err := c.Get(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(data)
		names, _, err := c.Children(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			walk(p + "/" + n)
		}
	}
	walk(root)
	return out
}

// cacheState reads the same from a TreeCache.
func cacheState(tc *recipes.TreeCache, root string) map[string]string {
	out := map[string]string{}
	var walk func(p string)
	walk = func(p string) {
		data, _, ok := tc.Get(p)
		if !ok {
			return
		}
		out[p] = string(data)
		names, _ := tc.Children(p)
		for _, n := range names {
			walk(p + "/" + n)
		}
	}
	walk(root)
	return out
}

func waitUntil(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}

func TestATreeCacheFollowsItsSubtreeAcrossAReconnect(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	p := newProxy(t, s.Addr().String())
	writer := dial(t, s.Addr().String())
	ctx := testCtx(t)
	for _, n := range []string{"/app", "/app/a", "/app/a/x", "/app/b"} {
		if _, err := writer.Create(ctx, n, []byte("v0 "+n), client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	tc := recipes.NewTreeCache(dial(t, p.addr(), client.WithSessionTimeout(10*time.Second)), "/app")
	defer tc.Close()
	events := tc.Events()
	var added []string
	for ev := range events {
		if ev.Type == recipes.TreeInitialized {
			break
		}
		added = append(added, ev.Type.String()+" "+ev.Path)
	}
	if want := []string{"added /app", "added /app/a", "added /app/a/x", "added /app/b"}; !slices.Equal(added, want) {
		t.Errorf("first load reported %v, want %v", added, want)
	}
	if names, _ := tc.Children("/app"); !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("Children(/app) = %v", names)
	}

	// Changes, with the cache's connection cut half-way.
	for i := range 200 {
		if i == 100 {
			p.cut(false)
		}
		var err error
		switch i % 4 {
		case 0:
			_, err = writer.Create(ctx, fmt.Sprintf("/app/a/n%d", i), []byte("new"), client.Persistent)
		case 1:
			_, err = writer.Set(ctx, "/app/b", fmt.Appendf(nil, "v%d", i), -1)
		case 2:
			err = writer.Delete(ctx, fmt.Sprintf("/app/a/n%d", i-2), -1)
		case 3:
			_, err = writer.Set(ctx, "/app", fmt.Appendf(nil, "v%d", i), -1)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := treeState(t, writer, "/app")
	waitUntil(t, "the cache to match the server", 10*time.Second, func() bool {
		return fmt.Sprint(cacheState(tc, "/app")) == fmt.Sprint(want)
	})
	_, st, _ := tc.Get("/app/a")
	_, server, _ := writer.Exists(ctx, "/app/a")
	if st.NumChildren != server.NumChildren || st.Cversion != server.Cversion || st.Pzxid != server.Pzxid {
		t.Errorf("cached Stat of /app/a %+v, the server's %+v", st, server)
	}
	// Every change came as an event, in order: 50 creates, 100 updates, 50 removals.
	counts := map[recipes.TreeEventType]int{}
	waitUntil(t, "every event", 10*time.Second, func() bool {
		for {
			select {
			case ev := <-events:
				counts[ev.Type]++
			default:
				return counts[recipes.TreeNodeAdded] == 50 && counts[recipes.TreeNodeUpdated] == 100 && counts[recipes.TreeNodeRemoved] == 50
			}
		}
	})
	if counts[recipes.TreeRebuilt] != 0 {
		t.Errorf("the cache rebuilt %d times across a mere reconnect", counts[recipes.TreeRebuilt])
	}
}

func TestServiceDiscoveryFollowsRegistrationsAndExpiries(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	addr := s.Addr().String()
	ctx := testCtx(t)
	p := newProxy(t, addr)
	instClient := dial(t, p.addr(), client.WithSessionTimeout(time.Second), client.WithSessionRenewal())
	sc, err := recipes.NewServiceCache(dial(t, addr), "billing")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	lists := sc.Watch()
	if got := <-lists; len(got) != 0 {
		t.Fatalf("first list %v, want none", got)
	}

	start := time.Now()
	a := recipes.Instance{ID: "a", Address: "10.0.0.1", Port: 8080, Metadata: map[string]string{"zone": "x"}}
	reg, err := recipes.Register(ctx, instClient, "billing", a)
	if err != nil {
		t.Fatal(err)
	}
	other, err := recipes.Register(ctx, dial(t, addr), "billing", recipes.Instance{ID: "b", Address: "10.0.0.2", Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "both instances in the cache", time.Second, func() bool { return len(sc.Instances()) == 2 })
	t.Logf("seen %v after registration", time.Since(start))
	if got := sc.Instances()[0]; got.ID != "a" || got.Metadata["zone"] != "x" || got.Port != 8080 {
		t.Errorf("instance %+v", got)
	}
	var picks []string
	for range 4 {
		inst, _ := sc.Pick()
		picks = append(picks, inst.ID)
	}
	if !slices.Equal(picks, []string{"a", "b", "a", "b"}) {
		t.Errorf("Pick gave %v, want round-robin", picks)
	}

	// a's session expires: it leaves the list; when its client comes
	// back with a new session, it registers again.
	p.cut(true)
	waitUntil(t, "a to go once its session expired", 10*time.Second, func() bool {
		list := sc.Instances()
		return len(list) == 1 && list[0].ID == "b"
	})
	p.setRefuse(false)
	waitUntil(t, "a to register again in a new session", 10*time.Second, func() bool { return len(sc.Instances()) == 2 })

	if err := reg.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the list to empty", time.Second, func() bool { return len(sc.Instances()) == 0 })
}

func TestAConfigWatcherSeesEveryValueInOrderThroughARestart(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freePort(t)
	s := startServer(t, dir, addr)
	ctx := testCtx(t)
	cv := recipes.NewConfigValue(dial(t, addr, client.WithSessionTimeout(10*time.Second)), "/config/feature")
	defer cv.Close()
	values := cv.Watch()
	writer := recipes.NewConfigValue(dial(t, addr), "/config/feature")
	defer writer.Close()

	// 8 writers, 50 values each: 400 committed values in some order.
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if err := writer.Set(ctx, fmt.Appendf(nil, "w%d-%d", w, i), -1); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	perWriter := map[byte]int{}
	for len(seen) < 400 {
		select {
		case v := <-values:
			if v == nil {
				continue // the node did not exist yet when the watcher read it
			}
			if seen[string(v)] {
				t.Fatalf("value %q seen twice", v)
			}
			seen[string(v)] = true
			var w, i int
			fmt.Sscanf(string(v), "w%d-%d", &w, &i)
			if i != perWriter[byte(w)] {
				t.Fatalf("writer %d's value %d after %d: out of order", w, i, perWriter[byte(w)]-1)
			}
			perWriter[byte(w)]++
		case <-time.After(10 * time.Second):
			t.Fatalf("saw %d of 400 values", len(seen))
		}
	}
	_, st, _ := dial(t, addr).Get(ctx, "/config/feature")
	if st.Version != 399 {
		t.Errorf("version %d, want 399", st.Version)
	}
	last := string(cv.Value())

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := string(cv.Value()); got != last {
		t.Errorf("value while the server is down %q, want %q", got, last)
	}
	startServer(t, dir, addr)
	if err := writer.Set(ctx, []byte("after the restart"), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-values:
		if string(v) != "after the restart" {
			t.Errorf("after the restart saw %q", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no value after the restart")
	}
}

func TestATreeCacheRebuildsAfterItsSessionExpires(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	addr := s.Addr().String()
	writer := dial(t, addr)
	ctx := testCtx(t)
	for _, n := range []string{"/r", "/r/old", "/r/keep"} {
		if _, err := writer.Create(ctx, n, []byte(n), client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	p := newProxy(t, addr)
	tc := recipes.NewTreeCache(dial(t, p.addr(), client.WithSessionTimeout(time.Second), client.WithSessionRenewal()), "/r")
	defer tc.Close()
	events := tc.Events()
	for ev := range events {
		if ev.Type == recipes.TreeInitialized {
			break
		}
	}
	p.cut(true)
	if err := writer.Delete(ctx, "/r/old", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Create(ctx, "/r/new", []byte("n"), client.Persistent); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Set(ctx, "/r/keep", []byte("changed"), -1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past the session timeout
	p.setRefuse(false)
	var got []string
	for ev := range events {
		got = append(got, ev.Type.String()+" "+ev.Path)
		if ev.Type == recipes.TreeRebuilt {
			if ev.Err == nil {
				t.Error("TreeRebuilt without a reason")
			}
			break
		}
	}
	if want := []string{"removed /r/old", "updated /r", "updated /r/keep", "added /r/new", "rebuilt /r"}; !slices.Equal(got, want) {
		t.Errorf("the rebuild reported %v, want %v", got, want)
	}
	if fmt.Sprint(cacheState(tc, "/r")) != fmt.Sprint(treeState(t, writer, "/r")) {
		t.Errorf("cache %v, server %v", cacheState(tc, "/r"), treeState(t, writer, "/r"))
	}
}
