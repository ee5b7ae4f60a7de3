package faults

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/server"
)

var flagRace = flag.Bool("faults.race", false, "build arbord with -race")

var (
	buildOnce sync.Once
	arbordBin string
	buildErr  error
)

// arbord builds the arbord binary once per package run.
func arbord(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "arbord-faults-bin")
		if err != nil {
			buildErr = err
			return
		}
		arbordBin = filepath.Join(dir, "arbord")
		args := []string{"build", "-o", arbordBin}
		if *flagRace {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/arbor-coord/arbor/cmd/arbord")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return arbordBin
}

// Timing of the clusters under test. The tick is half arbord's default, so
// that failovers take 250-500 ms; sessions get sessionTimeout.
const (
	tick           = 25 * time.Millisecond
	requestTimeout = 3 * time.Second
	sessionTimeout = 3 * time.Second
)

// member is one arbord of a cluster.
type member struct {
	id                       uint64
	dir, log                 string
	addr, httpAddr, peerAddr string
	diskFull                 string // while this file exists, the member's disk is full (arbord --fault-disk-full)
	stall                    string // while this file exists, the member's raft goroutine stands still (arbord --fault-stall)
	args                     []string

	mu       sync.Mutex    // guards the fields below
	cmd      *exec.Cmd     // nil while down
	exited   chan struct{} // closed when cmd has exited
	paused   bool
	killing  bool  // an exit now is ours
	full     bool  // the disk is full
	wasFull  bool  // the disk was full at some time since cmd started
	logStart int64 // the size of the log when cmd started
}

// cluster is n arbord processes on loopback whose peer traffic goes
// through one link per directed pair of members.
type cluster struct {
	t         testing.TB
	crashes   chan string  // exits nobody asked for, with the member's log
	diskStops atomic.Int64 // exits of members that could not write to their full disk
	dir       string
	members   map[uint64]*member
	links     map[[2]uint64]*link // [from, to]
	ids       []uint64
	http      *http.Client
}

func startCluster(t testing.TB, dir string, n int) *cluster {
	t.Helper()
	bin := arbord(t)
	c := &cluster{t: t, dir: dir, crashes: make(chan string, 64), members: map[uint64]*member{}, links: map[[2]uint64]*link{},
		http: &http.Client{Timeout: time.Second}}
	for id := uint64(1); id <= uint64(n); id++ {
		m := &member{id: id, dir: filepath.Join(dir, fmt.Sprintf("n%d", id)), log: filepath.Join(dir, fmt.Sprintf("n%d.log", id)),
			diskFull: filepath.Join(dir, fmt.Sprintf("n%d.disk-full", id)), stall: filepath.Join(dir, fmt.Sprintf("n%d.stall", id))}
		m.addr, m.httpAddr, m.peerAddr = freePort(t), freePort(t), freePort(t)
		c.members[id] = m
		c.ids = append(c.ids, id)
	}
	t.Cleanup(c.stopAll)
	for _, from := range c.ids {
		for _, to := range c.ids {
			if from == to {
				continue
			}
			l, err := newLink(from, to, c.members[to].peerAddr)
			if err != nil {
				t.Fatal(err)
			}
			c.links[[2]uint64{from, to}] = l
		}
	}
	for _, id := range c.ids {
		m := c.members[id]
		peers := []string{fmt.Sprintf("%d=%s", id, m.peerAddr)}
		for _, to := range c.ids {
			if to != id {
				peers = append(peers, fmt.Sprintf("%d=%s", to, c.links[[2]uint64{id, to}].addr()))
			}
		}
		m.args = []string{bin, "--id", fmt.Sprint(id), "--data", m.dir, "--listen", m.addr, "--http", m.httpAddr,
			"--peer-listen", m.peerAddr, "--peers", strings.Join(peers, ","),
			"--tick", tick.String(), "--request-timeout", requestTimeout.String(),
			"--min-session-timeout", "1s", "--snapshot-every", "500", "--log-level", "info",
			"--fault-disk-full", m.diskFull, "--fault-stall", m.stall}
	}
	for _, id := range c.ids {
		c.start(id)
	}
	if _, ok := c.waitLeader(30 * time.Second); !ok {
		t.Fatalf("the %d-member cluster elected no leader in 30s (logs in %s)", n, dir)
	}
	return c
}

