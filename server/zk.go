package server

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
	"go.uber.org/zap"
)

// ZooKeeper's client protocol is a second codec in front of the same
// pipeline (see codec): on the Config.ZKListen port, each connection is
// either a four-letter word (fourletter.go) or a ZooKeeper client, whose
// requests are decoded into wire.Request values, run through the reader,
// executor and responder like Arbor's own, and answered in jute. A session
// made by either protocol is the same kind of session.
//
// The ops wire has no op for are the codec's own (request.own): getACL,
// setACL, multiRead, auth, whoAmI, checkWatches and getEphemerals (which
// ZooKeeper lets take any prefix, not only a valid path). They are answered
// in order like reads, under the fsm's read lock.

// zkCodec is the ZooKeeper codec of one connection.
type zkCodec struct {
	c *conn
	// readOnly is set when the client sent the readOnly flag in its
	// ConnectRequest: the ConnectResponse then carries one too.
	readOnly bool
	// ids are the identities the client gave in auth packets, shown by
	// whoAmI after its ip. Only the responder goroutine touches them.
	ids []zkwire.ClientInfo
}

func newZKCodec(c *conn) codec { return &zkCodec{c: c} }

// zkRequest is what the codec keeps of a request to answer it in
// ZooKeeper's terms: the request as decoded, and the answers of its own ops
// that wire.Reply has no field for.
type zkRequest struct {
	zr      zkwire.Request
	clients []zkwire.ClientInfo // whoAmI
	results []zkwire.OpResult   // multiRead
}

// codeReconfigDisabled is ZooKeeper's ZRECONFIGDISABLED, its answer to
// reconfig when dynamic reconfiguration is off.
const codeReconfigDisabled wire.Code = -123

func (z *zkCodec) readConnect(br *bufio.Reader) (wire.ConnectRequest, bool) {
	var req wire.ConnectRequest
	head, err := br.Peek(4)
	if err != nil {
		z.c.log.Debug("handshake read failed", zap.Error(err))
		return req, false
	}
	// A ConnectRequest starts with its length, which is never four ASCII
	// letters' worth (over 1.6 GB): those are a four-letter word.
	if word := string(head); isFourLetterWord(word) {
		z.c.srv.fourLetter(z.c.nc, word)
		return req, false
	}
	body, err := wire.ReadFrame(br, nil, z.c.srv.cfg.MaxFrame)
	if err != nil {
		z.c.log.Debug("ZooKeeper handshake read failed", zap.Error(err))
		return req, false
	}
	var m zkwire.ConnectRequest
	if err := zkwire.DecodeConnectRequest(body, &m); err != nil {
		z.c.log.Info("closing connection: malformed ZooKeeper handshake", zap.Error(err))
		return req, false
	}
	z.readOnly = m.HasReadOnly
	return wire.ConnectRequest{
		ProtocolVersion: m.ProtocolVersion, LastZxidSeen: m.LastZxidSeen,
		TimeoutMs: m.TimeOut, SessionID: m.SessionID, Password: m.Passwd,
	}, true
}

func (z *zkCodec) appendConnectResponse(dst []byte, resp *wire.ConnectResponse) []byte {
	m := zkwire.ConnectResponse{ProtocolVersion: zkwire.ProtocolVersion, HasReadOnly: z.readOnly}
	switch resp.Err {
	case wire.CodeOK:
		m.TimeOut, m.SessionID, m.Passwd = resp.TimeoutMs, resp.SessionID, resp.Password
	case wire.CodeSessionExpired, wire.CodeBadPassword:
		// ZooKeeper answers an unknown session, and a wrong password,
		// with a zero timeout and session id: the client reports its
		// session expired.
		m.Passwd = make([]byte, zkwire.PasswordSize)
	default:
		// No quorum, a client ahead of this server, too many
		// connections, shutting down: ZooKeeper closes without a word
		// and the client tries another server.
		return dst
	}
	return zkwire.AppendConnectResponse(dst, &m)
}

