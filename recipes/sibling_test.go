package recipes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

// entries parses queue node names into the queue, in queue order.
func entries(t *testing.T, names ...string) []lockq.Entry {
	t.Helper()
	es := lockq.Sort(names)
	if len(es) != len(names) {
		t.Fatalf("bad names %v", names)
	}
	return es
}

func node(id string, kind lockq.Kind, seq int) string {
	return fmt.Sprintf("%s%0*d", lockq.Prefix(id, kind), lockq.SeqDigits, seq)
}

func TestADeletedNodeDropsItsAcquisitionOnlyWhenItWasItsOnlyNode(t *testing.T) {
	t.Parallel()
	ex := lockq.Exclusive
	for _, tc := range []struct {
		name  string
		queue []string
		me    string // the waiter's id; it watches its blocker
		held  bool   // it may take its turn without a list
	}{
		{"the holder's only node", []string{node("a", ex, 1), node("b", ex, 2)}, "b", true},
		// a's create was applied after all, ahead of the node its retry
		// made: a deletes the node it did not know of, and holds with the
		// other one (seed 531629175: token 1017 held before 1015).
		{"a node the holder did not know of, ahead of its own", []string{node("a", ex, 1), node("a", ex, 2), node("b", ex, 3)}, "b", false},
		{"the holder's only node, a node of mine left after mine", []string{node("a", ex, 1), node("b", ex, 2), node("b", ex, 3)}, "b", true},
		{"a holder ahead of another one's", []string{node("a", ex, 1), node("c", ex, 2), node("b", ex, 3)}, "b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := entries(t, tc.queue...)
			var me lockq.Entry
			for _, e := range es {
				if e.ID == tc.me {
					me = e
					break
				}
			}
			b := lockq.Blocker(es, tc.me)
			if b < 0 {
				t.Fatalf("%s waits for nobody in %v", tc.me, tc.queue)
			}
			got := dropped(es, es[b].Name, ticket{Entry: me})
			if (got != nil) != tc.held {
				t.Fatalf("dropped(%v, %s) = %v, want the turn without a list: %v", tc.queue, es[b].Name, got, tc.held)
			}
		})
	}
}

// An acquisition whose create's answer was lost can have two nodes: the
// one the create made, applied after all but not found by the retry's look
// (a member that had not yet applied it answered the look), and the one
// the retry made. Its list deletes the first; the waiter behind, which
// watches that first node, must not take the deletion for the
// acquisition's release.
func TestTheDeletionOfANodeALostCreateLeftDoesNotHandTheLockOn(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ca, cb := s.dial(t), s.dial(t)
	ctx := ctxWait(t)
	const dir = "/locks/sibling"
	must(t, makeDirs(ctx, ca, dir, nil))

	// a: the node of the lost create, then the retry's, as enqueueAt
	// makes them (one id for both).
	qa := newQueue(ca, dir, options{})
	id := randomID()
	var made []string
	var st client.Stat
	for range 2 {
		p, s, err := ca.CreateStat(ctx, dir+"/"+lockq.Prefix(id, lockq.Exclusive), nil, client.EphemeralSequential)
		must(t, err)
		made, st = append(made, p[len(dir)+1:]), s
	}
	e, _ := lockq.Parse(made[1])
	ta := ticket{Entry: e, prefix: lockq.IDPrefix(id), czxid: st.Czxid, owner: ca.SessionID(), lossy: true}

	// b queues behind both, and watches a's first node.
	mb := NewMutex(cb, dir)
	acquired := make(chan error, 1)
	go func() { acquired <- mb.Lock(ctx) }()
	waitFor(t, "b to watch a's first node", func() bool {
		return len(children(t, ca, dir)) == 3 && s.metric(t, "arbor_watches ") == 1
	})
	notified := s.notifications(t)

	// a lists: it deletes the node it did not know of and holds.
	must(t, qa.wait(ctx, &ta, true, nil))
	if nodes := children(t, ca, dir); len(nodes) != 2 || nodes[0] != ta.Name {
		t.Fatalf("nodes %v, want %s ahead of b's", nodes, ta.Name)
	}
	// b hears of the deletion, and lists again and watches a's node, or
	// (the bug) takes its turn.
	waitFor(t, "b to hear of the deletion and watch again", func() bool {
		select {
		case err := <-acquired:
			t.Fatalf("b took the lock (%v) while a holds with its node %s", err, ta.Name)
		default:
		}
		return s.notifications(t) > notified && s.metric(t, "arbor_watches ") == 1
	})
	select {
	case err := <-acquired:
		t.Fatalf("b took the lock (%v) while a holds with its node %s", err, ta.Name)
	case <-time.After(100 * time.Millisecond):
	}

	must(t, qa.leave(ctx, ta))
	select {
	case err := <-acquired:
		must(t, err)
	case <-ctx.Done():
		t.Fatal("b did not get the lock after a's release")
	}
	if mb.Token() <= ta.czxid {
		t.Errorf("b's token %d, not above a's %d", mb.Token(), ta.czxid)
	}
	must(t, mb.Unlock(context.WithoutCancel(ctx)))
}