// keptDir makes a directory for a test's cluster, under -faults.out if
// set, and removes it once the test has passed: a failed test keeps its
// members' data and logs, and says where.
func keptDir(t *testing.T) string {
	t.Helper()
	parent := *flagOut
	if parent == "" {
		parent = os.TempDir()
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(parent, "arbor-"+strings.ReplaceAll(t.Name(), "/", "_")+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("data and logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// startLed starts an n-member cluster in a directory of the test and
// waits for its leader: how the targeted tests begin.
func startLed(t *testing.T, n int) (c *cluster, lead uint64, dir string) {
	t.Helper()
	dir = t.TempDir()
	c = startCluster(t, dir, n)
	lead, ok := c.waitLeader(15 * time.Second)
	if !ok {
		t.Fatalf("no leader (logs in %s)", dir)
	}
	return c, lead, dir
}

// addrs lists the client addresses of every member.
func (c *cluster) addrs() []string {
	var out []string
	for _, id := range c.ids {
		out = append(out, c.members[id].addr)
	}
	return out
}

// memberOf returns the member whose client address is addr, or 0.
func (c *cluster) memberOf(addr string) uint64 {
	for id, m := range c.members {
		if m.addr == addr {
			return id
		}
	}
	return 0
}

// start starts member id's process (it must be down).
func (c *cluster) start(id uint64) {
	m := c.members[id]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return
	}
	logf, err := os.OpenFile(m.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Errorf("member %d log: %v", id, err)
		return
	}
	defer logf.Close()
	logStart, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		c.t.Errorf("member %d log: %v", id, err)
		return
	}
	cmd := exec.Command(m.args[0], m.args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Errorf("start member %d: %v", id, err)
		return
	}
	exited := make(chan struct{})
	m.cmd, m.exited, m.paused, m.killing = cmd, exited, false, false
	m.wasFull, m.logStart = m.full, logStart
	go func() {
		err := cmd.Wait()
		close(exited)
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.cmd != cmd || m.killing {
			return
		}
		m.cmd = nil
		if m.wasFull && loggedSince(m.log, m.logStart, noSpace) {
			c.diskStops.Add(1)
			return
		}
		select {
		case c.crashes <- fmt.Sprintf("member %d exited by itself (%v); log %s", id, err, m.log):
		default:
		}
	}()
}

// noSpace is how a failed write to a full disk reads in a member's log.
const noSpace = "no space left on device"

// loggedSince reports whether the log at path holds text past offset.
func loggedSince(path string, offset int64, text string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, offset, 1<<40))
	return err == nil && strings.Contains(string(b), text)
}

// stop stops member id as an operator does (SIGTERM) and waits up to d
// for it to exit. It returns an error if the member did not exit, or
// exited with a failure.
func (c *cluster) stop(id uint64, d time.Duration) error {
	m := c.members[id]
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	if cmd == nil {
		m.mu.Unlock()
		return nil
	}
	m.killing = true
	err := cmd.Process.Signal(syscall.SIGTERM)
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("SIGTERM to member %d: %w", id, err)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-exited:
	case <-timer.C:
		c.kill(id)
		return fmt.Errorf("member %d still ran %v after SIGTERM", id, d)
	}
	m.mu.Lock()
	m.cmd, m.paused = nil, false
	m.mu.Unlock()
	if !cmd.ProcessState.Success() {
		return fmt.Errorf("member %d exited with %v after SIGTERM; log %s", id, cmd.ProcessState, m.log)
	}
	return nil
}

// stallRaft holds member id's raft goroutine still, or lets it go again,
// while the rest of the member runs.
func (c *cluster) stallRaft(id uint64, stalled bool) {
	var err error
	if stalled {
		err = os.WriteFile(c.members[id].stall, nil, 0o644)
	} else {
		err = os.Remove(c.members[id].stall)
	}
	if err != nil {
		c.t.Errorf("stall member %d's raft (%v): %v", id, stalled, err)
	}
}

// fillDisk fills member id's disk: every write it makes from now on
// fails, and it stops at the first.
func (c *cluster) fillDisk(id uint64) {
	m := c.members[id]
	m.mu.Lock()
	m.full, m.wasFull = true, true
	m.mu.Unlock()
	if err := os.WriteFile(m.diskFull, nil, 0o644); err != nil {
		c.t.Errorf("fill the disk of member %d: %v", id, err)
	}
}

// freeDisk gives member id's disk room again, and starts the member if
// it stopped.
func (c *cluster) freeDisk(id uint64) {
	m := c.members[id]
	if err := os.Remove(m.diskFull); err != nil {
		c.t.Errorf("free the disk of member %d: %v", id, err)
	}
	m.mu.Lock()
	m.full = false
	m.mu.Unlock()
	c.start(id)
}

