package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/arbor-coord/arbor/lockq"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/session"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// Server is a running arbord member.
type Server struct {
	cfg  Config
	log  *zap.Logger
	node *raftnode.Node
	// lastLeader is the last leader this member knew, and leaderSeen when
	// it last knew one, since started (vouchForSessions); leaderMu guards
	// the two, so that they move together and only forward.
	leaderMu   sync.Mutex
	lastLeader uint64
	leaderSeen time.Duration
	fsm        *fsm
	sessions   *session.Table
	ids        *session.IDs
	watches    *watchRegistry
	metrics    *metrics
	limits     *limiter
	memory     *memory
	quotas     *quotaAlarms

	lockMetrics *lockMetrics
	lockWatch   *pathWatch                   // lock paths, woken as their queues change
	logins      *logins                      // the HTTP API's browser logins
	rates       rates                        // the overview's recent rates
	nodeWatch   *pathWatch                   // node paths, woken by their events (the tree API's event stream)
	backups     backups                      // snapshots taken for clients and not yet fetched whole (backup.go)
	groups      groups                       // the shards' raft groups besides the meta group (groups.go)
	closed      closedSessions               // how the meta group closed its last sessions, for the shards
	metaGroup   *group                       // the meta group: its node and fsm
	routing     atomic.Pointer[shardmap.Map] // the map requests are routed by; nil: one shard (route.go)
	renewals    *renewals                    // lease renewals gathered into batches (renewals.go)

	// saslUsers are Config.ZKSASLUsers' users, user to password; nil: no
	// SASL (sasl.go).
	saslUsers map[string]string

	// afterPreReplay, tests only, runs between the two parts of a
	// replay (replay.go).
	afterPreReplay func()
	// beforeMapGroups, tests only, runs in runGroups after it seeded the
	// splits it took and before it starts the groups of a changed map.
	beforeMapGroups atomic.Pointer[func()]
	// readOnlyConns counts the connections served read-only
	// (readOnlySession).
	readOnlyConns atomic.Int64

	transport  peerTransport // nil for a single node
	cards      *peerCards    // the peers' member cards; nil for a single node
	ln         net.Listener
	zkLn       net.Listener // ZooKeeper's protocol; nil unless Config.ZKListen is set
	secureLn   net.Listener // Arbor's protocol over TLS; nil unless Config.SecureListen is set
	zkSecureLn net.Listener // ZooKeeper's over TLS; nil unless Config.ZKSecureListen is set
	httpLn     net.Listener
	httpSrv    *http.Server

	mu        sync.Mutex
	conns     map[*conn]struct{} // mu guards conns, carried, bySession and heard
	carried   int                // of conns, the sessions carried by multiplexed connections (mux.go)
	bySession map[int64]*conn
	heard     map[int64]struct{} // sessions heard from since the last forward to the leader

	stats   serverStats // for the four-letter words
	started time.Time

	stopc chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

// New starts a server: it opens the data directory, replays the log,
// listens, and serves until Close.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.checkLimits(); err != nil {
		return nil, err
	}
	if err := checkSuperDigest(cfg.SuperDigest); err != nil {
		return nil, err
	}
	if err := checkAdminIdentities(&cfg); err != nil {
		return nil, err
	}
	for _, w := range cfg.FourLetterWords {
		if w != "*" && commandByWord(w) == nil {
			return nil, fmt.Errorf("four-letter word %q in the whitelist is not one Arbor answers", w)
		}
	}
	saslUsers, err := loadSASLUsers(&cfg)
	if err != nil {
		return nil, err
	}
	if cfg.DefaultACL != nil {
		if err := tree.ValidateACL(cfg.DefaultACL); err != nil {
			return nil, fmt.Errorf("default ACL: %w", err)
		}
		if slices.Equal(cfg.DefaultACL, wire.OpenACL) {
			cfg.DefaultACL = nil // the same to the tree, and shorter in each txn
		}
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger,
		sessions:  session.NewTable(cfg.MinSessionTimeout, cfg.MaxSessionTimeout),
		ids:       session.NewIDs(uint8(cfg.ID), time.Now()),
		conns:     map[*conn]struct{}{},
		bySession: map[int64]*conn{},
		heard:     map[int64]struct{}{},
		stopc:     make(chan struct{}),
		started:   time.Now(),
		saslUsers: saslUsers,
		groups:    groups{running: map[uint64]*group{}, wake: make(chan struct{}, 1), sweep: make(chan struct{}, 1)},
	}
	s.watches = newWatchRegistry(s.notify)
	s.watches.send = func(c *conn, rep *wire.Reply) {
		c.send(nil, rep)
		s.metrics.notifications.Inc()
	}
	s.watches.maxPerConn = cfg.MaxWatches
	s.fsm = newFSM(s.log, s.watches, s.sessions, cfg.MaxDataSize, cfg.LockHistory, shardmap.MetaGroup)
	s.fsm.onClose = s.sessionClosed
	s.fsm.onClosing = s.closed.put
	s.fsm.onSplit = s.onSplit
	s.fsm.onMapChanged = func() {
		s.refreshRouting()
		s.mapChanged()
	}
	s.fsm.onRestore = func() {
		s.refreshRouting()
		s.mapChanged()
		s.dropAllConns(wire.CodeConnectionLoss)
		s.lockWatch.changed(nil)
		s.nodeWatch.changed(nil)
	}
	s.metrics = newMetrics(s)
	s.limits = newLimiter(&s.cfg, s.metrics.reg)
	s.quotas = newQuotaAlarms(s.metrics.reg)
	s.memory = newMemory(cfg.MemoryBudget)
	s.memory.register(s.metrics.reg)
	s.lockMetrics = newLockMetrics(s, s.metrics.reg)
	s.fsm.locks.Observe = s.lockMetrics.observer()
	s.fsm.onLeaseExpired = s.lockMetrics.expiries.Inc
	s.fsm.onRenewal = s.lockMetrics.renewed
	s.lockWatch = newPathWatch()
	s.fsm.lockChanged = s.lockWatch.changed
	s.nodeWatch = newPathWatch()
	s.logins = newLogins()
	s.fsm.nodeChanged = s.nodeWatch.changedBy
	tlsConf, err := clientTLSConfig(&cfg)
	if err != nil {
		return nil, err
	}
	plainConf := tlsConf // the TLS of Listen and ZKListen
	if cfg.SecureListen != "" || cfg.ZKSecureListen != "" {
		if tlsConf == nil {
			return nil, errors.New("secure client ports need a TLS certificate and its key")
		}
		plainConf = nil
	}
	if s.ln, err = listen(cfg.Listen, plainConf); err != nil {
		return nil, fmt.Errorf("listen for clients: %w", err)
	}
	closeListeners := func() {
		for _, ln := range []net.Listener{s.ln, s.zkLn, s.secureLn, s.zkSecureLn, s.httpLn} {
			if ln != nil {
				ln.Close()
			}
		}
	}
	for _, l := range []struct {
		ln   *net.Listener
		addr string
		conf *tls.Config
		what string
	}{
		{&s.zkLn, cfg.ZKListen, plainConf, "ZooKeeper clients"},
		{&s.secureLn, cfg.SecureListen, tlsConf, "TLS clients"},
		{&s.zkSecureLn, cfg.ZKSecureListen, tlsConf, "ZooKeeper TLS clients"},
	} {
		if l.addr == "" {
			continue
		}
		if *l.ln, err = listen(l.addr, l.conf); err != nil {
			closeListeners()
			return nil, fmt.Errorf("listen for %s: %w", l.what, err)
		}
	}
	if cfg.HTTP != "-" {
		if s.httpLn, err = s.listenHTTP(cfg.HTTP); err != nil {
			closeListeners()
			return nil, fmt.Errorf("listen for http: %w", err)
		}
	}
	if s.fsm.history, err = openHistory(filepath.Join(cfg.DataDir, "history"), historyLimits{
		events: cfg.WatchHistoryEvents, age: cfg.WatchHistoryAge, bytes: cfg.WatchHistoryBytes,
	}, s.log.Named("history")); err != nil {
		closeListeners()
		return nil, err
	}
	s.watches.history = s.fsm.history
	if s.node, err = s.startRaft(); err != nil {
		closeListeners()
		s.fsm.history.close()
		return nil, err
	}
	s.metaGroup = &group{id: shardmap.MetaGroup, node: s.node, fsm: s.fsm}
	s.renewals = &renewals{node: s.node, timeout: cfg.RequestTimeout}
	// Sessions restored from disk got a fresh full timeout in Restore; those
	// replayed from the log got one when their create was applied.
	s.memory.node = s.node
	s.refreshRouting()
	s.startMapGroups()
	// For the meta group's preferred leader, if the map names one (under
	// the groups' lock: the meta group may be applying already).
	s.mapChanged()
	s.wg.Add(7)
	go s.runGroups()
	go s.sweepShardSessions()
	go s.acceptLoop(s.ln, newArborCodec)
	go s.sampleRates()
	go s.expiryLoop()
	go s.watchMemory()
	go s.watchDeadlocks()
	for _, l := range []struct {
		ln       net.Listener
		newCodec func(*conn) codec
	}{{s.zkLn, newZKCodec}, {s.secureLn, newArborCodec}, {s.zkSecureLn, newZKCodec}} {
		if l.ln != nil {
			s.wg.Add(1)
			go s.acceptLoop(l.ln, l.newCodec)
		}
	}
	if s.transport != nil {
		s.cards = &peerCards{heard: map[uint64]heardCard{}}
		s.transport.SetCardHandler(s.takeCard)
		s.wg.Add(2)
		go s.cardLoop()
		go s.registerLoop()
	}
	if s.httpLn != nil {
		s.httpSrv = newHTTPServer(&s.cfg, s.metrics.handler(s))
		go func() { _ = s.httpSrv.Serve(s.httpLn) }()
	}
	s.log.Info("arbord serving", zap.Uint64("id", cfg.ID), zap.String("clients", s.ln.Addr().String()),
		zap.String("zookeeper_clients", addrOf(s.zkLn)), zap.Bool("client_tls", plainConf != nil),
		zap.String("tls_clients", addrOf(s.secureLn)), zap.String("zookeeper_tls_clients", addrOf(s.zkSecureLn)), zap.String("data", cfg.DataDir), zap.Uint64("applied", s.node.Applied()))
	if plainConf == nil && cfg.TLSCA != "" {
		s.log.Warn("the plaintext client ports (--listen, --zk-listen) take clients without a certificate beside the secure ones: ACLs still apply, but no x509 identity does there")
	}
	if saslUsers != nil {
		s.log.Info("SASL logins (DIGEST-MD5) on the ZooKeeper ports", zap.String("users_file", cfg.ZKSASLUsers),
			zap.Int("users", len(saslUsers)), zap.String("superuser", cfg.ZKSASLSuperUser))
		if s.zkLn == nil && s.zkSecureLn == nil {
			s.log.Warn("SASL users are configured, and no ZooKeeper port is (--zk-listen, --zk-secure-listen): nobody can log in with SASL")
		}
	}
	if cfg.TLSCA != "" && cfg.SuperDigest == "" && len(cfg.AdminIdentities) == 0 {
		s.log.Warn("membership changes are refused to every client: clients need certificates, and neither a superuser nor an admin identity is configured")
	}
	return s, nil
}

