package server

import (
	"bufio"
	"errors"
	"fmt"
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
// The ops wire has no op for are the codec's own (request.own): multiRead,
// checkWatches and getEphemerals (which ZooKeeper lets take any prefix, not
// only a valid path). They are answered in order like reads, under the
// fsm's read lock. A failed auth closes the connection, as ZooKeeper does.

// zkCodec is the ZooKeeper codec of one connection.
type zkCodec struct {
	c *conn
	// readOnly is set when the client sent the readOnly flag in its
	// ConnectRequest: the ConnectResponse then carries one too.
	readOnly bool
}

func newZKCodec(c *conn) codec { return &zkCodec{c: c} }

// zkRequest is what the codec keeps of a request to answer it in
// ZooKeeper's terms: the request as decoded, and the answers of its own ops
// that wire.Reply has no field for.
type zkRequest struct {
	zr      zkwire.Request
	results []zkwire.OpResult // multiRead
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
		z.c.srv.limits.handshakes.done(z.c.nc) // the word is all such a client says
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
	case zkwire.OpGetACL:
		req.Op, req.Path = wire.OpGetACL, zr.Path
	case zkwire.OpSetACL:
		// An empty list is refused by the pipeline's ACL check.
		req.Op, req.Path, req.Version, req.ACL = wire.OpSetACL, zr.Path, zr.Version, fromZKACL(zr.ACL)
	case zkwire.OpAuth:
		req.Op, req.AuthScheme, req.AuthData = wire.OpAuth, zr.Scheme, zr.Auth
		r.endOnAuthFailure = true
	case zkwire.OpWhoAmI:
		req.Op = wire.OpWhoAmI
	case zkwire.OpCheckWatches:
		r.own = true
		return z.c.checkPath(zr.Path, false)
	case zkwire.OpGetEphemerals:
		r.own = true
		return z.c.checkPathLength(zr.Path, false) // any string prefix, but not any length
	case zkwire.OpReconfig:
		// Off for every client, admins too. Were it on, it would take
		// mayChangeMembers's rule after this answer, as ZooKeeper checks
		// reconfigEnabled before the caller's rights.
		return wire.Errorf(codeReconfigDisabled, "dynamic reconfiguration is off: members change with arbor member")
	default: // sasl
		return wire.Errorf(wire.CodeUnimplemented, "%s is not supported", zr.Op)
	}
	return nil
}

// mapCreate maps a create, create2, createContainer or createTTL.
// ZooKeeper's create flags are its create modes, which are wire's. A
// ZooKeeper client always sends an ACL: an empty one is InvalidACL there
// (where Arbor's protocol takes it for the server's default).
func mapCreate(zr *zkwire.Request, req *wire.Request) error {
	if len(zr.ACL) == 0 {
		return wire.Errorf(wire.CodeInvalidACL, "a create with an empty ACL")
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
	req.Op, req.Path, req.Data, req.Mode, req.TTL, req.ACL = wire.OpCreate, zr.Path, zr.Data, mode, zr.TTL, fromZKACL(zr.ACL)
	return nil
}

func fromZKACL(acl []zkwire.ACL) []wire.ACL {
	if len(acl) == 0 {
		return nil
	}
	out := make([]wire.ACL, len(acl))
	for i, a := range acl {
		out[i] = wire.ACL{Perms: wire.Perms(a.Perms), Scheme: a.ID.Scheme, ID: a.ID.ID}
	}
	return out
}

func toZKACL(acl []wire.ACL) []zkwire.ACL {
	out := make([]zkwire.ACL, len(acl))
	for i, a := range acl {
		out[i] = zkwire.ACL{Perms: int32(a.Perms), ID: zkwire.ID{Scheme: a.Scheme, ID: a.ID}}
	}
	return out
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

// answer answers the codec's own ops; the caller holds the fsm's read
// lock.
func (z *zkCodec) answer(t *tree.Tree, r *request, reply wire.Reply) wire.Reply {
	zr := r.ext.(*zkRequest)
	req := &zr.zr
	var err error
	switch req.Op {
	case zkwire.OpMultiRead:
		zr.results = z.multiRead(t, req.Ops)
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
		if err := z.c.checkPaths(&sub); err != nil {
			sr.Err = wire.CodeOf(err) // this read fails, as a bad path does
		} else {
			z.c.srv.read(t, z.c, &sub, &sr)
		}
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
		out.ACL, out.Stat = toZKACL(reply.ACL), reply.Stat
	case zkwire.OpGetData:
		out.Data, out.Stat = reply.Data, reply.Stat
	case zkwire.OpGetChildren, zkwire.OpGetChildren2, zkwire.OpGetEphemerals:
		out.Children, out.Stat = reply.Children, reply.Stat
	case zkwire.OpGetAllChildrenNumber:
		out.Number = reply.Descendants
	case zkwire.OpWhoAmI:
		for _, id := range reply.Identities {
			out.Clients = append(out.Clients, zkwire.ClientInfo{AuthScheme: id.Scheme, User: id.ID})
		}
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
