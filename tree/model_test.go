package tree_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// model is a deliberately naive reference for the tree: a flat map from path
// to node, children found by looking at the map, multi done on a copy. It
// follows ZooKeeper's rules in the same order of checks as the tree, and is
// what FuzzApply compares the tree with.
type model struct {
	nodes    map[string]*mnode
	sessions map[int64]tree.Session
	maxData  int
	// Of the txn being applied: whether it made a quota, whether hard
	// limits let it through.
	quotaMade, exempt bool
}

type mnode struct {
	data                              []byte
	czxid, mzxid, pzxid, ctime, mtime int64
	version, cversion                 int32
	owner                             int64
	mode                              wire.CreateMode // what it was created as
	ttl                               int64
	acl                               []wire.ACL // nil: the open ACL
	aversion                          int32
}

// modelACL is how the model keeps an ACL: nil for the open one (empty, or
// world:anyone:cdrwa written out).
func modelACL(acl []wire.ACL) []wire.ACL {
	if len(acl) == 0 || slices.Equal(acl, wire.OpenACL) {
		return nil
	}
	return acl
}

// may reports whether ids may do perm on n, by ZooKeeper's rules: an open
// ACL lets everyone do everything, the superuser passes every ACL, and
// otherwise an entry granting perm must match world:anyone or one of ids
// (the generator's ip identities are plain addresses).
func (n *mnode) may(ids []wire.Identity, perm wire.Perms) bool {
	if n.acl == nil || slices.ContainsFunc(ids, func(id wire.Identity) bool { return id.Scheme == tree.SuperScheme }) {
		return true
	}
	for _, a := range n.acl {
		if a.Perms&perm != 0 && (a == wire.ACL{Perms: a.Perms, Scheme: "world", ID: "anyone"} ||
			slices.Contains(ids, wire.Identity{Scheme: a.Scheme, ID: a.ID})) {
			return true
		}
	}
	return false
}

// newModel returns a model of a new tree: the root and ZooKeeper's
// system nodes, /zookeeper/config readable only.
func newModel(maxData int) *model {
	return &model{
		nodes: map[string]*mnode{"/": {}, wire.ZooKeeperPath: {}, wire.QuotaPath: {},
			wire.ConfigPath: {acl: wire.ReadACL}},
		sessions: map[int64]tree.Session{},
		maxData:  maxData,
	}
}

func (m *model) clone() *model {
	c := &model{nodes: map[string]*mnode{}, sessions: maps.Clone(m.sessions), maxData: m.maxData, quotaMade: m.quotaMade, exempt: m.exempt}
	for p, n := range m.nodes {
		cp := *n
		c.nodes[p] = &cp
	}
	return c
}

func parentOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i == 0 {
		return "/"
	}
	return path[:i]
}

func (m *model) children(path string) []string {
	var names []string
	for p := range m.nodes {
		if p != "/" && parentOf(p) == path {
			names = append(names, p[strings.LastIndexByte(p, '/')+1:])
		}
	}
	slices.Sort(names)
	return names
}

func (m *model) stat(path string) wire.Stat {
	n := m.nodes[path]
	return wire.Stat{
		Czxid: n.czxid, Mzxid: n.mzxid, Pzxid: n.pzxid, Ctime: n.ctime, Mtime: n.mtime,
		Version: n.version, Cversion: n.cversion, Aversion: n.aversion, EphemeralOwner: n.owner,
		DataLength: int32(len(n.data)), NumChildren: int32(len(m.children(path))),
	}
}

// modelResult is what the tree's Result must agree with.
type modelResult struct {
	code  wire.Code
	path  string
	stat  wire.Stat
	multi []wire.OpResult
}