func (z *zkCodec) decode(body []byte, r *request) error {
	if len(body) < zkwire.RequestHeaderSize {
		return fmt.Errorf("ZooKeeper request of %d bytes has no header", len(body))
	}
	zr := &zkRequest{}
	r.ext = zr
	err := zkwire.DecodeRequest(body, &zr.zr)
	r.req.Xid = zr.zr.Xid
	switch {
	case errors.Is(err, zkwire.ErrUnknownOp):
		r.err = wire.Errorf(wire.CodeUnimplemented, "unknown op %d", int32(zr.zr.Op))
	case err != nil:
		// ZooKeeper answers a record it cannot read with
		// MarshallingError and carries on; the framing is intact.
		r.err = wire.Errorf(wire.CodeMarshallingError, "%v", err)
	default:
		r.err = z.mapRequest(r, &zr.zr)
	}
	if errors.Is(r.err, wire.ErrInvalidACL) {
		z.c.log.Info("refusing a ZooKeeper request", zap.Stringer("op", zr.zr.Op), zap.Error(r.err))
	}
	return nil
}

// mapRequest turns a ZooKeeper request into the pipeline's, or marks it as
// one of the codec's own ops. An error refuses it (answered in order).
func (z *zkCodec) mapRequest(r *request, zr *zkwire.Request) error {
	req := &r.req
	switch zr.Op {
	case zkwire.OpCreate, zkwire.OpCreate2, zkwire.OpCreateContainer, zkwire.OpCreateTTL:
		return mapCreate(zr, req)
	case zkwire.OpDelete, zkwire.OpCheck, zkwire.OpSetData:
		mapWrite(zr, req)
	case zkwire.OpExists:
		req.Op, req.Path, req.Watch = wire.OpExists, zr.Path, zr.Watch
	case zkwire.OpGetData:
		req.Op, req.Path, req.Watch = wire.OpGetData, zr.Path, zr.Watch
	case zkwire.OpGetChildren, zkwire.OpGetChildren2:
		req.Op, req.Path, req.Watch = wire.OpGetChildren, zr.Path, zr.Watch
	case zkwire.OpSync:
		req.Op, req.Path = wire.OpSync, zr.Path
	case zkwire.OpGetAllChildrenNumber:
		req.Op, req.Path = wire.OpGetAllChildrenNumber, zr.Path
	case zkwire.OpPing:
		req.Op = wire.OpPing
	case zkwire.OpCloseSession:
		req.Op = wire.OpClose
	case zkwire.OpMulti:
		req.Op = wire.OpMulti
		req.Ops = make([]wire.Request, len(zr.Ops))
		for i := range zr.Ops {
			sub := &zr.Ops[i]
			switch sub.Op {
			case zkwire.OpCreate, zkwire.OpCreate2, zkwire.OpCreateContainer, zkwire.OpCreateTTL:
				if err := mapCreate(sub, &req.Ops[i]); err != nil {
					return err
				}
			case zkwire.OpDelete, zkwire.OpCheck, zkwire.OpSetData:
				mapWrite(sub, &req.Ops[i])
			default:
				return wire.Errorf(wire.CodeBadArguments, "%s cannot be in a multi: reads go in a multiRead", sub.Op)
			}
		}
	case zkwire.OpSetWatches, zkwire.OpSetWatches2:
		req.Op = wire.OpSetWatches
		if zr.Op == zkwire.OpSetWatches2 {
			req.Op = wire.OpSetWatches2
		}
		req.RelativeZxid, req.DataWatches, req.ExistWatches, req.ChildWatches = zr.RelativeZxid, zr.DataWatches, zr.ExistWatches, zr.ChildWatches
		req.PersistentWatches, req.RecursiveWatches = zr.PersistentWatches, zr.PersistentRecursiveWatches
	case zkwire.OpAddWatch:
		req.Op, req.Path, req.AddWatchMode = wire.OpAddWatch, zr.Path, wire.AddWatchMode(zr.Mode)
	case zkwire.OpRemoveWatches:
		req.Op, req.Path, req.WatcherType = wire.OpRemoveWatches, zr.Path, wire.WatcherType(zr.WatcherType)
	case zkwire.OpMultiRead:
		for _, sub := range zr.Ops {
			if sub.Op != zkwire.OpGetData && sub.Op != zkwire.OpGetChildren {
				return wire.Errorf(wire.CodeBadArguments, "%s cannot be in a multiRead: writes go in a multi", sub.Op)
			}
		}
		r.own = true
	case zkwire.OpGetACL, zkwire.OpSetACL, zkwire.OpAuth, zkwire.OpWhoAmI, zkwire.OpCheckWatches, zkwire.OpGetEphemerals:
		r.own = true
	case zkwire.OpReconfig:
		return wire.Errorf(codeReconfigDisabled, "dynamic reconfiguration is off: members change with arbor member")
	default: // sasl
		return wire.Errorf(wire.CodeUnimplemented, "%s is not supported", zr.Op)
	}
	return nil
}