// startRaft starts the raft member and, for a cluster, its peer transport.
func (s *Server) startRaft() (*raftnode.Node, error) {
	cfg := s.cfg
	rc := raftnode.Config{
		ID: cfg.ID, Dir: cfg.DataDir, TickInterval: cfg.TickInterval,
		ElectionTicks: cfg.ElectionTicks, HeartbeatTicks: cfg.HeartbeatTicks,
		SnapshotEvery: cfg.SnapshotEvery, CatchUpEntries: cfg.CatchUpEntries, Logger: s.log.Named("raft"),
		SnapshotBytes: cfg.SnapshotBytes, ForceNewCluster: cfg.ForceNewCluster, DiskFullFile: cfg.DiskFullFile, StallFile: cfg.StallFile,
		ResendWindow: cfg.RequestTimeout + 2*time.Second, // past which no write waits
	}
	s.memory.raftConfig(&rc)
	if len(cfg.Peers) > 0 {
		if _, ok := cfg.Peers[cfg.ID]; !ok {
			return nil, fmt.Errorf("--peers does not name this member (%d)", cfg.ID)
		}
		if err := checkObservers(&cfg); err != nil {
			return nil, err
		}
		rc.Peers, rc.Join, rc.Learners = cfg.Peers, cfg.Join, cfg.Observers
		tr, err := s.newTransport()
		if err != nil {
			return nil, err
		}
		s.transport, rc.Transport = tr, tr
	}
	node, err := raftnode.Start(rc, s.fsm)
	if err != nil {
		if s.transport != nil {
			s.transport.Close()
		}
		return nil, err
	}
	if s.transport != nil {
		s.transport.Attach(node, s.touchSessions)
	}
	return node, nil
}

