package server

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"os"
	"os/user"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/arbor-coord/arbor/session"
	"github.com/arbor-coord/arbor/tree"
	"go.uber.org/zap"
)

// ZooKeeper's four-letter words, on the ZooKeeper port: a connection whose
// first four bytes are one of them gets a text answer and is closed. The
// answers have ZooKeeper's layout, so that the tools that parse them (the
// go-zookeeper FLW helpers, monitoring agents reading mntr) work.

// zkVersion is the ZooKeeper version Arbor answers as: the client protocol
// it speaks is 3.9's (whoAmI, persistent watches, multiRead).
const zkVersion = "3.9.0-arbor"

// fourLetterWords are the words answered.
var fourLetterWords = map[string]func(s *Server, b *bytes.Buffer){
	"ruok": func(_ *Server, b *bytes.Buffer) { b.WriteString("imok") },
	"isro": func(s *Server, b *bytes.Buffer) {
		if s.readOnlyMode() {
			b.WriteString("ro")
		} else {
			b.WriteString("rw")
		}
	},
	"srvr": func(s *Server, b *bytes.Buffer) { s.writeStat(b, false) },
	"stat": func(s *Server, b *bytes.Buffer) { s.writeStat(b, true) },
	"mntr": (*Server).writeMntr,
	"conf": (*Server).writeConf,
	"cons": (*Server).writeCons,
	"envi": (*Server).writeEnvi,
	"wchs": (*Server).writeWchs,
	"dump": (*Server).writeDump,
}

// otherFourLetterWords are ZooKeeper's words not answered here; they get
// ZooKeeper's answer for a word left out of its whitelist.
var otherFourLetterWords = []string{"reqs", "dirs", "gtmk", "stmk", "crst", "srst", "wchc", "wchp", "hash"}

func isFourLetterWord(word string) bool {
	_, ok := fourLetterWords[word]
	return ok || slices.Contains(otherFourLetterWords, word)
}

// fourLetter answers word on nc.
func (s *Server) fourLetter(nc net.Conn, word string) {
	var b bytes.Buffer
	if f, ok := fourLetterWords[word]; ok {
		f(s, &b)
	} else {
		fmt.Fprintf(&b, "%s is not executed because it is not in the whitelist.\n", word)
	}
	_ = nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := nc.Write(b.Bytes()); err != nil {
		s.log.Debug("four-letter word answer not sent", zap.String("word", word), zap.Error(err))
	}
}

// serving reports whether this member serves clients: it knows a leader.
func (s *Server) serving(b *bytes.Buffer) bool {
	if s.node.Leader() == 0 && !s.readOnlyMode() {
		b.WriteString("This ZooKeeper instance is not currently serving requests\n")
		return false
	}
	return true
}

// readOnlyMode reports whether this member serves read-only: it cannot
// vouch for sessions (no quorum it can reach) and read-only mode is on.
func (s *Server) readOnlyMode() bool {
	return !s.cfg.NoReadOnly && s.vouchForSessions() != nil
}

// mode is ZooKeeper's name for this member's role.
func (s *Server) mode() string {
	switch {
	case s.transport == nil:
		return "standalone"
	case s.readOnlyMode():
		return "read-only"
	case s.node.IsLeader():
		return "leader"
	}
	for _, m := range s.node.Members() {
		if m.ID == s.cfg.ID && m.Learner {
			return "observer"
		}
	}
	return "follower"
}

// versionLine is ZooKeeper's version string; the build date is the
// binary's modification time, in the layout the go-zookeeper FLW parser
// reads.
func versionLine() string {
	built := time.Unix(0, 0)
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe); err == nil {
			built = fi.ModTime()
		}
	}
	return zkVersion + ", built on " + built.UTC().Format("01/02/2006 15:04 GMT")
}

// ms formats a duration in whole milliseconds, as ZooKeeper reports them.
func ms(d time.Duration) int64 { return d.Milliseconds() }

// outstanding is the number of requests read and not yet answered.
func (s *Server) outstanding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		n += len(c.pending) + len(c.replies)
	}
	return n
}

