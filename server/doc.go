// Package server is arbord's client-facing side: the TCP listeners (Arbor's
// protocol, and ZooKeeper's on Config.ZKListen, each a codec in front of
// the same pipeline), the handshake that creates or reattaches a session,
// the per-connection request pipeline, the watch registry, session expiry,
// ZooKeeper's four-letter words, and the http listener for metrics and
// health.
//
// Every write becomes a tree.Txn proposed through raftnode and is answered
// once this server applied it; reads are served from the local tree after
// the connection's earlier requests. See docs/architecture.md.
package server
