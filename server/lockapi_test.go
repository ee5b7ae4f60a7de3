package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// api calls the lock API of s: method on path with body (JSON unless a
// string), and returns the status and the decoded answer.
func api(t *testing.T, s *Server, method, path string, body any, auth ...string) (int, map[string]any) {
	t.Helper()
	code, out, err := tryAPI(s, method, path, body, auth...)
	if err != nil {
		t.Fatal(err)
	}
	return code, out
}

// tryAPI is api for a goroutine other than the test's: it returns its
// failure.
func tryAPI(s *Server, method, path string, body any, auth ...string) (int, map[string]any, error) {
	var b []byte
	switch v := body.(type) {
	case nil:
	case string:
		b = []byte(v)
	default:
		b, _ = json.Marshal(v)
	}
	req, err := http.NewRequest(method, "http://"+s.HTTPAddr().String()+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	if len(auth) == 2 {
		req.SetBasicAuth(auth[0], auth[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, nil, fmt.Errorf("%s %s: answered %d with no JSON object: %v", method, path, resp.StatusCode, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		return 0, nil, fmt.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, out, nil
}

func token(t *testing.T, v map[string]any) int64 {
	t.Helper()
	f, ok := v["fencing_token"].(float64)
	if !ok {
		t.Fatalf("no fencing_token in %v", v)
	}
	return int64(f)
}

// holdersAndWaiters reads the lock at name through the API.
func holdersAndWaiters(t *testing.T, s *Server, name string) (holders, waiters int) {
	t.Helper()
	code, v := api(t, s, "GET", "/api/v1/locks/"+name, nil)
	if code == http.StatusNotFound {
		return 0, 0
	}
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %v", name, code, v)
	}
	return len(v["holders"].([]any)), len(v["waiters"].([]any))
}

func TestHTTPClientsTakeTurnsWithTokensThatGrow(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	code, first := api(t, s, "POST", "/api/v1/locks/job/acquire", map[string]any{"client_id": "w1", "ttl_ms": 10_000})
	if code != http.StatusOK || first["acquired"] != true || first["lease_id"] == "" {
		t.Fatalf("acquire: %d %v", code, first)
	}
	if exp, err := time.Parse(time.RFC3339Nano, first["expires_at"].(string)); err != nil || time.Until(exp) < 5*time.Second {
		t.Errorf("expires_at %v (%v), want about 10 s from now", first["expires_at"], err)
	}
	// Try once: busy, and nothing left behind.
	code, busy := api(t, s, "POST", "/api/v1/locks/job/acquire", map[string]any{"client_id": "w2", "wait_timeout_ms": 0})
	if code != http.StatusConflict || busy["error"] != "timeout" {
		t.Fatalf("a second acquire that tries once: %d %v", code, busy)
	}
	if h, w := holdersAndWaiters(t, s, "job"); h != 1 || w != 0 {
		t.Fatalf("after a refused try: %d holders, %d waiters", h, w)
	}
	// A waiter gets the lock when the holder releases it.
	got := make(chan map[string]any, 1)
	go func() {
		code, v, err := tryAPI(s, "POST", "/api/v1/locks/job/acquire", map[string]any{"client_id": "w2", "wait_timeout_ms": 10_000})
		if err != nil || code != http.StatusOK {
			t.Errorf("a waiting acquire: %d %v %v", code, v, err)
		}
		got <- v
	}()
	waitFor(t, "the waiter to queue", func() bool { _, w := holdersAndWaiters(t, s, "job"); return w == 1 })
	if code, v := api(t, s, "POST", "/api/v1/locks/job/renew", map[string]any{"lease_id": first["lease_id"], "ttl_ms": 20_000}); code != http.StatusOK || token(t, v) != token(t, first) {
		t.Fatalf("renew: %d %v", code, v)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/job/renew", map[string]any{"client_id": "w1", "fencing_token": token(t, first)}); code != http.StatusOK {
		t.Fatalf("renew by client and token: %d %v", code, v)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/job/release", map[string]any{"client_id": "w1", "fencing_token": token(t, first) + 1}); code != http.StatusConflict {
		t.Fatalf("release by a token that does not hold: %d %v", code, v)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/job/release", map[string]any{"lease_id": first["lease_id"]}); code != http.StatusOK {
		t.Fatalf("release: %d %v", code, v)
	}
	second := <-got
	if token(t, second) <= token(t, first) {
		t.Errorf("the second holder's token %d is not over the first's %d", token(t, second), token(t, first))
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/job/renew", map[string]any{"lease_id": first["lease_id"]}); code != http.StatusGone {
		t.Errorf("renew of a released lease: %d %v, want 410", code, v)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/job/release", map[string]any{"lease_id": first["lease_id"]}); code != http.StatusConflict {
		t.Errorf("a second release: %d %v, want 409", code, v)
	}
}

// A holder that stops renewing loses the lock to the next waiter.
func TestAnHTTPHolderThatStopsRenewingLosesTheLock(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	code, first := api(t, s, "POST", "/api/v1/locks/lease/acquire", map[string]any{"client_id": "stuck", "ttl_ms": 1000})
	if code != http.StatusOK {
		t.Fatalf("acquire: %d %v", code, first)
	}
	code, next := api(t, s, "POST", "/api/v1/locks/lease/acquire", map[string]any{"client_id": "next", "wait_timeout_ms": 10_000})
	if code != http.StatusOK || token(t, next) <= token(t, first) {
		t.Fatalf("the next holder: %d %v", code, next)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/lease/renew", map[string]any{"lease_id": first["lease_id"]}); code != http.StatusGone {
		t.Errorf("renew of an expired lease: %d %v, want 410", code, v)
	}
}

func TestTheLockAPIRefusesBadInputAndChangesNothing(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	for _, tt := range []struct {
		name, path string
		body       any
	}{
		{"malformed JSON", "/api/v1/locks/a/acquire", `{"client_id":`},
		{"an unknown field", "/api/v1/locks/a/acquire", `{"client_id":"w","colour":"red"}`},
		{"two values", "/api/v1/locks/a/acquire", `{"client_id":"w"} {}`},
		{"no client_id", "/api/v1/locks/a/acquire", map[string]any{"ttl_ms": 5000}},
		{"a TTL too short", "/api/v1/locks/a/acquire", map[string]any{"client_id": "w", "ttl_ms": 10}},
		{"a TTL too long", "/api/v1/locks/a/acquire", map[string]any{"client_id": "w", "ttl_ms": 7_200_000}},
		{"a negative wait", "/api/v1/locks/a/acquire", map[string]any{"client_id": "w", "wait_timeout_ms": -1}},
		{"an unknown mode", "/api/v1/locks/a/acquire", map[string]any{"client_id": "w", "mode": "shared"}},
		{"a maximum hold too short", "/api/v1/locks/a/acquire", map[string]any{"client_id": "w", "max_hold_ms": 5}},
		{"a priority over the highest", "/api/v1/locks/a/acquire", map[string]any{"client_id": "w", "priority": 1000}},
		{"a negative priority", "/api/v1/locks/a/acquire", map[string]any{"client_id": "w", "priority": -1}},
		{"a name with a NUL", "/api/v1/locks/a%00b/acquire", map[string]any{"client_id": "w"}},
		{"a name with a control character", "/api/v1/locks/a%01b/acquire", map[string]any{"client_id": "w"}},
		{"an oversize body", "/api/v1/locks/a/acquire", `{"client_id":"` + strings.Repeat("x", maxAPIBody) + `"}`},
		{"a lease id that is not one", "/api/v1/locks/a/renew", map[string]any{"lease_id": "zz"}},
		{"a renew naming no hold", "/api/v1/locks/a/renew", map[string]any{}},
		{"a release with a TTL", "/api/v1/locks/a/release", map[string]any{"lease_id": "01", "ttl_ms": 1000}},
	} {
		code, v := api(t, s, "POST", tt.path, tt.body)
		if code != http.StatusBadRequest {
			t.Errorf("%s: %d %v, want 400", tt.name, code, v)
		}
		if msg, _ := v["error"].(string); msg == "" {
			t.Errorf("%s: no error message in %v", tt.name, v)
		}
	}
	var count int
	s.fsm.read(func(tr *tree.Tree) { count = tr.Count() })
	if count != 4 || len(s.sessions.Expired(time.Now().Add(time.Hour))) != 0 {
		t.Errorf("bad requests left %d znodes (want the root and the system nodes only) or a lease", count)
	}
}

func TestTheLockAPIKeepsTheLocksACL(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	alice := wire.Identity{Scheme: "digest", ID: wire.DigestID("alice", "secret")}
	for _, p := range []string{"/locks", "/locks/private"} {
		txn := tree.Txn{Type: wire.OpCreate, Path: p, ACL: []wire.ACL{{Perms: wire.PermAll, Scheme: "digest", ID: alice.ID}}, Identities: []wire.Identity{alice}}
		if _, err := s.write(t.Context(), &txn); err != nil {
			t.Fatal(err)
		}
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/private/acquire", map[string]any{"client_id": "mallory"}); code != http.StatusForbidden {
		t.Errorf("an acquire without alice's credentials: %d %v, want 403", code, v)
	}
	if code, v := api(t, s, "GET", "/api/v1/locks/private", nil, "mallory", "guess"); code != http.StatusNotFound {
		t.Errorf("a read of a lock one may not read: %d %v, want 404", code, v)
	}
	code, v := api(t, s, "POST", "/api/v1/locks/private/acquire", map[string]any{"client_id": "alice"}, "alice", "secret")
	if code != http.StatusOK {
		t.Fatalf("alice's acquire: %d %v", code, v)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/private/release", map[string]any{"lease_id": v["lease_id"]}, "mallory", "guess"); code != http.StatusForbidden {
		t.Errorf("mallory's release of alice's lock: %d %v, want 403", code, v)
	}
}

func TestTheLockAPIShowsLocksAndDeadlocks(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	for _, name := range []string{"a", "b"} {
		if code, v := api(t, s, "POST", "/api/v1/locks/"+name+"/acquire", map[string]any{"client_id": "c-" + name}); code != http.StatusOK {
			t.Fatalf("acquire %s: %d %v", name, code, v)
		}
	}
	code, v := api(t, s, "GET", "/api/v1/locks", nil)
	if ls, _ := v["locks"].([]any); code != http.StatusOK || len(ls) != 2 {
		t.Fatalf("GET /api/v1/locks: %d %v", code, v)
	}
	// c-a waits for b while c-b waits for a: a cycle.
	for _, w := range []struct{ client, lock string }{{"c-a", "b"}, {"c-b", "a"}} {
		go tryAPI(s, "POST", "/api/v1/locks/"+w.lock+"/acquire", map[string]any{"client_id": w.client, "wait_timeout_ms": 3000})
	}
	waitFor(t, "the deadlock", func() bool {
		_, v := api(t, s, "GET", "/api/v1/deadlocks", nil)
		cycles, _ := v["cycles"].([]any)
		return len(cycles) == 1 && len(cycles[0].([]any)) == 2
	})
	if code, v := api(t, s, "GET", "/api/v1/locks/none", nil); code != http.StatusNotFound {
		t.Errorf("a lock with no holder: %d %v", code, v)
	}
	if code, _ := api(t, s, "DELETE", "/api/v1/locks/a/acquire", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE on acquire: %d, want 405", code)
	}
}

// A long poll answers once the lock changed past the index it names.
func TestALongPollAnswersWhenTheLockChanges(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	code, held := api(t, s, "POST", "/api/v1/locks/poll/acquire", map[string]any{"client_id": "w1"})
	if code != http.StatusOK {
		t.Fatalf("acquire: %d %v", code, held)
	}
	code, v := api(t, s, "GET", "/api/v1/locks/poll", nil)
	index, _ := v["index"].(float64)
	if code != http.StatusOK || index == 0 {
		t.Fatalf("GET: %d %v", code, v)
	}
	// Nothing changes: the poll answers at its wait, with the same index.
	start := time.Now()
	if code, v := api(t, s, "GET", fmt.Sprintf("/api/v1/locks/poll?index=%d&wait=200ms", int64(index)), nil); code != http.StatusOK || v["index"] != index {
		t.Fatalf("a poll with no change: %d %v", code, v)
	} else if time.Since(start) < 200*time.Millisecond {
		t.Errorf("a poll with no change answered before its wait")
	}
	got := make(chan map[string]any, 1)
	go func() {
		_, v, err := tryAPI(s, "GET", fmt.Sprintf("/api/v1/locks/poll?index=%d&wait=1m", int64(index)), nil)
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	if code, v := api(t, s, "POST", "/api/v1/locks/poll/acquire", map[string]any{"client_id": "w2", "wait_timeout_ms": 0}); code != http.StatusConflict {
		t.Fatalf("a second acquire: %d %v", code, v)
	}
	v = <-got // the second's node came and went: changes
	if next, _ := v["index"].(float64); next <= index {
		t.Errorf("the poll answered with index %v, not past %v", next, index)
	}
	if code, v := api(t, s, "GET", "/api/v1/locks/poll?wait=forever", nil); code != http.StatusBadRequest {
		t.Errorf("a bad wait: %d %v", code, v)
	}
}

// The event stream sends the lock's state at once and at each change.
func TestTheEventStreamFollowsALock(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	resp, err := http.Get("http://" + s.HTTPAddr().String() + "/api/v1/locks/ev/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- data
			}
		}
		close(events)
	}()
	next := func() map[string]any {
		t.Helper()
		select {
		case e := <-events:
			var v map[string]any
			if err := json.Unmarshal([]byte(e), &v); err != nil {
				t.Fatalf("event %q: %v", e, err)
			}
			return v
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
			return nil
		}
	}
	if v := next(); len(v) != 0 {
		t.Fatalf("the first event of a free lock: %v, want {}", v)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/ev/acquire", map[string]any{"client_id": "w1"}); code != http.StatusOK {
		t.Fatalf("acquire: %d %v", code, v)
	}
	for {
		v := next()
		if hs, _ := v["holders"].([]any); len(hs) == 1 && hs[0].(map[string]any)["client_id"] == "w1" {
			break
		}
	}
}

func TestABreakOverHTTPFreesTheLock(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	if code, v := api(t, s, "POST", "/api/v1/locks/brk/acquire", map[string]any{"client_id": "stuck"}); code != http.StatusOK {
		t.Fatalf("acquire: %d %v", code, v)
	}
	code, v := api(t, s, "POST", "/api/v1/locks/brk/break", map[string]any{"reason": "stuck"})
	if broken, _ := v["broken"].([]any); code != http.StatusOK || len(broken) != 1 {
		t.Fatalf("break: %d %v", code, v)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/brk/acquire", map[string]any{"client_id": "next"}); code != http.StatusOK {
		t.Fatalf("acquire after the break: %d %v", code, v)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/none/break", map[string]any{}); code != http.StatusNotFound {
		t.Errorf("break of a lock nobody holds: %d %v", code, v)
	}
	// Any lock, by its path.
	code, v = api(t, s, "POST", "/api/v1/break", map[string]any{"path": "/locks/brk", "reason": "again"})
	if broken, _ := v["broken"].([]any); code != http.StatusOK || len(broken) != 1 {
		t.Errorf("break by path: %d %v", code, v)
	}
	if code, v := api(t, s, "POST", "/api/v1/break", map[string]any{"path": "locks"}); code != http.StatusBadRequest {
		t.Errorf("break of an invalid path: %d %v", code, v)
	}
	if evs := s.LockHistory(nil, "/"); len(evs) == 0 || evs[len(evs)-1].Reason != "again" || evs[len(evs)-1].Lock != "/locks/brk" {
		t.Errorf("the history does not end with the break by path: %+v", evs)
	}
}

// The lock's directory is a container: the reaper may take it between the
// acquire's check that it is there and the create of the lock node, which
// then makes it again.
func TestALockNodeMakesAgainTheDirectoryTheReaperTook(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	ctx := context.Background()
	lease := s.ids.Next()
	if _, err := s.write(ctx, &tree.Txn{Type: tree.TxnCreateSession, Session: lease, Time: time.Now().UnixMilli(),
		LeaseTTL: 10_000, LeaseOwner: "t"}); err != nil {
		t.Fatal(err)
	}
	// No makeLockDirs before: the directory is gone, as if just reaped.
	e, err := s.createLockNode(ctx, "/locks/reaped", lockq.Exclusive, 0, lease, lockq.Record{Owner: "t"}, nil)
	if err != nil {
		t.Fatalf("a lock node whose directory is gone: %v", err)
	}
	var ok bool
	s.fsm.read(func(tr *tree.Tree) { _, err := tr.Exists("/locks/reaped/" + e.Name); ok = err == nil })
	if !ok {
		t.Fatalf("lock node %q not made", e.Name)
	}
}

// An HTTP waiter's lease is renewed while it waits: a wait longer than its
// TTL ends with the lock.
func TestAnHTTPWaitLongerThanItsTTLEndsWithTheLock(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	code, first := api(t, s, "POST", "/api/v1/locks/long/acquire", map[string]any{"client_id": "w1", "ttl_ms": 10_000})
	if code != http.StatusOK {
		t.Fatalf("acquire: %d %v", code, first)
	}
	got := make(chan int, 1)
	go func() {
		code, v, err := tryAPI(s, "POST", "/api/v1/locks/long/acquire", map[string]any{"client_id": "w2", "ttl_ms": 1000, "wait_timeout_ms": 10_000})
		if err != nil || code != http.StatusOK {
			t.Errorf("a wait longer than its TTL: %d %v %v", code, v, err)
		}
		got <- code
	}()
	waitFor(t, "the waiter to queue", func() bool { _, w := holdersAndWaiters(t, s, "long"); return w == 1 })
	time.Sleep(2500 * time.Millisecond) // over two TTLs of the waiter's lease
	if code, v := api(t, s, "POST", "/api/v1/locks/long/release", map[string]any{"lease_id": first["lease_id"]}); code != http.StatusOK {
		t.Fatalf("release: %d %v", code, v)
	}
	<-got
}

func TestAnHTTPClientCannotReachASessionsLease(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	l := c.call(wire.Request{Xid: 1, Op: wire.OpLeaseCreate, TTL: 60_000, Owner: "go"})
	c.call(wire.Request{Xid: 2, Op: wire.OpCreate, Path: "/locks"})
	c.call(wire.Request{Xid: 3, Op: wire.OpCreate, Path: "/locks/s"})
	if r := c.call(wire.Request{Xid: 4, Op: wire.OpCreate, Path: "/locks/s/_c_ab-lock-", Mode: wire.ModeEphemeralSequential, Lease: l.Lease.ID}); r.Err != wire.CodeOK {
		t.Fatalf("the lease's lock node: %v", r.Err)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/s/release", map[string]any{"lease_id": fmt.Sprintf("%016x", l.Lease.ID)}); code != http.StatusConflict {
		t.Errorf("an HTTP release of a session's lease: %d %v, want 409", code, v)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/a%2Fb/acquire", map[string]any{"client_id": "w"}); code != http.StatusBadRequest {
		t.Errorf("a name with a slash: %d %v, want 400", code, v)
	}
}

func TestThePathWatchForgetsAPathNobodyWaitsOn(t *testing.T) {
	t.Parallel()
	w := newPathWatch()
	_, done1 := w.next("/a")
	_, done2 := w.next("/a")
	done1()
	if len(w.waiters) != 1 {
		t.Fatalf("a path with a waiter left was forgotten")
	}
	done2()
	if len(w.waiters) != 0 || w.n.Load() != 0 {
		t.Errorf("%d paths kept with nobody waiting (counted %d)", len(w.waiters), w.n.Load())
	}
	ch, done := w.next("/b")
	w.changed([]string{"/b"})
	select {
	case <-ch:
	default:
		t.Error("a change did not wake its waiter")
	}
	done() // after the change: nothing to forget, and no panic
}

// history reads the lock history of name through the API, each event as
// "event client_id".
func history(t *testing.T, s *Server, name string) ([]string, []any) {
	t.Helper()
	code, v := api(t, s, "GET", "/api/v1/locks/"+name+"/history", nil)
	if code != http.StatusOK {
		t.Fatalf("history: %d %v", code, v)
	}
	evs := v["events"].([]any)
	var brief []string
	for _, e := range evs {
		m := e.(map[string]any)
		brief = append(brief, fmt.Sprint(m["event"], " ", m["client_id"]))
	}
	return brief, evs
}

// The history tells each acquisition and how its hold ended: a lease that
// was not renewed expired, a release, a break with who and why; and a
// member that restarts, from a snapshot and the log after it, tells the
// same.
func TestTheLockHistoryTellsHowHoldsEndedAndOutlivesARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	snapshotOften := func(c *Config) { c.SnapshotEvery = 5 }
	s := startServer(t, dir, snapshotOften)
	code, stuck := api(t, s, "POST", "/api/v1/locks/h/acquire", map[string]any{"client_id": "stuck", "ttl_ms": 1000})
	if code != http.StatusOK {
		t.Fatalf("acquire: %d %v", code, stuck)
	}
	code, next := api(t, s, "POST", "/api/v1/locks/h/acquire", map[string]any{"client_id": "next", "wait_timeout_ms": 10_000})
	if code != http.StatusOK {
		t.Fatalf("the next holder: %d %v", code, next)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/h/release", map[string]any{"lease_id": next["lease_id"]}); code != http.StatusOK {
		t.Fatalf("release: %d %v", code, v)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/h/acquire", map[string]any{"client_id": "hung"}); code != http.StatusOK {
		t.Fatalf("acquire: %d %v", code, v)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/h/break", map[string]any{"reason": "hung since 9"}); code != http.StatusOK {
		t.Fatalf("break: %d %v", code, v)
	}
	want := "[acquired stuck expired stuck acquired next released next acquired hung broken hung]"
	got, evs := history(t, s, "h")
	if fmt.Sprint(got) != want {
		t.Fatalf("history %v, want %s", got, want)
	}
	first, expired, broken := evs[0].(map[string]any), evs[1].(map[string]any), evs[5].(map[string]any)
	if first["fencing_token"] != expired["fencing_token"] || first["lease_id"] != expired["lease_id"] || first["lease_id"] == nil ||
		expired["held_ms"].(float64) < 500 {
		t.Errorf("acquired %v, expired %v: want one token and lease, held for about the TTL", first, expired)
	}
	if broken["reason"] != "hung since 9" || broken["by"] == nil {
		t.Errorf("broken %v: want who and why", broken)
	}
	if code, v := api(t, s, "GET", "/api/v1/locks/none/history", nil); code != http.StatusOK || len(v["events"].([]any)) != 0 {
		t.Errorf("history of a lock never taken: %d %v", code, v)
	}

	// Restart: a snapshot (every 5 entries) holds the history, the log
	// after it adds the rest.
	s.Close()
	s = startServer(t, dir, snapshotOften)
	if got, _ := history(t, s, "h"); fmt.Sprint(got) != want {
		t.Fatalf("after a restart: history %v, want %s", got, want)
	}
}

// With EndDeadlocks, of two HTTP clients waiting for each other's locks
// the youngest wait answers 409 deadlock and leaves nothing behind; the
// other wait goes on.
func TestAnHTTPWaitEndedForADeadlockAnswers409(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.EndDeadlocks = true })
	leases := map[string]any{}
	for _, name := range []string{"a", "b"} {
		code, v := api(t, s, "POST", "/api/v1/locks/"+name+"/acquire", map[string]any{"client_id": "c-" + name})
		if code != http.StatusOK {
			t.Fatalf("acquire %s: %d %v", name, code, v)
		}
		leases[name] = v["lease_id"]
	}
	older := make(chan int, 1)
	go func() {
		code, _, _ := tryAPI(s, "POST", "/api/v1/locks/b/acquire", map[string]any{"client_id": "c-a", "wait_timeout_ms": 20_000})
		older <- code
	}()
	waitFor(t, "c-a to wait for b", func() bool { _, w := holdersAndWaiters(t, s, "b"); return w == 1 })
	code, v := api(t, s, "POST", "/api/v1/locks/a/acquire", map[string]any{"client_id": "c-b", "wait_timeout_ms": 20_000})
	if msg, _ := v["error"].(string); code != http.StatusConflict || !strings.HasPrefix(msg, "deadlock") {
		t.Fatalf("the youngest wait: %d %v, want 409 deadlock", code, v)
	}
	if _, w := holdersAndWaiters(t, s, "a"); w != 0 {
		t.Errorf("the ended wait left %d waiters on a", w)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/b/release", map[string]any{"lease_id": leases["b"]}); code != http.StatusOK {
		t.Fatalf("release b: %d %v", code, v)
	}
	if code := <-older; code != http.StatusOK {
		t.Errorf("the older wait: %d, want 200 once b was released", code)
	}
}

