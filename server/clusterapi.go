package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/locks"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// The cluster's views for operators: its sessions (/api/v1/sessions) and
// an overview of a member (/api/v1/overview), as the web console shows
// them (docs/http-api.md).

// maxSessionEphemerals is how many of a session's ephemeral paths its view
// lists; EphemeralCount counts them all.
const maxSessionEphemerals = 100

// SessionView is a session, or a lease, as the sessions view shows it.
type SessionView struct {
	ID             string   `json:"id"` // hex, as ZooKeeper's tools show it
	TimeoutMs      int32    `json:"timeout_ms,omitempty"`
	Lease          bool     `json:"lease,omitempty"` // an HTTP lock's lease, not a client's session
	LeaseOwner     string   `json:"lease_owner,omitempty"`
	LeaseExpiresAt string   `json:"lease_expires_at,omitempty"`
	AgeMs          int64    `json:"age_ms"` // since the member that answers learned of it; -1 unknown
	Member         uint64   `json:"member,omitempty"`
	ClientAddr     string   `json:"client_addr,omitempty"` // of its connection, when a member that answered has it
	Protocol       string   `json:"protocol,omitempty"`    // "arbor" or "zookeeper"
	LastHeardMsAgo int64    `json:"last_heard_ms_ago"`     // the connection's last request; -1 unknown
	Ephemerals     []string `json:"ephemerals"`            // the first maxSessionEphemerals the caller may read
	EphemeralCount int      `json:"ephemeral_count"`
}

// connView is what a member knows of a session's connection to it.
type connView struct {
	Session        string `json:"session"`
	ClientAddr     string `json:"client_addr"`
	Protocol       string `json:"protocol"`
	LastHeardMsAgo int64  `json:"last_heard_ms_ago"`
}

// localConns lists the sessions' connections to this member.
func (s *Server) localConns() []connView {
	now := time.Now()
	var out []connView
	for _, c := range s.sessionConns() {
		proto := "arbor"
		if _, ok := c.codec.(*zkCodec); ok {
			proto = "zookeeper"
		}
		c.stats.mu.Lock()
		heard := c.stats.lastResp
		c.stats.mu.Unlock()
		out = append(out, connView{Session: leaseID(c.session), ClientAddr: c.nc.RemoteAddr().String(), Protocol: proto,
			LastHeardMsAgo: now.Sub(heard).Milliseconds()})
	}
	return out
}

// peerConnsTimeout bounds how long Sessions waits for the other members'
// lists of connections.
const peerConnsTimeout = time.Second

// peerHTTP is the client that asks the other members: straight to them,
// never through a proxy the environment names.
var peerHTTP = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}

