package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/locks"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// The HTTP lock API, under /api/v1/ on the --http port of every member
// (docs/locks.md). A lock NAME is the path Config.LockRoot/NAME: the same
// lock a Go recipe takes there, by the same rules (package lockq). Each
// acquisition is bound to a lease of its own (a session without a
// connection, owned by no session), which the HTTP client renews; when it
// stops, the lease ends and the lock goes to the next waiter. Requests run
// through the same checks as the binary protocol's: the lock's ACL, with
// the caller's identities (ip, digest from HTTP basic auth, x509 from a
// client certificate), and writes through the raft log.

// DefaultLockRoot is where the HTTP lock API's locks live by default.
const DefaultLockRoot = "/locks"

// maxAPIBody is the largest JSON body the lock API reads.
const maxAPIBody = 64 << 10

// maxLockWait is the longest an acquire may wait.
const maxLockWait = time.Hour

// handleLockAPI adds the lock API's endpoints to mux. Every answer under
// /api/v1/ is JSON, a 404 or a 405 too.
func (s *Server) handleLockAPI(mux *http.ServeMux) {
	for _, e := range []struct {
		method, path string
		h            http.HandlerFunc
	}{
		{"POST", "/api/v1/locks/{name}/acquire", answering(s.acquire)},
		{"POST", "/api/v1/locks/{name}/renew", answering(s.renew)},
		{"POST", "/api/v1/locks/{name}/release", answering(s.release)},
		{"POST", "/api/v1/locks/{name}/break", answering(s.breakLock)},
		{"GET", "/api/v1/locks/{name}", s.apiLock},
		{"GET", "/api/v1/locks/{name}/events", s.apiLockEvents},
		{"GET", "/api/v1/locks/{name}/history", s.apiLockHistory},
		{"GET", "/api/v1/locks", s.apiLocks},
		{"GET", "/api/v1/deadlocks", s.apiDeadlocks},
		{"POST", "/api/v1/break", answering(s.breakPath)},
		{"GET", "/api/v1/locks/{name}/check", answering(s.checkLock)},
		{"GET", "/api/v1/check", answering(s.checkPath)},
		{"POST", "/api/v1/multilocks/acquire", answering(s.acquireMulti)},
	} {
		mux.HandleFunc(e.method+" "+e.path, e.h)
		mux.HandleFunc(e.path, methodNotAllowed(e.method))
	}
	mux.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, nil, &apiError{http.StatusNotFound, "no such endpoint: " + r.URL.Path})
	})
}

// answering makes a handler of f, whose answer (or error) it writes as
// JSON.
func answering(f func(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := f(r.Context(), w, r)
		writeJSON(w, v, err)
	}
}

// methodNotAllowed answers a method an endpoint does not serve.
func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if allow == "GET" {
			allow = "GET, HEAD"
		}
		w.Header().Set("Allow", allow)
		writeJSON(w, nil, &apiError{http.StatusMethodNotAllowed, r.Method + " is not allowed here; " + allow + " is"})
	}
}

// apiError is an error answer: its status and message.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// writeJSON answers with v, or with err as {"error": ...} and the status
// it maps to.
func writeJSON(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		status := http.StatusInternalServerError
		var ae *apiError
		switch {
		case errors.As(err, &ae):
			status = ae.status
		case errors.Is(err, wire.ErrNoAuth):
			status = http.StatusForbidden
		case errors.Is(err, wire.ErrQuotaExceeded):
			// Refused, as Kubernetes refuses a write past a ResourceQuota:
			// not the server's failure, and not one to try again as is.
			status = http.StatusForbidden
		case errors.Is(err, wire.ErrNoQuorum), errors.Is(err, wire.ErrShuttingDown),
			errors.Is(err, wire.ErrOperationTimeout), errors.Is(err, wire.ErrThrottled):
			status = http.StatusServiceUnavailable
		case errors.Is(err, wire.ErrBadArguments):
			status = http.StatusBadRequest
		}
		w.WriteHeader(status)
		v = map[string]string{"error": err.Error()}
	}
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody reads r's JSON body into v: one object of known fields, at
// most maxAPIBody bytes.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAPIBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("the body is not a JSON object of this request: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("the body has more than one JSON value")
	}
	return nil
}

// lockPath is the path of the lock named in r, checked.
func (s *Server) lockPath(r *http.Request) (string, error) {
	name := r.PathValue("name")
	p, ok := s.lockName(name)
	if !ok {
		return "", badRequest("%q is not a lock name: a lock name is one segment of a path", name)
	}
	return p, nil
}

// lockName is the path of the lock name, and whether name is one.
func (s *Server) lockName(name string) (string, bool) {
	p := strings.TrimSuffix(s.cfg.LockRoot, "/") + "/" + name
	return p, wire.ValidatePath(p, false) == nil && name != "" && !strings.Contains(name, "/")
}

// HTTPIdentities are the identities an HTTP request proves: its ip, a
// digest identity from HTTP basic auth (user and password, as an auth
// request's "user:password") or from a login (logins.go), and an x509
// identity from a verified client certificate.
func (s *Server) HTTPIdentities(r *http.Request) []wire.Identity {
	ids := []wire.Identity{{Scheme: "ip", ID: remoteHost(r)}}
	addDigest := func(user, id string) {
		ids = append(ids, wire.Identity{Scheme: "digest", ID: id})
		if s.cfg.SuperDigest != "" && id == s.cfg.SuperDigest {
			ids = append(ids, wire.Identity{Scheme: tree.SuperScheme, ID: user})
		}
	}
	if user, password, ok := r.BasicAuth(); ok && user != "" {
		addDigest(user, wire.DigestID(user, password))
	}
	if c, err := r.Cookie(s.loginCookie()); err == nil {
		if l, ok := s.logins.get(c.Value, time.Now()); ok {
			addDigest(l.user, l.digest)
		}
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		ids = append(ids, wire.Identity{Scheme: "x509", ID: r.TLS.PeerCertificates[0].Subject.String()})
	}
	return ids
}