// mapCreate maps a create, create2, createContainer or createTTL, and
// refuses an ACL Arbor cannot honour. ZooKeeper's create flags are its
// create modes, which are wire's.
func mapCreate(zr *zkwire.Request, req *wire.Request) error {
	if err := checkACL(zr.ACL); err != nil {
		return err
	}
	mode := wire.CreateMode(zr.Flags)
	switch {
	case zr.Op == zkwire.OpCreateContainer && !mode.IsContainer():
		return wire.Errorf(wire.CodeBadArguments, "createContainer takes the container mode, not %s", mode)
	case zr.Op == zkwire.OpCreateTTL && !mode.IsTTL():
		return wire.Errorf(wire.CodeBadArguments, "createTTL takes a TTL mode, not %s", mode)
	case zr.Op != zkwire.OpCreateTTL && mode.IsTTL():
		return wire.Errorf(wire.CodeBadArguments, "a %s node is made with createTTL", mode)
	}
	req.Op, req.Path, req.Data, req.Mode, req.TTL = wire.OpCreate, zr.Path, zr.Data, mode, zr.TTL
	return nil
}

// mapWrite maps a delete, check or setData.
func mapWrite(zr *zkwire.Request, req *wire.Request) {
	switch zr.Op {
	case zkwire.OpDelete:
		req.Op = wire.OpDelete
	case zkwire.OpCheck:
		req.Op = wire.OpCheck
	case zkwire.OpSetData:
		req.Op, req.Data = wire.OpSetData, zr.Data
	}
	req.Path, req.Version = zr.Path, zr.Version
}

// checkACL refuses any ACL but world:anyone with every permission. Arbor
// has no ACLs yet: every node is open to every client, and a request that
// asks for less is refused rather than silently given more.
func checkACL(acl []zkwire.ACL) error {
	if len(acl) == 0 {
		return wire.Errorf(wire.CodeInvalidACL, "an empty ACL")
	}
	for _, a := range acl {
		if a.ID != zkwire.Anyone || a.Perms != zkwire.PermAll {
			return wire.Errorf(wire.CodeInvalidACL, "ACL %s:%s with permissions %#x: Arbor has no ACLs yet and takes only world:anyone with every permission (cdrwa)",
				a.ID.Scheme, a.ID.ID, a.Perms)
		}
	}
	return nil
}

// answer answers the codec's own ops; the caller holds the fsm's read
// lock.
func (z *zkCodec) answer(t *tree.Tree, r *request, reply wire.Reply) wire.Reply {
	zr := r.ext.(*zkRequest)
	req := &zr.zr
	var err error
	switch req.Op {
	case zkwire.OpGetACL:
		reply.Stat, err = t.Exists(req.Path)
	case zkwire.OpSetACL:
		// The only ACL taken is the one every node has: setting it again
		// checks the version and changes nothing (aversion stays).
		if err = checkACL(req.ACL); err != nil {
			z.c.log.Info("refusing a ZooKeeper request", zap.Stringer("op", req.Op), zap.Error(err))
			break
		}
		if reply.Stat, err = t.Exists(req.Path); err == nil && req.Version != -1 && req.Version != reply.Stat.Aversion {
			err = wire.ErrBadVersion
		}
	case zkwire.OpMultiRead:
		zr.results = z.multiRead(t, req.Ops)
	case zkwire.OpAuth:
		if err = z.auth(req.Scheme, req.Auth); err != nil {
			// ZooKeeper closes the connection after a failed auth.
			z.c.log.Info("refusing a ZooKeeper auth packet", zap.String("scheme", req.Scheme), zap.Error(err))
			r.endConn = true
		}
	case zkwire.OpWhoAmI:
		zr.clients = append([]zkwire.ClientInfo{{AuthScheme: "ip", User: remoteIP(z.c.nc.RemoteAddr())}}, z.ids...)
	case zkwire.OpCheckWatches:
		switch typ := wire.WatcherType(req.WatcherType); {
		case typ < wire.WatcherChildren || typ > wire.WatcherPersistentRecursive:
			err = wire.Errorf(wire.CodeBadArguments, "unknown watcher type %d", typ)
		case !z.c.srv.watches.has(typ, req.Path, z.c):
			err = wire.ErrNoWatcher
		}
	case zkwire.OpGetEphemerals:
		// ZooKeeper matches any string prefix; an empty one, or "/",
		// means every ephemeral of the session.
		prefix := req.Path
		if p := strings.TrimSpace(prefix); p == "" || p == "/" {
			prefix = "/"
		}
		reply.Children = t.EphemeralsWithPrefix(z.c.session, prefix)
		if err = z.c.srv.checkListing(z.c, reply.Children); err != nil {
			reply.Children = nil
		}
	}
	reply.Err = wire.CodeOf(err)
	return reply
}

