package raftnode

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zaptest"
)

func TestQuorumSince(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	now := at(10)
	for _, tc := range []struct {
		name      string
		voters    []uint64
		heard     map[uint64]time.Time
		leadSince time.Time
		want      time.Time
	}{
		{"a single member is always in contact", []uint64{1}, nil, at(0), now},
		{"three: the latest peer heard makes a quorum", []uint64{1, 2, 3}, map[uint64]time.Time{2: at(4), 3: at(8)}, at(0), at(8)},
		{"three: one peer heard is enough", []uint64{1, 2, 3}, map[uint64]time.Time{2: at(4)}, at(0), at(4)},
		{"three: no peer heard since the lead began", []uint64{1, 2, 3}, nil, at(3), at(3)},
		{"a lead later than the answers counts from the lead", []uint64{1, 2, 3}, map[uint64]time.Time{2: at(4)}, at(6), at(6)},
		{"five: the second latest peer", []uint64{1, 2, 3, 4, 5}, map[uint64]time.Time{2: at(1), 3: at(7), 4: at(5), 5: at(2)}, at(0), at(5)},
		{"five: one peer heard is not a quorum", []uint64{1, 2, 3, 4, 5}, map[uint64]time.Time{3: at(9)}, at(2), at(2)},
		{"answers of members no longer voters do not count", []uint64{1, 2, 3}, map[uint64]time.Time{9: at(9), 2: at(3)}, at(0), at(3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := contact{heard: tc.heard, leadSince: tc.leadSince}
			if got := c.quorumSince(1, tc.voters, now); !got.Equal(tc.want) {
				t.Fatalf("quorumSince = %v, want %v", got.Sub(t0), tc.want.Sub(t0))
			}
		})
	}
}

func TestHeardSince(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	c := contact{heard: map[uint64]time.Time{2: at(4), 3: at(8), 4: at(1), 5: at(6)}, leadSince: at(5)}
	for _, tc := range []struct {
		name  string
		since time.Time
		want  []uint64
	}{
		{"the peers heard since the lead began, sorted", at(0), []uint64{3, 5}},
		{"the peers heard within a window inside the lead", at(7), []uint64{3}},
		{"an answer at the window's start counts", at(6), []uint64{3, 5}},
		{"none heard in a window after the last answer", at(9), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.heardSince(tc.since); !slices.Equal(got, tc.want) {
				t.Fatalf("heardSince = %v, want %v", got, tc.want)
			}
		})
	}
}

// stallable is a transport whose Send blocks while the member is
// stalled: the raft goroutine sends, so it stands still too.
type stallable struct {
	*MemTransport
	mu      sync.Mutex
	stalled chan struct{} // closed to resume; nil when not stalled
}

func (s *stallable) Send(msgs []raftpb.Message) {
	s.mu.Lock()
	ch := s.stalled
	s.mu.Unlock()
	if ch != nil {
		<-ch
	}
	s.MemTransport.Send(msgs)
}

// A leader whose raft goroutine stands still still believes it leads
// (nothing has told it otherwise), but QuorumContact shows it has heard
// from no quorum since the stall began.
func TestAStalledLeaderLosesQuorumContact(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	peers := map[uint64]string{1: "", 2: "", 3: ""}
	nodes := map[uint64]*Node{}
	trs := map[uint64]*stallable{}
	for id := range peers {
		tr := &stallable{MemTransport: nw.NewTransport(id)}
		n, err := Start(Config{ID: id, Peers: peers, Dir: t.TempDir(), TickInterval: 10 * time.Millisecond,
			Transport: tr, Logger: zaptest.NewLogger(t).Named(fmt.Sprintf("n%d", id))}, &counter{})
		if err != nil {
			t.Fatal(err)
		}
		tr.Attach(n, nil)
		nodes[id], trs[id] = n, tr
	}
	resume := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() { close(resume) })
		for id, n := range nodes {
			n.Stop()
			trs[id].Close()
		}
	})
	var lead uint64
	waitFor(t, "a leader", func() bool {
		lead = nodes[1].Leader()
		return lead != 0 && nodes[lead].IsLeader()
	})
	waitFor(t, "the leader in contact", func() bool { return nodes[lead].QuorumContact() < 50*time.Millisecond })

	trs[lead].mu.Lock()
	trs[lead].stalled = resume
	trs[lead].mu.Unlock()
	time.Sleep(300 * time.Millisecond) // three election timeouts
	if !nodes[lead].IsLeader() {
		t.Fatal("the stalled leader learned of its end: the stall did not hold its raft goroutine")
	}
	if d := nodes[lead].QuorumContact(); d < 250*time.Millisecond {
		t.Fatalf("a leader stalled for 300ms heard from a quorum %v ago", d)
	}
	once.Do(func() { close(resume) })
}