// apply applies txn and returns its result and events.
func (m *model) apply(zxid int64, txn *tree.Txn) (modelResult, []tree.Event) {
	var ev []tree.Event
	var r modelResult
	m.quotaMade = false
	m.exempt = txn.Cause == tree.CauseBreak || txn.Cause == tree.CauseLockDelay
	switch txn.Type {
	case wire.OpCreate, wire.OpDelete, wire.OpSetData, wire.OpCheck:
		r.path, r.stat, r.code = m.op(zxid, txn, txn.Identities, &ev)
	case wire.OpSetACL:
		r.stat, r.code = m.setACL(txn)
	case wire.OpMulti:
		c := m.clone()
		for i := range txn.Ops {
			op := &txn.Ops[i]
			or := wire.OpResult{Op: op.Type}
			if r.code != wire.CodeOK {
				or.Err = wire.CodeRuntimeInconsistency
			} else {
				or.Path, or.Stat, or.Err = c.op(zxid, op, txn.Identities, &ev)
				if or.Err != wire.CodeOK {
					r.code = or.Err
				}
			}
			r.multi = append(r.multi, or)
		}
		if r.code != wire.CodeOK {
			for i := range r.multi {
				r.multi[i].Path, r.multi[i].Stat = "", wire.Stat{}
			}
			return r, nil
		}
		*m = *c
	case tree.TxnCreateSession:
		if _, ok := m.sessions[txn.Session]; ok || txn.Session == 0 {
			r.code = wire.CodeBadArguments
			break
		}
		m.sessions[txn.Session] = tree.Session{ID: txn.Session, TimeoutMs: txn.TimeoutMs, Password: txn.Password}
	case tree.TxnCloseSession:
		if _, ok := m.sessions[txn.Session]; !ok {
			r.code = wire.CodeSessionExpired
			break
		}
		for _, p := range m.ephemerals(txn.Session) {
			m.remove(zxid, p, &ev)
		}
		delete(m.sessions, txn.Session)
	case tree.TxnReap:
		for _, p := range m.reapable(txn.Time) {
			m.remove(zxid, p, &ev)
		}
	case tree.TxnSetConfig:
		n := m.nodes[wire.ConfigPath]
		switch {
		case len(txn.Data) > m.maxData:
			r.code = wire.CodeDataTooLarge
		case txn.Version != -1 && txn.Version != n.version:
			r.code = wire.CodeBadVersion
		default:
			n.data = txn.Data
			n.version++
			n.mzxid, n.mtime = zxid, txn.Time
			ev = append(ev, changed(wire.ConfigPath))
			r.stat = m.stat(wire.ConfigPath)
		}
	default:
		r.code = wire.CodeUnimplemented
	}
	return r, ev
}

// op applies one of the ops a multi may hold, for identities ids;
// anything else is BadArguments. Events are appended to ev only on
// success.
func (m *model) op(zxid int64, txn *tree.Txn, ids []wire.Identity, ev *[]tree.Event) (string, wire.Stat, wire.Code) {
	switch txn.Type {
	case wire.OpCreate:
		return m.create(zxid, txn, ids, ev)
	case wire.OpDelete:
		if txn.Path == "/" {
			return "", wire.Stat{}, wire.CodeBadArguments
		}
		// ZooKeeper's order: the path, the parent, its DELETE
		// permission, then the node.
		if wire.ValidatePath(txn.Path, false) != nil || wire.IsSystemNode(txn.Path) {
			return "", wire.Stat{}, wire.CodeBadArguments
		}
		if _, code := m.find(parentOf(txn.Path), -1); code != wire.CodeOK {
			return "", wire.Stat{}, code
		}
		if !m.nodes[parentOf(txn.Path)].may(ids, wire.PermDelete) {
			return "", wire.Stat{}, wire.CodeNoAuth
		}
		if _, code := m.find(txn.Path, txn.Version); code != wire.CodeOK {
			return "", wire.Stat{}, code
		}
		if len(m.children(txn.Path)) > 0 {
			return "", wire.Stat{}, wire.CodeNotEmpty
		}
		m.remove(zxid, txn.Path, ev)
		return "", wire.Stat{}, wire.CodeOK
	case wire.OpSetData:
		if wire.ValidatePath(txn.Path, false) != nil {
			return "", wire.Stat{}, wire.CodeBadArguments
		}
		n := m.nodes[txn.Path]
		switch {
		case n == nil:
			return "", wire.Stat{}, wire.CodeNoNode
		case !n.may(ids, wire.PermWrite):
			return "", wire.Stat{}, wire.CodeNoAuth
		case len(txn.Data) > m.maxData:
			return "", wire.Stat{}, wire.CodeDataTooLarge
		case txn.Version != -1 && txn.Version != n.version:
			return "", wire.Stat{}, wire.CodeBadVersion
		}
		data, code := m.quotaData(txn.Path, txn.Data)
		if code == wire.CodeOK {
			code = m.checkQuota(txn.Path, 0, int64(len(data)-len(n.data)))
		}
		if code != wire.CodeOK {
			return "", wire.Stat{}, code
		}
		n.data = data
		n.version++
		n.mzxid, n.mtime = zxid, txn.Time
		m.refreshUsage()
		*ev = append(*ev, changed(txn.Path))
		return "", m.stat(txn.Path), wire.CodeOK
	case wire.OpCheck:
		n, code := m.find(txn.Path, -1)
		switch {
		case code != wire.CodeOK:
		case !n.may(ids, wire.PermRead):
			code = wire.CodeNoAuth
		default:
			_, code = m.find(txn.Path, txn.Version)
		}
		return "", wire.Stat{}, code
	}
	return "", wire.Stat{}, wire.CodeBadArguments
}

