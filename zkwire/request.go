package zkwire

import "fmt"

// Request is a request frame: the RequestHeader (Xid, Op) and the op's
// record. Which fields travel depends on Op; the others are zero after
// decoding.
type Request struct {
	Xid int32
	Op  Op

	Path    string // getEphemerals: the prefix
	Data    []byte // create, create2, createContainer, createTTL, setData; sasl: the token
	ACL     []ACL  // the creates, setACL
	Flags   int32  // the creates: the CreateMode
	TTL     int64  // createTTL, ms
	Version int32  // delete, setData, setACL, check
	Watch   bool   // exists, getData, getChildren, getChildren2

	// Ops are multi's or multiRead's sub-requests, each with its Op and
	// fields (and no Xid).
	Ops []Request

	// setWatches and setWatches2 (the last two lists only in setWatches2).
	RelativeZxid               int64
	DataWatches                []string
	ExistWatches               []string
	ChildWatches               []string
	PersistentWatches          []string
	PersistentRecursiveWatches []string

	Mode        int32 // addWatch: persistent 0, persistent-recursive 1
	WatcherType int32 // checkWatches, removeWatches: children 1, data 2, any 3, persistent 4, persistent-recursive 5

	// auth: the AuthPacket.
	AuthType int32
	Scheme   string
	Auth     []byte

	Reconfig *ReconfigRequest // reconfig
}

// ReconfigRequest is reconfig's record.
type ReconfigRequest struct {
	JoiningServers string
	LeavingServers string
	NewMembers     string
	CurConfigID    int64
}

// RequestHeaderSize is the length of a RequestHeader: a body shorter than
// this is no request at all.
const RequestHeaderSize = 8

// AppendRequest appends r as a frame to dst.
func AppendRequest(dst []byte, r *Request) []byte {
	dst, start := beginFrame(dst)
	dst = appendInt(dst, r.Xid)
	dst = appendInt(dst, int32(r.Op))
	dst = appendRequestBody(dst, r)
	return endFrame(dst, start)
}

func appendRequestBody(b []byte, r *Request) []byte {
	switch r.Op {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
		b = appendString(b, r.Path)
		b = appendBuffer(b, r.Data)
		b = appendACLs(b, r.ACL)
		b = appendInt(b, r.Flags)
		if r.Op == OpCreateTTL {
			b = appendLong(b, r.TTL)
		}
	case OpDelete, OpCheck:
		b = appendString(b, r.Path)
		b = appendInt(b, r.Version)
	case OpExists, OpGetData, OpGetChildren, OpGetChildren2:
		b = appendString(b, r.Path)
		b = appendBool(b, r.Watch)
	case OpSetData:
		b = appendString(b, r.Path)
		b = appendBuffer(b, r.Data)
		b = appendInt(b, r.Version)
	case OpGetACL, OpSync, OpGetEphemerals, OpGetAllChildrenNumber:
		b = appendString(b, r.Path)
	case OpSetACL:
		b = appendString(b, r.Path)
		b = appendACLs(b, r.ACL)
		b = appendInt(b, r.Version)
	case OpMulti, OpMultiRead:
		for i := range r.Ops {
			op := &r.Ops[i]
			b = appendMultiHeader(b, MultiHeader{Type: op.Op, Done: false, Err: -1})
			b = appendRequestBody(b, op)
		}
		b = appendMultiHeader(b, doneHeader)
	case OpSetWatches, OpSetWatches2:
		b = appendLong(b, r.RelativeZxid)
		b = appendStrings(b, r.DataWatches)
		b = appendStrings(b, r.ExistWatches)
		b = appendStrings(b, r.ChildWatches)
		if r.Op == OpSetWatches2 {
			b = appendStrings(b, r.PersistentWatches)
			b = appendStrings(b, r.PersistentRecursiveWatches)
		}
	case OpAddWatch:
		b = appendString(b, r.Path)
		b = appendInt(b, r.Mode)
	case OpCheckWatches, OpRemoveWatches:
		b = appendString(b, r.Path)
		b = appendInt(b, r.WatcherType)
	case OpAuth:
		b = appendInt(b, r.AuthType)
		b = appendString(b, r.Scheme)
		b = appendBuffer(b, r.Auth)
	case OpSASL:
		b = appendBuffer(b, r.Data)
	case OpReconfig:
		rc := r.Reconfig
		if rc == nil {
			rc = &ReconfigRequest{}
		}
		b = appendString(b, rc.JoiningServers)
		b = appendString(b, rc.LeavingServers)
		b = appendString(b, rc.NewMembers)
		b = appendLong(b, rc.CurConfigID)
	}
	return b
}

