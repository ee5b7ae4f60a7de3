package server

import (
	"bytes"
	"cmp"
	"crypto/tls"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/arbor-coord/arbor/tree"
)

// ZooKeeper's commands about clients: connections, dump, watch_summary,
// watches and watches_by_path. The connections they list are those bound
// to a session, of either protocol.

// lastOpCodes are ZooKeeper's four-letter names of a connection's last op.
var lastOpCodes = map[string]string{
	"create": "CREA", "delete": "DELE", "exists": "EXIS", "getData": "GETD", "setData": "SETD",
	"getChildren": "GETC", "sync": "SYNC", "ping": "PING", "check": "CHEC", "multi": "MULT",
	"multiRead": "MLTR", "setWatches": "SETW", "setWatches2": "STW2", "addWatch": "ADDW",
	"removeWatches": "REMW", "checkWatches": "CHKW", "getEphemerals": "GETE",
	"getAllChildrenNumber": "GETACN", "getACL": "GETA", "setACL": "SETA", "whoAmI": "HOMI",
	"close": "CLOS", "session": "SESS", "auth": "AUTH", "sasl": "SASL", "NA": "NA",
}

// connBrief is a connection as ZooKeeper's getConnectionInfo(true) gives
// it (stat).
type connBrief struct {
	RemoteSocketAddress string `json:"remote_socket_address"`
	InterestOps         int    `json:"interest_ops"` // always 1: reading, as ZooKeeper's NIO selector's OP_READ
	OutstandingRequests int    `json:"outstanding_requests"`
	PacketsReceived     int64  `json:"packets_received"`
	PacketsSent         int64  `json:"packets_sent"`
}

// connFull is a connection as getConnectionInfo(false) gives it (cons).
// Times are in ms since the Unix epoch, latencies in ms.
type connFull struct {
	connBrief
	SessionID        int64  `json:"session_id"`
	LastOperation    string `json:"last_operation"`
	Established      int64  `json:"established"`
	SessionTimeout   int32  `json:"session_timeout"`
	LastCxid         int64  `json:"last_cxid"` // -1 before the first request
	LastZxid         int64  `json:"last_zxid"`
	LastResponseTime int64  `json:"last_response_time"`
	LastLatency      int64  `json:"last_latency"`
	MinLatency       int64  `json:"min_latency"`
	AvgLatency       int64  `json:"avg_latency"`
	MaxLatency       int64  `json:"max_latency"`
}

func briefConnInfo(c *conn) connBrief {
	return connBrief{RemoteSocketAddress: c.nc.RemoteAddr().String(), InterestOps: 1,
		OutstandingRequests: len(c.pending) + len(c.replies), PacketsReceived: c.stats.nRecv.Load(), PacketsSent: c.stats.nSent.Load()}
}

func fullConnInfo(c *conn) connFull {
	info := connFull{connBrief: briefConnInfo(c), SessionID: c.session, Established: c.stats.established.UnixMilli()}
	st := &c.stats
	st.mu.Lock()
	defer st.mu.Unlock()
	op, ok := lastOpCodes[st.lastOp]
	if !ok {
		op = "ADMN" // Arbor's own ops
	}
	info.LastOperation, info.SessionTimeout, info.LastCxid, info.LastZxid = op, st.timeoutMs, int64(st.lastXid), st.lastZxid
	if !st.lastResp.IsZero() {
		info.LastResponseTime = st.lastResp.UnixMilli()
	}
	info.LastLatency, info.MinLatency, info.AvgLatency, info.MaxLatency = ms(st.latency.last), ms(st.latency.min), ms(st.latency.avg()), ms(st.latency.max)
	return info
}

// isTLS reports whether c came over TLS: ZooKeeper lists those as its
// secure port's.
func isTLS(c *conn) bool {
	_, ok := c.nc.(*tls.Conn)
	return ok
}

// writeText writes the connection as ZooKeeper's dumpConnectionInfo does.
func (c connBrief) writeText(b *bytes.Buffer) {
	c.write(b)
	b.WriteString(")")
}

func (c connBrief) write(b *bytes.Buffer) {
	fmt.Fprintf(b, " /%s[%d](queued=%d,recved=%d,sent=%d", c.RemoteSocketAddress, c.InterestOps,
		c.OutstandingRequests, c.PacketsReceived, c.PacketsSent)
}

// writeText writes the connection in full. ZooKeeper leaves lcxid out
// before the first request; it is always there here (-1 then), as the
// go-zookeeper parser needs it.
func (c connFull) writeText(b *bytes.Buffer) {
	c.connBrief.write(b)
	fmt.Fprintf(b, ",sid=0x%x,lop=%s,est=%d,to=%d,lcxid=0x%x", uint64(c.SessionID), c.LastOperation, c.Established,
		c.SessionTimeout, uint64(c.LastCxid))
	fmt.Fprintf(b, ",lzxid=0x%x,lresp=%d,llat=%d,minlat=%d,avglat=%d,maxlat=%d)", uint64(c.LastZxid),
		c.LastResponseTime, c.LastLatency, c.MinLatency, c.AvgLatency, c.MaxLatency)
}

