package cli

import (
	"fmt"
	"github.com/arbor-coord/arbor/client"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestLockRunsCommandsOneAtATime(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	logFile := filepath.Join(t.TempDir(), "log")
	// Each command writes "start TOKEN", sleeps, then "end TOKEN": with the
	// lock the lines come in pairs.
	script := `echo "start $ARBOR_LOCK_TOKEN $ARBOR_LOCK_PATH" >> ` + logFile + `; sleep 0.2; echo "end $ARBOR_LOCK_TOKEN" >> ` + logFile + `; exit 3`
	const n = 3
	runs := make([]*background, n)
	for i := range runs {
		runs[i] = start(t, addr, "lock", "/locks/cmd", "--", "sh", "-c", script)
	}
	for i, r := range runs {
		if code := r.wait(t); code != 3 {
			t.Errorf("run %d: exit %d, want the command's 3; stderr %q", i, code, r.stderr)
		}
	}
	raw, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 2*n {
		t.Fatalf("log %q, want %d lines", raw, 2*n)
	}
	var last int64
	for i := 0; i < len(lines); i += 2 {
		var token int64
		var path string
		if _, err := fmt.Sscanf(lines[i], "start %d %s", &token, &path); err != nil || path != "/locks/cmd" {
			t.Fatalf("line %q: %v", lines[i], err)
		}
		if lines[i+1] != "end "+strconv.FormatInt(token, 10) {
			t.Fatalf("commands overlapped: %q", raw)
		}
		if token <= last {
			t.Errorf("token %d after %d", token, last)
		}
		last = token
	}
}

func TestLockHoldsUntilInterruptedAndLocksShowsIt(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	holder := start(t, addr, "lock", "/locks/hold")
	waitFor(t, "the lock to be taken", func() bool { return strings.HasPrefix(holder.stdout.String(), "acquired /locks/hold (token ") })
	waiter := start(t, addr, "lock", "-o", "json", "/locks/hold")
	waitFor(t, "the waiter to queue", func() bool {
		return strings.Count(must(t, addr, "locks", "queue", "/locks/hold"), "\n") == 3
	})
	out := must(t, addr, "locks", "queue", "/locks/hold")
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(rows[0], "ROLE") || !strings.HasPrefix(rows[1], "holder  lock") ||
		!strings.HasPrefix(rows[2], "waiter  lock") || !strings.Contains(rows[1], fmt.Sprintf(":%d ", holder.cmd.Process.Pid)) {
		t.Errorf("locks printed:\n%s", out)
	}
	cts := decode[[]contenderJSON](t, must(t, addr, "locks", "queue", "-o", "json", "/locks/hold"))
	if len(cts) != 2 || cts[0].Role != "holder" || cts[1].Role != "waiter" || !strings.HasPrefix(cts[0].Session, "0x") ||
		!strings.HasSuffix(cts[1].Owner, fmt.Sprintf(":%d", waiter.cmd.Process.Pid)) || cts[1].Holder == "" || cts[0].Holder == cts[1].Holder {
		t.Errorf("locks -o json: %+v", cts)
	}

	if code := holder.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("holder: exit %d, stderr %q", code, holder.stderr)
	}
	if !strings.Contains(holder.stdout.String(), "released /locks/hold") {
		t.Errorf("holder printed %q", holder.stdout)
	}
	waitFor(t, "the waiter to take the lock", func() bool { return strings.Contains(waiter.stdout.String(), "acquired") })
	got := decode[heldJSON](t, waiter.stdout.String())
	if got.Path != "/locks/hold" || got.Event != "acquired" || got.Token <= 0 {
		t.Errorf("waiter printed %+v", got)
	}
	if code := waiter.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("waiter: exit %d", code)
	}
	if out := must(t, addr, "locks", "queue", "/locks/hold"); strings.Count(out, "\n") != 1 {
		t.Errorf("after both left, locks printed:\n%s", out)
	}
}

