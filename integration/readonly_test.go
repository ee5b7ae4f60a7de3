package integration

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
)

// A member cut off from the quorum serves, read-only, the ZooKeeper
// clients that accept it (canBeReadOnly), as a ZooKeeper server in
// read-only mode does: reads are answered, changes refused with
// NOTREADONLY, isro says ro. Other clients are refused. Once the member
// is back in the quorum it drops its read-only clients, so that they come
// back read-write.
func TestACutOffMemberServesReadOnlyClients(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, withZK)
	ctx := testCtx(t)
	ac := dialAll(t, c.addrs())
	if _, err := ac.Create(ctx, "/ro", []byte("v"), client.Persistent); err != nil {
		t.Fatal(err)
	}
	c.converged()
	cut := c.follower()
	// A session made before the cut, on the member about to be cut off.
	before := dialRawZK(t, c.servers[cut].ZKAddr().String(), zkwire.ConnectRequest{ReadOnly: true, HasReadOnly: true})
	before.nc.Close()
	var rest []uint64
	for id := range c.servers {
		if id != cut {
			rest = append(rest, id)
		}
	}
	zkAddr := c.servers[cut].ZKAddr().String()
	if got := fourLetterWord(t, zkAddr, "isro"); got != "rw" {
		t.Fatalf("isro before the cut: %q", got)
	}
	c.partition([]uint64{cut}, rest)
	waitUntil(t, "the cut-off member to serve read-only", 15*time.Second, func() bool { return fourLetterWord(t, zkAddr, "isro") == "ro" })

	if got := fourLetterWord(t, zkAddr, "srvr"); !strings.Contains(got, "Mode: read-only") {
		t.Fatalf("srvr on the read-only member: %q", got)
	}
	ro := dialRawZK(t, zkAddr, zkwire.ConnectRequest{ReadOnly: true, HasReadOnly: true})
	if !ro.resp.ReadOnly {
		t.Fatalf("the ConnectResponse of a read-only member: %+v", ro.resp)
	}
	if r := ro.call(zkwire.Request{Op: zkwire.OpGetData, Path: "/ro"}); r.Err != 0 || string(r.Data) != "v" {
		t.Fatalf("a read on the read-only member: %q, %d", r.Data, r.Err)
	}
	open := zkwire.OpenACL
	for _, req := range []zkwire.Request{
		{Op: zkwire.OpCreate, Path: "/ro/x", ACL: open},
		{Op: zkwire.OpSetData, Path: "/ro", Data: []byte("w"), Version: -1},
		{Op: zkwire.OpDelete, Path: "/ro", Version: -1},
		{Op: zkwire.OpSync, Path: "/ro"},
	} {
		if r := ro.call(req); r.Err != int32(wire.CodeNotReadOnly) {
			t.Errorf("%s on the read-only member: error %d, want NOTREADONLY (-119)", req.Op, r.Err)
		}
	}
	again := dialRawZK(t, zkAddr, zkwire.ConnectRequest{ReadOnly: true, HasReadOnly: true,
		SessionID: before.resp.SessionID, Passwd: before.resp.Passwd})
	if again.resp.SessionID != before.resp.SessionID || !again.resp.ReadOnly {
		t.Fatalf("a session reattached read-only: %+v, want session %#x read-only", again.resp, before.resp.SessionID)
	}
	if r := ro.call(zkwire.Request{Op: zkwire.OpPing, Xid: zkwire.XidPing}); r.Err != 0 {
		t.Fatalf("a ping on the read-only member: %d", r.Err)
	}
	if refusedZK(t, zkAddr, zkwire.ConnectRequest{TimeOut: 5000, Passwd: make([]byte, 16)}) == false {
		t.Fatal("a client that does not accept a read-only server was served")
	}

	c.heal()
	waitUntil(t, "the member back in the quorum", 15*time.Second, func() bool { return fourLetterWord(t, zkAddr, "isro") == "rw" })
	_ = ro.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(ro.nc); err != nil && !errors.Is(err, net.ErrClosed) && !isConnReset(err) {
		t.Fatalf("the read-only connection after the heal: %v", err)
	}
	rw := dialRawZK(t, zkAddr, zkwire.ConnectRequest{ReadOnly: true, HasReadOnly: true})
	if rw.resp.ReadOnly {
		t.Fatal("the member, back in the quorum, still answers read-only")
	}
	if r := rw.call(zkwire.Request{Op: zkwire.OpSetData, Path: "/ro", Data: []byte("w"), Version: -1}); r.Err != 0 {
		t.Fatalf("a write once back: %d", r.Err)
	}
}

// refusedZK reports whether the member at addr closes the connection
// instead of answering req with a session, as a ZooKeeper server without
// a quorum does.
func refusedZK(t *testing.T, addr string, req zkwire.ConnectRequest) bool {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(zkwire.AppendConnectRequest(nil, &req)); err != nil {
		return true
	}
	body, err := wire.ReadFrame(nc, nil, 1<<20)
	if err != nil {
		return true
	}
	var resp zkwire.ConnectResponse
	return zkwire.DecodeConnectResponse(body, &resp) != nil || resp.SessionID == 0
}

func isConnReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}
