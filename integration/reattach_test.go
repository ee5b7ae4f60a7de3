package integration

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/wire"
)

// handshake sends req to the member at addr and returns its answer.
func handshake(t *testing.T, addr string, req wire.ConnectRequest) wire.ConnectResponse {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	req.ProtocolVersion, req.TimeoutMs = wire.ProtocolVersion, 10_000
	if _, err := nc.Write(wire.AppendConnectRequest(nil, &req)); err != nil {
		t.Fatal(err)
	}
	body, err := wire.ReadFrame(bufio.NewReader(nc), nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var resp wire.ConnectResponse
	if err := wire.DecodeConnectResponse(body, &resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

// A session made on one member and taken at once to a member that has not
// applied its creation yet is not told it expired: the member catches up
// with the leader (ReadIndex) before it says so, or sends the client
// elsewhere. The fault suite found this: a client whose leader died just
// after its session was made was told by the next member it tried that
// its session had expired.
func TestANewSessionReattachedToALaggingMemberIsNotExpired(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	lead, lag := c.leader(), c.follower()
	// Behind, but within its election timeout (10 ticks of 20 ms): a
	// member that stops hearing the leader drops its clients instead.
	c.net.Delay(lead, lag, 150*time.Millisecond)
	made := handshake(t, c.addr(lead), wire.ConnectRequest{})
	if made.Err != wire.CodeOK || made.SessionID == 0 {
		t.Fatalf("new session: %+v", made)
	}
	// The lagging member either catches up and takes the session, or
	// sends the client elsewhere; it never says the session expired.
	got := handshake(t, c.addr(lag), wire.ConnectRequest{SessionID: made.SessionID, Password: made.Password})
	if !(got.Err == wire.CodeOK && got.SessionID == made.SessionID) && got.Err != wire.CodeNotCaughtUp {
		t.Fatalf("reattach to the lagging member: %+v (error %v), want the session or NotCaughtUp", got, got.Err)
	}
	c.net.Delay(lead, lag, 0)
	waitUntil(t, "the lagging member to take the session", patience, func() bool {
		got := handshake(t, c.addr(lag), wire.ConnectRequest{SessionID: made.SessionID, Password: made.Password})
		return got.Err == wire.CodeOK && got.SessionID == made.SessionID
	})
	// A session that never was is still told it expired.
	gone := handshake(t, c.addr(lag), wire.ConnectRequest{SessionID: made.SessionID + 1000, Password: made.Password})
	if gone.Err != wire.CodeSessionExpired {
		t.Errorf("reattach of an unknown session: error %v, want SessionExpired", gone.Err)
	}
}
