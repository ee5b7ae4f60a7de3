package client

import (
	"bytes"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// fakeServer is a small in-memory Arbor server on loopback TCP, enough to
// run the client end to end: a tree with ZooKeeper's semantics, sessions
// with ephemerals, watches with ZooKeeper's rules (setWatches included), and
// knobs to break connections, refuse handshakes and expire sessions. Every
// request is handled under mu, and notifications are written before the
// reply that reveals the change, as the real server does.
type fakeServer struct {
	t *testing.T

	mu       sync.Mutex // guards everything below
	lns      []net.Listener
	zxid     int64
	nodes    map[string]*fakeNode
	sessions map[int64][]byte // password by session id
	lastID   int64
	conns    map[*fakeConn]bool
	refuse   wire.Code       // when set, every handshake is refused with it
	badCreds map[string]bool // digest credentials refused by auth
	keepConn bool            // keep a connection whose auth was refused (Arbor does; ZooKeeper closes it)
	version  int32           // the protocol version it speaks; 0: wire.ProtocolVersion
	requests []wire.Request  // every request but pings, in arrival order
	// onRequest, when set, runs before each request but pings is handled:
	// a change another client makes just then.
	onRequest func(req *wire.Request)
	wg        sync.WaitGroup

	// snapshot, when set, answers the snapshot op (snapshot_test.go).
	snapshot func(req wire.SnapshotRequest) (wire.SnapshotChunk, wire.Code)
}

type fakeNode struct {
	data []byte
	stat wire.Stat
	acl  []wire.ACL
}

type fakeConn struct {
	nc      net.Conn
	session int64
	wmu     sync.Mutex               // serializes writes
	watches map[string]map[rune]bool // path -> 'd'ata, 'e'xist, 'c'hild (under the server's mu)
	ids     []wire.Identity          // added by auth (under the server's mu)
}

type fakeEvent struct {
	typ  wire.EventType
	path string
}

func newFakeServer(t *testing.T) *fakeServer {
	s := &fakeServer{
		t:        t,
		nodes:    map[string]*fakeNode{"/": {}},
		sessions: map[int64][]byte{},
		badCreds: map[string]bool{},
		conns:    map[*fakeConn]bool{},
	}
	t.Cleanup(s.shutdown)
	return s
}

// listen starts a listener on a loopback port and returns its address.
func (s *fakeServer) listen() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go s.serve(nc)
		}
	}()
	return ln.Addr().String()
}

// stopListening closes the listeners: dials are refused.
func (s *fakeServer) stopListening() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ln := range s.lns {
		ln.Close()
	}
	s.lns = nil
}

// dropConns closes every client connection.
func (s *fakeServer) dropConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for fc := range s.conns {
		fc.nc.Close()
	}
}

func (s *fakeServer) shutdown() {
	s.stopListening()
	s.dropConns()
	s.wg.Wait()
}

// refuseCred makes auth refuse the digest credential cred from now on.
func (s *fakeServer) refuseCred(cred string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.badCreds[cred] = true
}

func (s *fakeServer) setRefuse(code wire.Code) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = code
}

// expire ends a session as the leader would: its ephemerals go, with their
// events, and its connections close.
func (s *fakeServer) expire(session int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endSessionLocked(session)
	for fc := range s.conns {
		if fc.session == session {
			fc.nc.Close()
		}
	}
}

func (s *fakeServer) endSessionLocked(session int64) {
	delete(s.sessions, session)
	var gone []string
	for path, n := range s.nodes {
		if n.stat.EphemeralOwner == session {
			gone = append(gone, path)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(gone)))
	for _, path := range gone {
		s.writeLocked([]wire.Request{{Op: wire.OpDelete, Path: path, Version: -1}}, session)
	}
}

// node returns a copy of the node at path, or nil.
func (s *fakeServer) node(path string) *fakeNode {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.nodes[path]; n != nil {
		cp := *n
		return &cp
	}
	return nil
}

// write applies a change directly, as another client would.
func (s *fakeServer) write(req wire.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, _, code := s.writeLocked([]wire.Request{req}, 0); code != wire.CodeOK {
		s.t.Errorf("fake write %s %s: %v", req.Op, req.Path, code)
	}
}

// received returns the requests received so far.
func (s *fakeServer) received() []wire.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]wire.Request(nil), s.requests...)
}

