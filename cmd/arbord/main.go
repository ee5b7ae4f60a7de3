// Command arbord runs an Arbor server. With no flags it runs a single node
// with its data in ./arbor-data, clients on 127.0.0.1:2281 and metrics on
// 127.0.0.1:2481. Every flag can also be set by an ARBOR_* environment
// variable (--data is ARBOR_DATA, --log-level is ARBOR_LOG_LEVEL, ...); a
// flag on the command line wins.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/arbor-coord/arbor/console"
	"github.com/arbor-coord/arbor/locks"
	"github.com/arbor-coord/arbor/server"
	"github.com/arbor-coord/arbor/tree"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "arbord:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("arbord", flag.ContinueOnError)
	var (
		cfg      server.Config
		id       = fs.Uint64("id", 1, "this member's id")
		peers    = fs.String("peers", "", "the cluster's members as id=host:port,... (empty: a single node)")
		observer = fs.String("observers", "", "members of --peers that are observers, as id,...: they replicate the log and serve reads and watches but never vote (ZooKeeper's observers); give every member the same")
		logLevel = fs.String("log-level", "info", "debug, info, warn or error")
		defACL   = fs.String("default-acl", "world:anyone:cdrwa", "ACL of a node created without one, as scheme:id:perms,... (see docs/security.md)")
		admins   = fs.String("admin-identities", "", "client certificates that may change the membership, as x509:SUBJECT,... such as x509:CN=ops,O=Arbor (needs --tls-ca)")
		ui       = fs.Bool("ui", true, "serve the web console at /ui/ on the --http listener")
		readOnly = fs.Bool("read-only-mode", true, "when this member cannot reach a quorum, serve reads to the ZooKeeper clients that accept a read-only server (canBeReadOnly), as ZooKeeper's readonlymode.enabled")
		words    = fs.String("zk-4lw-whitelist", "", "four-letter words answered on the ZooKeeper ports, as word,... or * for all, as ZooKeeper's 4lw.commands.whitelist (empty: ZooKeeper's default, srvr, and isro with read-only mode)")
		hosts    = fs.String("http-hosts", "", "host names (besides IP addresses and localhost) the HTTP API and console answer to, as name,...: a request naming another host is refused (DNS rebinding)")
		restore  = fs.String("restore", "", "start a new cluster from this backup file (arbor snapshot save): --data must not exist or be empty, and this member is --id of --peers (alone without --peers); give it on the first start only")
		force    = fs.Bool("force-new-cluster", false, "start this member as the only member of a new cluster, with everything its --data holds, when a quorum is lost for good (docs/reliability.md); give it on one start only, then add members back with arbor member add")
		bump     = fs.Uint64("bump-zxid", 0, "with --restore: begin the new cluster's zxids this far past the backup's, past any the old cluster reached, so that none is handed out twice (fencing tokens); give every member the same")
		state    = fs.Bool("print-state", false, "print what the --data of a stopped member holds (its log's end, commit index, members) and exit: to choose the survivor to force a new cluster from")
		memLimit byteSize
		budget   = byteSize(server.DefaultMemoryBudget)
		snapSize = byteSize(128 << 20)
	)
	fs.StringVar(&cfg.DataDir, "data", "arbor-data", "directory for the raft log and snapshots")
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:2281", "client address")
	fs.StringVar(&cfg.HTTP, "http", "127.0.0.1:2481", `metrics and health address ("-" for none)`)
	fs.DurationVar(&cfg.HTTPIdleTimeout, "http-idle-timeout", server.DefaultHTTPIdleTimeout,
		fmt.Sprintf("how long a keep-alive connection on --http may wait for its next request before it is closed (more than 0, at most %v)", server.MaxHTTPIdleTimeout))
	fs.StringVar(&cfg.ZKListen, "zk-listen", "", "address for ZooKeeper's client protocol and four-letter words (empty: off)")
	fs.StringVar(&cfg.LockRoot, "lock-root", server.DefaultLockRoot, "the path under which the HTTP lock API's lock NAME lives, as NAME's own node")
	fs.IntVar(&cfg.LockHistory, "lock-history", locks.DefaultHistory, "how many events (at most 10000) the replicated lock history keeps: acquisitions, releases, expiries, breaks, over every lock; give every member the same")
	fs.IntVar(&cfg.WatchHistoryEvents, "watch-history-events", server.DefaultWatchHistoryEvents,
		"how many events of applied changes this member keeps for watches that resume from a zxid (-1: no limit by count)")
	fs.DurationVar(&cfg.WatchHistoryAge, "watch-history-age", server.DefaultWatchHistoryAge,
		"how long before the latest change the watch history keeps events (-1ns: no limit by age)")
	fs.Int64Var(&cfg.WatchHistoryBytes, "watch-history-bytes", server.DefaultWatchHistoryBytes,
		"bytes the watch history may keep on disk (-1: no limit by size)")
	fs.BoolVar(&cfg.EndDeadlocks, "end-deadlocks", false, "the leader ends the youngest wait of each deadlock it finds (its waiter gets a deadlock error); off, deadlocks are only reported")
	fs.StringVar(&cfg.PeerAddr, "peer-listen", "", "peer address (cluster only; default: this member's entry in --peers)")
	fs.BoolVar(&cfg.ReconfigEnabled, "reconfig-enabled", false, "take ZooKeeper's reconfig (dynamic reconfiguration) from clients with the rights to change the members, as ZooKeeper's reconfigEnabled (off by default there too); arbor member works either way")
	fs.BoolVar(&cfg.RemoteAdmin, "remote-admin", false, "accept membership changes from non-loopback clients (who may make them is unchanged: see --admin-identities)")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve Go's profiles under /debug/pprof/ on the --http listener")
	fs.BoolVar(&cfg.Join, "join", false, "join a running cluster that added this member (arbor member add); do not bootstrap")
	fs.DurationVar(&cfg.TickInterval, "tick", 0, "raft tick (default 50ms)")
	fs.IntVar(&cfg.ElectionTicks, "election-ticks", 0, "ticks without a leader before an election (default 10)")
	fs.IntVar(&cfg.HeartbeatTicks, "heartbeat-ticks", 0, "ticks between leader heartbeats (default 1)")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", 0, "how long a write may wait to commit (default 10s)")
	fs.DurationVar(&cfg.MinSessionTimeout, "min-session-timeout", 0, "shortest session timeout granted (default 2s)")
	fs.DurationVar(&cfg.MaxSessionTimeout, "max-session-timeout", 0, "longest session timeout granted (default 60s)")
	fs.IntVar(&cfg.MaxConns, "max-conns", 0, "open client connections at most (default 4096); the sessions multiplexed connections carry count toward --max-carried-sessions instead")
	fs.DurationVar(&cfg.HandshakeTimeout, "handshake-timeout", 0, "how long a new client connection may take to finish its handshake, TLS included (default 10s)")
	fs.DurationVar(&cfg.ShortHandshakeTimeout, "short-handshake-timeout", 0, "the handshake timeout while over half of --max-handshaking is in use (default 2s)")
	fs.IntVar(&cfg.MaxDataSize, "max-data", 0, "znode data limit in bytes (default 1 MiB)")
	fs.Uint64Var(&cfg.SnapshotEvery, "snapshot-every", 0, "applied entries between snapshots (default 10000)")
	fs.Var(&snapSize, "snapshot-bytes", "raft log bytes since the last snapshot that make a new one, as 128MiB")
	fs.Var(&budget, "memory-budget", "memory the member may hold for its clients' traffic (requests, replies, raft's queues), as 512MiB: past it writers are slowed, then refused (docs/reliability.md)")
	limits := limitFlags(fs, &cfg)
	fs.Var(&memLimit, "memory-limit", "soft limit on the memory the Go runtime holds, as 300MiB: the collector runs more often as it nears it (0: none, or GOMEMLIMIT's)")
	fs.StringVar(&cfg.SuperDigest, "super-digest", "", "the superuser, as user:base64(sha1(user:password)); it passes every ACL check (empty: none)")
	fs.StringVar(&cfg.ZKSASLUsers, "zk-sasl-users", "", `ZooKeeper's JAAS file (jaas.conf) whose Server section names the users who may log in with SASL DIGEST-MD5 on the ZooKeeper ports, as user_NAME="password" (empty: no SASL)`)
	fs.StringVar(&cfg.ZKSASLSuperUser, "zk-sasl-super-user", "", "a user of --zk-sasl-users who, once logged in, is the superuser, as ZooKeeper's zookeeper.superUser (empty: none)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "TLS certificate (PEM) of the client ports, --listen and --zk-listen, or only the secure ones when set (empty: plaintext)")
	fs.StringVar(&cfg.SecureListen, "secure-listen", "", "address for Arbor's protocol over TLS beside plaintext --listen (needs --tls-cert; empty: off)")
	fs.StringVar(&cfg.ZKSecureListen, "zk-secure-listen", "", "address for ZooKeeper's protocol over TLS beside plaintext --zk-listen, as ZooKeeper's secureClientPort (needs --tls-cert; empty: off)")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "the key (PEM) of --tls-cert")
	fs.StringVar(&cfg.TLSCA, "tls-ca", "", "CA certificates (PEM); with it, clients must present a certificate it signed")
	fs.StringVar(&cfg.PeerTLSCert, "peer-tls-cert", "", "TLS certificate (PEM) of this member on the peer port, to listen and to dial (empty: plaintext)")
	fs.StringVar(&cfg.PeerTLSKey, "peer-tls-key", "", "the key (PEM) of --peer-tls-cert")
	fs.StringVar(&cfg.PeerTLSCA, "peer-tls-ca", "", "CA certificates (PEM); with it, members verify each other's certificates both ways")
	fs.StringVar(&cfg.StallFile, "fault-stall", "", "fault testing only: while this file exists, the member's raft goroutine stands still (a disk that does not answer, a starved CPU) while the rest of it runs (docs/reliability.md)")
	fs.StringVar(&cfg.DiskFullFile, "fault-disk-full", "", "fault testing only: while this file exists, every write to --data fails with ENOSPC, as on a full disk, and the member stops at its first (docs/reliability.md)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := applyEnv(fs, os.LookupEnv); err != nil {
		return err
	}
	if *state {
		return printState(os.Stdout, cfg.DataDir)
	}
	if err := limits.apply(); err != nil {
		return err
	}
	if err := checkHTTPIdleTimeout(cfg.HTTPIdleTimeout); err != nil {
		return err
	}
	if memLimit > 0 {
		debug.SetMemoryLimit(int64(memLimit))
	}
	cfg.MemoryBudget, cfg.SnapshotBytes = int64(budget), uint64(snapSize)
	cfg.NoReadOnly = !*readOnly
	if *ui {
		cfg.UI = console.Handler
	}
	if *words != "" {
		cfg.FourLetterWords = strings.Split(*words, ",")
	}
	if *hosts != "" {
		cfg.HTTPHosts = strings.Split(*hosts, ",")
	}
	cfg.ID = *id
	var err error
	if cfg.Peers, err = parsePeers(*peers); err != nil {
		return err
	}
	if cfg.Observers, err = parseIDs("--observers", *observer); err != nil {
		return err
	}
	if cfg.DefaultACL, err = tree.ParseACL(*defACL); err != nil {
		return fmt.Errorf("--default-acl: %w", err)
	}
	if cfg.AdminIdentities, err = server.ParseAdminIdentities(*admins); err != nil {
		return fmt.Errorf("--admin-identities: %w", err)
	}
	if err := checkRecovery(*restore, *force, cfg.Join, *bump); err != nil {
		return err
	}
	cfg.ForceNewCluster = *force
	log, err := newLogger(*logLevel)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	cfg.Logger = log
	if *restore != "" {
		h, err := server.Restore(*restore, *bump, cfg)
		if err != nil {
			return fmt.Errorf("--restore: %w", err)
		}
		log.Info("restored a backup into a new data directory", zap.String("file", *restore), zap.String("data", cfg.DataDir),
			zap.Uint64("zxid", h.Index), zap.Uint64("bumped_to", h.Index+*bump), zap.Int64("znodes", h.Znodes), zap.Int64("sessions", h.Sessions),
			zap.Uint64("from_member", h.Member), zap.String("taken", h.Created))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return server.Run(ctx, cfg)
}