func TestElectAndFollowTheLeader(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	follow := start(t, addr, "elect", "-l", "/svc/leader")
	a := start(t, addr, "elect", "/svc/leader", "10.0.0.1:80")
	waitFor(t, "a to be elected", func() bool { return strings.HasPrefix(a.stdout.String(), "elected /svc/leader") })
	b := start(t, addr, "elect", "-o", "json", "/svc/leader", "10.0.0.2:80")
	waitFor(t, "b to queue", func() bool { return strings.Count(must(t, addr, "locks", "queue", "/svc/leader"), "\n") == 3 })
	if b.stdout.String() != "" {
		t.Fatalf("b printed %q while a leads", b.stdout)
	}
	if code := a.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("a: exit %d, stderr %q", code, a.stderr)
	}
	waitFor(t, "b to be elected", func() bool { return strings.Contains(b.stdout.String(), "elected") })
	waitFor(t, "the follower to see b", func() bool { return follow.stdout.String() == "10.0.0.1:80\n10.0.0.2:80\n" })
	if code := follow.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("follower: exit %d", code)
	}
	if code := b.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("b: exit %d", code)
	}
	for _, line := range strings.Split(strings.TrimSpace(b.stdout.String()), "\n") {
		decode[heldJSON](t, line)
	}
}

// elect -l stops with status 1, saying why, when it cannot follow: it
// used to exit 0 whenever its session lived.
func TestFollowingAnElectionItMayNotReadFails(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	must(t, addr, "create", "-a", "digest:"+client.DigestID("alice", "secret")+":cdrwa", "/hidden", "")
	r := arbor(t, addr, "elect", "-l", "/hidden")
	if r.code != 1 || !strings.Contains(r.stderr, "not allowed by the ACL") {
		t.Errorf("elect -l of an election it may not read: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestLockAndElectUsage(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	for _, args := range [][]string{
		{"lock"}, {"lock", "/a", "/b"}, {"lock", "/a", "--"}, {"lock", "--", "true"},
		{"elect", "/a"}, {"elect", "-l", "/a", "v"}, {"locks", "/a", "/b"}, {"locks", "queue"}, {"locks", "deadlocks", "/a"},
		{"lock", "--lease", "500ms", "/a"}, {"lock", "--kill-after", "-1s", "/a", "--", "true"},
		// Over a fifth of the session's timeout (10 s), or of the lease's TTL.
		{"lock", "--kill-after", "3s", "/a", "--", "true"}, {"lock", "--lease", "5s", "--kill-after", "2s", "/a", "--", "true"},
	} {
		if r := arbor(t, addr, args...); r.code != 2 {
			t.Errorf("arbor %v: %v, want exit 2", args, r)
		}
	}
	if r := arbor(t, addr, "lock", "/a", "--", "/no/such/command"); r.code != 1 {
		t.Errorf("lock with a missing command: %v, want exit 1", r)
	}
}

func TestLockWithAPriorityWaitsBeforeLowerOnes(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	holder := start(t, addr, "lock", "/locks/prio")
	waitFor(t, "the lock to be taken", func() bool { return strings.HasPrefix(holder.stdout.String(), "acquired") })
	low := start(t, addr, "lock", "/locks/prio")
	waitFor(t, "the low waiter to queue", func() bool { return strings.Count(must(t, addr, "locks", "queue", "/locks/prio"), "\n") == 3 })
	high := start(t, addr, "lock", "--priority", "7", "/locks/prio")
	waitFor(t, "the high waiter to queue", func() bool { return strings.Count(must(t, addr, "locks", "queue", "/locks/prio"), "\n") == 4 })
	cts := decode[[]contenderJSON](t, must(t, addr, "locks", "queue", "-o", "json", "/locks/prio"))
	if len(cts) != 3 || cts[0].Role != "holder" || cts[1].Priority != 7 || cts[2].Priority != 0 {
		t.Fatalf("locks queue -o json: %+v, want the priority 7 waiter next", cts)
	}
	if code := holder.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("holder: exit %d, stderr %q", code, holder.stderr)
	}
	waitFor(t, "the high waiter to take the lock", func() bool { return strings.Contains(high.stdout.String(), "acquired") })
	if low.stdout.String() != "" {
		t.Errorf("the low waiter printed %q before the high one released", low.stdout)
	}
	if r := arbor(t, addr, "lock", "--priority", "1000", "/locks/prio"); r.code == 0 || !strings.Contains(r.stderr, "--priority 1000") {
		t.Errorf("--priority 1000: %v", r)
	}
	if r := arbor(t, addr, "lock", "--lock-delay", "2m", "/locks/prio"); r.code != 2 || !strings.Contains(r.stderr, "--lock-delay 2m0s") {
		t.Errorf("--lock-delay 2m: %v", r)
	}
	high.stop(t, syscall.SIGINT)
	low.stop(t, syscall.SIGINT)
}

// lockChildEnv makes the test binary a command run under arbor lock (see
// lockChild).
const lockChildEnv = "ARBOR_TEST_LOCK_CHILD"