// checkObservers refuses observers that are not members, and a cluster of
// observers alone.
func checkObservers(cfg *Config) error {
	voters := maps.Clone(cfg.Peers)
	for _, id := range cfg.Observers {
		if _, ok := cfg.Peers[id]; !ok {
			return fmt.Errorf("observer %d is not one of the members (--peers)", id)
		}
		delete(voters, id)
	}
	if len(voters) == 0 {
		return errors.New("every member is an observer: a cluster needs a voter")
	}
	return nil
}

// peerTransport is what a member needs of its raft transport: a
// raftnode.TCPTransport, or a raftnode.MemTransport in tests.
type peerTransport interface {
	raftnode.Transport
	Attach(n *raftnode.Node, touch func(ids []int64))
	Group(g uint64) raftnode.Transport
	AttachGroup(g uint64, n *raftnode.Node)
	SendTouches(to uint64, ids []int64)
	TouchesUnanswered(to uint64) time.Duration
	Probe(to uint64)
	SendCard(to uint64, card []byte)
	SetCardHandler(h func(from uint64, card []byte))
	SetFilter(f raftnode.Filter)
	SetDelay(d time.Duration)
	Close() error
}

// newTransport makes the member's peer transport: TCP on PeerAddr, or a
// place on Config.PeerNetwork.
func (s *Server) newTransport() (peerTransport, error) {
	cfg := &s.cfg
	if cfg.PeerNetwork != nil {
		if cfg.PeerTLSCert != "" || cfg.PeerTLSKey != "" || cfg.PeerTLSCA != "" {
			return nil, errors.New("peer TLS needs the TCP peer transport, not Config.PeerNetwork")
		}
		return cfg.PeerNetwork.NewTransport(cfg.ID), nil
	}
	opts, err := peerTLSOptions(cfg)
	if err != nil {
		return nil, err
	}
	return raftnode.NewTCPTransport(cfg.ID, cfg.PeerAddr, cfg.Peers, s.log.Named("peers"), opts...)
}