// applyEnv sets each flag not given on the command line from its ARBOR_*
// variable, if set.
func applyEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := "ARBOR_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := lookup(name); ok && !given[f.Name] && err == nil {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, e)
			}
		}
	})
	return err
}

// limitFlagSet holds the flags of the per-client limits and of the HTTP
// connections. Each shows its real default, and 0 turns it off (as
// ZooKeeper's maxClientCnxns=0 does), except for the outstanding requests,
// which are always bounded.
type limitFlagSet []limitFlag

type limitFlag struct {
	name     string
	v        *int
	def      int
	optional bool // 0 turns it off
	usage    string
}

func limitFlags(fs *flag.FlagSet, cfg *server.Config) limitFlagSet {
	flags := limitFlagSet{
		{"max-conns-per-ip", &cfg.MaxConnsPerIP, server.DefaultMaxConnsPerIP, true,
			"open client connections from one IP address at most (0: no limit)"},
		{"max-sessions-per-conn", &cfg.MaxSessionsPerConn, server.DefaultMaxSessionsPerConn, true,
			"sessions one multiplexed client connection may carry (0: no limit)"},
		{"max-carried-sessions", &cfg.MaxCarriedSessions, server.DefaultMaxCarriedSessions, true,
			"sessions all multiplexed client connections together may carry (0: no limit); --max-conns counts the other connections"},
		{"max-outstanding", &cfg.MaxOutstanding, server.DefaultMaxOutstanding, false,
			"requests a connection may have read and not yet answered; then the server stops reading it"},
		{"max-outstanding-bytes", &cfg.MaxOutstandingBytes, server.DefaultMaxOutstandingBytes, false,
			"bytes of request frames a connection may have read and not yet answered (one request always fits)"},
		{"max-watches", &cfg.MaxWatches, server.DefaultMaxWatches, true,
			"watches a connection may hold, one-shot and persistent (0: no limit)"},
		{"max-ephemerals", &cfg.MaxEphemerals, server.DefaultMaxEphemerals, true,
			"ephemeral nodes a session may own (0: no limit)"},
		{"max-list-names", &cfg.MaxListNames, server.DefaultMaxListNames, true,
			"names a getChildren or getEphemerals reply may carry (0: no limit)"},
		{"max-list-bytes", &cfg.MaxListBytes, server.DefaultMaxListBytes, true,
			"bytes of names a getChildren or getEphemerals reply may carry (0: no limit)"},
		{"max-path", &cfg.MaxPath, server.DefaultMaxPath, true,
			"bytes of a path a request may name, a sequential create's 10 digits included (0: no limit)"},
		{"max-name", &cfg.MaxName, server.DefaultMaxName, true,
			"bytes of one name (a path's segment) in such a path (0: no limit)"},
		{"max-handshaking", &cfg.MaxHandshaking, server.DefaultMaxHandshaking, true,
			"client connections that may be in their handshake at once, from all addresses; more are closed at once (0: no limit)"},
		{"http-max-conns", &cfg.HTTPMaxConns, server.DefaultHTTPMaxConns, true,
			"open connections on --http at most; one more is closed as soon as it is accepted (0: no limit)"},
	}
	for _, f := range flags {
		fs.IntVar(f.v, f.name, f.def, f.usage)
	}
	return flags
}

