package zkwire

import (
	"fmt"

	"github.com/arbor-coord/arbor/wire"
)

// Reply is a reply frame: the ReplyHeader (Xid, Zxid, Err) and, for a
// successful request, the op's response record; or, with Xid
// XidNotification, a watch event. Which fields travel depends on the op
// (see AppendReply).
type Reply struct {
	Xid  int32
	Zxid int64
	Err  int32 // a ZooKeeper error code; 0 for success

	Path     string       // create, create2, createContainer, createTTL, sync; a notification's path
	Data     []byte       // getData; sasl: the server's token
	Stat     wire.Stat    // exists, getData, setData, setACL, getACL, getChildren2, create2, createContainer, createTTL
	Children []string     // getChildren, getChildren2; getEphemerals: full paths
	ACL      []ACL        // getACL
	Number   int32        // getAllChildrenNumber
	Clients  []ClientInfo // whoAmI
	Results  []OpResult   // multi, multiRead

	// A notification's WatcherEvent (with Path).
	EventType int32
	State     int32
}

// OpResult is one result in a multi or multiRead reply.
type OpResult struct {
	// Op is the result's type: the sub-request's op, or OpError for a
	// sub-request that failed or, in a failed multi, was not applied.
	Op       Op
	Err      int32     // OpError: the code; 0 for every result of a multi that was not the failing one
	Path     string    // create, create2, createContainer, createTTL
	Stat     wire.Stat // create2, createContainer, createTTL, setData, getData
	Data     []byte    // getData
	Children []string  // getChildren
}

// replyHeaderSize is the length of a ReplyHeader.
const replyHeaderSize = 16

// AppendReply appends r, the reply to a request of op, as a frame to dst.
// A notification (Xid XidNotification) ignores op and carries a
// WatcherEvent. A reply with a non-zero Err carries the header alone, as
// ZooKeeper's do. A successful reply carries op's response record:
//
//	create                                  CreateResponse: path
//	create2, createContainer, createTTL     Create2Response: path, stat
//	exists, setData, setACL                 stat
//	getData                                 GetDataResponse: data, stat
//	getChildren                             GetChildrenResponse: children
//	getChildren2                            GetChildren2Response: children, stat
//	getACL                                  GetACLResponse: acl, stat
//	sync                                    SyncResponse: path
//	getAllChildrenNumber                    totalNumber
//	getEphemerals                           GetEphemeralsResponse: paths
//	whoAmI                                  WhoAmIResponse: clientInfo
//	addWatch                                ErrorResponse: 0
//	sasl                                    SetSASLResponse: token
//	multi, multiRead                        a MultiHeader and record per result, then a done header
//
// and every other op (delete, check, ping, setWatches, removeWatches,
// checkWatches, auth, closeSession) the header alone. A sasl reply carries
// its token even with an error (a null one from ZooKeeper's server), as
// ZooKeeper's Java client reads it whatever the error.
func AppendReply(dst []byte, op Op, r *Reply) []byte {
	dst, start := beginFrame(dst)
	dst = appendInt(dst, r.Xid)
	dst = appendLong(dst, r.Zxid)
	dst = appendInt(dst, r.Err)
	switch {
	case r.Xid == XidNotification:
		dst = appendInt(dst, r.EventType)
		dst = appendInt(dst, r.State)
		dst = appendString(dst, r.Path)
	case r.Err != 0 && op != OpSASL:
	default:
		dst = appendReplyBody(dst, op, r)
	}
	return endFrame(dst, start)
}

func appendReplyBody(b []byte, op Op, r *Reply) []byte {
	switch op {
	case OpCreate, OpSync:
		b = appendString(b, r.Path)
	case OpCreate2, OpCreateContainer, OpCreateTTL:
		b = appendString(b, r.Path)
		b = appendStat(b, &r.Stat)
	case OpExists, OpSetData, OpSetACL:
		b = appendStat(b, &r.Stat)
	case OpGetData, OpReconfig:
		b = appendBuffer(b, r.Data)
		b = appendStat(b, &r.Stat)
	case OpGetChildren, OpGetEphemerals:
		b = appendStrings(b, r.Children)
	case OpGetChildren2:
		b = appendStrings(b, r.Children)
		b = appendStat(b, &r.Stat)
	case OpGetACL:
		b = appendACLs(b, r.ACL)
		b = appendStat(b, &r.Stat)
	case OpGetAllChildrenNumber:
		b = appendInt(b, r.Number)
	case OpWhoAmI:
		b = appendInt(b, int32(len(r.Clients)))
		for _, c := range r.Clients {
			b = appendString(b, c.AuthScheme)
			b = appendString(b, c.User)
		}
	case OpAddWatch:
		b = appendInt(b, 0)
	case OpSASL:
		b = appendBuffer(b, r.Data)
	case OpMulti, OpMultiRead:
		for i := range r.Results {
			res := &r.Results[i]
			b = appendMultiHeader(b, MultiHeader{Type: res.Op, Err: res.Err})
			b = appendResultBody(b, res)
		}
		b = appendMultiHeader(b, doneHeader)
	}
	return b
}

