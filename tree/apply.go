package tree

import (
	"maps"
	"slices"
	"strings"

	"github.com/arbor-coord/arbor/wire"
)

// Apply applies txn as the change with the given zxid and returns its result
// and the watch events it fired. The events slice is reused by the next
// Apply. A txn that fails changes nothing and fires nothing, and its zxid is
// still recorded as applied.
func (t *Tree) Apply(zxid int64, txn *Txn) (Result, []Event) {
	t.events = t.events[:0]
	t.breaches = nil
	t.quotaMade = false
	t.exempt = txn.Cause.quotaExempt()
	t.zxid = zxid
	if err := t.checkWrite(txn); err != nil {
		return Result{Err: err}, t.events
	}
	var res Result
	switch txn.Type {
	case wire.OpCreate:
		res.Path, res.Stat, res.Err = t.create(zxid, txn, txn.Identities)
	case wire.OpDelete:
		res.Err = t.delete(zxid, txn.Path, txn.Version, txn.Identities)
	case wire.OpSetData:
		res.Stat, res.Err = t.setData(zxid, txn, txn.Identities)
	case wire.OpCheck:
		res.Err = t.check(txn.Path, txn.Version, txn.Mode, txn.Identities)
	case wire.OpSetACL:
		res.Stat, res.Err = t.setACL(txn)
	case wire.OpMulti:
		res.Multi, res.Err = t.multi(zxid, txn.Ops, txn.Identities)
	case TxnCreateSession:
		res.Lease, res.Err = t.createSession(txn)
	case TxnRenewLease:
		res.Lease, res.Err = t.renewLease(txn)
	case TxnRenewLeases:
		res.Renewals = t.renewLeases(txn)
	case TxnCloseSession:
		res.Closed, res.Err = t.closeSession(zxid, txn.Session, txn.LeaseVersion)
	case TxnReap:
		t.reap(zxid, txn.Time)
	case TxnSetConfig:
		res.Stat, res.Err = t.setConfig(zxid, txn)
	case TxnSetShardMap:
		res.Stat, res.Err = t.setShardMap(zxid, txn)
	case TxnSplit:
		res.Stat, res.Err = t.splitShard(zxid, txn)
	case TxnStub:
		res.Err = t.stub(zxid, txn)
	default:
		res.Err = wire.Errorf(wire.CodeUnimplemented, "unknown txn type %d", int32(txn.Type))
	}
	res.Quota = t.breaches
	return res, t.events
}

// fire records an event of the node n at path.
func (t *Tree) fire(typ wire.EventType, path string, n *node) {
	t.events = append(t.events, Event{Type: typ, Path: path, ACL: t.eventACL(n)})
}

// fireNode records an event that carries n's data and Stat.
func (t *Tree) fireNode(typ wire.EventType, path string, n *node) {
	t.events = append(t.events, Event{Type: typ, Path: path, Data: n.data, Stat: t.stat(n), ACL: t.eventACL(n)})
}

// eventACL is n's ACL for an event: nil when it is open.
func (t *Tree) eventACL(n *node) []wire.ACL {
	if n.acl.index() == 0 {
		return nil
	}
	return t.acls.list(n.acl)
}

