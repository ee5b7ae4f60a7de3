package zkwire

// ConnectRequest is a client's first frame. A zero SessionID asks for a new
// session; otherwise the client reattaches SessionID, proving it with
// Passwd.
//
// The readOnly flag is not part of the jute record: clients since
// ZooKeeper 3.4 append it as one more boolean, and older ones do not.
// HasReadOnly says whether it was there, and the server answers in kind.
type ConnectRequest struct {
	ProtocolVersion int32
	LastZxidSeen    int64
	TimeOut         int32 // ms
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool // the client accepts a read-only server
	HasReadOnly     bool
}

// AppendConnectRequest appends m as a frame to dst.
func AppendConnectRequest(dst []byte, m *ConnectRequest) []byte {
	dst, start := beginFrame(dst)
	dst = appendInt(dst, m.ProtocolVersion)
	dst = appendLong(dst, m.LastZxidSeen)
	dst = appendInt(dst, m.TimeOut)
	dst = appendLong(dst, m.SessionID)
	dst = appendBuffer(dst, m.Passwd)
	if m.HasReadOnly {
		dst = appendBool(dst, m.ReadOnly)
	}
	return endFrame(dst, start)
}

// DecodeConnectRequest decodes a frame body into m. Bytes after the
// readOnly flag are ignored, as ZooKeeper ignores them.
func DecodeConnectRequest(body []byte, m *ConnectRequest) error {
	d := decoder{b: body}
	*m = ConnectRequest{
		ProtocolVersion: d.int(),
		LastZxidSeen:    d.long(),
		TimeOut:         d.int(),
		SessionID:       d.long(),
		Passwd:          d.buffer(),
	}
	if d.err == nil && len(d.b) > 0 {
		m.ReadOnly, m.HasReadOnly = d.bool(), true
	}
	return d.err
}

// ConnectResponse answers a ConnectRequest. A session the server does not
// know (expired, or a wrong password) is answered with TimeOut 0, SessionID
// 0 and a zero password, after which the server closes the connection.
// HasReadOnly adds the readOnly flag, for clients that sent one.
type ConnectResponse struct {
	ProtocolVersion int32
	TimeOut         int32 // the negotiated session timeout, ms
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool // the server serves only reads
	HasReadOnly     bool
}

// AppendConnectResponse appends m as a frame to dst.
func AppendConnectResponse(dst []byte, m *ConnectResponse) []byte {
	dst, start := beginFrame(dst)
	dst = appendInt(dst, m.ProtocolVersion)
	dst = appendInt(dst, m.TimeOut)
	dst = appendLong(dst, m.SessionID)
	dst = appendBuffer(dst, m.Passwd)
	if m.HasReadOnly {
		dst = appendBool(dst, m.ReadOnly)
	}
	return endFrame(dst, start)
}

// DecodeConnectResponse decodes a frame body into m.
func DecodeConnectResponse(body []byte, m *ConnectResponse) error {
	d := decoder{b: body}
	*m = ConnectResponse{
		ProtocolVersion: d.int(),
		TimeOut:         d.int(),
		SessionID:       d.long(),
		Passwd:          d.buffer(),
	}
	if d.err == nil && len(d.b) > 0 {
		m.ReadOnly, m.HasReadOnly = d.bool(), true
	}
	return d.err
}