// Addr is the client listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// ZKAddr is the address of the listener for ZooKeeper's protocol, nil when
// it is off.
func (s *Server) ZKAddr() net.Addr { return lnAddr(s.zkLn) }

// SecureAddr is the address of the TLS listener for Arbor's protocol
// (Config.SecureListen), nil when it is off.
func (s *Server) SecureAddr() net.Addr { return lnAddr(s.secureLn) }

// ZKSecureAddr is the address of the TLS listener for ZooKeeper's
// protocol (Config.ZKSecureListen), nil when it is off.
func (s *Server) ZKSecureAddr() net.Addr { return lnAddr(s.zkSecureLn) }

func lnAddr(ln net.Listener) net.Addr {
	if ln == nil {
		return nil
	}
	return ln.Addr()
}

// addrOf is ln's address for the log, "off" for none.
func addrOf(ln net.Listener) string {
	if ln == nil {
		return "off"
	}
	return ln.Addr().String()
}

// HTTPAddr is the http listener's address, nil when it is off.
func (s *Server) HTTPAddr() net.Addr {
	if s.httpLn == nil {
		return nil
	}
	return s.httpLn.Addr()
}

// Done is closed when the server's raft node stops, by Close or by a fatal
// error (such as a failed fsync).
func (s *Server) Done() <-chan struct{} { return s.node.Done() }

