package integration

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
)

// collect reads n events from ch, failing the test if they do not come.
func collect(t *testing.T, ch <-chan client.Event, n int, within time.Duration) []client.Event {
	t.Helper()
	var got []client.Event
	deadline := time.After(within)
	for len(got) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("channel closed after %d of %d events: %v", len(got), n, got[max(0, len(got)-3):])
			}
			got = append(got, ev)
		case <-deadline:
			t.Fatalf("%d of %d events within %v", len(got), n, within)
		}
	}
	return got
}

func TestARecursiveWatchSeesEveryChangeInOrderAcrossAReconnect(t *testing.T) {
	s := startServer(t, "", "")
	p := newProxy(t, s.Addr().String())
	watcher := dial(t, p.addr(), client.WithSessionTimeout(10*time.Second))
	writer := dial(t, s.Addr().String())
	ctx := testCtx(t)
	events, err := watcher.AddWatch(ctx, "/deep", client.WatchPersistentRecursive)
	if err != nil {
		t.Fatal(err)
	}

	// 1,000 changes in a subtree up to 6 deep: creates, sets, deletes of
	// leaves. Half-way the watcher's connection breaks.
	const changes = 1000
	rng := rand.New(rand.NewPCG(1, 2))
	nodes := []string{"/deep"}
	children := map[string]int{}
	var want []string
	wantData := map[int]string{} // event index: the data a NodeDataChanged carries
	if _, err := writer.Create(ctx, "/deep", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	want = append(want, "NodeCreated /deep")
	for i := 1; i < changes; i++ {
		if i == changes/2 {
			p.cut(false)
		}
		n := nodes[rng.IntN(len(nodes))]
		switch {
		case i%5 == 4 && n != "/deep" && children[n] == 0:
			if err := writer.Delete(ctx, n, -1); err != nil {
				t.Fatal(err)
			}
			nodes = slices.DeleteFunc(nodes, func(x string) bool { return x == n })
			children[n[:strings.LastIndexByte(n, '/')]]--
			want = append(want, "NodeDeleted "+n)
		case i%3 == 0 || strings.Count(n, "/") >= 6:
			if _, err := writer.Set(ctx, n, fmt.Appendf(nil, "%d", i), -1); err != nil {
				t.Fatal(err)
			}
			wantData[len(want)] = fmt.Sprint(i)
			want = append(want, "NodeDataChanged "+n)
		default:
			child := fmt.Sprintf("%s/n%d", n, i)
			if _, err := writer.Create(ctx, child, nil, client.Persistent); err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, child)
			children[n]++
			want = append(want, "NodeCreated "+child)
		}
	}
	got := collect(t, events, len(want), 20*time.Second)
	var last int64
	for i, ev := range got {
		if s := ev.Type.String() + " " + ev.Path; s != want[i] {
			t.Fatalf("event %d: %s, want %s (the events before: %v)", i, s, want[i], got[max(0, i-3):i])
		}
		if ev.Zxid <= last {
			t.Fatalf("event %d at zxid %d after %d: not in zxid order", i, ev.Zxid, last)
		}
		// Every value is in its event, also the replayed ones.
		switch ev.Type {
		case client.EventNodeDataChanged:
			if string(ev.Data) != wantData[i] || ev.Stat.Mzxid != ev.Zxid {
				t.Fatalf("event %d: %s carries %q at mzxid %d, want %q at %d", i, ev.Path, ev.Data, ev.Stat.Mzxid, wantData[i], ev.Zxid)
			}
		case client.EventNodeCreated:
			if ev.Stat.Czxid != ev.Zxid {
				t.Fatalf("event %d: %s carries czxid %d, want %d", i, ev.Path, ev.Stat.Czxid, ev.Zxid)
			}
		}
		last = ev.Zxid
	}
	select {
	case ev := <-events:
		t.Errorf("an event beyond the changes made: %v", ev)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestAPersistentWatchSeesItsNodeAndStaysUntilRemoved(t *testing.T) {
	s := startServer(t, "", "")
	c := dial(t, s.Addr().String())
	ctx := testCtx(t)
	events, err := c.AddWatch(ctx, "/cfg", client.WatchPersistent)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		do   func() error
		want string // "" for no event
	}{
		{func() error { _, err := c.Create(ctx, "/cfg", []byte("1"), client.Persistent); return err }, "NodeCreated /cfg"},
		{func() error { _, err := c.Set(ctx, "/cfg", []byte("2"), -1); return err }, "NodeDataChanged /cfg"},
		{func() error { _, err := c.Create(ctx, "/cfg/x", nil, client.Persistent); return err }, "NodeChildrenChanged /cfg"},
		{func() error { _, err := c.Set(ctx, "/cfg/x", []byte("y"), -1); return err }, ""},
		{func() error { return c.Delete(ctx, "/cfg/x", -1) }, "NodeChildrenChanged /cfg"},
		{func() error { return c.Delete(ctx, "/cfg", -1) }, "NodeDeleted /cfg"},
		{func() error { _, err := c.Create(ctx, "/cfg", nil, client.Persistent); return err }, "NodeCreated /cfg"},
	}
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatal(err)
		}
		// A sync is answered after every notification it follows.
		if err := c.Sync(ctx, "/"); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-events:
			if got := ev.Type.String() + " " + ev.Path; got != st.want {
				t.Errorf("step %d: %s, want %q", i, got, st.want)
			}
		default:
			if st.want != "" {
				t.Errorf("step %d: no event, want %s", i, st.want)
			}
		}
	}
	if err := c.RemoveWatch(ctx, "/cfg", client.WatchPersistent); err != nil {
		t.Fatal(err)
	}
	if _, open := <-events; open {
		t.Error("the channel of a removed watch is open")
	}
	if err := c.RemoveWatch(ctx, "/cfg", client.WatchPersistent); !errors.Is(err, client.ErrNoWatcher) {
		t.Errorf("removing it again: %v, want ErrNoWatcher", err)
	}
}

func TestALastingWatchEndsWhenTheServerCannotReplayWhatItMissed(t *testing.T) {
	dir, addr := t.TempDir(), freePort(t)
	small := func(c *server.Config) { c.SnapshotEvery = 20 }
	s := startServer(t, dir, addr, small)
	p := newProxy(t, addr)
	watcher := dial(t, p.addr(), client.WithSessionTimeout(20*time.Second))
	writer := dial(t, addr)
	ctx := testCtx(t)
	events, err := watcher.AddWatch(ctx, "/x", client.WatchPersistentRecursive)
	if err != nil {
		t.Fatal(err)
	}
	p.cut(true)
	for i := range 100 {
		if _, err := writer.Create(ctx, fmt.Sprintf("/x%d", i), nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := writer.Create(ctx, "/x", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	// A restart keeps only the events after its last snapshot.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	startServer(t, dir, addr, small)
	p.setRefuse(false)
	ev := collect(t, events, 1, 20*time.Second)[0]
	if ev.Type != client.EventWatchRemoved || ev.Path != "/x" || !errors.Is(ev.Err, client.ErrEventsLost) {
		t.Fatalf("got %v, want the watch removed with ErrEventsLost", ev)
	}
	if _, open := <-events; open {
		t.Error("the channel is still open")
	}
}