// create makes a node: CREATE on the parent.
func (t *Tree) create(zxid int64, txn *Txn, ids []wire.Identity) (string, wire.Stat, error) {
	mode := txn.Mode
	if !mode.Valid() {
		return "", wire.Stat{}, wire.Errorf(wire.CodeBadArguments, "unknown create mode %d", int32(mode))
	}
	if err := wire.ValidatePath(txn.Path, mode.IsSequential()); err != nil {
		return "", wire.Stat{}, err
	}
	if txn.Path == "/" && !mode.IsSequential() {
		return "", wire.Stat{}, wire.ErrNodeExists
	}
	if err := t.checkData(txn.Data); err != nil {
		return "", wire.Stat{}, err
	}
	if mode.IsTTL() && (txn.TTL <= 0 || txn.TTL > MaxTTL) {
		return "", wire.Stat{}, wire.Errorf(wire.CodeBadArguments, "ttl %d ms out of range (1 to %d)", txn.TTL, int64(MaxTTL))
	}
	if !mode.IsTTL() && txn.TTL != 0 {
		return "", wire.Stat{}, wire.Errorf(wire.CodeBadArguments, "ttl given for %s node", mode)
	}
	parentPath, name := splitPath(txn.Path)
	if txn.Path == "/" {
		parentPath, name = "/", ""
	}
	parent := t.lookup(parentPath)
	if parent == nil {
		return "", wire.Stat{}, wire.ErrNoNode
	}
	if err := t.allowed(parent, ids, wire.PermCreate); err != nil {
		return "", wire.Stat{}, err
	}
	if parent.kind == kindEphemeral {
		return "", wire.Stat{}, wire.ErrNoChildrenForEphemerals
	}
	path := txn.Path
	if mode.IsSequential() {
		path = sequenceName(path, parent.cversion)
		name = path[strings.LastIndexByte(path, '/')+1:]
	}
	if parent.children.get(name) != nil {
		return "", wire.Stat{}, wire.ErrNodeExists
	}
	if _, ok := t.sessions[txn.Session]; !ok && mode.IsEphemeral() {
		return "", wire.Stat{}, wire.ErrSessionExpired
	}
	data, err := t.quotaData(path, txn.Data)
	if err != nil {
		return "", wire.Stat{}, err
	}
	if err := t.checkNewQuota(path); err != nil {
		return "", wire.Stat{}, err
	}
	ref, err := t.acls.ref(txn.ACL)
	if err != nil {
		return "", wire.Stat{}, err
	}
	if err := t.checkQuota(path, 1, int64(len(data))); err != nil {
		t.acls.release(ref)
		return "", wire.Stat{}, err
	}
	n := &node{
		data: data, dataHash: hashData(data), acl: ref,
		czxid: zxid, mzxid: zxid, pzxid: zxid, ctime: txn.Time, mtime: txn.Time,
	}
	var owner int64
	switch {
	case mode.IsEphemeral():
		n.kind, owner = kindEphemeral, txn.Session
	case mode.IsContainer():
		n.kind = kindContainer
	case mode.IsTTL():
		n.kind = kindTTL
	}
	n.name = keptName(n.kind, name)
	t.link(zxid, parent, parentPath, n, path, txn.TTL, owner)
	return path, t.stat(n), nil
}

func (t *Tree) checkData(data []byte) error {
	if len(data) > t.maxData {
		return wire.Errorf(wire.CodeDataTooLarge, "data of %d bytes is over the %d-byte limit", len(data), t.maxData)
	}
	return nil
}

// link adds n as a child of parent and updates the parent's Stat, the
// indexes (with n's ttl and owner, if it has them), the digest and the undo
// log.
func (t *Tree) link(zxid int64, parent *node, parentPath string, n *node, path string, ttl, owner int64) {
	parent = t.own(parentPath, parent)
	oldParent := t.touchParent(zxid, parent, parentPath)
	addChild(parent, n)
	t.made(n)
	t.count++
	t.dataSize += nodeSize(path, n)
	t.index(n, path, ttl, owner)
	t.digest += t.nodeDigest(path, n)
	t.fireNode(wire.EventNodeCreated, path, n)
	t.fire(wire.EventNodeChildrenChanged, parentPath, parent)
	if t.undo != nil {
		t.undo = append(t.undo, func() {
			t.digest -= t.nodeDigest(path, n)
			t.acls.release(n.acl)
			t.unindex(n, path)
			removeChild(parent, n.name)
			t.count--
			t.dataSize -= nodeSize(path, n)
			t.restoreParent(parent, parentPath, oldParent)
		})
	}
	t.chargeQuota(path, 1, int64(len(n.data)))
	t.quotaNodeAdded(path, n)
}

// unlinkPath removes the childless node at path, which exists.
func (t *Tree) unlinkPath(zxid int64, path string) {
	parentPath, name := splitPath(path)
	parent := t.lookup(parentPath)
	t.unlink(zxid, parent, parent.children.get(name), path)
}

// unlink removes the childless node n at path from parent.
func (t *Tree) unlink(zxid int64, parent, n *node, path string) {
	parentPath, _ := splitPath(path)
	parent = t.own(parentPath, parent)
	oldParent := t.touchParent(zxid, parent, parentPath)
	ttl, owner := t.ttls[path], t.owner(n)
	removeChild(parent, n.name)
	t.count--
	t.dataSize -= nodeSize(path, n)
	t.digest -= t.nodeDigest(path, n) // before unindex: the hash covers the ttl
	t.unindex(n, path)
	t.fire(wire.EventNodeDeleted, path, n)
	t.fire(wire.EventNodeChildrenChanged, parentPath, parent)
	acl := t.acls.list(n.acl)
	t.acls.release(n.acl)
	if t.undo != nil {
		t.undo = append(t.undo, func() {
			n := n
			if t.shared(n) {
				n = t.copyNode(n) // a view holds n: n goes back as a copy
			}
			// The release may have dropped the list: take it again (the
			// reference may differ; the digest covers the list, not it).
			n.acl, _ = t.acls.ref(acl)
			t.index(n, path, ttl, owner)
			t.digest += t.nodeDigest(path, n)
			addChild(parent, n)
			t.count++
			t.dataSize += nodeSize(path, n)
			t.restoreParent(parent, parentPath, oldParent)
		})
	}
	t.chargeQuota(path, -1, -int64(len(n.data)))
	t.quotaNodeRemoved(path)
}