func TestAnHTTPWaiterWithAPriorityHoldsBeforeLowerOnes(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	code, first := api(t, s, "POST", "/api/v1/locks/pay/acquire", map[string]any{"client_id": "holder", "ttl_ms": 10_000})
	if code != http.StatusOK {
		t.Fatalf("acquire: %d %v", code, first)
	}
	got := make(chan string, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, w := range []map[string]any{
		{"client_id": "low", "wait_timeout_ms": 10_000},
		{"client_id": "high", "wait_timeout_ms": 10_000, "priority": 9},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, v, err := tryAPI(s, "POST", "/api/v1/locks/pay/acquire", w)
			if err != nil || code != http.StatusOK {
				t.Errorf("%v: %d %v %v", w["client_id"], code, v, err)
			}
			got <- w["client_id"].(string)
			if _, v, err := tryAPI(s, "POST", "/api/v1/locks/pay/release", map[string]any{"lease_id": v["lease_id"]}); err != nil {
				t.Errorf("release: %v %v", v, err)
			}
		}()
		waitFor(t, "the waiter to queue", func() bool { _, n := holdersAndWaiters(t, s, "pay"); return n == i+1 })
	}
	_, v := api(t, s, "GET", "/api/v1/locks/pay", nil)
	if ws := v["waiters"].([]any); ws[0].(map[string]any)["client_id"] != "high" {
		t.Errorf("waiters %v: want high first", ws)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/pay/release", map[string]any{"lease_id": first["lease_id"]}); code != http.StatusOK {
		t.Fatalf("release: %d %v", code, v)
	}
	if a, b := <-got, <-got; a != "high" || b != "low" {
		t.Errorf("held by %s, then %s; want high, then low", a, b)
	}
}

