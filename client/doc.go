// Package client is the Go client of Arbor, a ZooKeeper-style coordination
// service: a session with an ensemble, the znode operations, one-shot
// watches, and reconnection that keeps the session.
//
//	c, err := client.Dial(ctx, []string{"10.0.0.1:2181", "10.0.0.2:2181"},
//		client.WithSessionTimeout(10*time.Second), client.WithLogger(log))
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//
//	if _, err := c.Create(ctx, "/app", nil, client.Persistent); err != nil && !errors.Is(err, client.ErrNodeExists) {
//		return err
//	}
//	data, stat, changed, err := c.GetW(ctx, "/app")
//	if err != nil {
//		return err
//	}
//	fmt.Printf("%q at version %d\n", data, stat.Version)
//	ev := <-changed // one event: NodeDataChanged, NodeDeleted, or a session event
//
// # Sessions and connections
//
// Dial connects to one server and starts a session. The client pings while
// idle and, when the connection breaks, reconnects to the servers in random
// order with exponential backoff and reattaches the same session, which
// keeps its ephemeral nodes and its watches. Requests in flight when the
// connection breaks fail with an error matching ErrConnectionLoss (they may
// or may not have been applied); requests made while disconnected wait for
// the reconnect, within their context. When a server says the session is
// gone, or no server has answered for a full session timeout (counted from
// the send of the last answered request, so never later than the server
// counts it), the session expires: every call then fails with
// ErrSessionExpired and the Client must be replaced, unless it was dialed
// WithSessionRenewal, which starts a new session. StateChanges reports
// these transitions; Done and Session tell when the current session ends.
//
// A process that keeps many sessions (thousands of lock holders, say)
// shares connections among them with a Mux: each Client dialed WithMux(m)
// travels on a channel of m's one connection to its server, and is
// otherwise the session it would be on a connection of its own.
//
// # Persistent and recursive watches
//
// AddWatch leaves a watch that stays: WatchPersistent sees every event of
// one node, WatchPersistentRecursive the creates, deletes and data changes
// of a whole subtree. Its events arrive in zxid order on one channel, also
// across reconnects (the server replays what was missed, from its durable
// change history); a reader that falls too far behind loses the watch with
// a last EventWatchRemoved event rather than silently missing events.
//
// A watch can start in the past: AddWatch(ctx, path, mode, FromZxid(z))
// first delivers every event after zxid z, in order, then the live ones,
// with no gap and no duplicate. The servers keep a bounded history (by
// count, age and bytes); asking for more than it holds fails with an error
// matching ErrHistoryCompacted, and errors.As finds a
// *HistoryCompactedError whose Oldest is the zxid to read the state at and
// resume from. After a reconnect the client restores its watches from the
// highest zxid it has seen, or from the txn before when its last
// notification is newer than every reply (the rest of that txn's
// notifications may have been lost with the connection; each lasting
// watch then drops the events the replay brings again); when the
// server's history no longer goes back that far, each lasting watch gets a
// last EventWatchRemoved whose Err matches both ErrEventsLost and
// ErrHistoryCompacted. FromZxid needs a server of protocol version 3
// (wire.ResumableWatches): an older one fails it with ErrUnsupported
// rather than start the watch live and leave a gap.
//
// # Requests
//
// Requests are pipelined: many may be in flight on one connection, and the
// server answers them in the order they were sent, so the calls of one
// goroutine take effect in order. Paths are checked before any round trip
// (ErrInvalidPath). Errors wrap the sentinels of this package with the
// operation and path ("get /x: no node"); compare them with errors.Is, and
// find the node with errors.As and *OpError.
//
// # Consistency of reads
//
// A read is served by the member the client is connected to, from what it
// has applied, which may be a little behind the leader (ZooKeeper's
// reads): a client never sees the tree go back in time, and sees its own
// writes, but may not yet see another client's write that was just
// acknowledged. Pass Linearizable to a read to see every write committed
// before the read began, at the cost of a round of heartbeats from the
// leader (shared by the reads that arrive together):
//
//	data, _, err := c.Get(ctx, "/app/config", client.Linearizable())
//
// Sync before a run of reads gives the same guarantee to all of them.
//
// # Subtrees
//
// Walk visits a node and everything below it, depth first and in name
// order (ZooKeeper's ZKUtil.visitSubTreeDFS, in the shape of fs.WalkDir:
// return SkipChildren to leave a node's subtree out); DeleteAll deletes a
// subtree, deepest nodes first, and counts what it deleted (zkCli's
// deleteall). They take one request a node, and WithRequestTimeout bounds
// each request rather than the whole call. Neither is atomic: a node
// deleted by another client meanwhile is skipped, and DeleteAll empties
// again a node that gets a new child meanwhile.
//
//	err := c.Walk(ctx, "/app", func(path string, st client.Stat, children []string) error {
//		fmt.Println(path, st.DataLength)
//		return nil
//	})
//	n, err := c.DeleteAll(ctx, "/app", client.WithRequestTimeout(5*time.Second))
//
// # Watches
//
// GetW, ExistsW and ChildrenW return a channel that receives exactly one
// Event and is then closed. Every call gets its own channel. A watch is left
// only when the call succeeds (or, for ExistsW, finds no node). When the
// session expires or the client is closed, every pending watch receives an
// event of Type EventSession and is closed.
//
// # ACLs and authentication
//
// Every znode has an ACL, ZooKeeper's: entries of a scheme, an id and
// permissions (PermRead, PermWrite, PermCreate, PermDelete, PermAdmin).
// Create takes one WithACL (else the node gets the server's default); GetACL
// and SetACL read and replace it; the helpers WorldACL, DigestACL, IPACL,
// AuthACL and X509ACL make entries, and ParseACL reads zkCli.sh's text form.
// A connection proves identities with credentials, given WithAuth at Dial
// or added later with AddAuth, and WhoAmI lists them:
//
//	c, err := client.Dial(ctx, servers, client.WithAuth("digest", client.DigestCredential("alice", "secret")))
//	...
//	_, err = c.Create(ctx, "/app", nil, client.Persistent,
//		client.WithACL(client.DigestACL(client.PermAll, "alice", "secret"), client.WorldACL(client.PermRead)))
//
// A request the ACLs do not allow fails with ErrNoAuth. Identities belong
// to a connection, so the client sends its credentials again on every new
// connection before any other request; if a server then refuses one, the
// client gives its session up (StateAuthFailed, see AddAuth).
//
// # Concurrency
//
// All methods of Client are safe for concurrent use, and every blocking call
// returns when its context ends.
package client