// parentStat is the part of a parent that a child's create or delete
// changes.
type parentStat struct {
	cversion int32
	pzxid    int64
}

// touchParent records a change to parent's children: cversion and pzxid
// move (ZooKeeper's rule) and the digest follows. It returns the old values.
func (t *Tree) touchParent(zxid int64, parent *node, parentPath string) parentStat {
	old := parentStat{parent.cversion, parent.pzxid}
	t.digest -= t.nodeDigest(parentPath, parent)
	parent.cversion++
	parent.pzxid = zxid
	t.digest += t.nodeDigest(parentPath, parent)
	return old
}

func (t *Tree) restoreParent(parent *node, parentPath string, old parentStat) {
	t.digest -= t.nodeDigest(parentPath, parent)
	parent.cversion, parent.pzxid = old.cversion, old.pzxid
	t.digest += t.nodeDigest(parentPath, parent)
}

// addChild adds n to parent's children.
func addChild(parent, n *node) {
	if parent.children == nil {
		parent.children = &childSet{}
	}
	parent.children.add(n)
}

// removeChild removes the child called name from parent's children, and
// drops the set with the last one.
func removeChild(parent *node, name string) {
	parent.children.remove(name)
	if parent.children.len() == 0 {
		parent.children = nil
	}
}

// index adds n to the owner, session and housekeeping indexes; ttl and
// owner are n's, if it is a TTL node or an ephemeral.
func (t *Tree) index(n *node, path string, ttl, owner int64) {
	switch n.kind {
	case kindEphemeral:
		t.owners[n] = owner
		t.sessions[owner].ephemerals.add(path)
	case kindContainer:
		t.containers[path] = struct{}{}
	case kindTTL:
		t.ttls[path] = ttl
	}
}

func (t *Tree) unindex(n *node, path string) {
	switch n.kind {
	case kindEphemeral:
		if s, ok := t.sessions[t.owners[n]]; ok {
			s.ephemerals.remove(path)
		}
		delete(t.owners, n)
	case kindContainer:
		delete(t.containers, path)
	case kindTTL:
		delete(t.ttls, path)
	}
}

// delete deletes a childless node: DELETE on its parent.
func (t *Tree) delete(zxid int64, path string, version int32, ids []wire.Identity) error {
	if path == "/" {
		return wire.Errorf(wire.CodeBadArguments, "cannot delete the root")
	}
	// ZooKeeper's order: the parent must exist and allow DELETE before the
	// node's own absence is told.
	if err := wire.ValidatePath(path, false); err != nil {
		return err
	}
	if wire.IsSystemNode(path) {
		return wire.Errorf(wire.CodeBadArguments, "cannot delete %s: it is a system node", path)
	}
	parent, name := splitPath(path)
	p := t.lookup(parent)
	if p == nil {
		return wire.ErrNoNode
	}
	if err := t.allowed(p, ids, wire.PermDelete); err != nil {
		return err
	}
	n := p.children.get(name)
	if n == nil {
		return wire.ErrNoNode
	}
	if version != -1 && version != n.version {
		return wire.ErrBadVersion
	}
	if n.children.len() > 0 {
		return wire.ErrNotEmpty
	}
	t.unlink(zxid, p, n, path)
	return nil
}

// setData replaces a node's data: WRITE on the node.
func (t *Tree) setData(zxid int64, txn *Txn, ids []wire.Identity) (wire.Stat, error) {
	n, err := t.find(txn.Path)
	if err != nil {
		return wire.Stat{}, err
	}
	if err := t.allowed(n, ids, wire.PermWrite); err != nil {
		return wire.Stat{}, err
	}
	if err := t.checkData(txn.Data); err != nil {
		return wire.Stat{}, err
	}
	if txn.Version != -1 && txn.Version != n.version {
		return wire.Stat{}, wire.ErrBadVersion
	}
	data, err := t.quotaData(txn.Path, txn.Data)
	if err != nil {
		return wire.Stat{}, err
	}
	grown := int64(len(data)) - int64(len(n.data))
	if err := t.checkQuota(txn.Path, 0, grown); err != nil {
		return wire.Stat{}, err
	}
	n = t.writeData(zxid, txn.Path, n, data, txn.Time)
	t.chargeQuota(txn.Path, 0, grown)
	t.quotaLimitsSet(txn.Path, data)
	return t.stat(n), nil
}