// setACL replaces a node's ACL: ADMIN on it, and its aversion as expected.
// It changes the aversion only and fires nothing.
func (m *model) setACL(txn *tree.Txn) (wire.Stat, wire.Code) {
	n, code := m.find(txn.Path, -1)
	switch {
	case code != wire.CodeOK:
		return wire.Stat{}, code
	case !n.may(txn.Identities, wire.PermAdmin):
		return wire.Stat{}, wire.CodeNoAuth
	case txn.Version != -1 && txn.Version != n.aversion:
		return wire.Stat{}, wire.CodeBadVersion
	}
	n.acl = modelACL(txn.ACL)
	n.aversion++
	return m.stat(txn.Path), wire.CodeOK
}

// find checks the path and the expected version of an existing node.
func (m *model) find(path string, version int32) (*mnode, wire.Code) {
	if wire.ValidatePath(path, false) != nil {
		return nil, wire.CodeBadArguments
	}
	n := m.nodes[path]
	switch {
	case n == nil:
		return nil, wire.CodeNoNode
	case version != -1 && version != n.version:
		return nil, wire.CodeBadVersion
	}
	return n, wire.CodeOK
}

func (m *model) create(zxid int64, txn *tree.Txn, ids []wire.Identity, ev *[]tree.Event) (string, wire.Stat, wire.Code) {
	mode := txn.Mode
	fail := func(c wire.Code) (string, wire.Stat, wire.Code) { return "", wire.Stat{}, c }
	switch {
	case !mode.Valid():
		return fail(wire.CodeBadArguments)
	case wire.ValidatePath(txn.Path, mode.IsSequential()) != nil:
		return fail(wire.CodeBadArguments)
	case txn.Path == "/" && !mode.IsSequential():
		return fail(wire.CodeNodeExists)
	case len(txn.Data) > m.maxData:
		return fail(wire.CodeDataTooLarge)
	case mode.IsTTL() && (txn.TTL <= 0 || txn.TTL > tree.MaxTTL):
		return fail(wire.CodeBadArguments)
	case !mode.IsTTL() && txn.TTL != 0:
		return fail(wire.CodeBadArguments)
	}
	parentPath := parentOf(txn.Path)
	parent := m.nodes[parentPath]
	switch {
	case parent == nil:
		return fail(wire.CodeNoNode)
	case !parent.may(ids, wire.PermCreate):
		return fail(wire.CodeNoAuth)
	case parent.mode.IsEphemeral():
		return fail(wire.CodeNoChildrenForEphemerals)
	}
	path := txn.Path
	if mode.IsSequential() {
		path = fmt.Sprintf("%s%010d", path, parent.cversion)
	}
	if _, ok := m.nodes[path]; ok {
		return fail(wire.CodeNodeExists)
	}
	n := &mnode{
		data: txn.Data, czxid: zxid, mzxid: zxid, pzxid: zxid, ctime: txn.Time, mtime: txn.Time,
		mode: mode, ttl: txn.TTL, acl: modelACL(txn.ACL),
	}
	if mode.IsEphemeral() {
		if _, ok := m.sessions[txn.Session]; !ok {
			return fail(wire.CodeSessionExpired)
		}
		n.owner = txn.Session
	}
	data, code := m.quotaData(path, txn.Data)
	if code == wire.CodeOK {
		code = m.checkNewQuota(path)
	}
	if code == wire.CodeOK {
		code = m.checkQuota(path, 1, int64(len(data)))
	}
	if code != wire.CodeOK {
		return fail(code)
	}
	if _, name, ok := quotas.Split(path); ok && name == quotas.LimitNode {
		m.quotaMade = true
	}
	n.data = data
	m.nodes[path] = n
	m.refreshUsage()
	parent.cversion++
	parent.pzxid = zxid
	*ev = append(*ev, created(path), children(parentPath))
	return path, m.stat(path), wire.CodeOK
}

func (m *model) remove(zxid int64, path string, ev *[]tree.Event) {
	delete(m.nodes, path)
	m.refreshUsage()
	parent := m.nodes[parentOf(path)]
	parent.cversion++
	parent.pzxid = zxid
	*ev = append(*ev, deleted(path), children(parentOf(path)))
}