func (s *fakeServer) serve(nc net.Conn) {
	defer s.wg.Done()
	defer nc.Close()
	fc := &fakeConn{nc: nc, watches: map[string]map[rune]bool{}}
	body, err := wire.ReadFrame(nc, nil, wire.DefaultMaxFrame)
	if err != nil {
		return
	}
	var hs wire.ConnectRequest
	if wire.DecodeConnectRequest(body, &hs) != nil {
		return
	}
	s.mu.Lock()
	resp := s.handshakeLocked(fc, &hs)
	s.mu.Unlock()
	if fc.send(wire.AppendConnectResponse(nil, &resp)) != nil || resp.Err != wire.CodeOK {
		return
	}
	defer func() {
		s.mu.Lock()
		delete(s.conns, fc)
		s.mu.Unlock()
	}()
	for {
		body, err := wire.ReadFrame(nc, nil, wire.DefaultMaxFrame)
		if err != nil {
			return
		}
		var req wire.Request
		if err := wire.DecodeRequest(body, &req); err != nil {
			s.t.Errorf("fake server: %v", err)
			return
		}
		s.mu.Lock()
		keep := s.handleLocked(fc, &req)
		s.mu.Unlock()
		if !keep {
			return
		}
	}
}

func (s *fakeServer) handshakeLocked(fc *fakeConn, hs *wire.ConnectRequest) wire.ConnectResponse {
	version := wire.ProtocolVersion
	if s.version != 0 {
		version = s.version
	}
	resp := wire.ConnectResponse{ProtocolVersion: min(version, hs.ProtocolVersion), TimeoutMs: hs.TimeoutMs}
	switch pw, ok := s.sessions[hs.SessionID]; {
	case s.refuse != wire.CodeOK:
		resp.Err = s.refuse
	case hs.LastZxidSeen > s.zxid:
		resp.Err = wire.CodeNotCaughtUp
	case hs.SessionID == 0:
		s.lastID++
		resp.SessionID = s.lastID
		resp.Password = []byte(fmt.Sprintf("pw%d", s.lastID))
		s.sessions[resp.SessionID] = resp.Password
	case !ok:
		resp.Err = wire.CodeSessionExpired
	case !bytes.Equal(pw, hs.Password):
		resp.Err = wire.CodeBadPassword
	default:
		resp.SessionID, resp.Password = hs.SessionID, pw
	}
	if resp.Err == wire.CodeOK {
		fc.session = resp.SessionID
		s.conns[fc] = true
	}
	return resp
}

// handleLocked answers one request; false means close the connection.
func (s *fakeServer) handleLocked(fc *fakeConn, req *wire.Request) bool {
	if req.Op == wire.OpPing {
		return fc.reply(wire.OpPing, &wire.Reply{Xid: wire.XidPing, Zxid: s.zxid}) == nil
	}
	s.requests = append(s.requests, *req)
	if s.onRequest != nil {
		s.onRequest(req)
	}
	rep := wire.Reply{Xid: req.Xid}
	switch req.Op {
	case wire.OpGetData, wire.OpExists, wire.OpGetChildren:
		s.readLocked(fc, req, &rep)
	case wire.OpCreate, wire.OpDelete, wire.OpSetData:
		results, _, code := s.writeLocked([]wire.Request{*req}, fc.session)
		rep.Err, rep.Path, rep.Stat = code, results[0].Path, results[0].Stat
	case wire.OpMulti:
		rep.Results, _, rep.Err = s.writeLocked(req.Ops, fc.session)
	case wire.OpSync:
		rep.Path = req.Path
	case wire.OpGetACL:
		if n := s.nodes[req.Path]; n == nil {
			rep.Err = wire.CodeNoNode
		} else {
			rep.ACL, rep.Stat = n.acl, n.stat
		}
	case wire.OpSetACL:
		results, _, code := s.writeLocked([]wire.Request{*req}, fc.session)
		rep.Err, rep.Stat = code, results[0].Stat
	case wire.OpAuth:
		if rep.Err = s.authLocked(fc, req); rep.Err != wire.CodeOK && !s.keepConn {
			rep.Zxid = s.zxid
			fc.reply(req.Op, &rep)
			return false // as ZooKeeper closes the connection after a refused auth
		}
	case wire.OpWhoAmI:
		rep.Identities = append([]wire.Identity{{Scheme: "ip", ID: "127.0.0.1"}}, fc.ids...)
	case wire.OpSetWatches2:
		s.setWatchesLocked(fc, req)
	case wire.OpSnapshot:
		rep.Err = wire.CodeUnimplemented
		if s.snapshot != nil {
			rep.Snapshot, rep.Err = s.snapshot(req.Snapshot)
		}
	case wire.OpClose:
		s.endSessionLocked(fc.session)
		rep.Zxid = s.zxid
		fc.reply(wire.OpClose, &rep)
		return false
	default:
		rep.Err = wire.CodeUnimplemented
	}
	rep.Zxid = s.zxid
	return fc.reply(req.Op, &rep) == nil
}

