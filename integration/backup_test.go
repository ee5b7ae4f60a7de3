package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/snapfile"
	"github.com/arbor-coord/arbor/tree"
)

// The tests of issue 25's backups and disaster recovery, on arbord
// processes and the arbor command: a snapshot saved while writes go on and
// restored into a new cluster, damaged backup files refused, and a cluster
// that lost two of its three members for good, forced into a new cluster
// from the survivor's data.

var (
	cliOnce sync.Once
	cliBin  string
	cliErr  error
)

// arborCLI builds the arbor command once per test run.
func arborCLI(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "arbor-bin")
		if err != nil {
			cliErr = err
			return
		}
		cliBin = filepath.Join(dir, "arbor")
		if out, err := exec.Command("go", "build", "-o", cliBin, "github.com/arbor-coord/arbor/cmd/arbor").CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliBin
}

// savedSnapshot is what arbor -o json snapshot save prints.
type savedSnapshot struct {
	File   string `json:"file"`
	Member uint64 `json:"member"`
	Zxid   int64  `json:"zxid"`
	Znodes int64  `json:"znodes"`
}

// writers creates nodes under /k from several clients until stopped, and
// records each acknowledged create with its zxid.
type writers struct {
	mu    sync.Mutex
	acked map[string]int64 // path -> czxid
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

func startWriters(t *testing.T, addrs []string, n int) *writers {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &writers{acked: map[string]int64{}, stop: cancel}
	c := dialLong(t, addrs)
	if _, err := c.Create(ctx, "/k", nil, client.Persistent); err != nil && !errors.Is(err, client.ErrNodeExists) {
		t.Fatal(err)
	}
	for i := range n {
		w.wg.Go(func() {
			for j := 0; ctx.Err() == nil; j++ {
				p, st, err := c.CreateStat(ctx, fmt.Sprintf("/k/w%d-%d", i, j), []byte("v"), client.Persistent)
				if err == nil {
					w.mu.Lock()
					w.acked[p] = st.Czxid
					w.mu.Unlock()
				}
			}
		})
	}
	t.Cleanup(w.halt)
	return w
}

func (w *writers) halt() {
	w.stop()
	w.wg.Wait()
}

func (w *writers) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

func (w *writers) snapshot() map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int64, len(w.acked))
	for p, z := range w.acked {
		out[p] = z
	}
	return out
}

// dialLong opens a session on any of addrs, with a session timeout long
// enough that a restored copy of it outlives the test's checks.
func dialLong(t *testing.T, addrs []string) *client.Client {
	t.Helper()
	return dialAll(t, addrs, client.WithSessionTimeout(30*time.Second))
}

func (pc *processCluster) clientAddrs() []string {
	var addrs []string
	for id := range pc.procs {
		addrs = append(addrs, pc.addrs[id])
	}
	slices.Sort(addrs)
	return addrs
}

func (pc *processCluster) peerAddr(id uint64) string {
	for _, p := range strings.Split(pc.peers, ",") {
		if k, addr, _ := strings.Cut(p, "="); k == fmt.Sprint(id) {
			return addr
		}
	}
	pc.t.Fatalf("no peer address of member %d in %s", id, pc.peers)
	return ""
}

// newProcessCluster lays out members 1-3 (data, ports) without starting
// them.
func newProcessCluster(t *testing.T) *processCluster {
	pc := &processCluster{t: t, dirs: map[uint64]string{}, addrs: map[uint64]string{}, https: map[uint64]string{}, procs: map[uint64]*process{}}
	var peers []string
	for id := uint64(1); id <= 3; id++ {
		pc.dirs[id], pc.addrs[id], pc.https[id] = filepath.Join(t.TempDir(), "data"), freePort(t), freePort(t)
		peers = append(peers, fmt.Sprintf("%d=%s", id, freePort(t)))
	}
	pc.peers = strings.Join(peers, ",")
	return pc
}

