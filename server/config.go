package server

import (
	"net/http"
	"time"

	"github.com/arbor-coord/arbor/locks"
	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/session"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// Config configures a Server. The zero value of each field means its
// default.
type Config struct {
	ID       uint64            // this member's id (default 1)
	Listen   string            // client address (default 127.0.0.1:2281)
	HTTP     string            // metrics and health address (default 127.0.0.1:2481; "-" for none)
	ZKListen string            // address for ZooKeeper's client protocol and four-letter words (default: off)
	DataDir  string            // where the raft log and snapshots live (default ./arbor-data)
	Peers    map[uint64]string // every member's id -> peer address, this one included; empty for a single node
	PeerAddr string            // this member's peer listen address (default: its entry in Peers)
	Join     bool              // a new member of a running cluster (added with memberAdd): do not bootstrap
	// Observers are members of Peers that replicate the log and serve
	// reads and watches but never vote (ZooKeeper's observers; raft
	// learners for good): they forward writes to the leader, and add read
	// capacity without slowing writes. A new cluster starts with the
	// others; its leader adds them.
	Observers []uint64
	// ForceNewCluster starts this member as the only member of a new
	// cluster, with everything its data holds, when a quorum of its
	// cluster is lost for good (docs/reliability.md, "Disaster recovery").
	// For one start only: every start with it removes the other members
	// again.
	ForceNewCluster bool

	// PeerNetwork, for tests, carries the raft traffic of the members of
	// an in-process cluster over this in-memory network instead of TCP,
	// with the faults the test injects into it. Peers still names the
	// members; their peer addresses are not listened on. Peer TLS needs
	// TCP. Nil (always, outside tests): TCP.
	PeerNetwork *raftnode.MemNetwork

	// TLS of the client ports (Listen and ZKListen alike): the server's
	// PEM certificate and key files; with a CA file, clients must present a
	// certificate it signed. All empty: plaintext. The HTTP port stays
	// plaintext.
	TLSCert, TLSKey, TLSCA string
	// Secure client ports beside the plaintext ones, as ZooKeeper's
	// secureClientPort beside its clientPort: with either set, these two
	// speak TLS (they need TLSCert) and Listen and ZKListen stay
	// plaintext, so that TLS and plaintext clients are served at once.
	SecureListen   string // Arbor's protocol over TLS (default: off)
	ZKSecureListen string // ZooKeeper's protocol over TLS (default: off)
	// NoReadOnly turns read-only mode off: a member that cannot reach a
	// quorum then refuses ZooKeeper clients that accept a read-only server
	// (canBeReadOnly), as it refuses every other client, instead of
	// serving them reads.
	NoReadOnly bool
	// FourLetterWords are the four-letter words answered on the ZooKeeper
	// ports, as ZooKeeper's 4lw.commands.whitelist: "*" for all of them;
	// nil for ZooKeeper's default, srvr (and isro, with read-only mode).
	// Any other word gets ZooKeeper's "not in the whitelist" line.
	FourLetterWords []string
	// ReconfigEnabled takes ZooKeeper's reconfig (op 16), from clients
	// with the rights to change the members, as ZooKeeper's
	// reconfigEnabled does; off, reconfig is answered ReconfigDisabled to
	// everyone. The member ops (arbor member) are taken either way.
	ReconfigEnabled bool
	// TLS of the peer port, for a cluster: this member's certificate and
	// key, used both to listen and to dial the others; with a CA file, the
	// members verify each other's certificates against it both ways.
	PeerTLSCert, PeerTLSKey, PeerTLSCA string

	// RemoteAdmin accepts membership changes from clients on any address;
	// without it only clients on a loopback address may make them. It
	// widens where from, not who: see AdminIdentities.
	RemoteAdmin bool
	// AdminIdentities are the client certificates, as x509 identities
	// (x509, "CN=ops,O=Arbor"), that may change the membership. Once
	// SuperDigest or TLSCA is set, membership changes need the superuser
	// or one of these, wherever the client connects from; until then any
	// client on an allowed address may make them. They need TLSCA.
	AdminIdentities []wire.Identity

	// Pprof serves Go's profiles (net/http/pprof) under /debug/pprof/ on
	// the HTTP listener. They show the process's internals and a CPU
	// profile costs CPU while it runs: off by default.
	Pprof bool
	// UI makes the handler of the web console, served under /ui/ on the
	// HTTP listener (console.Handler; nil: no console). It is a function
	// of the server so that the console, which reads the server's views,
	// need not be a package the server imports.
	UI func(*Server) http.Handler

	MinSessionTimeout time.Duration // default 2s
	MaxSessionTimeout time.Duration // default 60s
	MaxFrame          int           // request frame limit (default 1 MiB + 64 KiB: room for a full 1 MiB value)
	MaxDataSize       int           // znode data limit (default 1 MiB)
	MaxConns          int           // open client connections at most, not counting the sessions multiplexed connections carry (default 4096)
	MemoryBudget      int64         // bytes the member may hold for its clients' traffic (default 512 MiB; see memory.go)
	SnapshotBytes     uint64        // raft log bytes since the last snapshot that make a new one (default 128 MiB)
	RequestTimeout    time.Duration // how long a write may wait for its commit (default 10s)
	SnapshotEvery     uint64        // applied entries between snapshots (default 10,000)
	CatchUpEntries    uint64        // log entries kept behind a snapshot for followers a little behind (default 10,000)
	TickInterval      time.Duration // raft tick (default 50ms)
	ElectionTicks     int           // ticks without a leader before an election (default 10)
	HeartbeatTicks    int           // ticks between leader heartbeats (default 1)

	// Per-client limits (see limits.go and docs/security.md): zero means
	// the default, NoLimit turns a limit off where that is allowed.
	MaxConnsPerIP       int // open client connections from one IP address at most (default 60)
	MaxSessionsPerConn  int // sessions one multiplexed connection may carry (default 1024; see mux.go)
	MaxCarriedSessions  int // sessions all multiplexed connections together may carry (default 16,384; MaxConns counts the rest)
	MaxOutstanding      int // requests a connection may have read and not yet answered (default 1000; no NoLimit)
	MaxOutstandingBytes int // bytes of those requests' frames (default 16 MiB; no NoLimit; one request always fits)
	MaxWatches          int // watches a connection may hold, one-shot and lasting (default 100,000)
	MaxEphemerals       int // ephemeral nodes a session may own (default 10,000)
	MaxListNames        int // names a getChildren or getEphemerals reply may carry (default 1,000,000)
	MaxListBytes        int // bytes of names such a reply may carry (default 16 MiB)
	MaxPath             int // bytes of a path a request names, a sequential create's digits included (default 4096)
	MaxName             int // bytes of one name (a path's segment) in such a path (default 1024)
	MaxHandshaking      int // connections accepted and not yet through their handshake, on both client ports (default 256)

	// A new connection must finish its handshake, TLS included, within
	// HandshakeTimeout (default 10s), or within ShortHandshakeTimeout
	// (default 2s) while more than half of MaxHandshaking is in use, so
	// that idle connections filling the cap are shed quickly.
	HandshakeTimeout, ShortHandshakeTimeout time.Duration

	// The watch history (history.go): the events of the applied txns that
	// persistent and recursive watches replay, from a client's last zxid
	// after a reconnect or from addWatch's FromZxid. It keeps at most
	// WatchHistoryEvents events (default 100,000), none older than
	// WatchHistoryAge before the latest txn (default 1h), and at most
	// WatchHistoryBytes on disk (default 64 MiB); NoLimit turns one off
	// (at least one must stay). Past a limit it drops the oldest txns'
	// events until it is a tenth below every limit.
	WatchHistoryEvents int
	WatchHistoryAge    time.Duration
	WatchHistoryBytes  int64

	// LockRoot is where the HTTP lock API's locks live: the lock NAME is
	// the path LockRoot/NAME, the same lock a Go recipe takes there
	// (default /locks).
	LockRoot string
	// LockHistory is how many events the lock history keeps, over every
	// lock (default locks.DefaultHistory). Give every member the same.
	LockHistory int
	// EndDeadlocks makes the leader end the youngest wait of each deadlock
	// it finds: the waiter's node is deleted, and its wait fails with a
	// deadlock error. Off, deadlocks are only reported.
	EndDeadlocks bool

	// Limits of the HTTP listener (see http.go and docs/security.md).
	HTTPMaxConns    int           // open HTTP connections at most (default 1024; NoLimit turns it off)
	HTTPIdleTimeout time.Duration // how long a keep-alive HTTP connection may wait for its next request (default and at most 60s)
	// HTTPHosts are the host names (besides IP addresses and localhost)
	// that requests to the API and the console may name in their Host
	// header: a name not listed is refused, so that a web page whose
	// name an attacker points at this member (DNS rebinding) cannot use
	// a browser to reach it.
	HTTPHosts []string

	// SuperDigest is the superuser's digest identity, user:base64(sha1(
	// user:password)): a connection that authenticates as it passes every
	// ACL check (ZooKeeper's zookeeper.DigestAuthenticationProvider.
	// superDigest). Empty: no superuser.
	SuperDigest string
	// ZKSASLUsers is a JAAS configuration file, ZooKeeper's jaas.conf,
	// whose Server section names the users who may log in with SASL
	// (DIGEST-MD5) on the ZooKeeper ports, as user_NAME="password" options
	// of org.apache.zookeeper.server.auth.DigestLoginModule. It is read at
	// start. Empty: no SASL users, and a client that asks for a SASL
	// login gets the answer of a ZooKeeper server without a Server
	// section.
	ZKSASLUsers string
	// ZKSASLSuperUser is a user of ZKSASLUsers who, once logged in, is the
	// superuser (ZooKeeper's zookeeper.superUser). Empty: none.
	ZKSASLSuperUser string
	// DefaultACL is the ACL of a node created without one (default: the
	// open ACL, world:anyone:cdrwa). It may not use scheme auth.
	DefaultACL []wire.ACL

	Logger *zap.Logger

	// DiskFullFile is for fault testing only (arbord --fault-disk-full;
	// empty otherwise): while a file of this name exists, every write to
	// DataDir fails with ENOSPC, as on a full disk (raftnode.Config).
	DiskFullFile string
	// StallFile is for fault testing only (arbord --fault-stall; empty
	// otherwise): while a file of this name exists, the member's raft
	// goroutine stands still (raftnode.Config).
	StallFile string

	// writeTimeout is how long a client may take to accept what is
	// written to it before the server drops it (0: writeTimeout, 10s).
	// Tests shorten it, or lengthen it to rule that drop out.
	writeTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.ID == 0 {
		c.ID = 1
	}
	if c.WatchHistoryEvents == 0 {
		c.WatchHistoryEvents = DefaultWatchHistoryEvents
	}
	if c.WatchHistoryAge == 0 {
		c.WatchHistoryAge = DefaultWatchHistoryAge
	}
	if c.WatchHistoryBytes == 0 {
		c.WatchHistoryBytes = DefaultWatchHistoryBytes
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:2281"
	}
	if c.HTTP == "" {
		c.HTTP = "127.0.0.1:2481"
	}
	if c.DataDir == "" {
		c.DataDir = "arbor-data"
	}
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = session.DefaultMinTimeout
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = session.DefaultMaxTimeout
	}
	if c.MaxDataSize == 0 {
		c.MaxDataSize = tree.DefaultMaxDataSize
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = c.MaxDataSize + (wire.DefaultMaxFrame - tree.DefaultMaxDataSize)
	}
	if c.MaxConns == 0 {
		c.MaxConns = 4096
	}
	if c.MemoryBudget == 0 {
		c.MemoryBudget = DefaultMemoryBudget
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.ShortHandshakeTimeout <= 0 {
		c.ShortHandshakeTimeout = 2 * time.Second
	}
	c.setLimitDefaults()
	if c.LockRoot == "" {
		c.LockRoot = DefaultLockRoot
	}
	if c.LockHistory <= 0 {
		c.LockHistory = locks.DefaultHistory
	}
	if c.HTTPIdleTimeout == 0 {
		c.HTTPIdleTimeout = DefaultHTTPIdleTimeout
	}
	if c.FourLetterWords == nil {
		c.FourLetterWords = []string{"srvr"}
		if !c.NoReadOnly {
			c.FourLetterWords = append(c.FourLetterWords, "isro")
		}
	}
	if c.writeTimeout == 0 {
		c.writeTimeout = writeTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.TickInterval == 0 {
		c.TickInterval = 50 * time.Millisecond
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 10 // raftnode's default, which vouchForSessions needs to know
	}
	if c.PeerAddr == "" {
		c.PeerAddr = c.Peers[c.ID]
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// maxOutBuffer is how much unsent output a connection may queue before the
// server gives up on its reader and closes it (sooner when the member's
// memory for replies is short: see conn.send).
const maxOutBuffer = 64 << 20

// A connection keeps its read and write buffers for the next frame, unless
// they grew past these for a large one: 4,096 connections that each once
// read a 1 MiB frame would otherwise hold 4 GiB.
const (
	maxKeptReadBuffer  = 64 << 10
	maxKeptWriteBuffer = 1 << 20
)