// remoteHost is the address r came from, without its port.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// needQuorum refuses what this member cannot do without a leader: grant,
// renew or release a lock.
func (s *Server) needQuorum() error {
	if s.node.Leader() == 0 {
		return &apiError{http.StatusServiceUnavailable, "this member cannot reach a quorum: it grants, renews and releases no lock"}
	}
	return nil
}

// acquireRequest is the body of an acquire.
type acquireRequest struct {
	ClientID      string `json:"client_id"`
	TTLMs         int64  `json:"ttl_ms"`
	WaitTimeoutMs int64  `json:"wait_timeout_ms"`
	Mode          string `json:"mode"`
	MaxHoldMs     int64  `json:"max_hold_ms"`   // no renewal keeps the hold past this; 0: none
	Priority      int    `json:"priority"`      // 1 to lockq.MaxPriority: before waiters of lower priority; 0: none
	LockDelayMs   int64  `json:"lock_delay_ms"` // lost without a release, the lock stays held this long (lockq.Delay); 0: none
}

// heldResponse answers an acquire or a renew that holds.
type heldResponse struct {
	Acquired     bool   `json:"acquired,omitempty"`
	FencingToken int64  `json:"fencing_token"`
	ExpiresAt    string `json:"expires_at"`
	LeaseID      string `json:"lease_id"`
}

// apiModes maps the API's modes to kinds of lock node.
var apiModes = map[string]lockq.Kind{"": lockq.Exclusive, "exclusive": lockq.Exclusive, "read": lockq.Read, "write": lockq.Write,
	"intent-shared": lockq.IntentShared, "intent-exclusive": lockq.IntentExclusive}

func (s *Server) acquire(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
	path, err := s.lockPath(r)
	if err != nil {
		return nil, err
	}
	var req acquireRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	kind, ok := apiModes[req.Mode]
	switch {
	case !ok:
		return nil, badRequest("mode %q is not exclusive, read, write, intent-shared or intent-exclusive", req.Mode)
	case req.Priority < 0 || req.Priority > lockq.MaxPriority:
		return nil, badRequest("priority is 0 (none) to %d", lockq.MaxPriority)
	}
	a, err := s.beginAcquire(ctx, r, &req, []string{path})
	if err != nil {
		return nil, err
	}
	node, err := s.createLockNode(ctx, path, kind, req.Priority, a.lease, a.rec, a.ids)
	if err != nil {
		s.closeLease(a.lease)
		return nil, err
	}
	if err := s.awaitHeld(ctx, &req, a, []queued{{path, node}}); err != nil {
		return nil, err
	}
	answer, err := s.heldAnswer(path, a.lease, true)
	if err != nil {
		s.closeLease(a.lease) // it lost the lock as it was granted: nothing is left behind
	}
	return answer, err
}

// acquisition is an HTTP acquisition under way: its lease, its lock
// nodes' record and its caller's identities.
type acquisition struct {
	lease int64
	ttl   time.Duration
	rec   lockq.Record
	ids   []wire.Identity
}

// beginAcquire checks what an acquire of the locks at paths asks, makes
// their paths, and creates the lease its nodes will be bound to.
func (s *Server) beginAcquire(ctx context.Context, r *http.Request, req *acquireRequest, paths []string) (acquisition, error) {
	switch {
	case req.ClientID == "" || len(req.ClientID) > lockq.MaxOwner:
		return acquisition{}, badRequest("client_id is required, at most %d bytes", lockq.MaxOwner)
	case req.WaitTimeoutMs < 0 || time.Duration(req.WaitTimeoutMs)*time.Millisecond > maxLockWait:
		return acquisition{}, badRequest("wait_timeout_ms is 0 (try once) to %d", maxLockWait.Milliseconds())
	case req.LockDelayMs < 0 || req.LockDelayMs > lockq.MaxLockDelay.Milliseconds():
		return acquisition{}, badRequest("lock_delay_ms is 0 (none) to %d", lockq.MaxLockDelay.Milliseconds())
	}
	ttl, err := leaseTTL(req.TTLMs, DefaultLeaseTTL)
	if err != nil {
		return acquisition{}, badRequest("ttl_ms: %v", err)
	}
	maxHold, err := leaseMaxHold(req.MaxHoldMs)
	if err != nil {
		return acquisition{}, badRequest("max_hold_ms: %v", err)
	}
	if err := s.needQuorum(); err != nil {
		return acquisition{}, err
	}
	a := acquisition{ttl: time.Duration(ttl) * time.Millisecond, ids: s.HTTPIdentities(r),
		rec: lockq.Record{Owner: req.ClientID, Holder: req.ClientID, DelayMs: req.LockDelayMs}}
	for _, path := range paths {
		if err := s.makeLockDirs(ctx, path, a.ids); err != nil {
			return acquisition{}, err
		}
	}
	a.lease = s.ids.Next()
	if _, err := s.write(ctx, &tree.Txn{Type: tree.TxnCreateSession, Session: a.lease, Time: time.Now().UnixMilli(),
		LeaseTTL: ttl, LeaseOwner: req.ClientID, LeaseMaxHold: maxHold}); err != nil {
		s.closeLease(a.lease) // its create may still commit
		return acquisition{}, err
	}
	return a, nil
}

// awaitHeld waits, for as long as req says, until a holds the locks of
// nodes. If it does not, its lease ends, and its nodes with it: nothing is
// left behind.
func (s *Server) awaitHeld(ctx context.Context, req *acquireRequest, a acquisition, nodes []queued) error {
	wait, cancel := context.WithTimeout(ctx, time.Duration(req.WaitTimeoutMs)*time.Millisecond)
	defer cancel()
	held, err := s.waitTurn(wait, nodes, a.lease, a.ttl)
	if err == nil && held {
		return nil
	}
	s.closeLease(a.lease)
	if err == nil || ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return &apiError{http.StatusConflict, "timeout"}
	}
	return err
}

