package zkwire

import (
	"strings"

	"github.com/arbor-coord/arbor/wire"
)

// The translation between ZooKeeper's requests and replies and Arbor's
// (package wire), which a server runs through one pipeline whichever
// protocol a client speaks. ZooKeeper's op codes, error codes, create modes,
// permissions and Stat are Arbor's where the meaning is the same, so most of
// it is a copy; what differs is here, in one place:
//
//   - a ZooKeeper create always carries an ACL, and an empty one is
//     InvalidACL (Arbor's protocol takes it for the server's default);
//   - create, create2, createContainer and createTTL are one Arbor create,
//     and each is answered in its own shape, in a multi too;
//   - a failed multi is answered ZooKeeper's way (header error 0, an error
//     result per op);
//   - getEphemerals takes any string as its prefix, an empty one (or "/")
//     meaning every ephemeral of the session;
//   - multiRead and checkWatches have no op in wire: multiRead maps to its
//     reads, checkWatches to a removeWatches (see RequestToWire);
//   - Arbor's own error codes become the ZooKeeper code nearest in meaning;
//   - a refused session is answered with a zeroed ConnectResponse, or not at
//     all.

// ZooKeeper's answers to a reconfig it does not make.
const (
	// CodeReconfigDisabled is ZRECONFIGDISABLED: dynamic reconfiguration
	// is off (arbord --reconfig-enabled turns it on).
	CodeReconfigDisabled wire.Code = -123
	// CodeNewConfigNoQuorum is ZNEWCONFIGNOQUORUM: the voters of the new
	// configuration could not form a quorum that is connected and caught
	// up with the leader.
	CodeNewConfigNoQuorum wire.Code = -13
	// CodeReconfigInProgress is ZRECONFIGINPROGRESS: another change of
	// the members is under way.
	CodeReconfigInProgress wire.Code = -14
)

// ConnectRequestToWire maps a ZooKeeper handshake onto Arbor's. The
// readOnly flag has no counterpart: the caller keeps HasReadOnly to answer
// in kind (ConnectResponseFromWire).
func ConnectRequestToWire(m *ConnectRequest) wire.ConnectRequest {
	return wire.ConnectRequest{
		ProtocolVersion: m.ProtocolVersion, LastZxidSeen: m.LastZxidSeen,
		TimeoutMs: m.TimeOut, SessionID: m.SessionID, Password: m.Passwd,
	}
}

// ConnectResponseFromWire maps the answer to a handshake, with the
// readOnly flag if the client sent one (hasReadOnly). It reports false when
// ZooKeeper would close the connection without a word, so that the client
// tries another server: no quorum, a client ahead of this server, too many
// connections, shutting down. An unknown session and a wrong password are
// answered with a zero timeout, session id and password: the client reports
// its session expired.
func ConnectResponseFromWire(resp *wire.ConnectResponse, hasReadOnly bool) (ConnectResponse, bool) {
	m := ConnectResponse{ProtocolVersion: ProtocolVersion, HasReadOnly: hasReadOnly}
	switch resp.Err {
	case wire.CodeOK:
		m.TimeOut, m.SessionID, m.Passwd = resp.TimeoutMs, resp.SessionID, resp.Password
	case wire.CodeSessionExpired, wire.CodeBadPassword:
		m.Passwd = make([]byte, PasswordSize)
	default:
		return m, false
	}
	return m, true
}