// Close stops accepting, closes every connection, stops raft and closes
// the store. Sessions are not closed: they live on in the log, and a
// restarted server gives each a fresh timeout.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.stopc)
		for _, ln := range []net.Listener{s.ln, s.zkLn, s.secureLn, s.zkSecureLn} {
			if ln != nil {
				ln.Close()
			}
		}
		if s.httpSrv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = s.httpSrv.Shutdown(ctx)
			cancel()
		}
		s.mu.Lock()
		for c := range s.conns {
			c.cancel()
		}
		s.mu.Unlock()
		s.wg.Wait()
		s.backups.closeAll()
		s.handOverLeadership()
		err = errors.Join(s.stopGroups(), s.node.Stop())
		if s.transport != nil {
			s.transport.Close()
		}
		// After the apply goroutine stopped: nothing records any more.
		err = errors.Join(err, s.fsm.history.close())
	})
	return err
}

// handOverLeadership hands this member's leaderships, of the meta group
// and of the shards' groups it leads, to other members before it stops,
// so that the cluster does not wait an election timeout for new leaders
// (a planned restart, a rolling upgrade). It waits two election timeouts
// at most.
func (s *Server) handOverLeadership() {
	if s.transport == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Duration(s.cfg.ElectionTicks)*s.cfg.TickInterval)
	defer cancel()
	var wg sync.WaitGroup
	for _, g := range append([]*group{s.metaGroup}, s.runningGroups()...) {
		wg.Go(func() {
			if to, err := g.node.TransferLeadership(ctx); to != 0 {
				s.log.Info("handed the leadership over before stopping", zap.Uint64("group", g.id), zap.Uint64("to", to), zap.Error(err))
			}
		})
	}
	wg.Wait()
}

// Run runs a server until ctx is done or the server fails.
func Run(ctx context.Context, cfg Config) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		s.log.Info("shutting down")
	case <-s.Done():
	}
	nodeErr := s.node.Err()
	if err := s.Close(); err != nil {
		return err
	}
	if nodeErr != nil && !errors.Is(nodeErr, raftnode.ErrStopped) {
		return nodeErr
	}
	return nil
}

// acceptLoop serves the connections of ln, each with the codec newCodec
// makes.
func (s *Server) acceptLoop(ln net.Listener, newCodec func(*conn) codec) {
	defer s.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.stopc:
				return
			default:
			}
			s.log.Warn("accept failed", zap.Error(err))
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if s.startHandshake(nc) {
			s.serveConn(newConn(s, nc, newCodec), "")
		}
	}
}

// startHandshake counts nc, just accepted, as in its handshake (see
// handshakes), or closes it at once when the cap is reached.
func (s *Server) startHandshake(nc net.Conn) bool {
	ok, pressed := s.limits.handshakes.take(nc)
	if !ok {
		// Closed before anything is read or allocated for it: a flood of
		// connections costs no more than its accepts.
		nc.Close()
		_ = s.limits.refuse(s.log, limitHandshaking, wire.CodeTooManyConnections,
			"closed a connection from %s at once: %d connections are in their handshake", remoteIP(nc.RemoteAddr()), s.cfg.MaxHandshaking)
		return false
	}
	if pressed {
		s.handshakePressure()
	}
	return true
}

// serveConn serves c, in its handshake (see handshakes), on a goroutine of
// its own, or refuses it when the server is over a limit: over is a limit
// its caller found it over, or "" for none.
func (s *Server) serveConn(c *conn, over string) {
	code := wire.CodeTooManyConnections
	if over == "" {
		code, over = s.addConn(c)
	}
	if code != wire.CodeOK {
		go c.refuse(code, over)
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		c.serve()
	}()
}