// multiRead runs a multiRead's reads one after the other, each as the
// pipeline runs it (a watch included), under one read lock: no change comes
// between them. A read that fails gives an error result and the others
// carry on, as in ZooKeeper.
func (z *zkCodec) multiRead(t *tree.Tree, ops []zkwire.Request) []zkwire.OpResult {
	results := make([]zkwire.OpResult, 0, len(ops))
	for _, op := range ops {
		sub := wire.Request{Op: wire.OpGetData, Path: op.Path, Watch: op.Watch}
		if op.Op == zkwire.OpGetChildren {
			sub.Op = wire.OpGetChildren
		}
		var sr wire.Reply
		z.c.srv.read(t, z.c, &sub, &sr)
		switch {
		case sr.Err != wire.CodeOK:
			results = append(results, zkwire.OpResult{Op: zkwire.OpError, Err: zkCode(sr.Err)})
		case op.Op == zkwire.OpGetData:
			results = append(results, zkwire.OpResult{Op: zkwire.OpGetData, Data: sr.Data, Stat: sr.Stat})
		default:
			results = append(results, zkwire.OpResult{Op: zkwire.OpGetChildren, Children: sr.Children})
		}
	}
	return results
}

// auth takes an auth packet. A digest ("user:password") is accepted, as
// ZooKeeper's digest provider accepts every one (it only records an
// identity for ACLs to match), and its user is shown by whoAmI; it grants
// nothing, as there are no ACLs yet. ip is accepted too: the connection
// has its ip identity already. Any other scheme fails with AuthFailed, and
// the connection is closed, as ZooKeeper does for a scheme it has no
// provider for.
func (z *zkCodec) auth(scheme string, cred []byte) error {
	switch scheme {
	case "digest":
		user, _, ok := strings.Cut(string(cred), ":")
		if !ok || user == "" {
			return wire.Errorf(wire.CodeAuthFailed, "digest auth takes user:password")
		}
		id := zkwire.ClientInfo{AuthScheme: "digest", User: user}
		if !slices.Contains(z.ids, id) {
			z.ids = append(z.ids, id)
		}
		return nil
	case "ip":
		return nil
	}
	return wire.Errorf(wire.CodeAuthFailed, "auth scheme %q is not supported (digest and ip are)", scheme)
}