// writeData replaces the data of n, at path, as a setData at zxid and
// time does: the version moves, NodeDataChanged fires. It returns the
// node it changed: n, or the copy of n that took its place (own).
func (t *Tree) writeData(zxid int64, path string, n *node, data []byte, time int64) *node {
	n = t.own(path, n)
	old := *n
	t.digest -= t.nodeDigest(path, n)
	t.dataSize += int64(len(data) - len(n.data))
	n.data, n.dataHash = data, hashData(data)
	n.version++
	n.mzxid, n.mtime = zxid, time
	t.digest += t.nodeDigest(path, n)
	t.fireNode(wire.EventNodeDataChanged, path, n)
	if t.undo != nil {
		t.undo = append(t.undo, func() {
			t.digest -= t.nodeDigest(path, n)
			t.dataSize += int64(len(old.data) - len(n.data))
			n.data, n.dataHash, n.version, n.mzxid, n.mtime = old.data, old.dataHash, old.version, old.mzxid, old.mtime
			t.digest += t.nodeDigest(path, n)
		})
	}
	return n
}

// check checks a node's version, and needs READ on the node: it fails
// with ErrBadVersion unless the node at path has version (-1: any), its
// data version, or with mode wire.CheckCversion its cversion.
func (t *Tree) check(path string, version int32, mode wire.CreateMode, ids []wire.Identity) error {
	if mode != 0 && mode != wire.CheckCversion {
		return wire.Errorf(wire.CodeBadArguments, "check mode %d is not 0 or %d (cversion)", mode, wire.CheckCversion)
	}
	n, err := t.find(path)
	if err != nil {
		return err
	}
	if err := t.allowed(n, ids, wire.PermRead); err != nil {
		return err
	}
	have := n.version
	if mode == wire.CheckCversion {
		have = n.cversion
	}
	if version != -1 && version != have {
		return wire.ErrBadVersion
	}
	return nil
}

// multi applies ops all or nothing. On failure every step is rolled back,
// no event fires, and the results follow ZooKeeper: CodeOK for the ops
// before the one that failed, its error for it, CodeRuntimeInconsistency
// after it. Every op is checked with ids, the multi's identities.
func (t *Tree) multi(zxid int64, ops []Txn, ids []wire.Identity) ([]wire.OpResult, error) {
	results := make([]wire.OpResult, len(ops))
	t.undo = make([]func(), 0, 2*len(ops))
	defer func() { t.undo = nil }()
	var failed error
	for i := range ops {
		op := &ops[i]
		results[i].Op = op.Type
		if failed != nil {
			results[i].Err = wire.CodeRuntimeInconsistency
			continue
		}
		ids := ids
		if len(op.Identities) > 0 {
			ids = op.Identities // an op the server adds as itself: a break's lock-delay
		}
		err := t.checkWrite(op)
		switch {
		case err != nil:
		case op.Type == wire.OpCreate:
			results[i].Path, results[i].Stat, err = t.create(zxid, op, ids)
		case op.Type == wire.OpDelete:
			err = t.delete(zxid, op.Path, op.Version, ids)
		case op.Type == wire.OpSetData:
			results[i].Stat, err = t.setData(zxid, op, ids)
		case op.Type == wire.OpCheck:
			err = t.check(op.Path, op.Version, op.Mode, ids)
		default:
			err = wire.Errorf(wire.CodeBadArguments, "op %s is not allowed in a multi", op.Type)
		}
		if err != nil {
			failed = err
			results[i].Err = wire.CodeOf(err)
		}
	}
	if failed == nil {
		return results, nil
	}
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
	t.events = t.events[:0]
	// The limits the rolled back ops went over were not, after all: the
	// hard one that refused it alone stays.
	t.breaches = slices.DeleteFunc(t.breaches, func(b QuotaBreach) bool { return !b.Hard || b.Exempt })
	for i := range results {
		results[i].Path, results[i].Stat = "", wire.Stat{}
	}
	return results, failed
}