// apply turns the flags' values into the Config's: 0 into server.NoLimit
// where that is allowed; a negative value, or 0 where it is not, is an
// error.
func (flags limitFlagSet) apply() error {
	for _, f := range flags {
		switch {
		case *f.v < 0:
			return fmt.Errorf("--%s: %d is negative (0 turns a limit off)", f.name, *f.v)
		case *f.v == 0 && !f.optional:
			return fmt.Errorf("--%s: must be at least 1: it cannot be turned off", f.name)
		case *f.v == 0:
			*f.v = server.NoLimit
		}
	}
	return nil
}

// checkHTTPIdleTimeout refuses a --http-idle-timeout of 0, which the
// server would take as its default, and one out of the server's range.
func checkHTTPIdleTimeout(d time.Duration) error {
	if d <= 0 || d > server.MaxHTTPIdleTimeout {
		return fmt.Errorf("--http-idle-timeout: must be more than 0 and at most %v, not %v", server.MaxHTTPIdleTimeout, d)
	}
	return nil
}

// parsePeers parses "1=host:port,2=host:port".
func parsePeers(s string) (map[uint64]string, error) {
	peers := map[uint64]string{}
	if s == "" {
		return peers, nil
	}
	for _, part := range strings.Split(s, ",") {
		idStr, addr, ok := strings.Cut(part, "=")
		id, err := strconv.ParseUint(idStr, 10, 64)
		if !ok || err != nil || id == 0 || addr == "" {
			return nil, fmt.Errorf("--peers: %q is not id=host:port", part)
		}
		if _, dup := peers[id]; dup {
			return nil, fmt.Errorf("--peers: member %d named twice", id)
		}
		peers[id] = addr
	}
	return peers, nil
}

// parseIDs parses "4,5", the member ids of flag.
func parseIDs(flag, s string) ([]uint64, error) {
	var ids []uint64
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		id, err := strconv.ParseUint(part, 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("%s: %q is not a member id", flag, part)
		}
		if slices.Contains(ids, id) {
			return nil, fmt.Errorf("%s: member %d named twice", flag, id)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func newLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Encoding = "console"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.DisableStacktrace = true
	return cfg.Build()
}