// authLocked takes a digest credential "user:password", unless it was
// refused with refuseCred; other schemes are refused.
func (s *fakeServer) authLocked(fc *fakeConn, req *wire.Request) wire.Code {
	user, _, ok := strings.Cut(string(req.AuthData), ":")
	if req.AuthScheme != "digest" || !ok || s.badCreds[string(req.AuthData)] {
		return wire.CodeAuthFailed
	}
	id := wire.Identity{Scheme: "digest", ID: user}
	for _, have := range fc.ids {
		if have == id {
			return wire.CodeOK
		}
	}
	fc.ids = append(fc.ids, id)
	return wire.CodeOK
}

func (s *fakeServer) readLocked(fc *fakeConn, req *wire.Request, rep *wire.Reply) {
	n := s.nodes[req.Path]
	if n == nil {
		rep.Err = wire.CodeNoNode
		if req.Watch && req.Op == wire.OpExists {
			fc.watch(req.Path, 'e')
		}
		return
	}
	rep.Stat = n.stat
	switch req.Op {
	case wire.OpGetData:
		rep.Data = n.data
	case wire.OpGetChildren:
		rep.Children = childrenOf(s.nodes, req.Path)
	}
	if req.Watch {
		fc.watch(req.Path, map[wire.Op]rune{wire.OpGetData: 'd', wire.OpExists: 'd', wire.OpGetChildren: 'c'}[req.Op])
	}
}

// setWatchesLocked restores watches by ZooKeeper's rules: what changed
// after the client's zxid fires at once, the rest is registered.
func (s *fakeServer) setWatchesLocked(fc *fakeConn, req *wire.Request) {
	rel := req.RelativeZxid
	for _, p := range req.DataWatches {
		switch n := s.nodes[p]; {
		case n == nil:
			fc.notify(s.zxid, wire.EventNodeDeleted, p)
		case n.stat.Mzxid > rel:
			fc.notify(s.zxid, wire.EventNodeDataChanged, p)
		default:
			fc.watch(p, 'd')
		}
	}
	for _, p := range req.ExistWatches {
		if s.nodes[p] != nil {
			fc.notify(s.zxid, wire.EventNodeCreated, p)
		} else {
			fc.watch(p, 'e')
		}
	}
	for _, p := range req.ChildWatches {
		switch n := s.nodes[p]; {
		case n == nil:
			fc.notify(s.zxid, wire.EventNodeDeleted, p)
		case n.stat.Pzxid > rel:
			fc.notify(s.zxid, wire.EventNodeChildrenChanged, p)
		default:
			fc.watch(p, 'c')
		}
	}
}

// fireLocked sends ev to every connection with a watch it triggers.
func (s *fakeServer) fireLocked(ev fakeEvent) {
	kinds := map[wire.EventType]string{
		wire.EventNodeCreated: "de", wire.EventNodeDataChanged: "de",
		wire.EventNodeDeleted: "dec", wire.EventNodeChildrenChanged: "c",
	}[ev.typ]
	for fc := range s.conns {
		hit := false
		for _, k := range kinds {
			if fc.watches[ev.path][k] {
				delete(fc.watches[ev.path], k)
				hit = true
			}
		}
		if hit {
			fc.notify(s.zxid, ev.typ, ev.path)
		}
	}
}

func (fc *fakeConn) watch(path string, kind rune) {
	if fc.watches[path] == nil {
		fc.watches[path] = map[rune]bool{}
	}
	fc.watches[path][kind] = true
}

func (fc *fakeConn) notify(zxid int64, typ wire.EventType, path string) {
	fc.reply(0, &wire.Reply{Xid: wire.XidNotification, Zxid: zxid, EventType: typ, State: wire.StateConnected, Path: path})
}

func (fc *fakeConn) reply(op wire.Op, rep *wire.Reply) error {
	return fc.send(wire.AppendReply(nil, op, rep))
}

func (fc *fakeConn) send(frame []byte) error {
	fc.wmu.Lock()
	defer fc.wmu.Unlock()
	_, err := fc.nc.Write(frame)
	return err
}

func childrenOf(nodes map[string]*fakeNode, parent string) []string {
	prefix := strings.TrimSuffix(parent, "/") + "/"
	var names []string
	for p := range nodes {
		if p != "/" && strings.HasPrefix(p, prefix) && !strings.Contains(p[len(prefix):], "/") {
			names = append(names, p[len(prefix):])
		}
	}
	sort.Strings(names)
	return names
}