// writeStat writes srvr, or with clients stat: the version, the clients
// (stat only), the server's counters, its zxid, mode and node count.
func (s *Server) writeStat(b *bytes.Buffer, clients bool) {
	if !s.serving(b) {
		return
	}
	fmt.Fprintf(b, "Zookeeper version: %s\n", versionLine())
	if clients {
		b.WriteString("Clients:\n")
		for _, c := range s.sessionConns() {
			s.writeConn(b, c, true)
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	lo, avg, hi := s.stats.latency.load()
	fmt.Fprintf(b, "Latency min/avg/max: %d/%.4f/%d\n", ms(lo), float64(avg.Microseconds())/1000, ms(hi))
	fmt.Fprintf(b, "Received: %d\n", s.stats.nRecv.Load())
	fmt.Fprintf(b, "Sent: %d\n", s.stats.nSent.Load())
	s.mu.Lock()
	conns := len(s.conns)
	s.mu.Unlock()
	fmt.Fprintf(b, "Connections: %d\n", conns)
	fmt.Fprintf(b, "Outstanding: %d\n", s.outstanding())
	var nodes int
	zxid := s.fsm.read(func(t *tree.Tree) { nodes = t.Count() })
	fmt.Fprintf(b, "Zxid: 0x%x\n", zxid)
	fmt.Fprintf(b, "Mode: %s\n", s.mode())
	fmt.Fprintf(b, "Node count: %d\n", nodes)
}

// sessionConns lists the connections bound to a session (of either
// protocol), ordered by session id.
func (s *Server) sessionConns() []*conn {
	s.mu.Lock()
	ids := make([]int64, 0, len(s.bySession))
	for id := range s.bySession {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]*conn, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.bySession[id])
	}
	s.mu.Unlock()
	return out
}

// lastOpCodes are ZooKeeper's four-letter names of the last op in cons.
var lastOpCodes = map[string]string{
	"create": "CREA", "delete": "DELE", "exists": "EXIS", "getData": "GETD", "setData": "SETD",
	"getChildren": "GETC", "sync": "SYNC", "ping": "PING", "check": "CHEC", "multi": "MULT",
	"multiRead": "MLTR", "setWatches": "SETW", "setWatches2": "STW2", "addWatch": "ADDW",
	"removeWatches": "REMW", "checkWatches": "CHKW", "getEphemerals": "GETE",
	"getAllChildrenNumber": "GETACN", "getACL": "GETA", "setACL": "SETA", "whoAmI": "HOMI",
	"close": "CLOS", "session": "SESS", "auth": "AUTH", "NA": "NA",
}

// writeConn writes one connection as ZooKeeper's dumpConnectionInfo does;
// brief leaves out the session's details.
func (s *Server) writeConn(b *bytes.Buffer, c *conn, brief bool) {
	fmt.Fprintf(b, " /%s[1](queued=%d,recved=%d,sent=%d", c.nc.RemoteAddr(),
		len(c.pending)+len(c.replies), c.stats.nRecv.Load(), c.stats.nSent.Load())
	if !brief {
		st := &c.stats
		st.mu.Lock()
		op, ok := lastOpCodes[st.lastOp]
		if !ok {
			op = "ADMN"
		}
		// ZooKeeper leaves lcxid out before the first request; it is
		// always there here (-1 then), as the go-zookeeper parser needs it.
		fmt.Fprintf(b, ",sid=0x%x,lop=%s,est=%d,to=%d,lcxid=0x%x", uint64(c.session), op, st.established.UnixMilli(),
			st.timeoutMs, uint64(int64(st.lastXid)))
		fmt.Fprintf(b, ",lzxid=0x%x,lresp=%d,llat=%d,minlat=%d,avglat=%d,maxlat=%d", uint64(st.lastZxid),
			st.lastResp.UnixMilli(), ms(st.latency.last), ms(st.latency.min), ms(st.latency.avg()), ms(st.latency.max))
		st.mu.Unlock()
	}
	b.WriteString(")")
}