func TestATokenCheckSaysWhetherTheTokenStillHolds(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	code, v := api(t, s, "POST", "/api/v1/locks/chk/acquire", map[string]any{"client_id": "a"})
	if code != http.StatusOK {
		t.Fatalf("acquire: %d %v", code, v)
	}
	first, lease := token(t, v), v["lease_id"]
	check := func(query string) (int, map[string]any) {
		t.Helper()
		return api(t, s, "GET", query, nil)
	}
	if code, v := check(fmt.Sprintf("/api/v1/locks/chk/check?token=%d", first)); code != 200 || v["current"] != true {
		t.Errorf("the holder's token: %d %v, want current", code, v)
	}
	api(t, s, "POST", "/api/v1/locks/chk/release", map[string]any{"lease_id": lease})
	code, v = api(t, s, "POST", "/api/v1/locks/chk/acquire", map[string]any{"client_id": "b"})
	if code != http.StatusOK {
		t.Fatalf("acquire: %d %v", code, v)
	}
	second := token(t, v)
	for _, q := range []string{
		fmt.Sprintf("/api/v1/locks/chk/check?token=%d", first),
		fmt.Sprintf("/api/v1/check?path=/locks/chk&token=%d", first),
	} {
		code, v := check(q)
		if code != 200 || v["current"] != false || fmt.Sprint(v["holder_tokens"]) != fmt.Sprintf("[%d]", second) {
			t.Errorf("%s after the lock moved on: %d %v, want not current, held by %d", q, code, v, second)
		}
	}
	if code, v := check(fmt.Sprintf("/api/v1/locks/free/check?token=%d", first)); code != 200 || v["current"] != false {
		t.Errorf("a lock nobody holds: %d %v", code, v)
	}
	for _, q := range []string{"/api/v1/locks/chk/check", "/api/v1/locks/chk/check?token=x", "/api/v1/locks/chk/check?token=-1", "/api/v1/check?path=chk&token=1"} {
		if code, v := check(q); code != http.StatusBadRequest {
			t.Errorf("%s: %d %v, want 400", q, code, v)
		}
	}
}

