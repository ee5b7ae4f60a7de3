package server

import (
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// freeAddr returns a loopback address with a port that was free.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestMembersApplyTheSameACLDecisions runs three members and writes through
// the followers: the permission checks run at apply, with the identities
// the txn carries, so every member decides alike and their trees (ACLs
// included, through the digest) stay equal.
func TestMembersApplyTheSameACLDecisions(t *testing.T) {
	t.Parallel()
	peers := map[uint64]string{1: freeAddr(t), 2: freeAddr(t), 3: freeAddr(t)}
	members := map[uint64]*Server{}
	for id := uint64(1); id <= 3; id++ {
		members[id] = startServer(t, "", func(c *Config) {
			c.ID, c.Peers, c.SuperDigest, c.HTTP = id, peers, rootDigest, "-"
			c.TickInterval = 20 * time.Millisecond
		})
	}
	var followers []*Server
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		followers = followers[:0]
		agreed := true
		for _, s := range members {
			agreed = agreed && s.node.Leader() != 0 && s.node.Leader() == members[1].node.Leader()
			if !s.node.IsLeader() {
				followers = append(followers, s)
			}
		}
		if agreed && len(followers) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader that every member knows")
		}
	}
	alice := authedSession(t, followers[0], "alice:secret")
	bob := authedSession(t, followers[1], "bob:secret")
	mine := []wire.ACL{{Perms: wire.PermAll, Scheme: "digest", ID: aliceDigest}, {Perms: wire.PermRead, Scheme: "world", ID: "anyone"}}
	alice.must(wire.Request{Op: wire.OpCreate, Path: "/f", ACL: mine})
	if r := bob.answer(wire.Request{Op: wire.OpSetData, Path: "/f", Data: []byte("bob"), Version: -1}); r.Err != wire.CodeNoAuth {
		t.Fatalf("setData by bob through a follower: %s, want NoAuth", r.Err)
	}
	if r := bob.answer(wire.Request{Op: wire.OpMulti, Ops: []wire.Request{
		{Op: wire.OpCreate, Path: "/g"},
		{Op: wire.OpCreate, Path: "/f/child"},
	}}); r.Err != wire.CodeNoAuth {
		t.Fatalf("multi by bob through a follower: %s, want NoAuth", r.Err)
	}
	last := alice.must(wire.Request{Op: wire.OpSetData, Path: "/f", Data: []byte("alice"), Version: -1}).Zxid
	bob.must(wire.Request{Op: wire.OpAuth, AuthScheme: "digest", AuthData: []byte("root:rootpw")})
	last = max(last, bob.must(wire.Request{Op: wire.OpSetACL, Path: "/f", Version: 0, ACL: []wire.ACL{mine[0]}}).Zxid)

	// Nothing else writes: every member ends at the same zxid.
	type state struct {
		zxid   int64
		digest uint64
		data   string
		acl    []wire.ACL
		hasG   bool
	}
	var states []state
	for id, s := range members {
		for deadline := time.Now().Add(10 * time.Second); s.fsm.lastZxid() < last; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("member %d did not apply up to %d", id, last)
			}
		}
		var st state
		s.fsm.read(func(tr *tree.Tree) {
			st.zxid, st.digest = tr.Zxid(), tr.Digest()
			data, _, _ := tr.Get("/f")
			st.data = string(data)
			st.acl, _, _ = tr.ACL("/f")
			_, err := tr.Exists("/g")
			st.hasG = err == nil
		})
		states = append(states, st)
	}
	want := state{zxid: states[0].zxid, digest: states[0].digest, data: "alice", acl: []wire.ACL{mine[0]}}
	for i, st := range states {
		if !reflect.DeepEqual(st, want) {
			t.Errorf("member state %d: %+v, want %+v", i, st, want)
		}
	}
}