// peerConns asks the other members that are heard from for the
// connections of sessions to them (their /api/v1/connections), by member;
// a member that does not answer in time is left out.
func (s *Server) peerConns(ctx context.Context) map[uint64][]connView {
	ctx, cancel := context.WithTimeout(ctx, peerConnsTimeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[uint64][]connView{}
	for _, m := range s.Members().Members {
		addr := ReachableAddr(m.HTTPAddr, m.PeerAddr)
		if m.ID == s.cfg.ID || addr == "" || !m.Healthy {
			continue
		}
		wg.Go(func() {
			var v struct {
				Member      uint64     `json:"member"`
				Connections []connView `json:"connections"`
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/v1/connections", nil)
			resp, err := peerHTTP.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&v) != nil ||
				v.Member != m.ID { // an address that is not that member's (a loopback one, seen from another host)
				return
			}
			mu.Lock()
			out[m.ID] = v.Connections
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// ReachableAddr is addr, a member's listener's address, with the host of
// peer (the member's peer address) when addr's host is unspecified
// (0.0.0.0, ::): where another host reaches that listener. It is "" when
// either cannot be read.
func ReachableAddr(addr, peer string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if host, _, err = net.SplitHostPort(peer); err != nil {
			return ""
		}
	}
	return net.JoinHostPort(host, port)
}

// Sessions lists the cluster's sessions and leases as ids may see them
// (the ephemerals they may read; a lease's owner only with one of its
// nodes, or to the superuser), with their connections: to this
// member, and to the others that answer in time (the client's address
// is known only to the member it is connected to).
func (s *Server) Sessions(ctx context.Context, ids []wire.Identity) []SessionView {
	now := time.Now()
	out := []SessionView{}
	isSuper := super(ids)
	s.fsm.read(func(t *tree.Tree) {
		for _, ses := range t.Sessions() {
			v := SessionView{ID: leaseID(ses.ID), TimeoutMs: ses.TimeoutMs, AgeMs: -1, LastHeardMsAgo: -1, Ephemerals: []string{}}
			if ses.Lease != nil {
				v.Lease, v.LeaseOwner, v.LeaseExpiresAt = true, ses.Lease.Owner, msTime(ses.Lease.Expires)
			}
			if since, ok := s.sessions.Since(ses.ID); ok && !since.IsZero() {
				v.AgeMs = now.Sub(since).Milliseconds()
			}
			eph := t.Ephemerals(ses.ID)
			v.EphemeralCount = len(eph)
			readable := false
			for _, p := range eph {
				if t.Check(p, ids, wire.PermRead) == nil {
					readable = true
					if len(v.Ephemerals) < maxSessionEphemerals {
						v.Ephemerals = append(v.Ephemerals, p)
					}
				}
			}
			if v.Lease && !readable && !isSuper {
				v.LeaseOwner = "" // its owner is shown where its locks are: to who may read them
			}
			out = append(out, v)
		}
	})
	byID := make(map[string]*SessionView, len(out))
	for i := range out {
		byID[out[i].ID] = &out[i]
	}
	conns := s.peerConns(ctx)
	conns[s.cfg.ID] = s.localConns()
	for member, cs := range conns {
		for _, c := range cs {
			if v := byID[c.Session]; v != nil {
				v.Member, v.ClientAddr, v.Protocol, v.LastHeardMsAgo = member, c.ClientAddr, c.Protocol, c.LastHeardMsAgo
			}
		}
	}
	return out
}

// handleClusterAPI adds the sessions and overview endpoints to mux.
func (s *Server) handleClusterAPI(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"sessions": s.Sessions(r.Context(), s.HTTPIdentities(r))}, nil)
	})
	mux.HandleFunc("/api/v1/sessions", methodNotAllowed("GET"))
	mux.HandleFunc("GET /api/v1/connections", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"member": s.cfg.ID, "connections": s.localConns()}, nil)
	})
	mux.HandleFunc("/api/v1/connections", methodNotAllowed("GET"))
	mux.HandleFunc("DELETE /api/v1/sessions/{id}", answering(s.apiCloseSession))
	mux.HandleFunc("/api/v1/sessions/{id}", methodNotAllowed("DELETE"))
	mux.HandleFunc("GET /api/v1/overview", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.Overview(), nil)
	})
	mux.HandleFunc("/api/v1/overview", methodNotAllowed("GET"))
}

// apiCloseSession answers DELETE /api/v1/sessions/ID: it closes the
// session (or lease), whose ephemerals go with it, as its expiry would.
// It needs the superuser: an operator's act, not a client's. Coming from
// loopback proves nothing over HTTP (a browser on the member's host, a
// proxy), and the listener takes no client certificates.
func (s *Server) apiCloseSession(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 16, 64)
	if err != nil || id == 0 {
		return nil, badRequest("%q is not a session id (hex)", r.PathValue("id"))
	}
	if !super(s.HTTPIdentities(r)) {
		return nil, &apiError{http.StatusForbidden, "closing a session over HTTP needs the superuser (--super-digest), logged in or by basic auth"}
	}
	var known bool
	s.fsm.read(func(t *tree.Tree) { _, known = t.Session(int64(id)) })
	if !known {
		return nil, &apiError{http.StatusNotFound, "no session " + r.PathValue("id")}
	}
	if _, err := s.write(ctx, &tree.Txn{Type: tree.TxnCloseSession, Session: int64(id), Time: time.Now().UnixMilli()}); err != nil {
		if errors.Is(err, wire.ErrSessionExpired) || errors.Is(err, wire.ErrUnknownSession) {
			return nil, &apiError{http.StatusNotFound, "no session " + r.PathValue("id")}
		}
		return nil, err
	}
	return map[string]bool{"closed": true}, nil
}