// handshakePressure logs, at most once a second, that the connections in
// their handshake went over half the cap.
func (s *Server) handshakePressure() {
	if _, ok := s.limits.mayLog("handshake_pressure", time.Now()); ok {
		s.log.Warn("over half the handshake cap in use: handshake timeout shortened",
			zap.Int("cap", s.cfg.MaxHandshaking), zap.Duration("timeout", s.limits.handshakes.short))
	}
}

// refuse reads a connection's handshake and answers it with an error: code,
// for being over limit (or "" when the server is stopping). While the
// handshake cap is under pressure it closes the connection at once
// instead: an address over its own limit must not fill the cap with
// connections held for their answer.
func (c *conn) refuse(code wire.Code, limit string) {
	defer c.cancel()
	defer c.nc.Close()
	defer c.srv.limits.handshakes.done(c.nc)
	// Counted before the client can hear of it: what it does next may
	// be to read the count.
	if limit != "" {
		_ = c.srv.limits.refuse(c.log, limit, code, "refused a connection from %s", remoteIP(c.nc.RemoteAddr()))
	}
	if !c.srv.limits.handshakes.pressing() {
		c.srv.limits.handshakes.shorten(c.nc, time.Second)
		if _, ok := c.codec.readConnect(bufio.NewReader(c.nc)); ok {
			_, _ = c.nc.Write(c.codec.appendConnectResponse(nil, &wire.ConnectResponse{ProtocolVersion: wire.ProtocolVersion, Err: code}))
		}
	}
}

// addConn takes a new connection on, or names why not: the code to refuse
// it with, and the limit it is over.
func (s *Server) addConn(c *conn) (wire.Code, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stopc:
		return wire.CodeShuttingDown, ""
	default:
	}
	switch {
	case c.carried:
		if over(s.carried+1, s.cfg.MaxCarriedSessions) {
			return wire.CodeTooManyConnections, limitCarriedSessions
		}
		s.carried++
	case len(s.conns)-s.carried >= s.cfg.MaxConns:
		return wire.CodeTooManyConnections, limitConns
	case !s.limits.addConn(remoteIP(c.nc.RemoteAddr())):
		return wire.CodeTooManyConnections, limitConnsPerIP
	}
	s.conns[c] = struct{}{}
	s.metrics.connections.Set(float64(len(s.conns)))
	return wire.CodeOK, ""
}

func (s *Server) dropConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.conns[c]; ok && c.carried {
		s.carried--
	} else if ok {
		s.limits.dropConn(remoteIP(c.nc.RemoteAddr()))
	}
	delete(s.conns, c)
	if s.bySession[c.session] == c {
		delete(s.bySession, c.session)
	}
	s.metrics.connections.Set(float64(len(s.conns)))
}

// dropAllConns ends every client connection, telling each client it lost
// its connection: after a snapshot replaced the tree, clients reattach and
// restore their watches against the new state (setWatches fires what
// changed), and sessions the snapshot no longer has are refused.
func (s *Server) dropAllConns(code wire.Code) {
	s.dropConns(code, func(*conn) bool { return true })
}

// dropConns closes the connections that which picks, telling their
// clients code.
func (s *Server) dropConns(code wire.Code, which func(*conn) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if which(c) {
			c.goodbye(code)
			c.cancel()
		}
	}
}

// bindSession makes c the connection of its session on this server; a
// connection the session had before is closed.
func (s *Server) bindSession(c *conn) {
	s.mu.Lock()
	old := s.bySession[c.session]
	s.bySession[c.session] = c
	s.mu.Unlock()
	if old != nil && old != c {
		old.goodbye(wire.CodeSessionMoved)
		old.cancel()
	}
}

// sessionClosed is called after a session's close was applied: its
// connection, if it is here and did not ask for the close itself, is told
// and closed.
func (s *Server) sessionClosed(id int64) {
	select {
	case s.groups.sweep <- struct{}{}: // its ephemerals in the shards go too
	default:
	}
	s.mu.Lock()
	c := s.bySession[id]
	s.mu.Unlock()
	if c != nil && !c.closingSession.Load() {
		c.goodbye(wire.CodeSessionExpired)
		c.cancel()
	}
}