// lossyTransport sends every request, and loses the answer of the first
// one it is told to lose: the request was served, and the client cannot
// know it.
type lossyTransport struct{ lose atomic.Bool }

func (lt *lossyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && lt.lose.CompareAndSwap(true, false) {
		resp.Body.Close()
		return nil, errors.New("lossyTransport: the answer was lost")
	}
	return resp, err
}

// A release whose answer is lost, tried again after the lock went to the
// next holder, and a renewal tried after it, act on nothing: they answer
// that the lock is no longer held by that hold, and why, and the next
// holder keeps it.
func TestAReleaseOrRenewalTriedAgainLeavesTheNextHolderAlone(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	lt := &lossyTransport{}
	hc := &http.Client{Transport: lt}
	post := func(path string, body any) (int, map[string]any, error) {
		b, _ := json.Marshal(body)
		resp, err := hc.Post("http://"+s.HTTPAddr().String()+path, "application/json", bytes.NewReader(b))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var v map[string]any
		return resp.StatusCode, v, json.NewDecoder(resp.Body).Decode(&v)
	}
	code, v, err := post("/api/v1/locks/rt/acquire", map[string]any{"client_id": "a"})
	if err != nil || code != 200 {
		t.Fatalf("acquire: %d %v %v", code, v, err)
	}
	lease, first := v["lease_id"], token(t, v)
	next := make(chan map[string]any, 1)
	go func() {
		_, v, _ := tryAPI(s, "POST", "/api/v1/locks/rt/acquire", map[string]any{"client_id": "b", "wait_timeout_ms": 30000})
		next <- v
	}()
	waitFor(t, "b to wait", func() bool {
		_, v := api(t, s, "GET", "/api/v1/locks/rt", nil)
		return len(v["waiters"].([]any)) == 1
	})
	lt.lose.Store(true)
	if _, _, err := post("/api/v1/locks/rt/release", map[string]any{"lease_id": lease}); err == nil {
		t.Fatal("the release's answer was not lost")
	}
	b := <-next
	for _, retry := range []struct {
		path string
		body map[string]any
		want int
	}{
		{"/api/v1/locks/rt/release", map[string]any{"lease_id": lease}, http.StatusConflict},
		{"/api/v1/locks/rt/release", map[string]any{"client_id": "a", "fencing_token": first}, http.StatusConflict},
		{"/api/v1/locks/rt/renew", map[string]any{"lease_id": lease}, http.StatusGone},
	} {
		code, v, err := post(retry.path, retry.body)
		if err != nil || code != retry.want || !strings.Contains(fmt.Sprint(v["error"]), "no longer held by that hold: it was released") {
			t.Errorf("%s %v tried again: %d %v %v, want %d saying it was released", retry.path, retry.body, code, v, err, retry.want)
		}
	}
	if _, v := api(t, s, "GET", fmt.Sprintf("/api/v1/locks/rt/check?token=%d", token(t, b)), nil); v["current"] != true {
		t.Errorf("the next holder after the retries: %v", v)
	}
}