// RequestToWire maps zr, a decoded ZooKeeper request, onto req. An error (a
// *wire.Error) refuses the request, to be answered in order with its code;
// req may then be partly filled in.
//
// wire has no op for three of ZooKeeper's, which the caller tells by zr.Op:
// a multiRead leaves req.Op zero and its reads (getData and getChildren) in
// req.Ops, to be run one after the other, each answered on its own (see
// ReplyFromWire); a checkWatches becomes a removeWatches of the same path
// and watcher type, to be answered as one but without removing anything; a
// sasl becomes an auth with no scheme and the client's token in AuthData,
// to be answered with the server's token in the reply's Data.
func RequestToWire(zr *Request, req *wire.Request) error {
	switch zr.Op {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
		return createToWire(zr, req)
	case OpDelete, OpCheck, OpSetData:
		writeToWire(zr, req)
	case OpExists:
		req.Op, req.Path, req.Watch = wire.OpExists, zr.Path, zr.Watch
	case OpGetData:
		req.Op, req.Path, req.Watch = wire.OpGetData, zr.Path, zr.Watch
	case OpGetChildren, OpGetChildren2:
		req.Op, req.Path, req.Watch = wire.OpGetChildren, zr.Path, zr.Watch
	case OpSync:
		req.Op, req.Path = wire.OpSync, zr.Path
	case OpGetAllChildrenNumber:
		req.Op, req.Path = wire.OpGetAllChildrenNumber, zr.Path
	case OpGetEphemerals:
		req.Op, req.Path = wire.OpGetEphemerals, ephemeralsPrefix(zr.Path)
	case OpPing:
		req.Op = wire.OpPing
	case OpCloseSession:
		req.Op = wire.OpClose
	case OpMulti:
		return multiToWire(zr, req)
	case OpMultiRead:
		return multiReadToWire(zr, req)
	case OpSetWatches, OpSetWatches2:
		req.Op = wire.OpSetWatches
		if zr.Op == OpSetWatches2 {
			req.Op = wire.OpSetWatches2
		}
		req.RelativeZxid, req.DataWatches, req.ExistWatches, req.ChildWatches = zr.RelativeZxid, zr.DataWatches, zr.ExistWatches, zr.ChildWatches
		req.PersistentWatches, req.RecursiveWatches = zr.PersistentWatches, zr.PersistentRecursiveWatches
	case OpAddWatch:
		req.Op, req.Path, req.AddWatchMode = wire.OpAddWatch, zr.Path, wire.AddWatchMode(zr.Mode)
	case OpRemoveWatches, OpCheckWatches:
		req.Op, req.Path, req.WatcherType = wire.OpRemoveWatches, zr.Path, wire.WatcherType(zr.WatcherType)
	case OpGetACL:
		req.Op, req.Path = wire.OpGetACL, zr.Path
	case OpSetACL:
		// An empty list is refused by the server's ACL check, as any
		// ACL that grants nothing.
		req.Op, req.Path, req.Version, req.ACL = wire.OpSetACL, zr.Path, zr.Version, ACLToWire(zr.ACL)
	case OpAuth:
		req.Op, req.AuthScheme, req.AuthData = wire.OpAuth, zr.Scheme, zr.Auth
	case OpSASL:
		// An auth of no scheme carrying the token: the caller runs it as
		// a step of the connection's SASL login, telling it from an auth
		// packet by zr.Op.
		req.Op, req.AuthData = wire.OpAuth, zr.Data
	case OpWhoAmI:
		req.Op = wire.OpWhoAmI
	case OpReconfig:
		// The server decides whether reconfiguration is enabled, before
		// the caller's rights, as ZooKeeper does.
		rc := zr.Reconfig
		if rc == nil {
			rc = &ReconfigRequest{}
		}
		req.Op, req.Reconfig = wire.OpReconfig, wire.Reconfig{
			Joining: rc.JoiningServers, Leaving: rc.LeavingServers, NewMembers: rc.NewMembers, FromConfig: rc.CurConfigID,
		}
	default:
		return wire.Errorf(wire.CodeUnimplemented, "%s is not supported", zr.Op)
	}
	return nil
}

// createToWire maps a create, create2, createContainer or createTTL.
// ZooKeeper's create flags are its create modes, which are wire's; each of
// the four ops takes only its own modes.
func createToWire(zr *Request, req *wire.Request) error {
	if len(zr.ACL) == 0 {
		return wire.Errorf(wire.CodeInvalidACL, "a create with an empty ACL")
	}
	mode := wire.CreateMode(zr.Flags)
	switch {
	case zr.Op == OpCreateContainer && !mode.IsContainer():
		return wire.Errorf(wire.CodeBadArguments, "createContainer takes the container mode, not %s", mode)
	case zr.Op == OpCreateTTL && !mode.IsTTL():
		return wire.Errorf(wire.CodeBadArguments, "createTTL takes a TTL mode, not %s", mode)
	case zr.Op != OpCreateTTL && mode.IsTTL():
		return wire.Errorf(wire.CodeBadArguments, "a %s node is made with createTTL", mode)
	}
	req.Op, req.Path, req.Data, req.Mode, req.TTL, req.ACL = wire.OpCreate, zr.Path, zr.Data, mode, zr.TTL, ACLToWire(zr.ACL)
	return nil
}