// writeCons lists the clients' connections in full.
func (s *Server) writeCons(b *bytes.Buffer) {
	for _, c := range s.sessionConns() {
		s.writeConn(b, c, false)
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// writeMntr writes key-value lines, tab-separated, with ZooKeeper's keys
// where the value means the same, and a few of Arbor's own (zk_raft_*).
func (s *Server) writeMntr(b *bytes.Buffer) {
	kv := func(k string, v any) { fmt.Fprintf(b, "zk_%s\t%v\n", k, v) }
	state := s.mode()
	if s.node.Leader() == 0 {
		state = "looking"
	}
	kv("version", versionLine())
	kv("server_state", state)
	lo, avg, hi := s.stats.latency.load()
	kv("avg_latency", strconv.FormatFloat(float64(avg.Microseconds())/1000, 'f', 4, 64))
	kv("max_latency", ms(hi))
	kv("min_latency", ms(lo))
	kv("packets_received", s.stats.nRecv.Load())
	kv("packets_sent", s.stats.nSent.Load())
	s.mu.Lock()
	conns := len(s.conns)
	s.mu.Unlock()
	kv("num_alive_connections", conns)
	kv("outstanding_requests", s.outstanding())
	var nodes, ephemerals, sessions int
	zxid := s.fsm.read(func(t *tree.Tree) {
		nodes, ephemerals, sessions = t.Count(), t.EphemeralCount(), t.SessionCount()
	})
	kv("znode_count", nodes)
	kv("watch_count", s.watches.size())
	kv("ephemerals_count", ephemerals)
	if n, ok := openFiles(); ok {
		kv("open_file_descriptor_count", n)
	}
	kv("uptime", time.Since(s.started).Milliseconds())
	kv("global_sessions", sessions)
	kv("local_sessions", 0)
	kv("last_zxid", fmt.Sprintf("0x%x", zxid))
	if state == "leader" {
		var followers, learners int
		for _, m := range s.node.Members() {
			switch {
			case m.ID == s.cfg.ID:
			case m.Learner:
				learners++
			default:
				followers++
			}
		}
		kv("learners", followers+learners)
		kv("followers", followers)
	}
	kv("raft_term", s.node.Term())
	kv("raft_applied_index", s.node.Applied())
	kv("raft_leader_id", s.node.Leader())
}

// openFiles counts this process's open file descriptors, where /proc
// tells.
func openFiles() (int, bool) {
	fds, err := os.ReadDir("/proc/self/fd")
	return len(fds), err == nil
}

// writeConf writes the configuration, with ZooKeeper's keys where the
// setting means the same.
func (s *Server) writeConf(b *bytes.Buffer) {
	cfg := &s.cfg
	for _, l := range []struct {
		name string
		addr net.Addr
	}{{"clientPort", s.ZKAddr()}, {"secureClientPort", s.ZKSecureAddr()}} {
		port := "-1"
		if l.addr != nil {
			_, port, _ = net.SplitHostPort(l.addr.String())
		}
		fmt.Fprintf(b, "%s=%s\n", l.name, port)
		if l.addr != nil {
			fmt.Fprintf(b, "%sAddress=%s\n", l.name, l.addr)
		}
	}
	fmt.Fprintf(b, "dataDir=%s\n", cfg.DataDir)
	fmt.Fprintf(b, "dataLogDir=%s\n", cfg.DataDir)
	fmt.Fprintf(b, "tickTime=%d\n", ms(cfg.TickInterval))
	fmt.Fprintf(b, "maxClientCnxns=%d\n", max(cfg.MaxConnsPerIP, 0)) // per client IP; 0 is none, as in ZooKeeper
	fmt.Fprintf(b, "arborMaxConns=%d\n", cfg.MaxConns)
	fmt.Fprintf(b, "minSessionTimeout=%d\n", ms(cfg.MinSessionTimeout))
	fmt.Fprintf(b, "maxSessionTimeout=%d\n", ms(cfg.MaxSessionTimeout))
	fmt.Fprintf(b, "serverId=%d\n", cfg.ID)
	fmt.Fprintf(b, "arborClientAddress=%s\n", s.Addr())
	fmt.Fprintf(b, "requestTimeout=%d\n", ms(cfg.RequestTimeout))
	fmt.Fprintf(b, "maxDataSize=%d\n", cfg.MaxDataSize)
	if s.transport != nil {
		fmt.Fprintf(b, "electionTicks=%d\n", cfg.ElectionTicks)
		b.WriteString("membership: \n")
		for _, m := range s.node.Members() {
			role := "participant"
			if m.Learner {
				role = "observer"
			}
			fmt.Fprintf(b, "server.%d=%s:%s\n", m.ID, m.Addr, role)
		}
	}
}

// writeEnvi writes the environment, with ZooKeeper's keys where they mean
// the same (Go's version where ZooKeeper gives Java's).
func (s *Server) writeEnvi(b *bytes.Buffer) {
	b.WriteString("Environment:\n")
	kv := func(k, v string) { fmt.Fprintf(b, "%s=%s\n", k, v) }
	kv("zookeeper.version", versionLine())
	host, _ := os.Hostname()
	kv("host.name", host)
	kv("go.version", runtime.Version())
	kv("os.name", runtime.GOOS)
	kv("os.arch", runtime.GOARCH)
	if u, err := user.Current(); err == nil {
		kv("user.name", u.Username)
		kv("user.home", u.HomeDir)
	}
	if wd, err := os.Getwd(); err == nil {
		kv("user.dir", wd)
	}
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	kv("os.memory.total", strconv.FormatUint(mem.Sys>>20, 10)+"MB") // from the OS, as ZooKeeper's JVM total
	kv("process.id", strconv.Itoa(os.Getpid()))
	kv("arbor.data", s.cfg.DataDir)
}

// writeWchs writes the watch summary as ZooKeeper's wchs does.
func (s *Server) writeWchs(b *bytes.Buffer) {
	conns, paths, watches := s.watches.summary()
	fmt.Fprintf(b, "%d connections watching %d paths\nTotal watches:%d\n", conns, paths, watches)
}

// javaDate is the layout of Java's Date.toString, in which ZooKeeper's
// dump writes its expiry times.
const javaDate = "Mon Jan 02 15:04:05 MST 2006"

// writeDump writes ZooKeeper's dump: the sessions by when they expire (as
// this member's expiry tracking has them: the leader's is the one that
// acts), each session's ephemeral nodes, and this member's connections by
// when their sessions expire.
func (s *Server) writeDump(b *bytes.Buffer) {
	type session struct {
		id  int64
		eph []string
	}
	var sessions []session
	s.fsm.read(func(t *tree.Tree) {
		for _, ses := range t.Sessions() {
			sessions = append(sessions, session{id: ses.ID, eph: t.Ephemerals(ses.ID)})
		}
	})
	tracked := expirySets{}
	for _, ses := range sessions {
		tracked.add(s.sessions, ses.id, fmt.Sprintf("0x%x", uint64(ses.id)))
	}
	b.WriteString("SessionTracker dump:\n")
	tracked.write(b, "Session Sets", len(sessions))
	b.WriteString("ephemeral nodes dump:\n")
	withEph := slices.DeleteFunc(sessions, func(ses session) bool { return len(ses.eph) == 0 })
	fmt.Fprintf(b, "Sessions with Ephemerals (%d):\n", len(withEph))
	for _, ses := range withEph {
		fmt.Fprintf(b, "0x%x:\n", uint64(ses.id))
		for _, p := range ses.eph {
			fmt.Fprintf(b, "\t%s\n", p)
		}
	}
	conns, connected := expirySets{}, s.sessionConns()
	for _, c := range connected {
		conns.add(s.sessions, c.session, fmt.Sprintf("ip: /%s sessionId: 0x%x", c.nc.RemoteAddr(), uint64(c.session)))
	}
	b.WriteString("Connections dump:\n")
	conns.write(b, "Connections Sets", len(connected))
}

// expirySets groups what dump lists by the tick in which its session
// expires, as ZooKeeper's expiry queue does.
type expirySets map[int64][]string

// add lists line under the tick in which session id expires, if the
// session table tracks it.
func (e expirySets) add(t *session.Table, id int64, line string) {
	if d, ok := t.Deadline(id); ok {
		tick := d.Truncate(expiryInterval).Add(expiryInterval).UnixMilli()
		e[tick] = append(e[tick], line)
	}
}

// write writes the sets under title, of n in all.
func (e expirySets) write(b *bytes.Buffer, title string, n int) {
	fmt.Fprintf(b, "%s (%d)/(%d):\n", title, len(e), n)
	for _, tick := range slices.Sorted(maps.Keys(e)) {
		fmt.Fprintf(b, "%d expire at %s:\n", len(e[tick]), time.UnixMilli(tick).UTC().Format(javaDate))
		for _, line := range e[tick] {
			fmt.Fprintf(b, "\t%s\n", line)
		}
	}
}