// notify queues a watch notification of ev, in group at zxid, on c, with
// the node's data and Stat when ev carries them. Its zxid is a position
// for a client that speaks them (eventZxid).
func (s *Server) notify(c *conn, group uint64, zxid int64, ev tree.Event, turns []string) {
	c.send(nil, &wire.Reply{Xid: wire.XidNotification, Zxid: c.eventZxid(group, zxid), EventType: ev.Type,
		State: wire.StateConnected, Path: ev.Path, Data: ev.Data, Stat: ev.Stat, Turns: turns})
	s.metrics.notifications.Inc()
}

// admit checks what a write can be refused for without a round through the
// log: the paths and the data sizes. The tree checks them again on apply.
func (s *Server) admit(r *wire.Request) error {
	for p, sequential := range r.Paths {
		if err := wire.ValidatePath(p, sequential); err != nil {
			return err
		}
	}
	ops := []wire.Request{*r}
	if r.Op == wire.OpMulti {
		ops = r.Ops
	}
	for i := range ops {
		op := &ops[i]
		if op.Op.Counts(wire.LimitDataSize) && len(op.Data) > s.cfg.MaxDataSize {
			return wire.Errorf(wire.CodeDataTooLarge, "data of %d bytes is over the %d-byte limit", len(op.Data), s.cfg.MaxDataSize)
		}
		if op.Op == wire.OpCreate && isDelayNode(op.Path) {
			return wire.Errorf(wire.CodeBadArguments, "%s: a lock-delay's node is the server's to make", op.Path)
		}
	}
	return nil
}

// isDelayNode reports whether a create of path would make a node of kind
// lockq.Delay, which sorts before every holder of its lock.
func isDelayNode(path string) bool {
	name := path[strings.LastIndexByte(path, '/')+1:]
	if !strings.HasPrefix(name, lockq.Mark) || !strings.Contains(name, "-"+string(lockq.Delay)+"-") {
		return false // every create pays this much, no more
	}
	// As named, or with the number a sequential create gets.
	for _, n := range []string{name, name + strings.Repeat("0", lockq.SeqDigits)} {
		if e, ok := lockq.Parse(n); ok && e.Kind == lockq.Delay {
			return true
		}
	}
	return false
}

// write proposes a txn the server itself makes and waits for its result.
func (s *Server) write(ctx context.Context, txn *tree.Txn) (*tree.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	g, err := s.groupOfTxn(txn)
	if err == nil {
		err = s.prepare(ctx, g, txn)
	}
	if err != nil {
		return nil, err
	}
	o := g.node.Propose(ctx, tree.AppendTxn(nil, txn)).Wait(ctx)
	if o.Err != nil {
		return nil, s.writeErrorIn(g, o.Err)
	}
	res := o.Result.(*tree.Result)
	s.quotas.note(s.log, res.Quota, txn.Session)
	if txn.Type == tree.TxnCloseSession && res.Err == nil {
		s.awaitEndedInShards(ctx, append([]int64{txn.Session}, res.Closed...))
	}
	return res, res.Err
}

// awaitEndedInShards waits, on a sharded cluster, until no other group
// this member runs holds an ephemeral of the sessions ids the meta group
// closed (each shard's leader ends them at once: sweepShardSessions), so
// that a close's answer comes once their ephemerals, a lease's lock nodes,
// are gone everywhere, as on a cluster of one group. It passes over a
// group with no leader, which ends nothing until it has one, and gives up
// when ctx ends: the shards end them all the same.
func (s *Server) awaitEndedInShards(ctx context.Context, ids []int64) {
	for _, g := range s.runningGroups() {
		for g.node.Leader() != 0 && g.fsm.holdsEphemeralsOf(ids) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
}

// holdsEphemeralsOf reports whether f's tree holds an ephemeral of one of
// the sessions ids.
func (f *fsm) holdsEphemeralsOf(ids []int64) bool {
	var holds bool
	f.read(func(t *tree.Tree) {
		holds = slices.ContainsFunc(ids, func(id int64) bool { return len(t.Ephemerals(id)) > 0 })
	})
	return holds
}

// lastZxid is the zxid of the last txn applied.
func (f *fsm) lastZxid() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.zxid
}
