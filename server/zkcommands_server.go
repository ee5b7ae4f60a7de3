package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbor-coord/arbor/tree"
)

// ZooKeeper's commands about the server itself: ruok, is_read_only,
// server_stats, stats, monitor, configuration, environment, dirs, leader,
// voting_view and observers.

// ruokResult is ruok's: "imok", and over http no field at all.
type ruokResult struct{}

func (ruokResult) writeText(b *bytes.Buffer) { b.WriteString("imok") }

// readOnlyResult is is_read_only's (isro).
type readOnlyResult struct {
	ReadOnly bool `json:"read_only"`
}

func (r readOnlyResult) writeText(b *bytes.Buffer) {
	if r.ReadOnly {
		b.WriteString("ro")
	} else {
		b.WriteString("rw")
	}
}

// serverStatsResult is server_stats's (srvr), ZooKeeper's SrvrCommand.
type serverStatsResult struct {
	Version     string          `json:"version"`
	ReadOnly    bool            `json:"read_only"`
	ServerStats serverStatsView `json:"server_stats"`
	NodeCount   int             `json:"node_count"`
}

// serverStatsView is ZooKeeper's ServerStats as its Jackson output names
// its properties, those Arbor can fill.
type serverStatsView struct {
	PacketsSent               int64   `json:"packets_sent"`
	PacketsReceived           int64   `json:"packets_received"`
	MinLatency                int64   `json:"min_latency"` // ms
	AvgLatency                float64 `json:"avg_latency"` // ms, to four decimals
	MaxLatency                int64   `json:"max_latency"` // ms
	OutstandingRequests       int     `json:"outstanding_requests"`
	LastProcessedZxid         int64   `json:"last_processed_zxid"`
	DataDirSize               int64   `json:"data_dir_size"`
	LogDirSize                int64   `json:"log_dir_size"`
	ServerState               string  `json:"server_state"`
	NumAliveClientConnections int     `json:"num_alive_client_connections"`
	Uptime                    int64   `json:"uptime"` // ms
	ProviderNull              bool    `json:"provider_null"`
}

// statsResult is stats's (stat): server_stats and the clients.
type statsResult struct {
	serverStatsResult
	Connections       []connBrief `json:"connections"`        // plaintext
	SecureConnections []connBrief `json:"secure_connections"` // over TLS
	all               []connBrief // both, by session, for the text
}

func (s *Server) serverStats(q commandQuery) serverStatsResult {
	lo, avg, hi := s.stats.latency.load()
	s.mu.Lock()
	conns := len(s.conns)
	s.mu.Unlock()
	var size int64 // srvr's text has no sizes: a health check polling it walks no directory
	if !q.text {
		size = dirSize(s.cfg.DataDir)
	}
	r := serverStatsResult{Version: versionLine(), ReadOnly: s.readOnlyMode(), ServerStats: serverStatsView{
		PacketsSent: s.stats.nSent.Load(), PacketsReceived: s.stats.nRecv.Load(),
		MinLatency: ms(lo), AvgLatency: avgMs(avg), MaxLatency: ms(hi),
		OutstandingRequests: s.outstanding(), DataDirSize: size, LogDirSize: size,
		ServerState: s.mode(), NumAliveClientConnections: conns, Uptime: ms(time.Since(s.started)),
	}}
	r.ServerStats.LastProcessedZxid = s.fsm.lastZxid()
	r.NodeCount = s.counts().znodes
	return r
}

func (s *Server) statsWithClients(q commandQuery) statsResult {
	r := statsResult{serverStatsResult: s.serverStats(q)}
	r.all, r.Connections, r.SecureConnections = connInfos(s.sessionConns(), briefConnInfo)
	return r
}

// connInfos gives each of conns as info writes it: all of them, the
// plaintext ones and those over TLS (none is an empty list, not nil:
// JSON's []).
func connInfos[T any](conns []*conn, info func(*conn) T) (all, plain, secure []T) {
	plain, secure = []T{}, []T{}
	for _, c := range conns {
		i := info(c)
		all = append(all, i)
		if isTLS(c) {
			secure = append(secure, i)
		} else {
			plain = append(plain, i)
		}
	}
	return all, plain, secure
}

// avgMs is a mean latency in milliseconds, as ZooKeeper reports it.
func avgMs(d time.Duration) float64 { return round4(float64(d.Microseconds()) / 1000) }