// multiAcquireRequest is the body of a multi-lock's acquire: an acquire's
// fields, but for the mode, which each lock has, and the priority, which a
// multi-lock has not.
type multiAcquireRequest struct {
	acquireRequest
	Locks []struct {
		Name string `json:"name"`
		Mode string `json:"mode"`
	} `json:"locks"`
}

// maxMultiLock bounds the locks of one multi-lock.
const maxMultiLock = 64

// acquireMulti takes several locks as one request (POST
// /api/v1/multilocks/acquire): one txn joins every lock's queue, with
// nodes bound to one lease, and the answer comes when the acquisition
// holds them all, or never (the lease ends, and every node with it). Two
// multi-locks over shared locks joined their queues in the order their
// txns were applied, the same in every queue, so neither can hold a lock
// the other waits for: they never deadlock each other. On a sharded
// cluster, whose txns stay in one shard, it joins one shard's queues at
// a time, in the order of the shards' groups, and holds them before it
// joins the next's, as the Go MultiLock does (recipes.shardSegments says
// why that keeps the promise). The multi-lock is renewed and released by
// its lease, through any of its locks.
func (s *Server) acquireMulti(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
	var req multiAcquireRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	switch {
	case len(req.Locks) == 0 || len(req.Locks) > maxMultiLock:
		return nil, badRequest("locks names 1 to %d locks", maxMultiLock)
	case req.Mode != "" || req.Priority != 0:
		return nil, badRequest("a multi-lock takes a mode for each lock, and no priority")
	}
	paths, kinds := make([]string, len(req.Locks)), make([]lockq.Kind, len(req.Locks))
	for i, l := range req.Locks {
		var ok bool
		if paths[i], ok = s.lockName(l.Name); !ok {
			return nil, badRequest("%q is not a lock name: a lock name is one segment of a path", l.Name)
		}
		if slices.Contains(paths[:i], paths[i]) {
			return nil, badRequest("lock %q is named twice", l.Name)
		}
		if kinds[i], ok = apiModes[l.Mode]; !ok {
			return nil, badRequest("mode %q of %q is not exclusive, read, write, intent-shared or intent-exclusive", l.Mode, l.Name)
		}
	}
	a, err := s.beginAcquire(ctx, r, &req.acquireRequest, paths)
	if err != nil {
		return nil, err
	}
	a.rec.Parts = len(paths)
	id, data := randomHex(16), a.rec.Encode()
	until := time.Now().Add(time.Duration(req.WaitTimeoutMs) * time.Millisecond)
	for _, seg := range s.routingMap().ByShard(paths) {
		nodes, err := s.joinQueues(ctx, a, id, data, pick(paths, seg), pick(kinds, seg))
		if err != nil {
			s.closeLease(a.lease)
			return nil, err
		}
		within := req.acquireRequest // the wait left of the whole
		within.WaitTimeoutMs = max(0, time.Until(until).Milliseconds())
		if err := s.awaitHeld(ctx, &within, a, nodes); err != nil {
			return nil, err
		}
	}
	answer := map[string]any{"acquired": true, "lease_id": leaseID(a.lease)}
	var locks []map[string]any
	for i, path := range paths {
		h, err := s.heldAnswer(path, a.lease, true)
		if err != nil {
			s.closeLease(a.lease)
			return nil, err
		}
		answer["expires_at"] = h.ExpiresAt
		locks = append(locks, map[string]any{"name": req.Locks[i].Name, "fencing_token": h.FencingToken})
	}
	answer["locks"] = locks
	return answer, nil
}