func TestASnapshotSavedUnderWritesRestoresIntoANewClusterAtOnePoint(t *testing.T) {
	t.Parallel()
	old := startProcessCluster(t)
	w := startWriters(t, old.clientAddrs(), 6)
	waitUntil(t, "writes acknowledged before the save", patience, func() bool { return w.count() >= 200 })
	lead := old.leader()
	var follower uint64
	for id := range old.procs {
		if id != lead {
			follower = id
		}
	}
	before := w.snapshot() // acknowledged before the save began
	file := filepath.Join(t.TempDir(), "backup.arbor")
	out, err := exec.Command(arborCLI(t), "--servers", old.addrs[follower], "-o", "json", "snapshot", "save", file).Output()
	if err != nil {
		t.Fatalf("arbor snapshot save: %v", err)
	}
	atSave := w.count()
	waitUntil(t, "writes acknowledged after the save", patience, func() bool { return w.count() >= atSave+100 })
	w.halt()
	var saved savedSnapshot
	if err := json.Unmarshal(out, &saved); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if saved.Member != follower || saved.File != file {
		t.Fatalf("saved %+v, want a snapshot of member %d in %s", saved, follower, file)
	}

	// The file holds exactly the state at its zxid: every acknowledged
	// create at or before it, none after; and every create acknowledged
	// before the save began is at or before it.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	h, state, err := snapfile.Read(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tree.Restore(state)
	if err != nil {
		t.Fatal(err)
	}
	acked := w.snapshot()
	var in, out2 int
	for p, czxid := range acked {
		_, _, err := tr.Get(p)
		switch {
		case czxid <= int64(h.Index) && err != nil:
			t.Fatalf("%s, acknowledged at %d, is missing from the backup at %d", p, czxid, h.Index)
		case czxid > int64(h.Index) && err == nil:
			t.Fatalf("%s, created at %d, is in the backup at %d", p, czxid, h.Index)
		case err == nil:
			in++
		default:
			out2++
		}
	}
	for p, czxid := range before {
		if czxid > int64(h.Index) {
			t.Fatalf("%s was acknowledged before the save began, at %d, after the backup's zxid %d", p, czxid, h.Index)
		}
	}
	if out2 == 0 {
		t.Fatal("no acknowledged write came after the backup: the test did not write while it saved")
	}
	t.Logf("backup of member %d at zxid %d: %d znodes, %d bytes; %d acknowledged creates in it, %d after it",
		h.Member, h.Index, h.Znodes, h.Size, in, out2)

	// A new cluster of three, each member restored from the file, its
	// zxids bumped past any the old cluster reached.
	const bump = 1 << 20
	fresh := newProcessCluster(t)
	for id := uint64(1); id <= 3; id++ {
		fresh.procs[id] = spawnProcess(t, fresh.dirs[id], fresh.addrs[id], fresh.https[id],
			append(fresh.args(id), "--restore", file, "--bump-zxid", fmt.Sprint(bump))...)
	}
	for _, p := range fresh.procs {
		p.waitHealthy(t)
	}
	// Until it applies a txn of its own (the expiry, after its timeout, of
	// the session that took the backup), the new cluster's tree is the
	// backup's.
	st := fresh.converged()
	if st.Applied < h.Index+bump || st.Zxid < int64(h.Index+bump) {
		t.Fatalf("the new cluster: %+v; the backup is at %d, bumped by %d", st, h.Index, bump)
	}
	if st.Zxid == int64(h.Index+bump) && (st.Digest != fmt.Sprintf("%016x", tr.Digest()) || st.Znodes != tr.Count() || st.Sessions != tr.SessionCount()) {
		t.Fatalf("the new cluster: %+v; the backup: digest %016x, %d znodes, %d sessions", st, tr.Digest(), tr.Count(), tr.SessionCount())
	}
	c := dialLong(t, fresh.clientAddrs())
	ctx := testCtx(t)
	for p, czxid := range acked {
		ok, _, err := c.Exists(ctx, p)
		if err != nil || ok != (czxid <= int64(h.Index)) {
			t.Fatalf("%s (created at %d) on the new cluster: %v, %v; the backup is at %d", p, czxid, ok, err, h.Index)
		}
	}
	_, stat, err := c.CreateStat(ctx, "/after-restore", nil, client.Persistent)
	if err != nil || stat.Czxid <= int64(h.Index+bump) {
		t.Fatalf("a write to the new cluster: %+v, %v", stat, err)
	}
	// The old cluster goes on, apart.
	if ok, _, err := dialLong(t, old.clientAddrs()).Exists(ctx, "/after-restore"); ok || err != nil {
		t.Fatalf("the old cluster has the new cluster's write: %v, %v", ok, err)
	}
}

func TestArbordRefusesADamagedBackupAndWritesNothing(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	c := dial(t, s.Addr().String())
	if _, err := c.Create(testCtx(t), "/a", []byte("x"), client.Persistent); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "backup.arbor")
	if out, err := exec.Command(arborCLI(t), "--servers", s.Addr().String(), "snapshot", "save", file).CombinedOutput(); err != nil {
		t.Fatalf("arbor snapshot save: %v: %s", err, out)
	}
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 0x04; return b }
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"a file cut short", good[:len(good)/2], "cut short"},
		{"a file with a changed byte", flip(len(good) - 40), "checksum does not match"},
		{"a file of another version", flip(11), "unsupported backup file version"},
		{"another kind of file", []byte("this is not a backup\n"), "not a whole backup file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad.arbor")
			if err := os.WriteFile(bad, tc.b, 0o600); err != nil {
				t.Fatal(err)
			}
			parent := t.TempDir()
			cmd := exec.Command(arbord(t), "--restore", bad, "--data", filepath.Join(parent, "data"),
				"--listen", freePort(t), "--http", "-", "--log-level", "warn")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !strings.Contains(string(out), tc.want) {
				t.Fatalf("arbord --restore of %s: %v, %q; want a failure saying %q", tc.name, err, out, tc.want)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Fatalf("a refused restore left %v", entries)
			}
		})
	}
}

