package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/recipes"
)

func TestTheLockDoctorShowsHoldsQueuesAndFlags(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	holder := start(t, addr, "lock", "/locks/doc")
	waitFor(t, "the lock to be taken", func() bool { return strings.HasPrefix(holder.stdout.String(), "acquired") })
	waiter := start(t, addr, "lock", "/locks/doc")
	waitFor(t, "the waiter to queue", func() bool {
		ls := decode[[]lockJSON](t, must(t, addr, "locks", "-o", "json", "/locks"))
		return len(ls) == 1 && len(ls[0].Waiters) == 1
	})
	ls := decode[[]lockJSON](t, must(t, addr, "locks", "-o", "json", "--hold-over", "1h"))
	if len(ls) != 1 || ls[0].Path != "/locks/doc" || len(ls[0].Holders) != 1 || len(ls[0].Flags) != 0 {
		t.Fatalf("locks -o json = %+v", ls)
	}
	if h := ls[0].Holders[0]; h.Mode != "lock" || h.Token <= 0 || !strings.HasSuffix(h.Owner, ":"+strconv.Itoa(holder.cmd.Process.Pid)) {
		t.Errorf("holder %+v", h)
	}
	ls = decode[[]lockJSON](t, must(t, addr, "locks", "-o", "json", "--hold-over", "1ns", "--queue-over", "0"))
	if got := strings.Join(ls[0].Flags, ","); got != "long-hold,long-queue" {
		t.Errorf("flags %q, want long-hold,long-queue", got)
	}
	out := must(t, addr, "locks", "--hold-over", "1ns")
	if rows := strings.Split(strings.TrimSpace(out), "\n"); len(rows) != 2 || !strings.HasPrefix(rows[0], "PATH") ||
		!strings.HasPrefix(rows[1], "/locks/doc") || !strings.Contains(rows[1], "long-hold") {
		t.Errorf("locks printed:\n%s", out)
	}
	if ls := decode[[]lockJSON](t, must(t, addr, "locks", "-o", "json", "/elsewhere")); len(ls) != 0 {
		t.Errorf("locks of a path with none: %+v", ls)
	}
	holder.stop(t, syscall.SIGINT)
	waiter.stop(t, syscall.SIGINT)
}

func TestDeadlocksPrintsACycleAndExitsOne(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	if out := must(t, addr, "locks", "deadlocks"); out != "no deadlocks\n" {
		t.Errorf("deadlocks with none: %q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c1, c2 := dial(t, addr), dial(t, addr)
	a1 := recipes.NewMutex(c1, "/dl/a", recipes.WithOwner("p1"), recipes.WithHolder("g1"))
	b2 := recipes.NewMutex(c2, "/dl/b", recipes.WithOwner("p2"), recipes.WithHolder("g2"))
	if err := a1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	go recipes.NewMutex(c1, "/dl/b", recipes.WithOwner("p1"), recipes.WithHolder("g1")).Lock(ctx)
	go recipes.NewMutex(c2, "/dl/a", recipes.WithOwner("p2"), recipes.WithHolder("g2")).Lock(ctx)
	var r result
	waitFor(t, "the deadlock to show", func() bool { r = arbor(t, addr, "locks", "deadlocks", "-o", "json"); return r.code == 1 })
	got := decode[map[string][][]waitJSON](t, r.stdout)["cycles"]
	if len(got) != 1 || len(got[0]) != 2 {
		t.Fatalf("deadlocks -o json = %+v", got)
	}
	out := arbor(t, addr, "locks", "deadlocks")
	if out.code != 1 || !strings.Contains(out.stdout, "cycle 1:") || !strings.Contains(out.stdout, "p1 (holder g1) waits") {
		t.Errorf("deadlocks printed %v", out)
	}
}

func TestBreakFreesALockForTheNextWaiter(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	holder := start(t, addr, "lock", "/locks/brk")
	waitFor(t, "the lock to be taken", func() bool { return strings.HasPrefix(holder.stdout.String(), "acquired") })
	out := must(t, addr, "locks", "break", "/locks/brk", "--reason", "hung")
	if !strings.HasPrefix(out, "broke /locks/brk: _c_") {
		t.Errorf("break printed %q", out)
	}
	if r := arbor(t, addr, "locks", "break", "/locks/brk"); r.code != 1 {
		t.Errorf("a break of a free lock: %v, want exit 1", r)
	}
	holder.stop(t, syscall.SIGINT)

	// The history tells who held it and that it was broken, and why.
	lines := strings.Split(strings.TrimSpace(must(t, addr, "locks", "history", "/locks/brk")), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], " acquired ") || !strings.Contains(lines[2], " broken ") ||
		!strings.HasSuffix(lines[2], " hung") {
		t.Errorf("history printed:\n%s", strings.Join(lines, "\n"))
	}
	var evs []map[string]any
	if err := json.Unmarshal([]byte(must(t, addr, "locks", "history", "-o", "json")), &evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1]["event"] != "broken" || evs[1]["reason"] != "hung" || evs[0]["token"] != evs[1]["token"] {
		t.Errorf("history -o json = %v", evs)
	}
}

func TestCheckSaysWhetherATokenHolds(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	holder := start(t, addr, "lock", "/locks/chk")
	waitFor(t, "the lock to be taken", func() bool { return strings.HasPrefix(holder.stdout.String(), "acquired") })
	var token int64
	if _, err := fmt.Sscanf(holder.stdout.String(), "acquired /locks/chk (token %d)", &token); err != nil {
		t.Fatalf("lock printed %q: %v", holder.stdout.String(), err)
	}
	tok := strconv.FormatInt(token, 10)
	if out := must(t, addr, "locks", "check", "/locks/chk", tok); out != tok+" holds /locks/chk\n" {
		t.Errorf("check of the holder's token printed %q", out)
	}
	holder.stop(t, syscall.SIGINT)
	if r := arbor(t, addr, "locks", "check", "/locks/chk", tok); r.code != 1 || !strings.Contains(r.stdout, "nobody holds it") {
		t.Errorf("check after the release: %v, want exit 1 and nobody", r)
	}
	if r := arbor(t, addr, "locks", "check", "/locks/chk", tok, "-o", "json"); r.code != 1 || !strings.Contains(r.stdout, `"current":false,"holders":[]`) {
		t.Errorf("check -o json after the release: %v", r)
	}
	if r := arbor(t, addr, "locks", "check", "/locks/chk", "soon"); r.code != 2 {
		t.Errorf("check of a token that is not a number: %v, want exit 2", r)
	}
}

// The lock doctor shows a hierarchical lock's intention locks as holds of
// their own mode, beside the lock they cover.
func TestTheLockDoctorShowsIntentionLocks(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	parts, err := recipes.HierarchyParts("/locks", "/locks/orders/42", false)
	if err != nil {
		t.Fatal(err)
	}
	m, err := recipes.NewMultiLock(dial(t, addr), parts, recipes.WithOwner("order-42"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	modes := map[string]string{}
	for _, l := range decode[[]lockJSON](t, must(t, addr, "locks", "-o", "json", "/locks")) {
		for _, h := range l.Holders {
			modes[l.Path] += h.Mode
		}
	}
	want := map[string]string{"/locks": "ix", "/locks/orders": "ix", "/locks/orders/42": "lock"}
	if fmt.Sprint(modes) != fmt.Sprint(want) {
		t.Errorf("the doctor shows %v, want %v", modes, want)
	}
}