// connectionsResult is connections's (cons).
type connectionsResult struct {
	Connections       []connFull `json:"connections"`        // plaintext
	SecureConnections []connFull `json:"secure_connections"` // over TLS
	all               []connFull // both, by session, for the text
}

func (s *Server) connections() connectionsResult {
	var r connectionsResult
	r.all, r.Connections, r.SecureConnections = connInfos(s.sessionConns(), fullConnInfo)
	return r
}

func (r connectionsResult) writeText(b *bytes.Buffer) {
	for _, c := range r.all {
		c.writeText(b)
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// javaDate is the layout of Java's Date.toString, in which ZooKeeper's
// dump writes its expiry times.
const javaDate = "Mon Jan 02 15:04:05 MST 2006"

// dumpResult is dump's: the sessions by when they expire, their
// ephemeral nodes, and (in the text alone) this member's connections by
// when their sessions expire. As in ZooKeeper, only the member whose
// expiry tracking acts (the leader, or a single member) lists sessions
// by expiry; another lists every session with its timeout, as
// ZooKeeper's learners do, and no expiry times in JSON.
type dumpResult struct {
	// ExpiryTimeToSessionIDs: ms since the Unix epoch of the expiry tick
	// (ZooKeeper's are its own clock's, which means nothing outside it).
	ExpiryTimeToSessionIDs    map[int64][]int64  `json:"expiry_time_to_session_ids"`
	SessionIDToEphemeralPaths map[int64][]string `json:"session_id_to_ephemeral_paths"`

	tracks   bool               // this member's expiry tracking acts
	tracked  int                // the sessions in ExpiryTimeToSessionIDs
	sessions []dumpSession      // every session, by id
	conns    map[int64][]string // connection lines by their sessions' expiry tick
	nconns   int
}

type dumpSession struct {
	id        int64
	timeoutMs int32
}

func (s *Server) dump(q commandQuery) dumpResult {
	r := dumpResult{ExpiryTimeToSessionIDs: map[int64][]int64{}, SessionIDToEphemeralPaths: map[int64][]string{},
		tracks: s.transport == nil || s.node.IsLeader(), conns: map[int64][]string{}}
	s.fsm.read(func(t *tree.Tree) {
		for _, ses := range t.Sessions() {
			r.sessions = append(r.sessions, dumpSession{id: ses.ID, timeoutMs: ses.TimeoutMs})
			eph := s.ephemerals(t, ses.ID, "")
			if q.mayList != nil {
				eph = slices.DeleteFunc(eph, func(p string) bool { return !q.mayList(t, p) })
			}
			if len(eph) > 0 {
				r.SessionIDToEphemeralPaths[ses.ID] = eph
			}
		}
	})
	slices.SortFunc(r.sessions, func(a, b dumpSession) int { return cmp.Compare(a.id, b.id) })
	if r.tracks {
		for _, ses := range r.sessions {
			if tick, ok := s.expiryTick(ses.id); ok {
				r.ExpiryTimeToSessionIDs[tick] = append(r.ExpiryTimeToSessionIDs[tick], ses.id)
				r.tracked++
			}
		}
	}
	connected := s.sessionConns()
	r.nconns = len(connected)
	for _, c := range connected {
		if tick, ok := s.expiryTick(c.session); ok {
			r.conns[tick] = append(r.conns[tick], fmt.Sprintf("ip: /%s sessionId: 0x%x", c.nc.RemoteAddr(), uint64(c.session)))
		}
	}
	return r
}

// expiryTick is the tick (ms since the Unix epoch) in which session id
// expires, as ZooKeeper's expiry queue rounds it, if this member's session
// table tracks it.
func (s *Server) expiryTick(id int64) (int64, bool) {
	d, ok := s.sessions.Deadline(id)
	if !ok {
		return 0, false
	}
	return d.Truncate(expiryInterval).Add(expiryInterval).UnixMilli(), true
}

func (r dumpResult) writeText(b *bytes.Buffer) {
	b.WriteString("SessionTracker dump:\n")
	if r.tracks {
		sets := map[int64][]string{}
		for tick, ids := range r.ExpiryTimeToSessionIDs {
			for _, id := range ids {
				sets[tick] = append(sets[tick], fmt.Sprintf("0x%x", uint64(id)))
			}
		}
		writeExpirySets(b, "Session Sets", sets, r.tracked)
	} else {
		fmt.Fprintf(b, "Global Sessions(%d):\n", len(r.sessions))
		for _, ses := range r.sessions {
			fmt.Fprintf(b, "0x%x\t%dms\n", uint64(ses.id), ses.timeoutMs)
		}
	}
	b.WriteString("ephemeral nodes dump:\n")
	fmt.Fprintf(b, "Sessions with Ephemerals (%d):\n", len(r.SessionIDToEphemeralPaths))
	for _, id := range slices.Sorted(maps.Keys(r.SessionIDToEphemeralPaths)) {
		fmt.Fprintf(b, "0x%x:\n", uint64(id))
		for _, p := range r.SessionIDToEphemeralPaths[id] {
			fmt.Fprintf(b, "\t%s\n", p)
		}
	}
	b.WriteString("Connections dump:\n")
	writeExpirySets(b, "Connections Sets", r.conns, r.nconns)
}

// writeExpirySets writes sets (lines by expiry tick) as ZooKeeper's
// ExpiryQueue.dump does, under title, of n elements in all.
func writeExpirySets(b *bytes.Buffer, title string, sets map[int64][]string, n int) {
	fmt.Fprintf(b, "%s (%d)/(%d):\n", title, len(sets), n)
	for _, tick := range slices.Sorted(maps.Keys(sets)) {
		fmt.Fprintf(b, "%d expire at %s:\n", len(sets[tick]), time.UnixMilli(tick).UTC().Format(javaDate))
		for _, line := range sets[tick] {
			fmt.Fprintf(b, "\t%s\n", line)
		}
	}
}

// watchSummaryResult is watch_summary's (wchs), over every kind of watch.
type watchSummaryResult struct {
	NumConnections  int `json:"num_connections"`
	NumPaths        int `json:"num_paths"`
	NumTotalWatches int `json:"num_total_watches"`
}

func (s *Server) watchSummary() watchSummaryResult {
	conns, paths, watches := s.watches.summary()
	return watchSummaryResult{NumConnections: conns, NumPaths: paths, NumTotalWatches: watches}
}

func (r watchSummaryResult) writeText(b *bytes.Buffer) {
	fmt.Fprintf(b, "%d connections watching %d paths\nTotal watches:%d\n", r.NumConnections, r.NumPaths, r.NumTotalWatches)
}

// watchedPaths is the paths each session's connection watches, of every
// kind, those q may see.
func (s *Server) watchedPaths(q commandQuery) map[int64][]string {
	bySession := s.watches.watchedPaths() // taken first: the registry's lock comes after the fsm's
	if q.mayList != nil {
		s.fsm.read(func(t *tree.Tree) {
			for id, paths := range bySession {
				paths = slices.DeleteFunc(paths, func(p string) bool { return !q.mayList(t, p) })
				if len(paths) == 0 {
					delete(bySession, id)
				} else {
					bySession[id] = paths
				}
			}
		})
	}
	return bySession
}

// watchesResult is watches's (wchc): the paths watched, by session.
type watchesResult struct {
	SessionIDToWatchedPaths map[int64][]string `json:"session_id_to_watched_paths"`
}

func (s *Server) watchesBySession(q commandQuery) watchesResult {
	return watchesResult{SessionIDToWatchedPaths: s.watchedPaths(q)}
}

func (r watchesResult) writeText(b *bytes.Buffer) {
	for _, id := range slices.Sorted(maps.Keys(r.SessionIDToWatchedPaths)) {
		fmt.Fprintf(b, "0x%x\n", uint64(id))
		for _, p := range r.SessionIDToWatchedPaths[id] {
			fmt.Fprintf(b, "\t%s\n", p)
		}
	}
	b.WriteString("\n")
}

// watchesByPathResult is watches_by_path's (wchp): the sessions watching,
// by path.
type watchesByPathResult struct {
	PathToSessionIDs map[string][]int64 `json:"path_to_session_ids"`
}

func (s *Server) watchesByPath(q commandQuery) watchesByPathResult {
	r := watchesByPathResult{PathToSessionIDs: map[string][]int64{}}
	bySession := s.watchedPaths(q)
	for _, id := range slices.Sorted(maps.Keys(bySession)) {
		for _, p := range bySession[id] {
			r.PathToSessionIDs[p] = append(r.PathToSessionIDs[p], id)
		}
	}
	return r
}

func (r watchesByPathResult) writeText(b *bytes.Buffer) {
	for _, p := range slices.Sorted(maps.Keys(r.PathToSessionIDs)) {
		fmt.Fprintf(b, "%s\n", p)
		for _, id := range r.PathToSessionIDs[p] {
			fmt.Fprintf(b, "\t0x%x\n", uint64(id))
		}
	}
	b.WriteString("\n")
}