func (r serverStatsResult) writeText(b *bytes.Buffer) { r.write(b, false, nil) }

func (r statsResult) writeText(b *bytes.Buffer) { r.write(b, true, r.all) }

// write writes ZooKeeper's StatCommand: with withClients (stat), the
// clients too.
func (r serverStatsResult) write(b *bytes.Buffer, withClients bool, clients []connBrief) {
	fmt.Fprintf(b, "Zookeeper version: %s\n", r.Version)
	if r.ReadOnly {
		b.WriteString("READ-ONLY mode; serving only read-only clients\n")
	}
	if withClients {
		b.WriteString("Clients:\n")
		for _, c := range clients {
			c.writeText(b)
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	st := &r.ServerStats
	fmt.Fprintf(b, "Latency min/avg/max: %d/%s/%d\n", st.MinLatency, javaDouble(st.AvgLatency), st.MaxLatency)
	fmt.Fprintf(b, "Received: %d\n", st.PacketsReceived)
	fmt.Fprintf(b, "Sent: %d\n", st.PacketsSent)
	fmt.Fprintf(b, "Connections: %d\n", st.NumAliveClientConnections)
	fmt.Fprintf(b, "Outstanding: %d\n", st.OutstandingRequests)
	fmt.Fprintf(b, "Zxid: 0x%x\n", st.LastProcessedZxid)
	fmt.Fprintf(b, "Mode: %s\n", st.ServerState)
	fmt.Fprintf(b, "Node count: %d\n", r.NodeCount)
}

// monitorResult is monitor's (mntr): ZooKeeper's keys where Arbor has a
// value that means the same, in the order ZooKeeper's dumpMonitorValues
// and then its gauges' registration give them, and Arbor's own after.
type monitorResult orderedValues

func (m monitorResult) MarshalJSON() ([]byte, error) { return orderedValues(m).MarshalJSON() }

func (m monitorResult) writeText(b *bytes.Buffer) {
	for _, kv := range m {
		fmt.Fprintf(b, "zk_%s\t%s\n", kv.key, text(kv.value))
	}
}

func (s *Server) monitor() monitorResult {
	var m monitorResult
	kv := func(k string, v any) { m = append(m, keyValue{k, v}) }
	serving, cluster := s.servesClients(), s.transport != nil
	state := s.mode()
	if !serving {
		state = "looking" // answered over http only: the word answers zkNotServing
	}
	kv("version", versionLine())
	kv("server_state", state)
	if cluster {
		kv("peer_state", s.peerState(serving))
	}
	if cluster && serving && state == "observer" {
		kv("observer_master_id", s.node.Leader()) // an observer learns from the leader
	}
	lo, avg, hi := s.stats.latency.load()
	kv("avg_latency", avgMs(avg))
	kv("max_latency", ms(hi))
	kv("min_latency", ms(lo))
	kv("packets_received", s.stats.nRecv.Load())
	kv("packets_sent", s.stats.nSent.Load())
	s.mu.Lock()
	conns := len(s.conns)
	s.mu.Unlock()
	kv("num_alive_connections", conns)
	kv("outstanding_requests", s.outstanding())
	kv("uptime", ms(time.Since(s.started)))
	var sessions int
	zxid := s.fsm.read(func(t *tree.Tree) { sessions = t.SessionCount() })
	counts := s.counts()
	nodes, ephemerals, size := counts.znodes, counts.ephemerals, counts.size
	kv("znode_count", nodes)
	kv("watch_count", s.watches.size())
	kv("ephemerals_count", ephemerals)
	kv("approximate_data_size", size)
	kv("global_sessions", sessions)
	kv("local_sessions", 0)
	if n, ok := openFiles(); ok {
		kv("open_file_descriptor_count", n)
	}
	if n, ok := maxFiles(); ok {
		kv("max_file_descriptor_count", n)
	}
	if cluster {
		voters := 0
		for _, mb := range s.node.Members() {
			if !mb.Learner {
				voters++
			}
		}
		kv("quorum_size", voters)
	}
	if state == "leader" {
		followers, observers := s.syncedLearners()
		kv("learners", len(followers)+len(observers))
		kv("synced_followers", len(followers))
		kv("synced_observers", len(observers))
		if since := s.node.LeadingSince(); !since.IsZero() {
			kv("leader_uptime", ms(time.Since(since)))
		}
	}
	kv("last_zxid", fmt.Sprintf("0x%x", zxid))
	kv("raft_term", s.node.Term())
	kv("raft_applied_index", s.node.Applied())
	kv("raft_leader_id", s.node.Leader())
	return m
}

// peerState is ZooKeeper's detailed peer state (QuorumPeer's): its role
// and, once it serves, Zab's broadcast phase, raft's normal operation.
func (s *Server) peerState(serving bool) string {
	switch {
	case !serving || s.readOnlyMode():
		return "looking"
	case s.node.IsLeader():
		return "leading - broadcast"
	case s.isLearner():
		return "observing - broadcast"
	}
	return "following - broadcast"
}

// syncedLearners lists, on the leader, the followers and the observers it
// leads and heard answer its raft messages within the contact timeout
// (ZooKeeper's learners the leader holds a live connection with).
func (s *Server) syncedLearners() (followers, observers []uint64) {
	heard := s.node.PeersHeard(s.contactTimeout())
	for _, m := range s.node.Members() {
		switch {
		case m.ID == s.cfg.ID || !slices.Contains(heard, m.ID):
		case m.Learner:
			observers = append(observers, m.ID)
		default:
			followers = append(followers, m.ID)
		}
	}
	return followers, observers
}

// openFiles counts this process's open file descriptors, where /proc
// tells.
func openFiles() (int, bool) {
	fds, err := os.ReadDir("/proc/self/fd")
	return len(fds), err == nil
}

// maxFiles is this process's limit on open file descriptors (the soft
// one, as Java's OperatingSystemMXBean gives it), where /proc tells.
func maxFiles() (int64, bool) {
	f, err := os.Open("/proc/self/limits")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Max open files"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return 0, false
			}
			n, err := strconv.ParseInt(fields[0], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// dirSize is the size of the files under dir, as ZooKeeper's getDirSize;
// what cannot be read counts nothing.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// dirsResult is dirs's: the size of the data directory, where Arbor keeps
// both what ZooKeeper's dataDir (snapshots) and dataLogDir (its log) hold.
type dirsResult struct {
	DatadirSize int64 `json:"datadir_size"`
	LogdirSize  int64 `json:"logdir_size"`
}

func (s *Server) dirs() dirsResult {
	n := dirSize(s.cfg.DataDir)
	return dirsResult{DatadirSize: n, LogdirSize: n}
}

func (r dirsResult) writeText(b *bytes.Buffer) {
	fmt.Fprintf(b, "datadir_size: %d\nlogdir_size: %d\n", r.DatadirSize, r.LogdirSize)
}

// confResult is configuration's (conf): ZooKeeper's keys where the setting
// means the same, then Arbor's own. ZooKeeper's JSON has the first nine
// fields; its text has more, which the JSON carries here too.
type confResult struct {
	ClientPort              int    `json:"client_port"` // -1: none
	DataDir                 string `json:"data_dir"`
	DataLogDir              string `json:"data_log_dir"`
	TickTime                int64  `json:"tick_time"`
	MaxClientCnxns          int    `json:"max_client_cnxns"`
	MinSessionTimeout       int64  `json:"min_session_timeout"`
	MaxSessionTimeout       int64  `json:"max_session_timeout"`
	ServerID                uint64 `json:"server_id"`
	ClientPortListenBacklog int    `json:"client_port_listen_backlog"` // -1: the system's default, as ZooKeeper's unset
	SecureClientPort        int    `json:"secure_client_port"`
	DataDirSize             int64  `json:"data_dir_size"`
	DataLogSize             int64  `json:"data_log_size"`
	// A cluster's: raft's one peer port carries what ZooKeeper's quorum
	// and election ports do; peerType is 0 for a voter, 1 for an observer.
	ElectionPort int  `json:"election_port,omitempty"`
	QuorumPort   int  `json:"quorum_port,omitempty"`
	PeerType     *int `json:"peer_type,omitempty"`
	// Arbor's own.
	ClientPortAddress       string `json:"client_port_address,omitempty"`
	SecureClientPortAddress string `json:"secure_client_port_address,omitempty"`
	ArborMaxConns           int    `json:"arbor_max_conns"`
	ArborClientAddress      string `json:"arbor_client_address"`
	RequestTimeout          int64  `json:"request_timeout"`
	MaxDataSize             int    `json:"max_data_size"`
	ElectionTicks           int    `json:"election_ticks,omitempty"`
	// membership is the cluster's members, as ZooKeeper's text lists
	// them (voting_view has them in JSON).
	membership []string
}

func (s *Server) configuration() confResult {
	cfg := &s.cfg
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		dir = cfg.DataDir
	}
	size := dirSize(dir)
	r := confResult{
		ClientPort: portOf(s.ZKAddr()), DataDir: dir, DataLogDir: dir, TickTime: ms(cfg.TickInterval),
		MaxClientCnxns:    max(cfg.MaxConnsPerIP, 0), // per client IP; 0 is none, as in ZooKeeper
		MinSessionTimeout: ms(cfg.MinSessionTimeout), MaxSessionTimeout: ms(cfg.MaxSessionTimeout),
		ServerID: cfg.ID, ClientPortListenBacklog: -1, SecureClientPort: portOf(s.ZKSecureAddr()),
		DataDirSize: size, DataLogSize: size,
		ArborMaxConns: cfg.MaxConns, ArborClientAddress: s.Addr().String(),
		RequestTimeout: ms(cfg.RequestTimeout), MaxDataSize: cfg.MaxDataSize,
	}
	if a := s.ZKAddr(); a != nil {
		r.ClientPortAddress = a.String()
	}
	if a := s.ZKSecureAddr(); a != nil {
		r.SecureClientPortAddress = a.String()
	}
	if s.transport == nil {
		return r
	}
	r.ElectionTicks = cfg.ElectionTicks
	for _, m := range s.node.Members() {
		if m.ID == cfg.ID {
			peerType := 0
			if m.Learner {
				peerType = 1
			}
			r.ElectionPort, r.QuorumPort, r.PeerType = portOfString(m.Addr), portOfString(m.Addr), &peerType
		}
	}
	// ZooKeeper's conf ends with its dynamic configuration, as
	// /zookeeper/config holds it (reconfig.go), version line included.
	cur := s.currentConfig()
	r.membership = strings.Split(string(cur.Format()), "\n")
	return r
}

// portOf is a listener's port, -1 when it does not listen (ZooKeeper's
// getClientPort without a factory).
func portOf(a net.Addr) int {
	if a == nil {
		return -1
	}
	return portOfString(a.String())
}

func portOfString(addr string) int {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return -1
	}
	return n
}

// writeText writes ZooKeeper's dumpConf: its keys in its order (a
// cluster's after a standalone's, the membership last), Arbor's own
// before the membership.
func (r confResult) writeText(b *bytes.Buffer) {
	kv := func(k string, v any) { fmt.Fprintf(b, "%s=%v\n", k, v) }
	kv("clientPort", r.ClientPort)
	kv("secureClientPort", r.SecureClientPort)
	kv("dataDir", r.DataDir)
	kv("dataDirSize", r.DataDirSize)
	kv("dataLogDir", r.DataLogDir)
	kv("dataLogSize", r.DataLogSize)
	kv("tickTime", r.TickTime)
	kv("maxClientCnxns", r.MaxClientCnxns)
	kv("minSessionTimeout", r.MinSessionTimeout)
	kv("maxSessionTimeout", r.MaxSessionTimeout)
	kv("clientPortListenBacklog", r.ClientPortListenBacklog)
	kv("serverId", r.ServerID)
	if r.PeerType != nil {
		kv("electionPort", r.ElectionPort)
		kv("quorumPort", r.QuorumPort)
		kv("peerType", *r.PeerType)
	}
	if r.ClientPortAddress != "" {
		kv("clientPortAddress", r.ClientPortAddress)
	}
	if r.SecureClientPortAddress != "" {
		kv("secureClientPortAddress", r.SecureClientPortAddress)
	}
	kv("arborMaxConns", r.ArborMaxConns)
	kv("arborClientAddress", r.ArborClientAddress)
	kv("requestTimeout", r.RequestTimeout)
	kv("maxDataSize", r.MaxDataSize)
	if r.ElectionTicks != 0 {
		kv("electionTicks", r.ElectionTicks)
		b.WriteString("membership: \n")
		for _, line := range r.membership {
			b.WriteString(line + "\n")
		}
	}
}

// environmentResult is environment's (envi): ZooKeeper's keys where they
// mean the same (Go's version where ZooKeeper gives Java's), then
// Arbor's own.
type environmentResult orderedValues

func (e environmentResult) MarshalJSON() ([]byte, error) { return orderedValues(e).MarshalJSON() }

func (e environmentResult) writeText(b *bytes.Buffer) {
	b.WriteString("Environment:\n")
	for _, kv := range e {
		fmt.Fprintf(b, "%s=%s\n", kv.key, text(kv.value))
	}
}

func (s *Server) environment() environmentResult {
	var e environmentResult
	kv := func(k, v string) { e = append(e, keyValue{k, v}) }
	kv("zookeeper.version", versionLine())
	host, _ := os.Hostname()
	kv("host.name", host)
	kv("go.version", runtime.Version())
	kv("os.name", javaOSName(runtime.GOOS))
	kv("os.arch", javaOSArch(runtime.GOARCH))
	if v, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kv("os.version", strings.TrimSpace(string(v)))
	}
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
	return e
}