// kill sends SIGKILL to member id: nothing survives but what is on disk.
func (c *cluster) kill(id uint64) {
	m := c.members[id]
	m.mu.Lock()
	if m.cmd == nil {
		m.mu.Unlock()
		return
	}
	m.killing = true
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	exited := m.exited
	m.mu.Unlock()
	<-exited
	m.mu.Lock()
	m.cmd, m.paused = nil, false
	m.mu.Unlock()
}

// pause stops member id with SIGSTOP; resume continues it.
func (c *cluster) pause(id uint64) {
	c.signal(id, syscall.SIGSTOP, true)
}

func (c *cluster) resume(id uint64) {
	c.signal(id, syscall.SIGCONT, false)
}

func (c *cluster) signal(id uint64, sig syscall.Signal, paused bool) {
	m := c.members[id]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	if err := m.cmd.Process.Signal(sig); err == nil {
		m.paused = paused
	}
}

// state reports whether member id runs and whether it is paused.
func (c *cluster) state(id uint64) (running, paused bool) {
	m := c.members[id]
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil, m.paused
}

// live lists the members that run and are not paused.
func (c *cluster) live() []uint64 {
	var out []uint64
	for _, id := range c.ids {
		if running, paused := c.state(id); running && !paused {
			out = append(out, id)
		}
	}
	return out
}

func (c *cluster) stopAll() {
	for _, id := range c.ids {
		c.resume(id)
		c.kill(id)
	}
	for _, l := range c.links {
		l.close()
	}
}

// status asks member id for its /status.
func (c *cluster) status(id uint64) (server.Status, error) {
	var st server.Status
	resp, err := c.http.Get("http://" + c.members[id].httpAddr + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// leader returns the leader that a majority of the members reports, if
// there is one now.
func (c *cluster) leader() (uint64, bool) {
	votes := map[uint64]int{}
	for _, id := range c.live() {
		if st, err := c.status(id); err == nil && st.Leader != 0 {
			votes[st.Leader]++
		}
	}
	for lead, n := range votes {
		if running, paused := c.state(lead); n > len(c.ids)/2 && running && !paused {
			return lead, true
		}
	}
	return 0, false
}

// waitLeader waits up to d for a leader that a majority agrees on.
func (c *cluster) waitLeader(d time.Duration) (uint64, bool) {
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if lead, ok := c.leader(); ok {
			return lead, true
		}
		if time.Now().After(deadline) {
			return 0, false
		}
	}
}

// linksPass reports whether every link to and from member id passes
// everything (no cut, loss or delay).
func (c *cluster) linksPass(id uint64) bool {
	for k, l := range c.links {
		if k[0] != id && k[1] != id {
			continue
		}
		l.mu.Lock()
		clean := l.mode == linkPass && l.loss == 0 && l.delay == 0
		l.mu.Unlock()
		if !clean {
			return false
		}
	}
	return true
}

// heal lets every link pass everything.
func (c *cluster) heal() {
	for _, l := range c.links {
		l.heal()
	}
}

// converged waits until every member reports the same applied index and
// tree digest, and returns the statuses it saw last.
func (c *cluster) converged(d time.Duration) ([]server.Status, bool) {
	var sts []server.Status
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		sts = sts[:0]
		for _, id := range c.ids {
			if st, err := c.status(id); err == nil {
				sts = append(sts, st)
			}
		}
		same := len(sts) == len(c.ids)
		for _, st := range sts {
			same = same && st.Applied == sts[0].Applied && st.Digest == sts[0].Digest
		}
		if same {
			return sts, true
		}
	}
	return sts, false
}

// linkStats sums the frames every link saw and dropped.
func (c *cluster) linkStats() (frames, dropped int64) {
	keys := make([][2]uint64, 0, len(c.links))
	for k := range c.links {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]*100+keys[i][1] < keys[j][0]*100+keys[j][1] })
	for _, k := range keys {
		f, d := c.links[k].counts()
		frames, dropped = frames+f, dropped+d
	}
	return frames, dropped
}

var (
	portsMu sync.Mutex
	ports   = map[string]bool{} // every address freePort handed out
)

// freePort returns a loopback address nobody listens on right now, from
// 25000-29999, below Linux's ephemeral range, so that outgoing connections
// of tests running meanwhile cannot take it before arbord listens (the
// integration tests, which run beside these, pick from 20000-24999). It
// never returns an address twice: a member that is down keeps its
// addresses for its restart.
func freePort(t testing.TB) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 25000+rand.IntN(5000))
		if ports[addr] {
			continue
		}
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			ports[addr] = true
			return addr
		}
	}
	t.Fatal("no free loopback port in 25000-29999")
	return ""
}