func (m *model) ephemerals(id int64) []string {
	var paths []string
	for p, n := range m.nodes {
		if n.mode.IsEphemeral() && n.owner == id {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

func (m *model) reapable(now int64) []string {
	var paths []string
	for p, n := range m.nodes {
		if len(m.children(p)) > 0 {
			continue
		}
		if (n.mode.IsContainer() && n.cversion > 0) || (n.mode.IsTTL() && now-n.mtime > n.ttl) {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

// descendants counts the paths below path.
func (m *model) descendants(path string) int {
	prefix := strings.TrimSuffix(path, "/") + "/"
	n := 0
	for p := range m.nodes {
		if p != path && strings.HasPrefix(p, prefix) {
			n++
		}
	}
	return n
}

// Quotas, the model's way: a quota is wherever a limits node is; its usage
// is counted from its subtree each time it is needed, and written into
// its stats node after every change.

// quotaPaths are the paths with a quota, sorted.
func (m *model) quotaPaths() []string {
	var out []string
	for p := range m.nodes {
		if qp, name, ok := quotas.Split(p); ok && name == quotas.LimitNode {
			out = append(out, qp)
		}
	}
	slices.Sort(out)
	return out
}

// usage counts the nodes at and below path and their bytes.
func (m *model) usage(path string) (count, size int64) {
	for p, n := range m.nodes {
		if p == path || strings.HasPrefix(p, path+"/") {
			count++
			size += int64(len(n.data))
		}
	}
	return count, size
}

// quotaData is the tree's rule: limits must parse; a stats node of a
// quota holds its usage.
func (m *model) quotaData(path string, data []byte) ([]byte, wire.Code) {
	qp, name, ok := quotas.Split(path)
	switch {
	case !ok:
	case name == quotas.LimitNode:
		if _, err := quotas.Parse(string(data)); err != nil {
			return nil, wire.CodeBadArguments
		}
	case m.nodes[quotas.LimitPath(qp)] != nil:
		return []byte(quotas.Usage(m.usage(qp))), wire.CodeOK
	}
	return data, wire.CodeOK
}

// checkNewQuota is BadArguments for a limits node at path with a quota
// above or below it, or the txn's second.
func (m *model) checkNewQuota(path string) wire.Code {
	qp, name, ok := quotas.Split(path)
	if !ok || name != quotas.LimitNode {
		return wire.CodeOK
	}
	if m.quotaMade {
		return wire.CodeBadArguments
	}
	for _, other := range m.quotaPaths() {
		if isAncestorOrSelf(other, qp) || isAncestorOrSelf(qp, other) {
			return wire.CodeBadArguments
		}
	}
	return wire.CodeOK
}

// isAncestorOrSelf reports whether a is p or one of its ancestors.
func isAncestorOrSelf(a, p string) bool { return p == a || strings.HasPrefix(p, a+"/") }

// checkQuota is QuotaExceeded if growing path's subtrees by dCount nodes
// and dBytes bytes takes one over a hard limit of a quota above path,
// unless the txn is exempt.
func (m *model) checkQuota(path string, dCount, dBytes int64) wire.Code {
	if m.exempt {
		return wire.CodeOK
	}
	for _, qp := range m.quotaPaths() {
		if !isAncestorOrSelf(qp, path) {
			continue
		}
		st, _ := quotas.Parse(string(m.nodes[quotas.LimitPath(qp)].data))
		ls := st.Limits()
		count, size := m.usage(qp)
		if dCount > 0 && ls[quotas.CountHard] >= 0 && count+dCount > ls[quotas.CountHard] ||
			dBytes > 0 && ls[quotas.BytesHard] >= 0 && size+dBytes > ls[quotas.BytesHard] {
			return wire.CodeQuotaExceeded
		}
	}
	return wire.CodeOK
}

// refreshUsage writes each quota's usage into its stats node.
func (m *model) refreshUsage() {
	for _, qp := range m.quotaPaths() {
		if n := m.nodes[quotas.StatPath(qp)]; n != nil {
			n.data = []byte(quotas.Usage(m.usage(qp)))
		}
	}
}

// dump is the model's treeDump (without the digest, which it cannot know).
func (m *model) dump(reapAt []int64) treeDump {
	d := treeDump{Count: len(m.nodes), Nodes: map[string]nodeDump{}, Ephemerals: map[int64][]string{}}
	for _, qp := range m.quotaPaths() {
		st, _ := quotas.Parse(string(m.nodes[quotas.LimitPath(qp)].data))
		count, size := m.usage(qp)
		d.Quotas = append(d.Quotas, tree.Quota{Path: qp, Limits: st.Limits(), UsedCount: count, UsedBytes: size})
	}
	for p, n := range m.nodes {
		acl := n.acl
		if acl == nil {
			acl = wire.OpenACL
		}
		d.Nodes[p] = nodeDump{Data: string(n.data), Stat: m.stat(p), Children: m.children(p), Descendants: m.descendants(p), ACL: acl}
	}
	for _, id := range slices.Sorted(maps.Keys(m.sessions)) {
		d.Sessions = append(d.Sessions, m.sessions[id])
		d.Ephemerals[id] = m.ephemerals(id)
	}
	for _, now := range reapAt {
		d.Reapable = append(d.Reapable, m.reapable(now))
	}
	return d
}