// javaOSName is Java's os.name for a GOOS, where they differ.
func javaOSName(goos string) string {
	switch goos {
	case "linux":
		return "Linux"
	case "darwin":
		return "Mac OS X"
	case "freebsd":
		return "FreeBSD"
	case "windows":
		return "Windows"
	}
	return goos
}

// javaOSArch is Java's os.arch for a GOARCH, where they differ.
func javaOSArch(goarch string) string {
	switch goarch {
	case "arm64":
		return "aarch64"
	case "386":
		return "x86"
	}
	return goarch
}

// leaderResult is leader's (lead), an AdminServer command alone.
type leaderResult struct {
	IsLeader bool   `json:"is_leader"`
	LeaderID int64  `json:"leader_id"` // -1: none known
	LeaderIP string `json:"leader_ip"` // the host of its peer address, "" if unknown
}

func (leaderResult) writeText(*bytes.Buffer) {}

func (s *Server) leaderInfo() commandResult {
	if s.transport == nil {
		return failedResult("server is not initialized") // ZooKeeper's answer from a standalone server
	}
	lead := s.node.Leader()
	r := leaderResult{IsLeader: s.node.IsLeader(), LeaderID: -1}
	if lead != 0 {
		r.LeaderID = int64(lead)
	}
	for _, m := range s.node.Members() {
		if m.ID == lead && m.Addr != "" {
			r.LeaderIP = m.Addr
			if host, _, err := net.SplitHostPort(m.Addr); err == nil {
				r.LeaderIP = host
			}
		}
	}
	return r
}

