package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
)

// getMembers reads a member's GET /api/v1/members.
func getMembers(t *testing.T, s *server.Server) server.MembersView {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr().String() + "/api/v1/members")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/members: %s", resp.Status)
	}
	var v server.MembersView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// waitView polls view until ok holds of what it returns, and fails the
// test after patience with the last view and why it did not hold.
func waitView(t *testing.T, what string, view func() server.MembersView, ok func(server.MembersView) error) server.MembersView {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		v := view()
		err := ok(v)
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v\n%+v", what, patience, err, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// member finds member id in v.
func member(v server.MembersView, id uint64) (server.MemberView, bool) {
	for _, m := range v.Members {
		if m.ID == id {
			return m, true
		}
	}
	return server.MemberView{}, false
}

// wholeAndSettled says why v is not a view of the whole cluster c, led by
// lead, with every member healthy and caught up.
func wholeAndSettled(c *cluster, lead uint64) func(server.MembersView) error {
	return func(v server.MembersView) error {
		if v.Leader != lead || !v.Quorum {
			return fmt.Errorf("leader %d, quorum %v; want %d and a quorum", v.Leader, v.Quorum, lead)
		}
		if len(v.Members) != len(c.cfgs) {
			return fmt.Errorf("%d members, want %d", len(v.Members), len(c.cfgs))
		}
		leaders := 0
		for i, m := range v.Members {
			switch {
			case m.ID != uint64(i+1):
				return fmt.Errorf("member %d in place %d: not sorted by id", m.ID, i)
			case !m.Healthy || m.HeardMsAgo < 0:
				return fmt.Errorf("member %d unhealthy (heard %d ms ago)", m.ID, m.HeardMsAgo)
			case m.Lag != 0:
				return fmt.Errorf("member %d lags by %d", m.ID, m.Lag)
			case m.ClientAddr != c.addr(m.ID) || m.HTTPAddr == "" || m.Version == "" || m.StartedAt == "":
				return fmt.Errorf("member %d's card is incomplete: %+v", m.ID, m)
			case m.PeerAddr != c.cfgs[m.ID].Peers[m.ID]:
				return fmt.Errorf("member %d's peer address is %q", m.ID, m.PeerAddr)
			case m.Role == "leader":
				leaders++
			case m.Role != "follower":
				return fmt.Errorf("member %d has role %q", m.ID, m.Role)
			}
		}
		if leaders != 1 {
			return fmt.Errorf("%d leaders", leaders)
		}
		return nil
	}
}

func TestEveryMemberSeesTheWholeClusterWithOneLeaderAndNoLag(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, withHTTP)
	lead := c.leader()
	ctx := testCtx(t)
	cl := dial(t, c.addr(lead))
	for i := range 20 {
		if _, err := cl.Create(ctx, fmt.Sprintf("/n%d", i), nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	for id, s := range c.servers {
		v := waitView(t, fmt.Sprintf("member %d's view", id), func() server.MembersView { return getMembers(t, s) }, wholeAndSettled(c, lead))
		if v.Self != id {
			t.Fatalf("member %d's view says self is %d", id, v.Self)
		}
		if self, _ := member(v, id); self.HeardMsAgo != 0 {
			t.Fatalf("member %d heard from itself %d ms ago", id, self.HeardMsAgo)
		}
	}
}

func TestAPartitionedFollowerIsSeenUnhealthyAndSeesNoQuorum(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mod  []func(*server.Config)
	}{
		{"on the memory network", nil},
		{"over TCP", []func(*server.Config){overTCP}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 3, append(tc.mod, withHTTP)...)
			lead := c.leader()
			cut := c.follower()
			var rest []uint64
			for id := range c.servers {
				if id != cut {
					rest = append(rest, id)
				}
			}
			for _, id := range rest {
				waitView(t, fmt.Sprintf("member %d's view before the partition", id), c.servers[id].Members, wholeAndSettled(c, lead))
			}

			c.partition([]uint64{cut}, rest)
			ctx := testCtx(t)
			cl := dial(t, c.addr(lead))
			for i := range 5 {
				// On a sharded cluster the cut member may lead the
				// node's shard, which takes writes again once the others
				// elect a leader of their own (a retried create may find
				// its first try's node).
				err := retry(func() error { _, err := cl.Create(ctx, fmt.Sprintf("/n%d", i), nil, client.Persistent); return err })
				if err != nil && !errors.Is(err, client.ErrNodeExists) {
					t.Fatal(err)
				}
			}
			for _, id := range rest {
				waitView(t, fmt.Sprintf("member %d's view of the cut-off member %d", id, cut), c.servers[id].Members, func(v server.MembersView) error {
					m, _ := member(v, cut)
					l, _ := member(v, lead)
					switch {
					case !v.Quorum || v.Leader != lead || l.Role != "leader":
						return fmt.Errorf("leader %d (role %q), quorum %v; want %d and a quorum", v.Leader, l.Role, v.Quorum, lead)
					case m.Healthy:
						return fmt.Errorf("member %d is still healthy", cut)
					case m.Lag <= 0:
						return fmt.Errorf("member %d lags by %d after writes it cannot have", cut, m.Lag)
					}
					return nil
				})
			}
			waitView(t, fmt.Sprintf("the cut-off member %d's view", cut), c.servers[cut].Members, func(v server.MembersView) error {
				if v.Quorum {
					return fmt.Errorf("it sees a quorum (leader %d)", v.Leader)
				}
				for _, id := range rest {
					if m, _ := member(v, id); m.Healthy {
						return fmt.Errorf("it sees member %d healthy", id)
					}
				}
				return nil
			})

			c.heal()
			lead = c.leader()
			for id, s := range c.servers {
				waitView(t, fmt.Sprintf("member %d's view after the heal", id), s.Members, wholeAndSettled(c, lead))
			}
		})
	}
}