// Known reports whether op is a request op this package decodes.
func (op Op) Known() bool {
	switch op {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL, OpDelete, OpCheck,
		OpExists, OpGetData, OpGetChildren, OpGetChildren2, OpSetData,
		OpGetACL, OpSetACL, OpSync, OpPing, OpMulti, OpMultiRead, OpReconfig,
		OpCheckWatches, OpRemoveWatches, OpAuth, OpSetWatches, OpSetWatches2, OpSASL,
		OpGetEphemerals, OpGetAllChildrenNumber, OpAddWatch, OpWhoAmI, OpCloseSession:
		return true
	}
	return false
}

// DecodeRequest decodes a request frame body into r. A body too short for
// the header fails with ErrMalformed and leaves r zero. Once the header is
// read, r.Xid and r.Op are set even when decoding fails: an op this package
// does not know fails with ErrUnknownOp, a record that does not decode
// with ErrMalformed, so that a server can answer that request and carry on,
// as ZooKeeper's does. Bytes after the record are ignored, as ZooKeeper
// ignores them.
func DecodeRequest(body []byte, r *Request) error {
	*r = Request{}
	if len(body) < RequestHeaderSize {
		return fmt.Errorf("%w: request of %d bytes has no header", ErrMalformed, len(body))
	}
	d := decoder{b: body}
	r.Xid = d.int()
	r.Op = Op(d.int())
	if !r.Op.Known() {
		return fmt.Errorf("%w %d", ErrUnknownOp, int32(r.Op))
	}
	d.requestBody(r)
	if d.err != nil {
		return fmt.Errorf("%s request: %w", r.Op, d.err)
	}
	return nil
}

func (d *decoder) requestBody(r *Request) {
	switch r.Op {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
		r.Path = d.string()
		r.Data = d.buffer()
		r.ACL = d.acls()
		r.Flags = d.int()
		if r.Op == OpCreateTTL {
			r.TTL = d.long()
		}
	case OpDelete, OpCheck:
		r.Path = d.string()
		r.Version = d.int()
	case OpExists, OpGetData, OpGetChildren, OpGetChildren2:
		r.Path = d.string()
		r.Watch = d.bool()
	case OpSetData:
		r.Path = d.string()
		r.Data = d.buffer()
		r.Version = d.int()
	case OpGetACL, OpSync, OpGetEphemerals, OpGetAllChildrenNumber:
		r.Path = d.string()
	case OpSetACL:
		r.Path = d.string()
		r.ACL = d.acls()
		r.Version = d.int()
	case OpMulti, OpMultiRead:
		r.Ops = d.multiOps()
	case OpSetWatches, OpSetWatches2:
		r.RelativeZxid = d.long()
		r.DataWatches = d.strings()
		r.ExistWatches = d.strings()
		r.ChildWatches = d.strings()
		if r.Op == OpSetWatches2 {
			r.PersistentWatches = d.strings()
			r.PersistentRecursiveWatches = d.strings()
		}
	case OpAddWatch:
		r.Path = d.string()
		r.Mode = d.int()
	case OpCheckWatches, OpRemoveWatches:
		r.Path = d.string()
		r.WatcherType = d.int()
	case OpAuth:
		r.AuthType = d.int()
		r.Scheme = d.string()
		r.Auth = d.buffer()
	case OpSASL:
		r.Data = d.buffer()
	case OpReconfig:
		r.Reconfig = &ReconfigRequest{
			JoiningServers: d.string(), LeavingServers: d.string(),
			NewMembers: d.string(), CurConfigID: d.long(),
		}
	}
}

// multiHeaderSize is the length of a MultiHeader.
const multiHeaderSize = 9

// multiOps reads a MultiOperationRecord: a MultiHeader and a record per
// sub-request, up to a header with done set. The sub-requests may be the
// writes of a multi or the reads of a multiRead; which are allowed where
// is the server's business.
func (d *decoder) multiOps() []Request {
	var ops []Request
	for d.err == nil {
		h := d.multiHeader()
		if d.err != nil || h.Done {
			break
		}
		op := Request{Op: h.Type}
		switch h.Type {
		case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL, OpDelete, OpSetData, OpCheck,
			OpGetChildren, OpGetData:
		default:
			d.fail("op %s cannot be in a multi", h.Type)
			return ops
		}
		d.requestBody(&op)
		ops = append(ops, op)
	}
	return ops
}

// MultiHeader precedes each sub-request of a multi and each result of its
// reply; one with Done set ends the sequence.
type MultiHeader struct {
	Type Op
	Done bool
	Err  int32
}

// doneHeader ends a multi's sequence, as ZooKeeper writes it.
var doneHeader = MultiHeader{Type: -1, Done: true, Err: -1}

func appendMultiHeader(b []byte, h MultiHeader) []byte {
	b = appendInt(b, int32(h.Type))
	b = appendBool(b, h.Done)
	return appendInt(b, h.Err)
}

func (d *decoder) multiHeader() MultiHeader {
	return MultiHeader{Type: Op(d.int()), Done: d.bool(), Err: d.int()}
}