// remoteIP is the address part of addr, ZooKeeper's ip identity.
func remoteIP(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// opName names a request by the pipeline op it became, or by its
// ZooKeeper op when it became none (the codec's own, or one refused before
// mapping); all unknown ops share one name, so that a client cannot grow
// the metrics' label set without bound.
func (z *zkCodec) opName(r *request) string {
	if r.req.Op != 0 {
		return r.req.Op.String()
	}
	if op := r.ext.(*zkRequest).zr.Op; op.Known() {
		return op.String()
	}
	return "unknown"
}

func (z *zkCodec) appendReply(dst []byte, r *request, reply wire.Reply) []byte {
	switch {
	case reply.Xid == wire.XidClosing:
		return dst // ZooKeeper has no closing frame: the connection just closes
	case r == nil:
		return zkwire.AppendReply(dst, zkwire.OpNotification, &zkwire.Reply{
			Xid: zkwire.XidNotification, Zxid: reply.Zxid,
			EventType: int32(reply.EventType), State: int32(reply.State), Path: reply.Path,
		})
	}
	zr := r.ext.(*zkRequest)
	out := zkwire.Reply{Xid: reply.Xid, Zxid: reply.Zxid, Err: zkCode(reply.Err)}
	switch zr.zr.Op {
	case zkwire.OpCreate, zkwire.OpCreate2, zkwire.OpCreateContainer, zkwire.OpCreateTTL:
		out.Path, out.Stat = reply.Path, reply.Stat
	case zkwire.OpSync:
		out.Path = reply.Path
	case zkwire.OpExists, zkwire.OpSetData, zkwire.OpSetACL:
		out.Stat = reply.Stat
	case zkwire.OpGetACL:
		out.ACL, out.Stat = zkwire.OpenACL, reply.Stat
	case zkwire.OpGetData:
		out.Data, out.Stat = reply.Data, reply.Stat
	case zkwire.OpGetChildren, zkwire.OpGetChildren2, zkwire.OpGetEphemerals:
		out.Children, out.Stat = reply.Children, reply.Stat
	case zkwire.OpGetAllChildrenNumber:
		out.Number = reply.Descendants
	case zkwire.OpWhoAmI:
		out.Clients = zr.clients
	case zkwire.OpMultiRead:
		out.Results = zr.results
	case zkwire.OpMulti:
		multiResults(&out, &zr.zr, &reply)
	}
	return zkwire.AppendReply(dst, zr.zr.Op, &out)
}

// multiResults gives a multi's reply ZooKeeper's shape. A multi that ran
// and failed has header error 0 and a result of type error per op: 0 for
// those before the one that failed, its code for it, RuntimeInconsistency
// after. A multi refused before it ran (a bad ACL, no quorum) has its code
// in the header and no results.
func multiResults(out *zkwire.Reply, zr *zkwire.Request, reply *wire.Reply) {
	if reply.Err != wire.CodeOK {
		if len(reply.Results) == 0 {
			return
		}
		out.Err = 0
		for _, res := range reply.Results {
			out.Results = append(out.Results, zkwire.OpResult{Op: zkwire.OpError, Err: zkCode(res.Err)})
		}
		return
	}
	for i, res := range reply.Results {
		switch res.Op {
		case wire.OpCreate:
			// ZooKeeper answers a create or create2 in a multi with the
			// path alone, a createContainer or createTTL with the path and
			// the Stat (a create2 result).
			if i < len(zr.Ops) && (zr.Ops[i].Op == zkwire.OpCreate || zr.Ops[i].Op == zkwire.OpCreate2) {
				out.Results = append(out.Results, zkwire.OpResult{Op: zkwire.OpCreate, Path: res.Path})
			} else {
				out.Results = append(out.Results, zkwire.OpResult{Op: zkwire.OpCreate2, Path: res.Path, Stat: res.Stat})
			}
		case wire.OpSetData:
			out.Results = append(out.Results, zkwire.OpResult{Op: zkwire.OpSetData, Stat: res.Stat})
		case wire.OpDelete:
			out.Results = append(out.Results, zkwire.OpResult{Op: zkwire.OpDelete})
		case wire.OpCheck:
			out.Results = append(out.Results, zkwire.OpResult{Op: zkwire.OpCheck})
		}
	}
}

// zkCode maps an error code to ZooKeeper's: its own codes (0 to -127) are
// the same; Arbor's are mapped to the nearest ZooKeeper client behaviour.
func zkCode(c wire.Code) int32 {
	switch c {
	case wire.CodeDataTooLarge:
		return int32(wire.CodeBadArguments)
	case wire.CodeMalformed, wire.CodeFrameTooLarge:
		return int32(wire.CodeMarshallingError)
	case wire.CodeNoQuorum, wire.CodeShuttingDown, wire.CodeNotCaughtUp, wire.CodeTooManyConnections:
		// ZooKeeper's client sees these as a lost connection.
		return int32(wire.CodeConnectionLoss)
	case wire.CodeBadPassword:
		return int32(wire.CodeAuthFailed)
	}
	if c >= -127 {
		return int32(c)
	}
	return int32(wire.CodeSystemError)
}