// writeToWire maps a delete, check or setData.
func writeToWire(zr *Request, req *wire.Request) {
	switch zr.Op {
	case OpDelete:
		req.Op = wire.OpDelete
	case OpCheck:
		req.Op = wire.OpCheck
	case OpSetData:
		req.Op, req.Data = wire.OpSetData, zr.Data
	}
	req.Path, req.Version = zr.Path, zr.Version
}

// multiToWire maps a multi of creates, deletes, setData and checks.
func multiToWire(zr *Request, req *wire.Request) error {
	req.Op = wire.OpMulti
	req.Ops = make([]wire.Request, len(zr.Ops))
	for i := range zr.Ops {
		sub := &zr.Ops[i]
		switch sub.Op {
		case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
			if err := createToWire(sub, &req.Ops[i]); err != nil {
				return err
			}
		case OpDelete, OpCheck, OpSetData:
			writeToWire(sub, &req.Ops[i])
		default:
			return wire.Errorf(wire.CodeBadArguments, "%s cannot be in a multi: reads go in a multiRead", sub.Op)
		}
	}
	return nil
}

// multiReadToWire puts a multiRead's reads in req.Ops, leaving req.Op zero.
func multiReadToWire(zr *Request, req *wire.Request) error {
	for _, sub := range zr.Ops {
		if sub.Op != OpGetData && sub.Op != OpGetChildren {
			return wire.Errorf(wire.CodeBadArguments, "%s cannot be in a multiRead: writes go in a multi", sub.Op)
		}
	}
	req.Ops = make([]wire.Request, len(zr.Ops))
	for i, sub := range zr.Ops {
		op := wire.OpGetData
		if sub.Op == OpGetChildren {
			op = wire.OpGetChildren
		}
		req.Ops[i] = wire.Request{Op: op, Path: sub.Path, Watch: sub.Watch}
	}
	return nil
}

// ephemeralsPrefix is the prefix getEphemerals matches for ZooKeeper's
// prefix p: p itself, a string and not necessarily a path ("/app/" and
// "/app/lock-" are both fine); but a p that is empty or "/" once spaces are
// trimmed means every ephemeral of the session, which is "/".
func ephemeralsPrefix(p string) string {
	if t := strings.TrimSpace(p); t == "" || t == "/" {
		return "/"
	}
	return p
}

// ReplyFromWire gives reply, the answer to zr, ZooKeeper's shape: the
// fields zr.Op's response record carries. reads are the answers to a
// multiRead's reads, in order (nil for any other op). Of zr it reads only
// Op and the Ops of a multi or multiRead (the server keeps no more of a
// request for its reply).
func ReplyFromWire(zr *Request, reply *wire.Reply, reads []wire.Reply) Reply {
	out := Reply{Xid: reply.Xid, Zxid: reply.Zxid, Err: CodeFromWire(reply.Err)}
	switch zr.Op {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
		out.Path, out.Stat = reply.Path, reply.Stat
	case OpSync:
		out.Path = reply.Path
	case OpExists, OpSetData, OpSetACL:
		out.Stat = reply.Stat
	case OpGetACL:
		out.ACL, out.Stat = ACLFromWire(reply.ACL), reply.Stat
	case OpGetData, OpReconfig:
		out.Data, out.Stat = reply.Data, reply.Stat
	case OpGetChildren, OpGetChildren2, OpGetEphemerals:
		out.Children, out.Stat = reply.Children, reply.Stat
	case OpGetAllChildrenNumber:
		out.Number = reply.Descendants
	case OpSASL:
		out.Data = reply.Data
	case OpWhoAmI:
		for _, id := range reply.Identities {
			out.Clients = append(out.Clients, ClientInfo{AuthScheme: id.Scheme, User: id.ID})
		}
	case OpMultiRead:
		out.Results = readResults(zr.Ops, reads)
	case OpMulti:
		multiResults(&out, zr, reply)
	}
	return out
}