// votingViewResult is voting_view's: the voters, by id.
type votingViewResult struct {
	CurrentConfig map[uint64]quorumServerView `json:"current_config"`
}

// quorumServerView is a voter as ZooKeeper's VotingViewCommand shows it.
type quorumServerView struct {
	ServerAddresses   []string `json:"server_addresses"`
	ElectionAddresses []string `json:"election_addresses"`
	ClientAddress     string   `json:"client_address"` // its ZooKeeper port, "" if unknown
	LearnerType       string   `json:"learner_type"`
}

func (votingViewResult) writeText(*bytes.Buffer) {}

func (s *Server) votingView() votingViewResult {
	r := votingViewResult{CurrentConfig: map[uint64]quorumServerView{}}
	if s.transport == nil {
		return r
	}
	for _, m := range s.Members().Members {
		if m.Learner {
			continue // ZooKeeper's voting view holds the voting members alone
		}
		addrs := []string{}
		if m.PeerAddr != "" {
			addrs = append(addrs, m.PeerAddr)
		}
		r.CurrentConfig[m.ID] = quorumServerView{ServerAddresses: addrs, ElectionAddresses: addrs,
			ClientAddress: m.ZKAddr, LearnerType: "participant"}
	}
	return r
}

// observersResult is observers's (obsr): on the leader, the observers it
// leads and hears from.
type observersResult struct {
	SyncedObservers int            `json:"synced_observers"`
	Observers       []observerInfo `json:"observers"`
}

// observerInfo is what Arbor has of ZooKeeper's LearnerHandler info.
type observerInfo struct {
	Sid uint64 `json:"sid"`
}

func (observersResult) writeText(*bytes.Buffer) {}

func (s *Server) observersInfo() observersResult {
	r := observersResult{Observers: []observerInfo{}}
	if !s.node.IsLeader() || s.transport == nil {
		return r // a follower is no observer's learner master here
	}
	_, observers := s.syncedLearners()
	for _, id := range observers {
		r.Observers = append(r.Observers, observerInfo{Sid: id})
	}
	r.SyncedObservers = len(observers)
	return r
}