// Rates: the overview samples its counters every rateStep and keeps
// rateSamples of them (ten minutes).
const (
	rateStep    = 5 * time.Second
	rateSamples = 120
)

// RatePoint is one step of the overview's series: the rates over the
// step, and the counts at its end.
type RatePoint struct {
	Time     string  `json:"time"`
	Writes   float64 `json:"writes_per_s"` // txns the cluster applied (the same on every member)
	Reads    float64 `json:"reads_per_s"`  // reads this member answered
	Znodes   int     `json:"znodes"`
	Sessions int     `json:"sessions"`
	Watches  int     `json:"watches"` // on this member
}

// rates keeps the overview's recent series.
type rates struct {
	mu     sync.Mutex
	points []RatePoint // oldest first, at most rateSamples

	lastAt              time.Time
	lastApplied, lastRd int64
}

// sample adds p, with the rates since the last sample of the txns
// applied and the reads answered.
func (rt *rates) sample(now time.Time, applied, reads int64, p RatePoint) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if !rt.lastAt.IsZero() {
		d := now.Sub(rt.lastAt).Seconds()
		p.Time, p.Writes, p.Reads = now.UTC().Format(time.RFC3339), float64(applied-rt.lastApplied)/d, float64(reads-rt.lastRd)/d
		rt.points = append(rt.points, p)
		if len(rt.points) > rateSamples {
			rt.points = rt.points[len(rt.points)-rateSamples:]
		}
	}
	rt.lastAt, rt.lastApplied, rt.lastRd = now, applied, reads
}

func (rt *rates) list() []RatePoint {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]RatePoint{}, rt.points...)
}

// sampleRates samples the rates every rateStep until the server closes.
func (s *Server) sampleRates() {
	defer s.wg.Done()
	tick := time.NewTicker(rateStep)
	defer tick.Stop()
	for {
		p := RatePoint{Watches: s.watches.size()}
		applied := s.fsm.read(func(t *tree.Tree) { p.Sessions = t.SessionCount() })
		p.Znodes = s.counts().znodes
		s.rates.sample(time.Now(), applied, s.stats.reads.Load(), p)
		select {
		case <-tick.C:
		case <-s.stopc:
			return
		}
	}
}

// OverviewView is a member's overview: the tree's size, its clients and
// the recent rates.
type OverviewView struct {
	Member    uint64      `json:"member"`
	Leader    uint64      `json:"leader"`
	Term      uint64      `json:"term"`
	Zxid      int64       `json:"zxid"`
	Znodes    int         `json:"znodes"`
	Sessions  int         `json:"sessions"`
	Ephemeral int         `json:"ephemerals"`
	Watches   int         `json:"watches"` // registered on this member
	Conns     int         `json:"connections"`
	Locks     int         `json:"locks"`  // held or waited for
	Rates     []RatePoint `json:"series"` // every 5 s over the last 10 minutes, oldest first
}

// Overview reports the member's overview.
func (s *Server) Overview() OverviewView {
	v := OverviewView{Member: s.cfg.ID, Leader: s.node.Leader(), Term: s.node.Term(), Watches: s.watches.size(), Rates: s.rates.list()}
	s.mu.Lock()
	v.Conns = len(s.conns)
	s.mu.Unlock()
	s.fsm.readLocks(func(t *tree.Tree, x *locks.Index) {
		v.Zxid, v.Sessions, v.Locks = t.Zxid(), t.SessionCount(), len(x.Paths("/"))
	})
	counts := s.counts()
	v.Znodes, v.Ephemeral = counts.znodes, counts.ephemerals
	return v
}