// readResults gives a multiRead's answers: a getData or getChildren result
// for each read that succeeded, an error result for each that failed.
func readResults(ops []Request, reads []wire.Reply) []OpResult {
	results := make([]OpResult, 0, len(reads))
	for i := range reads {
		sr := &reads[i]
		switch {
		case sr.Err != wire.CodeOK:
			results = append(results, OpResult{Op: OpError, Err: CodeFromWire(sr.Err)})
		case i < len(ops) && ops[i].Op == OpGetData:
			results = append(results, OpResult{Op: OpGetData, Data: sr.Data, Stat: sr.Stat})
		default:
			results = append(results, OpResult{Op: OpGetChildren, Children: sr.Children})
		}
	}
	return results
}

// multiResults gives a multi's reply ZooKeeper's shape. A multi that ran
// and failed has header error 0 and a result of type error per op: 0 for
// those before the one that failed, its code for it, RuntimeInconsistency
// after. A multi refused before it ran (a bad ACL, no quorum) has its code
// in the header and no results.
func multiResults(out *Reply, zr *Request, reply *wire.Reply) {
	if reply.Err != wire.CodeOK {
		if len(reply.Results) == 0 {
			return
		}
		out.Err = 0
		for _, res := range reply.Results {
			out.Results = append(out.Results, OpResult{Op: OpError, Err: CodeFromWire(res.Err)})
		}
		return
	}
	for i, res := range reply.Results {
		switch res.Op {
		case wire.OpCreate:
			// ZooKeeper answers a create or create2 in a multi with the
			// path alone, a createContainer or createTTL with the path and
			// the Stat (a create2 result).
			if i < len(zr.Ops) && (zr.Ops[i].Op == OpCreate || zr.Ops[i].Op == OpCreate2) {
				out.Results = append(out.Results, OpResult{Op: OpCreate, Path: res.Path})
			} else {
				out.Results = append(out.Results, OpResult{Op: OpCreate2, Path: res.Path, Stat: res.Stat})
			}
		case wire.OpSetData:
			out.Results = append(out.Results, OpResult{Op: OpSetData, Stat: res.Stat})
		case wire.OpDelete:
			out.Results = append(out.Results, OpResult{Op: OpDelete})
		case wire.OpCheck:
			out.Results = append(out.Results, OpResult{Op: OpCheck})
		}
	}
}

// NotificationFromWire maps a watch event (a wire.Reply with Xid
// XidNotification) onto ZooKeeper's WatcherEvent. Event types and session
// states are ZooKeeper's in both; a ZooKeeper event carries no data or Stat.
func NotificationFromWire(n *wire.Reply) Reply {
	return Reply{
		Xid: XidNotification, Zxid: n.Zxid,
		EventType: int32(n.EventType), State: int32(n.State), Path: n.Path,
	}
}

// CodeFromWire maps an error code to ZooKeeper's: its own codes (0 to
// -127) are the same; Arbor's are mapped to the nearest ZooKeeper client
// behaviour, and any other to SystemError.
func CodeFromWire(c wire.Code) int32 {
	switch c {
	case wire.CodeDataTooLarge, wire.CodeCrossShard:
		return int32(wire.CodeBadArguments)
	case wire.CodeWrongShard:
		// Not applied, and to be sent again: what ZooKeeper's clients
		// retry.
		return int32(wire.CodeConnectionLoss)
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

// ACLToWire maps a ZooKeeper ACL onto wire's: the same permission bits,
// schemes and ids. An empty list is nil.
func ACLToWire(acl []ACL) []wire.ACL {
	if len(acl) == 0 {
		return nil
	}
	out := make([]wire.ACL, len(acl))
	for i, a := range acl {
		out[i] = wire.ACL{Perms: wire.Perms(a.Perms), Scheme: a.ID.Scheme, ID: a.ID.ID}
	}
	return out
}

// ACLFromWire maps a wire ACL onto ZooKeeper's.
func ACLFromWire(acl []wire.ACL) []ACL {
	out := make([]ACL, len(acl))
	for i, a := range acl {
		out[i] = ACL{Perms: int32(a.Perms), ID: ID{Scheme: a.Scheme, ID: a.ID}}
	}
	return out
}
