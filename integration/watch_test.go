package integration

import (
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

func TestWatchRules(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	c := dial(t, s.Addr().String())
	writer := dial(t, s.Addr().String())
	ctx := testCtx(t)
	mustCreate := func(p string) {
		t.Helper()
		if _, err := writer.Create(ctx, p, nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	const within = 5 * time.Second

	cases := []struct {
		name   string
		setup  []string                                    // nodes made first
		arm    func(p string) (<-chan client.Event, error) // leaves the watch on /w
		change func(p string) error                        // by another client
		want   client.EventType
	}{
		{"getData fires NodeDataChanged on a set", []string{"/w"},
			func(p string) (<-chan client.Event, error) { _, _, ch, err := c.GetW(ctx, p); return ch, err },
			func(p string) error { _, err := writer.Set(ctx, p, []byte("x"), -1); return err },
			client.EventNodeDataChanged},
		{"getData fires NodeDeleted on a delete", []string{"/w"},
			func(p string) (<-chan client.Event, error) { _, _, ch, err := c.GetW(ctx, p); return ch, err },
			func(p string) error { return writer.Delete(ctx, p, -1) },
			client.EventNodeDeleted},
		{"exists on a missing node fires NodeCreated", nil,
			func(p string) (<-chan client.Event, error) { _, _, ch, err := c.ExistsW(ctx, p); return ch, err },
			func(p string) error { _, err := writer.Create(ctx, p, nil, client.Persistent); return err },
			client.EventNodeCreated},
		{"exists on a present node fires NodeDataChanged", []string{"/w"},
			func(p string) (<-chan client.Event, error) { _, _, ch, err := c.ExistsW(ctx, p); return ch, err },
			func(p string) error { _, err := writer.Set(ctx, p, []byte("x"), -1); return err },
			client.EventNodeDataChanged},
		{"getChildren fires NodeChildrenChanged on a child create", []string{"/w"},
			func(p string) (<-chan client.Event, error) { _, _, ch, err := c.ChildrenW(ctx, p); return ch, err },
			func(p string) error { _, err := writer.Create(ctx, p+"/kid", nil, client.Persistent); return err },
			client.EventNodeChildrenChanged},
		{"getChildren fires NodeChildrenChanged on a child delete", []string{"/w", "/w/kid"},
			func(p string) (<-chan client.Event, error) { _, _, ch, err := c.ChildrenW(ctx, p); return ch, err },
			func(p string) error { return writer.Delete(ctx, p+"/kid", -1) },
			client.EventNodeChildrenChanged},
		{"getChildren fires NodeDeleted when the node goes", []string{"/w"},
			func(p string) (<-chan client.Event, error) { _, _, ch, err := c.ChildrenW(ctx, p); return ch, err },
			func(p string) error { return writer.Delete(ctx, p, -1) },
			client.EventNodeDeleted},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := "/case" + string(rune('a'+i))
			mustCreate(root)
			for _, p := range tc.setup {
				mustCreate(root + p)
			}
			p := root + "/w"
			ch, err := tc.arm(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.change(p); err != nil {
				t.Fatal(err)
			}
			ev := waitEvent(t, ch, within)
			if ev.Type != tc.want || ev.Path != p {
				t.Fatalf("event %v, want %v on %s", ev, tc.want, p)
			}
			// One-shot: the channel is closed after its event.
			if _, ok := <-ch; ok {
				t.Fatal("a second event on a one-shot watch")
			}
		})
	}
}

func TestWatchFiresOnceForManyChanges(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	c := dial(t, s.Addr().String())
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/once", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	_, _, ch, err := c.GetW(ctx, "/once")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.Set(ctx, "/once", []byte{byte(i)}, -1); err != nil {
			t.Fatal(err)
		}
	}
	waitEvent(t, ch, 5*time.Second)
	noEvent(t, ch, 100*time.Millisecond)
}

// A client sees a watch event before the reply that reveals the change:
// by the time its own Set returns, the event is already delivered.
func TestNotificationPrecedesTheRevealingReply(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	c := dial(t, s.Addr().String())
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/order", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		_, _, ch, err := c.GetW(ctx, "/order")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Set(ctx, "/order", []byte{byte(i)}, -1); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-ch:
			if ev.Type != client.EventNodeDataChanged {
				t.Fatalf("event %v", ev)
			}
		default:
			t.Fatalf("round %d: the set's reply came before its watch event", i)
		}
	}
}