// lockChild is a command run under arbor lock, as spec says: FILE,NAME,
// MODE. It appends "NAME <unix ns>" to FILE every few ms: with MODE
// "stubborn" forever, noting a SIGTERM ("NAME term <unix ns>") and going
// on, so that only a SIGKILL stops it; with MODE "brief" a few times, then
// it exits 0. Lines of two commands in one file (O_APPEND) come in the
// order they were written.
func lockChild(spec string) int {
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		fmt.Fprintln(os.Stderr, "lock child: bad spec", spec)
		return 2
	}
	f, err := os.OpenFile(parts[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	name, stubborn := parts[1], parts[2] == "stubborn"
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	for i := 0; stubborn || i < 5; i++ {
		select {
		case <-term:
			fmt.Fprintf(f, "%s term %d\n", name, time.Now().UnixNano())
		default:
		}
		fmt.Fprintf(f, "%s %d\n", name, time.Now().UnixNano())
		time.Sleep(2 * time.Millisecond)
	}
	return 0
}

// freezer forwards TCP connections to a server and can freeze them:
// nothing goes either way, and the connections stay open (a partition, as
// neither side can tell it from a silent peer).
type freezer struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	frozen bool
	thawed chan struct{} // closed at thaw; mu guards frozen and thawed
}

func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target}
	t.Cleanup(func() {
		f.freeze(false)
		ln.Close()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go f.pipe(c, s)
			go f.pipe(s, c)
		}
	}()
	return f
}

func (f *freezer) addr() string { return f.ln.Addr().String() }

func (f *freezer) freeze(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case on && !f.frozen:
		f.frozen, f.thawed = true, make(chan struct{})
	case !on && f.frozen:
		f.frozen = false
		close(f.thawed)
	}
}

// pipe copies from to to, holding what it read while frozen.
func (f *freezer) pipe(from, to net.Conn) {
	defer from.Close()
	defer to.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		f.mu.Lock()
		frozen, thawed := f.frozen, f.thawed
		f.mu.Unlock()
		if frozen {
			<-thawed
		}
		if n > 0 {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A command run under a lock whose holder is cut off from the server is
// stopped (SIGTERM, then SIGKILL for one that ignores it) before the next
// holder's command starts: in the file both append to, none of its lines
// comes after the first of the next command's.
func TestLockStopsTheCommandBeforeTheNextHolderStarts(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	f := newFreezer(t, addr)
	log := filepath.Join(t.TempDir(), "log")
	first := startEnv(t, f.addr(), []string{lockChildEnv + "=" + log + ",first,stubborn"},
		"--timeout", "2s", "lock", "--lease", "2s", "--kill-after", "300ms", "/locks/stop", "--", os.Args[0])
	waitFor(t, "the first command to run", func() bool { raw, _ := os.ReadFile(log); return len(raw) > 0 })
	second := startEnv(t, addr, []string{lockChildEnv + "=" + log + ",second,brief"}, "lock", "/locks/stop", "--", os.Args[0])
	waitFor(t, "the second to queue", func() bool {
		return strings.Count(must(t, addr, "locks", "queue", "/locks/stop"), "\n") == 3
	})

	f.freeze(true) // the first holder hears nothing more, nor is heard
	if code := second.wait(t); code != 0 {
		t.Fatalf("second: exit %d, stderr %q", code, second.stderr)
	}
	if code := first.wait(t); code != 1 || !strings.Contains(first.stderr.String(), "lost") {
		t.Errorf("first: exit %d, stderr %q; want 1, the lock lost", code, first.stderr)
	}
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var lastFirst, term, firstSecond int64
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		fields := strings.Fields(line)
		ns, _ := strconv.ParseInt(fields[len(fields)-1], 10, 64)
		switch {
		case fields[0] == "first" && firstSecond != 0:
			t.Fatalf("the first command wrote %q after the second began at %d", line, firstSecond)
		case fields[0] == "first" && len(fields) == 3:
			term = ns
		case fields[0] == "first":
			lastFirst = ns
		case fields[0] == "second" && firstSecond == 0:
			firstSecond = ns
		}
	}
	if term == 0 || firstSecond == 0 {
		t.Fatalf("log without the first's SIGTERM or the second's start:\n%s", raw)
	}
	t.Logf("first: SIGTERM at +0, last wrote at +%v; second began at +%v",
		time.Duration(lastFirst-term), time.Duration(firstSecond-term))
}
