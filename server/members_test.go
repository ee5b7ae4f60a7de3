package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func TestASingleNodeShowsItselfAsTheLeaderWithAQuorum(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.ZKListen = "127.0.0.1:0" })
	resp, err := http.Get("http://" + s.HTTPAddr().String() + "/api/v1/members")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/v1/members: %s, %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	var v MembersView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	if v.Self != 1 || v.Leader != 1 || !v.Quorum || len(v.Members) != 1 {
		t.Fatalf("view %+v, want member 1 alone, leading, with a quorum", v)
	}
	m := v.Members[0]
	want := MemberView{
		ID: 1, Role: "leader", ClientAddr: s.Addr().String(), HTTPAddr: s.HTTPAddr().String(), ZKAddr: s.ZKAddr().String(),
		Version: buildVersion(), Term: m.Term, Commit: m.Commit, Applied: m.Applied, Zxid: m.Zxid, Healthy: true,
		StartedAt: s.started.UTC().Format(time.RFC3339),
	}
	if m != want {
		t.Fatalf("itself as\n%+v\nwant\n%+v", m, want)
	}
	if m.Term == 0 || m.Commit < m.Applied || m.Applied == 0 {
		t.Fatalf("term %d, commit %d, applied %d", m.Term, m.Commit, m.Applied)
	}
}

func TestTheMembersEndpointAnswersOnlyGET(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	resp, err := http.Post("http://"+s.HTTPAddr().String()+"/api/v1/members", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" || answer["error"] == "" {
		t.Fatalf("POST: %s, Allow %q, %v", resp.Status, resp.Header.Get("Allow"), answer)
	}
}

// TestAMemberWhosePeersAreDownShowsThemUnknown runs member 1 of three
// whose peers never start: it knows no leader, and hears no card but the
// ones the test hands it.
func TestAMemberWhosePeersAreDownShowsThemUnknown(t *testing.T) {
	t.Parallel()
	peers := map[uint64]string{1: freeAddr(t), 2: freeAddr(t), 3: freeAddr(t)}
	s := startServer(t, "", func(c *Config) { c.Peers, c.HTTP = peers, "-" })
	card := func(c memberCard) []byte { return encodeCard(t, c) }
	s.takeCard(2, card(memberCard{ID: 3, Applied: 7}))                 // a card naming another member than its sender
	s.takeCard(2, []byte("not a card"))                                // one that does not decode
	s.takeCard(9, card(memberCard{ID: 9, Applied: 7, Healthy: true}))  // a member not in the configuration
	s.takeCard(3, card(memberCard{ID: 3, Applied: 5, Healthy: false})) // a member that knows no leader either

	v := s.Members()
	if v.Self != 1 || v.Leader != 0 || v.Quorum || len(v.Members) != 3 {
		t.Fatalf("view %+v, want members 1-3, no leader and no quorum", v)
	}
	for _, m := range v.Members {
		if m.Lag != -1 || m.Healthy || m.Role == "leader" {
			t.Errorf("member %d: lag %d, healthy %v, role %q without a leader", m.ID, m.Lag, m.Healthy, m.Role)
		}
	}
	if m := v.Members[0]; m.Role != "follower" || m.HeardMsAgo != 0 || m.PeerAddr != peers[1] {
		t.Errorf("itself: %+v", m)
	}
	if m := v.Members[1]; m.Role != "unknown" || m.HeardMsAgo != -1 || m.Applied != 0 || m.PeerAddr != peers[2] {
		t.Errorf("member 2, whose only cards were bad: %+v", m)
	}
	if m := v.Members[2]; m.Role != "follower" || m.HeardMsAgo < 0 || m.Applied != 5 {
		t.Errorf("member 3, heard from: %+v", m)
	}
}

// encodeCard is c as a member sends it.
func encodeCard(t *testing.T, c memberCard) []byte {
	t.Helper()
	b, err := msgpack.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