func (t *Tree) createSession(txn *Txn) (Lease, error) {
	if txn.Session == 0 {
		return Lease{}, wire.Errorf(wire.CodeBadArguments, "session id 0 is reserved")
	}
	if _, ok := t.sessions[txn.Session]; ok {
		return Lease{}, wire.Errorf(wire.CodeBadArguments, "session id %#x is in use", txn.Session)
	}
	s := &session{timeoutMs: txn.TimeoutMs, password: txn.Password}
	if txn.LeaseTTL > 0 {
		if p := txn.LeaseParent; p != 0 && (t.sessions[p] == nil || t.sessions[p].lease != nil) {
			return Lease{}, wire.ErrSessionExpired // its session is gone (or is a lease)
		}
		s.lease = &Lease{TTLMs: txn.LeaseTTL, Expires: txn.Time + txn.LeaseTTL, Version: 1, Parent: txn.LeaseParent, Owner: txn.LeaseOwner}
		if txn.LeaseMaxHold > 0 {
			s.lease.MaxUntil = txn.Time + txn.LeaseMaxHold
			s.lease.Expires = min(s.lease.Expires, s.lease.MaxUntil)
		}
	}
	t.addSession(txn.Session, s)
	if s.lease == nil {
		return Lease{}, nil
	}
	return *s.lease, nil
}

// addSession adds s, and indexes it under its parent if it is a lease.
func (t *Tree) addSession(id int64, s *session) {
	t.sessions[id] = s
	t.digest += s.digest(id)
	if s.lease != nil && s.lease.Parent != 0 {
		if t.leases[s.lease.Parent] == nil {
			t.leases[s.lease.Parent] = map[int64]struct{}{}
		}
		t.leases[s.lease.Parent][id] = struct{}{}
	}
}

// renewLease keeps a lease for another TTL from the txn's time.
func (t *Tree) renewLease(txn *Txn) (Lease, error) {
	s, ok := t.sessions[txn.Session]
	switch {
	case !ok:
		return Lease{}, wire.ErrSessionExpired // expired, or never was
	case s.lease == nil:
		return Lease{}, wire.Errorf(wire.CodeBadArguments, "session %#x is not a lease", txn.Session)
	}
	t.digest -= s.digest(txn.Session)
	l := s.lease
	if txn.LeaseTTL > 0 {
		l.TTLMs = txn.LeaseTTL
	}
	l.Expires, l.Version = txn.Time+l.TTLMs, l.Version+1
	if l.MaxUntil > 0 {
		l.Expires = min(l.Expires, l.MaxUntil)
	}
	t.digest += s.digest(txn.Session)
	return *l, nil
}

// renewLeases applies each renewal of txn, at txn's time.
func (t *Tree) renewLeases(txn *Txn) []Result {
	out := make([]Result, len(txn.Ops))
	for i := range txn.Ops {
		op := txn.Ops[i]
		if op.Type != TxnRenewLease {
			out[i].Err = wire.Errorf(wire.CodeBadArguments, "a %s txn in a batch of renewals", op.Type)
			continue
		}
		op.Time = txn.Time
		out[i].Lease, out[i].Err = t.renewLease(&op)
	}
	return out
}

// closeSession deletes the session's ephemerals, in path order, and the
// session, after its leases, whose ids it returns. A lease is closed only
// at version (when it is not 0): a renewal that committed after the
// version its closer saw keeps it, and the close answers ErrBadVersion.
func (t *Tree) closeSession(zxid int64, id int64, version int64) ([]int64, error) {
	s, ok := t.sessions[id]
	if !ok {
		return nil, wire.ErrSessionExpired
	}
	if version != 0 && s.lease != nil && s.lease.Version != version {
		return nil, wire.ErrBadVersion
	}
	leases := slices.Sorted(maps.Keys(t.leases[id]))
	for _, lease := range leases {
		_, _ = t.closeSession(zxid, lease, 0)
	}
	for _, path := range s.ephemerals.sorted() {
		t.unlinkPath(zxid, path)
	}
	delete(t.sessions, id)
	delete(t.leases, id)
	if s.lease != nil && s.lease.Parent != 0 {
		delete(t.leases[s.lease.Parent], id)
	}
	t.digest -= s.digest(id)
	return leases, nil
}

// Reapable returns the paths TxnReap would delete at time now: containers
// that had children and have none left, and childless TTL nodes not changed
// for longer than their ttl. The leader proposes TxnReap only when there are
// some.
func (t *Tree) Reapable(now int64) []string {
	var paths []string
	for path := range t.containers {
		n := t.lookup(path)
		if n.children.len() == 0 && n.cversion > 0 {
			paths = append(paths, path)
		}
	}
	for path, ttl := range t.ttls {
		n := t.lookup(path)
		if n.children.len() == 0 && now-n.mtime > ttl {
			paths = append(paths, path)
		}
	}
	slices.Sort(paths)
	return paths
}

func (t *Tree) reap(zxid, now int64) {
	for _, path := range t.Reapable(now) {
		t.unlinkPath(zxid, path)
	}
}