func TestAClusterThatLostTwoMembersForGoodIsForcedFromTheSurvivor(t *testing.T) {
	t.Parallel()
	pc := startProcessCluster(t)
	w := startWriters(t, pc.clientAddrs(), 4)
	waitUntil(t, "writes acknowledged", patience, func() bool { return w.count() >= 200 })
	w.halt()
	acked := w.snapshot()
	pc.converged()

	// The leader and one follower are lost for good: killed, their data
	// deleted.
	lead := pc.leader()
	var survivor uint64
	for id := range pc.procs {
		if id != lead {
			survivor = id
		}
	}
	for id := range pc.procs {
		if id != survivor {
			pc.procs[id].kill()
			delete(pc.procs, id)
			if err := os.RemoveAll(pc.dirs[id]); err != nil {
				t.Fatal(err)
			}
		}
	}
	pc.procs[survivor].kill()
	delete(pc.procs, survivor)

	out, err := exec.Command(arbord(t), "--print-state", "--data", pc.dirs[survivor]).Output()
	if err != nil {
		t.Fatalf("arbord --print-state: %v", err)
	}
	state := string(out)
	var maxZxid int64
	for _, z := range acked {
		maxZxid = max(maxZxid, z)
	}
	var last int64
	if _, err := fmt.Sscanf(state[strings.Index(state, "last_index = "):], "last_index = %d", &last); err != nil || last < maxZxid ||
		!strings.Contains(state, "voters = 1,2,3\n") {
		t.Fatalf("--print-state printed %q; want voters 1,2,3 and a log to %d at least", state, maxZxid)
	}

	// The survivor alone, as a new cluster.
	self := fmt.Sprintf("%d=%s", survivor, pc.peerAddr(survivor))
	pc.procs[survivor] = startProcess(t, pc.dirs[survivor], pc.addrs[survivor], pc.https[survivor],
		"--id", fmt.Sprint(survivor), "--peers", self, "--tick", "20ms", "--request-timeout", "3s", "--force-new-cluster")
	if lead := pc.leader(); lead != survivor {
		t.Fatalf("member %d leads, not the survivor %d", lead, survivor)
	}
	ctx := testCtx(t)
	c := dialLong(t, []string{pc.addrs[survivor]})
	for p := range acked {
		if ok, _, err := c.Exists(ctx, p); !ok || err != nil {
			t.Fatalf("%s, acknowledged before the loss, is missing: %v", p, err)
		}
	}
	if _, err := c.Create(ctx, "/after-force", nil, client.Persistent); err != nil {
		t.Fatalf("a write to the forced cluster: %v", err)
	}
	members, err := c.Members(ctx)
	if err != nil || len(members) != 1 || members[0].ID != int64(survivor) {
		t.Fatalf("members of the forced cluster: %+v, %v", members, err)
	}

	// A new member joins it the usual way.
	const newID = 4
	peer4 := freePort(t)
	if _, err := c.AddMember(ctx, newID, peer4, false); err != nil {
		t.Fatal(err)
	}
	pc.dirs[newID], pc.addrs[newID], pc.https[newID] = t.TempDir(), freePort(t), freePort(t)
	pc.procs[newID] = startProcess(t, pc.dirs[newID], pc.addrs[newID], pc.https[newID],
		"--id", fmt.Sprint(newID), "--peers", self+fmt.Sprintf(",%d=%s", newID, peer4), "--join", "--tick", "20ms", "--request-timeout", "3s")
	if _, err := c.Create(ctx, "/after-join", nil, client.Persistent); err != nil {
		t.Fatalf("a write after the join: %v", err)
	}
	st := pc.converged()

	// Restarted without the flag, the survivor keeps the new membership.
	pc.procs[survivor].kill()
	pc.procs[survivor] = startProcess(t, pc.dirs[survivor], pc.addrs[survivor], pc.https[survivor],
		"--id", fmt.Sprint(survivor), "--peers", self, "--tick", "20ms", "--request-timeout", "3s")
	pc.leader()
	if after := pc.converged(); after.Applied < st.Applied {
		t.Fatalf("after the survivor's restart: %+v, before: %+v", after, st)
	}
	check := dialLong(t, []string{pc.addrs[newID]})
	if members, err := check.Members(ctx); err != nil || len(members) != 2 {
		t.Fatalf("members after the restart: %+v, %v", members, err)
	}
	if ok, _, err := check.Exists(ctx, "/after-join"); !ok || err != nil {
		t.Fatalf("the new member lacks a write made after it joined: %v", err)
	}
}