// joinQueues joins the queues of the locks at paths (all in one shard),
// each with a node of its kind, acquisition id and data, bound to a's
// lease, in one txn. A lock's directory is a container, which the reaper
// takes once its last node is gone: it is made again, as
// createLockNode does, if the txn finds one missing.
func (s *Server) joinQueues(ctx context.Context, a acquisition, id string, data []byte, paths []string, kinds []lockq.Kind) ([]queued, error) {
	multi := wire.Request{Op: wire.OpMulti}
	for i, path := range paths {
		multi.Ops = append(multi.Ops, wire.Request{Op: wire.OpCreate, Path: path + "/" + lockq.Prefix(id, kinds[i]),
			Mode: wire.ModeEphemeralSequential, Data: data})
	}
	if err := s.resolveACLs(&multi, a.ids); err != nil {
		return nil, err
	}
	for remade := 0; ; remade++ {
		txn := tree.TxnFromRequest(&multi, a.lease, time.Now().UnixMilli(), a.ids)
		res, err := s.write(ctx, &txn)
		if errors.Is(err, wire.ErrNoNode) && remade < 3 {
			for _, path := range paths {
				if err := s.makeLockDirs(ctx, path, a.ids); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		nodes := make([]queued, len(paths))
		for i, path := range paths {
			nodes[i].path = path
			nodes[i].node, _ = lockq.Parse(res.Multi[i].Path[len(path)+1:])
		}
		return nodes, nil
	}
}

// pick is the elements of s at the indexes at.
func pick[T any](s []T, at []int) []T {
	out := make([]T, len(at))
	for j, i := range at {
		out[j] = s[i]
	}
	return out
}

// makeLockDirs creates the lock's path and its missing ancestors as
// containers, as the recipes do. A path this member has already is not
// written again: most acquires find their lock's path there.
func (s *Server) makeLockDirs(ctx context.Context, path string, ids []wire.Identity) error {
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		var missing bool
		s.readShardOf(path[:i], func(t *tree.Tree, _ *locks.Index) {
			_, err := t.Exists(path[:i])
			missing = errors.Is(err, wire.ErrNoNode)
		})
		if !missing {
			continue
		}
		req := wire.Request{Op: wire.OpCreate, Path: path[:i], Mode: wire.ModeContainer}
		if err := s.resolveACLs(&req, ids); err != nil {
			return err
		}
		txn := tree.TxnFromRequest(&req, 0, time.Now().UnixMilli(), ids)
		if _, err := s.write(ctx, &txn); err != nil && !errors.Is(err, wire.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// createLockNode creates the lock node of an HTTP acquisition of kind
// and priority, bound to lease, and returns its entry. A node with a
// priority goes where lockq.Place puts it, as the Go recipes place theirs:
// against this member's list of the queue, in a multi with a check that
// the queue is still that (a follower's list may be behind: the check
// fails and it lists again, lockq.PlaceTries times at most before it joins at
// the end) and the rewrite of the node that waiters would come to wait
// for it watch.
func (s *Server) createLockNode(ctx context.Context, path string, kind lockq.Kind, prio int, lease int64, rec lockq.Record, ids []wire.Identity) (lockq.Entry, error) {
	base, data := randomHex(16), rec.Encode()
	remade := 0 // times the lock's directory was made again
	for try := 0; ; try++ {
		req := wire.Request{Op: wire.OpCreate, Path: path + "/" + lockq.Prefix(lockq.ID(base, prio, ""), kind),
			Mode: wire.ModeEphemeralSequential, Data: data}
		if prio > 0 && try < lockq.PlaceTries {
			req = s.placeLockNode(path, req, base, kind, prio)
		}
		if err := s.resolveACLs(&req, ids); err != nil {
			return lockq.Entry{}, err
		}
		txn := tree.TxnFromRequest(&req, lease, time.Now().UnixMilli(), ids)
		res, err := s.write(ctx, &txn)
		switch {
		case req.Op == wire.OpMulti && (errors.Is(err, wire.ErrBadVersion) || errors.Is(err, wire.ErrNoNode)):
			continue // the queue changed, or this member's list was behind
		case req.Op == wire.OpMulti && errors.Is(err, wire.ErrNoAuth):
			try = lockq.PlaceTries - 1 // the caller may not read the queue, or rewrite a node of it: at the end
			continue
		case errors.Is(err, wire.ErrNoNode) && remade < 3:
			// The lock's directory is a container, which the reaper takes
			// once its last node is gone (a release or a break just
			// before): make it again, as the recipes do.
			remade++
			if err := s.makeLockDirs(ctx, path, ids); err != nil {
				return lockq.Entry{}, err
			}
			continue
		case err != nil:
			return lockq.Entry{}, err
		}
		made := res.Path
		if req.Op == wire.OpMulti {
			made = res.Multi[len(res.Multi)-1].Path
		}
		e, _ := lockq.Parse(made[len(path)+1:])
		return e, nil
	}
}

// placeLockNode turns create, of a node of the unique id base, kind and
// prio, into the multi that places it where lockq.Place puts it in this
// member's list of the queue at path, or leaves it as it is (at the end).
func (s *Server) placeLockNode(path string, create wire.Request, base string, kind lockq.Kind, prio int) wire.Request {
	var ops []wire.Request
	s.readShardOf(path, func(t *tree.Tree, _ *locks.Index) {
		names, st, err := t.Children(path)
		if err != nil {
			return
		}
		es := lockq.Sort(names)
		at := lockq.Place(es, kind, prio, int64(st.Cversion))
		if at.Key == "" {
			return
		}
		create.Path = path + "/" + lockq.Prefix(lockq.ID(base, prio, at.Key), kind)
		ops = []wire.Request{{Op: wire.OpCheck, Path: path, Version: st.Cversion, Mode: wire.CheckCversion}}
		if at.Touch >= 0 {
			touched := path + "/" + es[at.Touch].Name
			data, tst, _ := t.Get(touched) // there: the queue was just listed under the same lock
			ops = append(ops, wire.Request{Op: wire.OpSetData, Path: touched, Data: data, Version: tst.Version})
		}
	})
	if ops == nil {
		return create
	}
	return wire.Request{Op: wire.OpMulti, Ops: append(ops, create)}
}

// queued is an acquisition's node in the queue of the lock at path.
type queued struct {
	path string
	node lockq.Entry
}

// waitTurn waits until the acquisition holds the lock of each of its
// nodes, or ctx ends (then it reports false), renewing its lease every
// third of ttl meanwhile: the client is still there, waiting on its
// request. An acquisition with a node gone (its lease ended) fails.
func (s *Server) waitTurn(ctx context.Context, nodes []queued, lease int64, ttl time.Duration) (bool, error) {
	renew := time.NewTicker(ttl / 3)
	defer renew.Stop()
	for {
		path, held, err := s.turnOfAll(nodes)
		if path == "" {
			return held, err
		}
		changed, done := s.lockWatch.next(path)
		if again, _, _ := s.turnOfAll(nodes); again != path {
			done() // it changed before the watch was taken
			continue
		}
		select {
		case <-changed:
		case <-renew.C:
			_, err = s.renewLease(ctx, lease, 0)
		case <-ctx.Done():
			err = ctx.Err()
		}
		done()
		if err != nil && !errors.Is(err, wire.ErrSessionExpired) { // an ended lease shows as its node gone
			return false, err
		}
	}
}

// turnOfAll returns the path of the first lock of nodes that the
// acquisition still waits for, or "" with whether it holds them all.
func (s *Server) turnOfAll(nodes []queued) (waitsFor string, held bool, err error) {
	for _, n := range nodes {
		held, waiting, err := s.turnOf(n.path, n.node)
		switch {
		case waiting:
			return n.path, false, nil
		case !held || err != nil:
			return "", false, err
		}
	}
	return "", true, nil
}

// turnOf says whether the acquisition of node holds the lock at path, or
// still waits for it.
func (s *Server) turnOf(path string, node lockq.Entry) (held, waiting bool, err error) {
	var names []string
	s.readShardOf(path, func(t *tree.Tree, _ *locks.Index) { names, _, err = t.Children(path) })
	if err != nil {
		return false, false, err
	}
	es := lockq.Sort(names)
	switch {
	case !containsNode(es, node) && s.endedForDeadlock(path, node.Name):
		return false, false, &apiError{http.StatusConflict, "deadlock: the wait was ended to break a deadlock (--end-deadlocks)"}
	case !containsNode(es, node):
		return false, false, &apiError{http.StatusGone, "the lock's lease ended while it waited"}
	case lockq.Holds(es, node.ID):
		return true, false, nil
	}
	return false, true, nil
}

// endedForDeadlock reports whether the lock history says that the wait of
// node, at the lock at path, was ended for a deadlock.
func (s *Server) endedForDeadlock(path, node string) bool {
	var ended bool
	s.readShardOf(path, func(_ *tree.Tree, x *locks.Index) {
		for _, ev := range x.History(path) {
			ended = ended || ev.Kind == wire.LockDeadlock && ev.Lock == path && ev.Node == node
		}
	})
	return ended
}

func containsNode(es []lockq.Entry, node lockq.Entry) bool {
	for _, e := range es {
		if e.Name == node.Name {
			return true
		}
	}
	return false
}

// closeLease ends lease, and its node with it, whatever the caller's
// context: an acquire that gave up leaves nothing behind.
func (s *Server) closeLease(lease int64) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	_, _ = s.write(ctx, &tree.Txn{Type: tree.TxnCloseSession, Session: lease, Time: time.Now().UnixMilli()})
}

// heldAnswer is the answer of an acquire or renew by lease of the lock at
// path: its token and the lease's expiry.
func (s *Server) heldAnswer(path string, lease int64, acquired bool) (heldResponse, error) {
	var answer heldResponse
	var found bool
	info, _ := s.lockInfo(path)
	for _, h := range info.Holders {
		if h.Lease == lease {
			answer = heldResponse{Acquired: acquired, FencingToken: h.Token, LeaseID: leaseID(lease),
				ExpiresAt: time.UnixMilli(h.Expires).UTC().Format(time.RFC3339Nano)}
			found = true
		}
	}
	if !found {
		return heldResponse{}, &apiError{http.StatusGone, "the lease no longer holds the lock"}
	}
	return answer, nil
}

func leaseID(lease int64) string { return fmt.Sprintf("%016x", uint64(lease)) }

// leaseRequest names the hold a renew or release acts on: its lease, or
// its client and fencing token.
type leaseRequest struct {
	LeaseID      string `json:"lease_id"`
	ClientID     string `json:"client_id"`
	FencingToken int64  `json:"fencing_token"`
	TTLMs        int64  `json:"ttl_ms"` // renew only
}

// lease is the lease req names, 0 if it names its hold by client and
// token instead.
func (req *leaseRequest) lease() (int64, error) {
	switch {
	case req.LeaseID != "":
		v, err := strconv.ParseUint(req.LeaseID, 16, 64)
		if err != nil {
			return 0, badRequest("lease_id %q is not a lease id", req.LeaseID)
		}
		return int64(v), nil
	case req.ClientID == "" || req.FencingToken == 0:
		return 0, badRequest("name the hold by lease_id, or by client_id and fencing_token")
	}
	return 0, nil
}

// holdOf finds the lease of the hold req names on the lock at path: by
// lease_id, or by client_id and fencing_token. held says whether it holds
// the lock now (rather than waits for it); 0 means no such lease.
func (s *Server) holdOf(path string, req leaseRequest) (lease int64, held bool, err error) {
	want, err := req.lease()
	if err != nil {
		return 0, false, err
	}
	info, _ := s.lockInfo(path)
	for i, p := range append(info.Holders, info.Waiters...) {
		// Only an HTTP client's lease (of no session): a session's lease
		// is its own, and closing it would end its nodes elsewhere too.
		match := p.Lease != 0 && p.Session == 0 &&
			(p.Lease == want || want == 0 && p.Owner == req.ClientID && p.Token == req.FencingToken)
		if match {
			return p.Lease, i < len(info.Holders), nil
		}
	}
	return 0, false, nil
}

// notHeld says that the hold req names no longer holds the lock at path,
// and, when the lock history still has it, how it ended: the answer of a
// renew or release that comes late (a retry after a lost reply, a
// duplicate), which acts on nothing, whoever holds the lock now.
func (s *Server) notHeld(path string, req leaseRequest) string {
	lease, _ := req.lease()
	var end *wire.LockEvent
	s.readShardOf(path, func(_ *tree.Tree, x *locks.Index) {
		for _, ev := range x.History(path) {
			mine := lease != 0 && ev.Lease == lease || lease == 0 && ev.Owner == req.ClientID && ev.Token == req.FencingToken
			if mine && ev.Lock == path && ev.Kind != wire.LockAcquired {
				end = &ev
			}
		}
	})
	const gone = "the lock is no longer held by that hold"
	if end == nil {
		return gone + " (it may never have held it)"
	}
	switch end.Kind {
	case wire.LockReleased:
		return gone + ": it was released"
	case wire.LockExpired:
		return gone + ": its lease expired"
	case wire.LockBroken:
		return fmt.Sprintf("%s: it was broken by %s (%q)", gone, end.By, end.Reason)
	}
	return gone + ": " + end.Kind
}

// partLost reports whether lease, a multi-lock's, has fewer nodes than
// its locks: one was broken.
func (s *Server) partLost(lease int64) bool {
	var nodes []string
	s.fsm.read(func(t *tree.Tree) { nodes = s.ephemerals(t, lease, "") })
	if len(nodes) == 0 {
		return false
	}
	var data []byte
	s.readShardOf(nodes[0], func(t *tree.Tree, _ *locks.Index) { data, _, _ = t.Get(nodes[0]) })
	return len(nodes) < lockq.DecodeRecord(data).Parts
}

// brokenLease says which lock of lease was broken, as the lock history
// has it ("" if none).
func (s *Server) brokenLease(lease int64) string {
	var out string
	s.fsm.read(func(t *tree.Tree) {
		s.eachShard(t, func(_ *tree.Tree, x *locks.Index, _ func(string) bool) {
			for _, ev := range x.History("/") {
				if ev.Lease == lease && ev.Kind == wire.LockBroken {
					out = fmt.Sprintf("%s was broken by %s (%q)", ev.Lock, ev.By, ev.Reason)
				}
			}
		})
	})
	return out
}

func (s *Server) renew(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
	path, req, err := s.leaseBody(w, r)
	if err != nil {
		return nil, err
	}
	ttl, err := leaseTTL(req.TTLMs, 0)
	if err != nil {
		return nil, badRequest("ttl_ms: %v", err)
	}
	if err := s.allowed(path, r, wire.PermCreate); err != nil {
		return nil, err
	}
	lease, held, err := s.holdOf(path, req)
	switch {
	case err != nil:
		return nil, err
	case lease == 0 || !held:
		return nil, &apiError{http.StatusGone, s.notHeld(path, req)}
	case s.partLost(lease):
		// A multi-lock's other lock was broken: it holds no longer all.
		return nil, &apiError{http.StatusGone, "the multi-lock no longer holds all its locks: " + s.brokenLease(lease)}
	}
	if _, err := s.renewLease(ctx, lease, ttl); err != nil {
		if errors.Is(err, wire.ErrSessionExpired) {
			return nil, &apiError{http.StatusGone, s.notHeld(path, req)}
		}
		return nil, err
	}
	return s.heldAnswer(path, lease, false)
}

func (s *Server) release(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
	path, req, err := s.leaseBody(w, r)
	if err != nil {
		return nil, err
	}
	if req.TTLMs != 0 {
		return nil, badRequest("a release takes no ttl_ms")
	}
	if err := s.allowed(path, r, wire.PermDelete); err != nil {
		return nil, err
	}
	lease, held, err := s.holdOf(path, req)
	switch {
	case err != nil:
		return nil, err
	case lease == 0 || !held:
		return nil, &apiError{http.StatusConflict, s.notHeld(path, req)}
	}
	if _, err := s.write(ctx, &tree.Txn{Type: tree.TxnCloseSession, Session: lease, Time: time.Now().UnixMilli()}); err != nil {
		if errors.Is(err, wire.ErrSessionExpired) {
			return nil, &apiError{http.StatusConflict, s.notHeld(path, req)}
		}
		return nil, err
	}
	return map[string]bool{"released": true}, nil
}

// breakLock frees the lock NAME, as `arbor locks break` does: its holders'
// nodes go, the next waiter holds. It needs ADMIN and DELETE on the lock.
func (s *Server) breakLock(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
	path, err := s.lockPath(r)
	if err != nil {
		return nil, err
	}
	var req struct {
		Reason string `json:"reason"`
	}
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	return s.breakAt(ctx, r, path, req.Reason)
}

// breakPath frees the lock at any path, {"path", "reason"}: the lock of a
// Go recipe as well as an HTTP lock (the console's break button).
func (s *Server) breakPath(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
	var req struct {
		Path   string `json:"path"`
		Reason string `json:"reason"`
	}
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	if err := wire.ValidatePath(req.Path, false); err != nil {
		return nil, badRequest("path: %v", err)
	}
	return s.breakAt(ctx, r, req.Path, req.Reason)
}

// breakAt breaks the lock at path for r, for reason.
func (s *Server) breakAt(ctx context.Context, r *http.Request, path, reason string) (any, error) {
	if err := s.needQuorum(); err != nil {
		return nil, err
	}
	txn := tree.Txn{Time: time.Now().UnixMilli()}
	nodes, err := s.breakTxn(s.HTTPIdentities(r), &wire.Request{Op: wire.OpLockBreak, Path: path, Reason: reason}, &txn)
	if errors.Is(err, wire.ErrNoNode) {
		return nil, &apiError{http.StatusNotFound, err.Error()}
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.write(ctx, &txn); err != nil {
		return nil, err
	}
	s.lockMetrics.breaks.Inc()
	return map[string]any{"broken": nodes}, nil
}

// checkLock answers whether ?token=N is the fencing token of a current
// holder of the lock NAME.
func (s *Server) checkLock(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
	path, err := s.lockPath(r)
	if err != nil {
		return nil, err
	}
	return s.checkToken(ctx, r, path)
}

// checkPath is checkLock for the lock at any ?path=.
func (s *Server) checkPath(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
	path := r.URL.Query().Get("path")
	if err := wire.ValidatePath(path, false); err != nil {
		return nil, badRequest("?path: %v", err)
	}
	return s.checkToken(ctx, r, path)
}

// TokenCheck is the answer of a token check: whether Token is the fencing
// token of a current holder of Lock, and the tokens of its holders.
type TokenCheck struct {
	Lock         string  `json:"lock"`
	Token        int64   `json:"token"`
	Current      bool    `json:"current"`
	HolderTokens []int64 `json:"holder_tokens"` // none when nobody holds the lock
	Index        int64   `json:"index"`         // the zxid the answer was read at
}

// checkToken checks r's ?token against the holders of the lock at path,
// linearizably: the member first learns from the leader what is committed
// and applies it, so that a holder that lost the lock anywhere in the
// cluster is not current, even on a member that was behind. A member cut
// off from the quorum answers 503, never a stale yes.
func (s *Server) checkToken(ctx context.Context, r *http.Request, path string) (any, error) {
	token, err := strconv.ParseInt(r.URL.Query().Get("token"), 10, 64)
	if err != nil || token <= 0 {
		return nil, badRequest("?token is the fencing token to check, a number above 0")
	}
	if err := s.needQuorum(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if err := s.node.ReadIndex(ctx); err != nil {
		return nil, s.writeError(err)
	}
	ids := s.HTTPIdentities(r)
	v := TokenCheck{Lock: path, Token: token, HolderTokens: []int64{}}
	g, err := s.groupOfPath(path)
	if err != nil {
		return v, err
	}
	g.fsm.readLocks(func(t *tree.Tree, x *locks.Index) {
		v.Index = t.Zxid()
		if err = t.Check(path, ids, wire.PermRead); errors.Is(err, wire.ErrNoNode) {
			err = nil // nobody holds it: no token is current
			return
		}
		for _, l := range indexLockInfos(t, x, path, ids, nil) {
			if l.Path != path {
				continue // a lock below it
			}
			for _, h := range l.Holders {
				v.HolderTokens = append(v.HolderTokens, h.Token)
				v.Current = v.Current || h.Token == token
			}
		}
	})
	return v, err
}

// leaseBody reads the lock's path and the body of a renew or release, and
// checks that this member can change it.
func (s *Server) leaseBody(w http.ResponseWriter, r *http.Request) (string, leaseRequest, error) {
	var req leaseRequest
	path, err := s.lockPath(r)
	if err == nil {
		err = decodeBody(w, r, &req)
	}
	if err == nil {
		_, err = req.lease()
	}
	if err == nil {
		err = s.needQuorum()
	}
	return path, req, err
}

// allowed checks that r's identities have perm on the lock at path.
func (s *Server) allowed(path string, r *http.Request, perm wire.Perms) error {
	var err error
	ids := s.HTTPIdentities(r)
	s.readShardOf(path, func(t *tree.Tree, _ *locks.Index) { err = t.Check(path, ids, perm) })
	if errors.Is(err, wire.ErrNoNode) {
		return &apiError{http.StatusNotFound, "no lock " + path}
	}
	return err
}

// LockView is a lock as the API shows it.
type LockView struct {
	Index           int64       `json:"index"` // the zxid of its last change, for a long poll (0: unknown since a restart)
	Path            string      `json:"path"`
	Holders         []PartyView `json:"holders"`
	Waiters         []PartyView `json:"waiters"`
	EstimatedWaitMs int64       `json:"estimated_wait_ms"`
}

// PartyView is a holder or a waiter as the API shows it.
type PartyView struct {
	ClientID     string `json:"client_id"` // its owner
	Holder       string `json:"holder,omitempty"`
	Mode         string `json:"mode"`
	Session      string `json:"session"`
	LeaseID      string `json:"lease_id,omitempty"`
	FencingToken int64  `json:"fencing_token"`
	Since        string `json:"since"`
	ExpiresAt    string `json:"expires_at,omitempty"`
}

func apiParties(ps []wire.LockParty) []PartyView {
	out := []PartyView{}
	for _, p := range ps {
		j := PartyView{ClientID: p.Owner, Holder: p.Holder, Mode: p.Mode, Session: leaseID(p.Session), FencingToken: p.Token,
			Since: time.UnixMilli(p.Since).UTC().Format(time.RFC3339Nano)}
		if p.Lease != 0 {
			j.LeaseID = leaseID(p.Lease)
			j.ExpiresAt = time.UnixMilli(p.Expires).UTC().Format(time.RFC3339Nano)
		}
		out = append(out, j)
	}
	return out
}

func apiLock(l wire.LockInfo) LockView {
	return LockView{Path: l.Path, Holders: apiParties(l.Holders), Waiters: apiParties(l.Waiters), EstimatedWaitMs: l.EstimatedWaitMs}
}

// Long polls: how long a GET of a lock with ?index waits for a change,
// unless ?wait says, and at most.
const (
	defaultLockPoll = 5 * time.Minute
	maxLockPoll     = 10 * time.Minute
)

// lockState reads the lock at path for r: the lock (ok false if nobody
// holds or waits, or r may not read it) and the zxid of its last change.
func (s *Server) lockState(r *http.Request, path string) (l LockView, ok bool) {
	ids := s.HTTPIdentities(r)
	s.readLock(path, func(meta, t *tree.Tree, x *locks.Index) {
		infos := indexLockInfos(t, x, path, ids, nil)
		if ok = len(infos) > 0 && infos[0].Path == path; ok {
			withLeases(meta, &infos[0])
			l = apiLock(infos[0])
			l.Index = x.Modified(path)
		}
	})
	return l, ok
}

// apiLock answers the lock NAME. With ?index=N it is a long poll (as
// Consul's blocking queries): it answers once the lock has changed past
// the zxid N (its "index"), or ?wait (default 5m, at most 10m) has passed.
func (s *Server) apiLock(w http.ResponseWriter, r *http.Request) {
	path, err := s.lockPath(r)
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	index, wait, err := pollParams(r)
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		changed, done := s.lockWatch.next(path)
		l, ok := s.lockState(r, path)
		answer := index < 0 || l.Index > index
		if !answer {
			select {
			case <-changed:
			case <-timer.C:
				answer = true
			case <-s.stopc: // the member is closing: the state as it is
				answer = true
			case <-r.Context().Done():
				done()
				return
			}
		}
		done()
		if answer {
			answerLock(w, l, ok, path)
			return
		}
	}
}

func answerLock(w http.ResponseWriter, l LockView, ok bool, path string) {
	if !ok {
		writeJSON(w, nil, &apiError{http.StatusNotFound, "no lock " + path})
		return
	}
	w.Header().Set("X-Arbor-Index", strconv.FormatInt(l.Index, 10))
	writeJSON(w, l, nil)
}

// pollParams reads a long poll's ?index (-1 without one) and ?wait.
func pollParams(r *http.Request) (index int64, wait time.Duration, err error) {
	index, wait = -1, defaultLockPoll
	if v := r.URL.Query().Get("index"); v != "" {
		if index, err = strconv.ParseInt(v, 10, 64); err != nil || index < 0 {
			return 0, 0, badRequest("index %q is not a zxid", v)
		}
	}
	if v := r.URL.Query().Get("wait"); v != "" {
		if wait, err = time.ParseDuration(v); err != nil || wait < 0 || wait > maxLockPoll {
			return 0, 0, badRequest("wait %q is not a duration up to %v", v, maxLockPoll)
		}
	}
	return index, wait, nil
}

// eventsKeepAlive is how often an idle event stream sends a comment, so
// that proxies keep it open.
const eventsKeepAlive = 15 * time.Second

// apiLockEvents streams the lock NAME's state as server-sent events: one
// "lock" event at once, and one at each change ("data" is what GET of the
// lock answers; {} when nobody holds or waits), until the client goes.
func (s *Server) apiLockEvents(w http.ResponseWriter, r *http.Request) {
	path, err := s.lockPath(r)
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	s.stream(w, r, s.lockWatch, path, func() bool { return s.sendLockEvent(w, r, path) })
}

// sendLockEvent writes the lock's state as a "lock" event and flushes it;
// false when the client has gone.
func (s *Server) sendLockEvent(w http.ResponseWriter, r *http.Request, path string) bool {
	if l, ok := s.lockState(r, path); ok {
		return sendEvent(w, "lock", l)
	}
	return sendEvent(w, "lock", struct{}{})
}

// stream answers r with a stream of server-sent events: send at once and
// after each change at path in pw, until send or the client says no more
// (or the member closes), with a comment while idle. send is called after
// the change's watch is taken, so that a change between the two wakes the
// wait at once.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, pw *pathWatch, path string, send func() bool) {
	if _, ok := w.(http.Flusher); !ok {
		writeJSON(w, nil, errors.New("this connection cannot stream"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	keepAlive := time.NewTicker(eventsKeepAlive)
	defer keepAlive.Stop()
	for {
		changed, done := pw.next(path)
		ok := send() && s.waitChange(w, r, changed, keepAlive.C)
		done()
		if !ok {
			return
		}
	}
}

// waitChange waits for changed, keeping the stream alive meanwhile; false
// when the client has gone or the server is closing.
func (s *Server) waitChange(w http.ResponseWriter, r *http.Request, changed <-chan struct{}, keepAlive <-chan time.Time) bool {
	for {
		select {
		case <-changed:
			return true
		case <-keepAlive:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return false
			}
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
			return false
		case <-s.stopc:
			return false
		}
	}
}

// LockEventView is an event of the lock history as the API shows it.
type LockEventView struct {
	Lock         string `json:"lock"`
	Index        int64  `json:"index"` // the zxid of the change
	Time         string `json:"time"`
	Event        string `json:"event"` // acquired, released, expired, session-ended, broken, deadlock
	ClientID     string `json:"client_id"`
	Holder       string `json:"holder,omitempty"`
	Mode         string `json:"mode"`
	Session      string `json:"session"`
	LeaseID      string `json:"lease_id,omitempty"`
	FencingToken int64  `json:"fencing_token"`
	WaitedMs     int64  `json:"waited_ms,omitempty"`
	HeldMs       int64  `json:"held_ms,omitempty"`
	By           string `json:"by,omitempty"`
	Reason       string `json:"reason,omitempty"`
}

// LockHistory is the recent history of the locks at and below prefix, as
// ids may read it, oldest first.
func (s *Server) LockHistory(ids []wire.Identity, prefix string) []LockEventView {
	var evs []wire.LockEvent
	s.fsm.read(func(t *tree.Tree) { evs = s.lockHistory(t, prefix, ids) })
	out := []LockEventView{}
	for _, ev := range evs {
		j := LockEventView{Lock: ev.Lock, Index: ev.Zxid, Time: time.UnixMilli(ev.Time).UTC().Format(time.RFC3339Nano), Event: ev.Kind,
			ClientID: ev.Owner, Holder: ev.Holder, Mode: ev.Mode, Session: leaseID(ev.Session), FencingToken: ev.Token,
			WaitedMs: ev.WaitedMs, HeldMs: ev.HeldMs, By: ev.By, Reason: ev.Reason}
		if ev.Lease != 0 {
			j.LeaseID = leaseID(ev.Lease)
		}
		out = append(out, j)
	}
	return out
}

// apiLockHistory answers the lock NAME's recent history, oldest first.
func (s *Server) apiLockHistory(w http.ResponseWriter, r *http.Request) {
	path, err := s.lockPath(r)
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	out := []LockEventView{}
	for _, ev := range s.LockHistory(s.HTTPIdentities(r), path) {
		if ev.Lock == path { // not a lock below NAME's node
			out = append(out, ev)
		}
	}
	writeJSON(w, map[string]any{"events": out}, nil)
}

// Locks lists every lock held or waited for, as ids may read them.
func (s *Server) Locks(ids []wire.Identity) []LockView {
	var infos []wire.LockInfo
	s.fsm.read(func(t *tree.Tree) { infos = s.lockInfos(t, "/", ids) })
	out := []LockView{}
	for _, l := range infos {
		out = append(out, apiLock(l))
	}
	return out
}

func (s *Server) apiLocks(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"locks": s.Locks(s.HTTPIdentities(r))}, nil)
}

// DeadlockEdge is one wait of a deadlock cycle: a client waits for a lock
// that another holds.
type DeadlockEdge struct {
	ClientID string `json:"client_id"`
	Holder   string `json:"holder,omitempty"`
	Lock     string `json:"lock"`
	HeldBy   string `json:"held_by"`
}

// Deadlocks lists the deadlock cycles among the locks ids may read.
func (s *Server) Deadlocks(ids []wire.Identity) [][]DeadlockEdge {
	var cycles [][]wire.LockWait
	s.fsm.read(func(t *tree.Tree) { cycles = s.deadlocks(t, ids) })
	out := [][]DeadlockEdge{}
	for _, c := range cycles {
		var es []DeadlockEdge
		for _, w := range c {
			es = append(es, DeadlockEdge{ClientID: w.Waiter.Owner, Holder: w.Waiter.Holder, Lock: w.Lock, HeldBy: w.Holder.Owner})
		}
		out = append(out, es)
	}
	return out
}

func (s *Server) apiDeadlocks(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"cycles": s.Deadlocks(s.HTTPIdentities(r))}, nil)
}