// lockEvents is the history of the lock NAME, oldest first.
func lockEvents(t *testing.T, s *Server, name string) []map[string]any {
	t.Helper()
	_, v := api(t, s, "GET", "/api/v1/locks/"+name+"/history", nil)
	var out []map[string]any
	for _, ev := range v["events"].([]any) {
		out = append(out, ev.(map[string]any))
	}
	return out
}

// eventTime is when the history's event happened.
func eventTime(t *testing.T, ev map[string]any) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, ev["time"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// A holder that asked for a lock-delay and is lost without releasing (its
// lease expires, or the lock is broken) leaves the lock held by the delay
// for that long: the next holder's acquisition comes at least that long
// after the loss. A release hands over at once, with no delay.
func TestALockDelayHoldsTheLockAfterALossNotAfterARelease(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	const delay = 1500 * time.Millisecond
	for _, tc := range []struct {
		name, end string
		lose      func(t *testing.T, name string, a map[string]any)
	}{
		{"expiry", "expired", func(t *testing.T, name string, a map[string]any) {}}, // a does not renew
		{"break", "broken", func(t *testing.T, name string, a map[string]any) {
			api(t, s, "POST", "/api/v1/locks/"+name+"/break", map[string]any{"reason": "a test"})
		}},
		{"release", "released", func(t *testing.T, name string, a map[string]any) {
			api(t, s, "POST", "/api/v1/locks/"+name+"/release", map[string]any{"lease_id": a["lease_id"]})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "delay-" + tc.name
			code, a := api(t, s, "POST", "/api/v1/locks/"+name+"/acquire",
				map[string]any{"client_id": "a", "ttl_ms": 1000, "lock_delay_ms": delay.Milliseconds()})
			if code != http.StatusOK {
				t.Fatalf("acquire: %d %v", code, a)
			}
			got := make(chan map[string]any, 1)
			go func() {
				_, v, _ := tryAPI(s, "POST", "/api/v1/locks/"+name+"/acquire", map[string]any{"client_id": "b", "wait_timeout_ms": 30000})
				got <- v
			}()
			waitFor(t, "b to wait", func() bool {
				_, v := api(t, s, "GET", "/api/v1/locks/"+name, nil)
				ws, _ := v["waiters"].([]any)
				return len(ws) == 1
			})
			tc.lose(t, name, a)
			if b := <-got; b["acquired"] != true {
				t.Fatalf("b's acquire: %v", b)
			}
			evs := lockEvents(t, s, name)
			var lost, delayed, bAt time.Time
			for _, ev := range evs {
				switch {
				case ev["client_id"] == "a" && ev["event"] == tc.end:
					lost = eventTime(t, ev)
				case ev["client_id"] == "lock-delay" && ev["event"] == "acquired":
					delayed = eventTime(t, ev)
				case ev["client_id"] == "b" && ev["event"] == "acquired":
					bAt = eventTime(t, ev)
				}
			}
			switch {
			case lost.IsZero() || bAt.IsZero():
				t.Fatalf("history without a's %s or b's acquisition: %v", tc.end, evs)
			case tc.end == "released" && !delayed.IsZero():
				t.Errorf("a release was followed by a lock-delay: %v", evs)
			case tc.end != "released" && (delayed.IsZero() || bAt.Sub(lost) < delay):
				t.Errorf("b acquired %v after a was %s (lock-delay at %v), want at least %v: %v", bAt.Sub(lost), tc.end, delayed, delay, evs)
			}
		})
	}
	for _, bad := range []int64{-1, 60_001} {
		if code, v := api(t, s, "POST", "/api/v1/locks/x/acquire", map[string]any{"client_id": "a", "lock_delay_ms": bad}); code != http.StatusBadRequest {
			t.Errorf("lock_delay_ms %d: %d %v, want 400", bad, code, v)
		}
	}
}

// A multi-lock joins every queue in one txn and holds all its locks or
// none: it waits as one waiter, times out leaving nothing behind, and two
// multi-locks over the same locks, named in either order, never wait for
// each other at once.
func TestAMultiLockHoldsAllOrNone(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	multi := func(client string, waitMs int, names ...string) (int, map[string]any) {
		var locks []map[string]any
		for _, n := range names {
			locks = append(locks, map[string]any{"name": n})
		}
		code, v, err := tryAPI(s, "POST", "/api/v1/multilocks/acquire", map[string]any{"client_id": client, "wait_timeout_ms": waitMs, "locks": locks})
		if err != nil {
			return 0, map[string]any{"error": err.Error()}
		}
		return code, v
	}
	code, m1 := multi("m1", 0, "ma", "mb")
	if code != http.StatusOK || len(m1["locks"].([]any)) != 2 {
		t.Fatalf("a multi-lock of free locks: %d %v", code, m1)
	}
	// Two more, in both orders, wait as one waiter each.
	got := make(chan map[string]any, 2)
	go func() { _, v := multi("m2", 30000, "ma", "mb"); got <- v }()
	waitFor(t, "m2 to wait", func() bool {
		_, v := api(t, s, "GET", "/api/v1/locks/mb", nil)
		ws, _ := v["waiters"].([]any)
		return len(ws) == 1
	})
	go func() { _, v := multi("m3", 30000, "mb", "ma"); got <- v }()
	waitFor(t, "m3 to wait", func() bool {
		_, v := api(t, s, "GET", "/api/v1/locks/ma", nil)
		ws, _ := v["waiters"].([]any)
		return len(ws) == 2
	})
	// A multi-lock that cannot have them all in time leaves nothing behind.
	if code, v := multi("m4", 200, "mc", "ma"); code != http.StatusConflict {
		t.Errorf("a multi-lock that timed out: %d %v", code, v)
	}
	if code, v := api(t, s, "GET", "/api/v1/locks/mc", nil); code != http.StatusNotFound {
		t.Errorf("the timed-out multi-lock left a node on mc: %d %v", code, v)
	}
	for range 2 {
		if _, v := api(t, s, "GET", "/api/v1/deadlocks", nil); len(v["cycles"].([]any)) != 0 {
			t.Fatalf("multi-locks in a deadlock: %v", v)
		}
		lease := m1["lease_id"]
		if code, v := api(t, s, "POST", "/api/v1/locks/ma/release", map[string]any{"lease_id": lease}); code != 200 {
			t.Fatalf("release of a multi-lock through one of its locks: %d %v", code, v)
		}
		m1 = <-got
		if m1["acquired"] != true {
			t.Fatalf("the next multi-lock: %v", m1)
		}
		for _, name := range []string{"ma", "mb"} {
			_, v := api(t, s, "GET", "/api/v1/locks/"+name, nil)
			if hs := v["holders"].([]any); len(hs) != 1 || hs[0].(map[string]any)["lease_id"] != m1["lease_id"] {
				t.Errorf("%s is not held by the multi-lock that got both: %v", name, v)
			}
		}
	}
	for _, bad := range []map[string]any{
		{"client_id": "x", "locks": []any{}},
		{"client_id": "x", "locks": []any{map[string]any{"name": "a"}, map[string]any{"name": "a"}}},
		{"client_id": "x", "locks": []any{map[string]any{"name": "a", "mode": "sideways"}}},
		{"client_id": "x", "priority": 3, "locks": []any{map[string]any{"name": "a"}}},
		{"client_id": "x", "locks": []any{map[string]any{"name": "a/b"}}},
	} {
		if code, v := api(t, s, "POST", "/api/v1/multilocks/acquire", bad); code != http.StatusBadRequest {
			t.Errorf("%v: %d %v, want 400", bad, code, v)
		}
	}
}

// A client cannot make a lock-delay's node: it would hold the lock against
// every mode, for as long as it liked.
func TestAClientCannotMakeALockDelaysNode(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	c.call(wire.Request{Op: wire.OpCreate, Path: "/l"})
	for _, req := range []wire.Request{
		{Op: wire.OpCreate, Path: "/l/_c_x-delay-", Mode: wire.ModePersistentSequential},
		{Op: wire.OpCreate, Path: "/l/_c_x-delay-0000000001"},
		{Op: wire.OpMulti, Ops: []wire.Request{{Op: wire.OpCreate, Path: "/l/_c_y-delay-", Mode: wire.ModeEphemeralSequential}}},
	} {
		if r := c.call(req); r.Err != wire.CodeBadArguments {
			t.Errorf("%v %s: %v, want BadArguments", req.Op, req.Path, r.Err)
		}
	}
	if r := c.call(wire.Request{Op: wire.OpCreate, Path: "/l/_c_z-lock-", Mode: wire.ModeEphemeralSequential}); r.Err != wire.CodeOK {
		t.Errorf("a lock node: %v", r.Err)
	}
}

// A multi-lock one of whose locks was broken holds no longer all of them:
// a renewal through another of its locks says so.
func TestAMultiLocksRenewalAfterABreakOfAnotherLockFails(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	code, v := api(t, s, "POST", "/api/v1/multilocks/acquire", map[string]any{"client_id": "m",
		"locks": []any{map[string]any{"name": "rx"}, map[string]any{"name": "ry"}}})
	if code != http.StatusOK {
		t.Fatalf("acquire: %d %v", code, v)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/rx/renew", map[string]any{"lease_id": v["lease_id"]}); code != http.StatusOK {
		t.Fatalf("renew of a whole multi-lock: %d %v", code, v)
	}
	api(t, s, "POST", "/api/v1/locks/ry/break", map[string]any{"reason": "a test"})
	if code, r := api(t, s, "POST", "/api/v1/locks/rx/renew", map[string]any{"lease_id": v["lease_id"]}); code != http.StatusGone ||
		!strings.Contains(fmt.Sprint(r["error"]), "/locks/ry was broken") {
		t.Errorf("renew after a break of its other lock: %d %v", code, r)
	}
}
