package recipes

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/wire"
)

func TestOneLeaderAtATimeThroughLeaderCrashes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const n = 10
	type candidate struct {
		k *cutter
		c *client.Client
		e *Election
	}
	obs := s.dial(t)
	observed := NewElection(obs, "/election").Observe(ctxWait(t))
	cands := make([]*candidate, n)
	elected := make(chan int, n)
	for i := range cands {
		k := new(cutter)
		c := s.dial(t, client.WithDialer(k.dial), client.WithSessionTimeout(time.Second))
		cands[i] = &candidate{k: k, c: c, e: NewElection(c, "/election")}
		go func() {
			if err := cands[i].e.Campaign(ctxWait(t), []byte(fmt.Sprint("candidate-", i))); err == nil {
				elected <- i
			} else if !errors.Is(err, client.ErrSessionExpired) {
				t.Error(err)
			}
		}()
	}
	var last int64
	for round := range n {
		var leader int
		select {
		case leader = <-elected:
		case <-time.After(testWait):
			t.Fatalf("round %d: no leader", round)
		}
		leaders := 0
		for _, c := range cands {
			if c.e.IsLeader() {
				leaders++
			}
		}
		if leaders != 1 {
			t.Fatalf("round %d: %d candidates believe they lead", round, leaders)
		}
		if tok := cands[leader].e.Token(); tok <= last {
			t.Errorf("round %d: token %d after %d", round, tok, last)
		}
		last = cands[leader].e.Token()
		want := fmt.Sprint("candidate-", leader)
		got, err := NewElection(obs, "/election").Leader(ctxWait(t))
		if err != nil || string(got) != want {
			t.Errorf("Leader = %q, %v; want %q", got, err, want)
		}
		// Observe reports every leader, in order (with no value repeated).
		select {
		case v := <-observed:
			if string(v) != want {
				t.Errorf("observed %q, want %q", v, want)
			}
		case <-time.After(testWait):
			t.Fatalf("round %d: Observe did not report the leader", round)
		}
		if round%2 == 0 {
			cands[leader].k.cut() // a crash: the session times out
			<-cands[leader].e.Lost()
		} else {
			must(t, cands[leader].e.Resign(ctxWait(t)))
		}
		if cands[leader].e.IsLeader() {
			t.Errorf("round %d: a leader that crashed or resigned still believes it leads", round)
		}
	}
	if _, err := NewElection(obs, "/election").Leader(ctxWait(t)); !errors.Is(err, ErrNoLeader) {
		t.Errorf("Leader with no candidates: %v, want ErrNoLeader", err)
	}
}

func TestObserveWaitsForTheFirstCandidateAndEndsWithCtx(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dial(t)
	ctx, cancel := context.WithCancel(context.Background())
	values := NewElection(c, "/quiet").Observe(ctx)
	select {
	case v := <-values:
		t.Fatalf("observed %q with no candidate", v)
	case <-time.After(50 * time.Millisecond):
	}
	e := NewElection(c, "/quiet")
	must(t, e.Campaign(ctxWait(t), []byte("first")))
	must(t, e.Campaign(ctxWait(t), []byte("ignored"))) // already leading
	if v := <-values; string(v) != "first" {
		t.Errorf("observed %q", v)
	}
	cancel()
	for range values { // closed once ctx ends
	}
	must(t, e.Resign(ctxWait(t)))
	if err := e.Resign(ctxWait(t)); !errors.Is(err, ErrNotHeld) {
		t.Errorf("second Resign: %v, want ErrNotHeld", err)
	}
}

// An observer that finds no election node, and then finds it made between
// its child watch (no node) and its exists watch, lists the election again:
// it used to end as if the session had.
func TestObserveSeesTheElectionMadeWhileItSetsItsWatch(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	other := s.dial(t)
	var once sync.Once
	g := &beforeWrite{op: wire.OpExists, path: "/late", do: func() {
		once.Do(func() {
			if _, err := other.Create(ctxWait(t), "/late", nil, client.Persistent); err != nil {
				t.Errorf("create /late: %v", err)
			}
		})
	}}
	c := s.dial(t, client.WithDialer(g.dial))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	values := NewElection(c, "/late").Observe(ctx)
	waitFor(t, "the election node", func() bool { ok, _, _ := other.Exists(ctxWait(t), "/late"); return ok })
	e := NewElection(other, "/late")
	must(t, e.Campaign(ctxWait(t), []byte("leader")))
	select {
	case v, ok := <-values:
		if !ok {
			t.Fatal("Observe ended with ctx and the session alive")
		}
		if string(v) != "leader" {
			t.Errorf("observed %q", v)
		}
	case <-time.After(testWait):
		t.Fatal("no leader observed")
	}
}

// beforeWrite is a dialer whose connections call do before they send a
// watching request of op on path (and its frames with it).
type beforeWrite struct {
	op   wire.Op
	path string
	do   func()
}

func (b *beforeWrite) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &beforeWriteConn{Conn: nc, b: b}, nil
}

type beforeWriteConn struct {
	net.Conn
	b *beforeWrite
}

func (c *beforeWriteConn) Write(p []byte) (int, error) {
	for rest := p; len(rest) >= wire.FrameHeaderSize; {
		n := int(binary.BigEndian.Uint32(rest))
		if len(rest) < wire.FrameHeaderSize+n {
			break
		}
		var req wire.Request
		if wire.DecodeRequest(rest[wire.FrameHeaderSize:wire.FrameHeaderSize+n], &req) == nil &&
			req.Op == c.b.op && req.Path == c.b.path && req.Watch {
			c.b.do()
		}
		rest = rest[wire.FrameHeaderSize+n:]
	}
	return c.Conn.Write(p)
}

// Follow says why it stopped: nil when its ctx ended, fn's error, the
// session's end, or why the election could not be read (Observe's channel
// only closes).
func TestFollowSaysWhyItStopped(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dial(t, client.WithAuth("digest", client.DigestCredential("alice", "pw")))
	e := NewElection(c, "/follow")
	must(t, e.Campaign(ctxWait(t), []byte("leader")))

	errStop := errors.New("stop")
	if err := NewElection(s.dial(t), "/follow").Follow(ctxWait(t), func([]byte) error { return errStop }); !errors.Is(err, errStop) {
		t.Errorf("fn's error: Follow returned %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var seen []string
	err := NewElection(s.dial(t), "/follow").Follow(ctx, func(v []byte) error {
		seen = append(seen, string(v))
		cancel()
		return nil
	})
	if err != nil || !slices.Equal(seen, []string{"leader"}) {
		t.Errorf("ctx ended: Follow returned %v, having seen %q", err, seen)
	}

	_, err = c.Create(ctxWait(t), "/secret", nil, client.Persistent, client.WithACL(client.DigestACL(client.PermAll, "alice", "pw")))
	must(t, err)
	if err := NewElection(s.dial(t), "/secret").Follow(ctxWait(t), func([]byte) error { return nil }); !errors.Is(err, client.ErrNoAuth) {
		t.Errorf("an election it may not read: Follow returned %v, want ErrNoAuth", err)
	}

	obs := s.dial(t)
	done, following := make(chan error, 1), make(chan struct{})
	go func() {
		done <- NewElection(obs, "/follow").Follow(context.Background(), func([]byte) error {
			close(following)
			return nil
		})
	}()
	<-following // it saw the leader, and watches its node
	obs.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the session ended: Follow returned nil")
		}
	case <-time.After(testWait):
		t.Fatal("Follow went on after its session ended")
	}
}