func appendResultBody(b []byte, res *OpResult) []byte {
	switch res.Op {
	case OpCreate:
		b = appendString(b, res.Path)
	case OpCreate2, OpCreateContainer, OpCreateTTL:
		b = appendString(b, res.Path)
		b = appendStat(b, &res.Stat)
	case OpSetData:
		b = appendStat(b, &res.Stat)
	case OpGetData:
		b = appendBuffer(b, res.Data)
		b = appendStat(b, &res.Stat)
	case OpGetChildren:
		b = appendStrings(b, res.Children)
	case OpError:
		b = appendInt(b, res.Err)
	}
	return b
}

// PeekXid returns the xid of a reply frame body, so that a client can tell
// which request (and so which op) it answers before decoding it.
func PeekXid(body []byte) (int32, error) {
	d := decoder{b: body}
	xid := d.int()
	return xid, d.err
}

// DecodeReply decodes a frame body that answers a request of op into r. A
// notification (Xid XidNotification) ignores op.
func DecodeReply(body []byte, op Op, r *Reply) error {
	*r = Reply{}
	d := decoder{b: body}
	r.Xid = d.int()
	r.Zxid = d.long()
	r.Err = d.int()
	switch {
	case d.err != nil:
	case r.Xid == XidNotification:
		r.EventType = d.int()
		r.State = d.int()
		r.Path = d.string()
	case r.Err != 0 && op != OpSASL:
	default:
		d.replyBody(op, r)
	}
	if d.err != nil {
		return fmt.Errorf("%s reply: %w", op, d.err)
	}
	return nil
}

func (d *decoder) replyBody(op Op, r *Reply) {
	switch op {
	case OpCreate, OpSync:
		r.Path = d.string()
	case OpCreate2, OpCreateContainer, OpCreateTTL:
		r.Path = d.string()
		d.stat(&r.Stat)
	case OpExists, OpSetData, OpSetACL:
		d.stat(&r.Stat)
	case OpGetData, OpReconfig:
		r.Data = d.buffer()
		d.stat(&r.Stat)
	case OpGetChildren, OpGetEphemerals:
		r.Children = d.strings()
	case OpGetChildren2:
		r.Children = d.strings()
		d.stat(&r.Stat)
	case OpGetACL:
		r.ACL = d.acls()
		d.stat(&r.Stat)
	case OpGetAllChildrenNumber:
		r.Number = d.int()
	case OpWhoAmI:
		n, _ := d.count(8)
		for i := 0; i < n && d.err == nil; i++ {
			r.Clients = append(r.Clients, ClientInfo{AuthScheme: d.string(), User: d.string()})
		}
	case OpSASL:
		r.Data = d.buffer()
	case OpAddWatch:
		if code := d.int(); code != 0 && d.err == nil {
			d.fail("addWatch reply carries error %d", code)
		}
	case OpMulti, OpMultiRead:
		for d.err == nil {
			h := d.multiHeader()
			if d.err != nil || h.Done {
				break
			}
			res := OpResult{Op: h.Type, Err: h.Err}
			switch h.Type {
			case OpCreate:
				res.Path = d.string()
			case OpCreate2, OpCreateContainer, OpCreateTTL:
				res.Path = d.string()
				d.stat(&res.Stat)
			case OpSetData:
				d.stat(&res.Stat)
			case OpGetData:
				res.Data = d.buffer()
				d.stat(&res.Stat)
			case OpGetChildren:
				res.Children = d.strings()
			case OpError:
				res.Err = d.int()
			case OpDelete, OpCheck:
			default:
				d.fail("result of type %s in a multi reply", h.Type)
			}
			r.Results = append(r.Results, res)
		}
	}
}
