package tree

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/wire"
)

// DefaultMaxDataSize is the default limit on a znode's data: 1 MiB.
const DefaultMaxDataSize = 1 << 20

// MaxTTL is the longest time to live a TTL node may have, in ms (as
// ZooKeeper: what fits in 40 bits).
const MaxTTL = 1<<40 - 1

// node kinds; sequential is only a naming rule and is not remembered.
const (
	kindPersistent uint8 = iota
	kindEphemeral
	kindContainer
	kindTTL
)

// node is one znode, in 112 bytes: a million znodes pay for each byte.
// It has no parent pointer (whoever changes a node has its path, and so
// its parent's) and no ephemeral owner (the tree's owners index holds it).
type node struct {
	name     string // the last segment of its path, in an allocation of its own
	data     []byte
	children *childSet // nil while it has none

	czxid, mzxid, pzxid int64
	ctime, mtime        int64
	dataHash            uint64
	version             int32
	cversion            int32
	aversion            int32
	kind                uint8
	acl                 aclRef // into the tree's aclTable; 0 is the open ACL
}

func (t *Tree) stat(n *node) wire.Stat {
	return wire.Stat{
		Czxid: n.czxid, Mzxid: n.mzxid, Pzxid: n.pzxid,
		Ctime: n.ctime, Mtime: n.mtime,
		Version: n.version, Cversion: n.cversion, Aversion: n.aversion,
		EphemeralOwner: t.owner(n),
		DataLength:     int32(len(n.data)),
		NumChildren:    int32(n.children.len()),
	}
}

// owner is n's ephemeral owner session, 0 if n is not ephemeral.
func (t *Tree) owner(n *node) int64 {
	if n.kind != kindEphemeral {
		return 0
	}
	return t.owners[n]
}

// session is what the tree knows of a session: enough to reattach it and to
// delete its ephemerals when it closes.
type session struct {
	timeoutMs  int32
	password   []byte
	ephemerals pathSet
	lease      *Lease // nil for a client's session
}

// Session describes a live session.
type Session struct {
	ID        int64
	TimeoutMs int32
	Password  []byte
	Lease     *Lease // nil for a client's session
}

// Lease is what makes a session a lease: a session without a connection,
// kept alive not by a client's heartbeats but by renewals, each a txn. The
// leader closes it, as it closes a silent session, once Expires passes
// without a renewal; its ephemerals (the locks it holds) go with it. A
// lease also ends with the session it belongs to (Parent).
type Lease struct {
	TTLMs   int64  // how long a renewal keeps it
	Expires int64  // ms since the Unix epoch: the last renewal's time plus TTLMs
	Version int64  // 1 at its creation, one more at each renewal
	Parent  int64  // the client session it belongs to; 0 for an HTTP client's
	Owner   string // who asked for it (an HTTP client's client_id)
	// MaxUntil (ms since the Unix epoch; 0: none) is when the lease ends
	// whatever its renewals: a hold's maximum, which no renewal passes.
	MaxUntil int64
}

// Tree is the znode tree and the sessions that own its ephemerals.
type Tree struct {
	root     *node
	count    int   // znodes, the root included
	dataSize int64 // the sum of each znode's path and data lengths
	zxid     int64
	digest   uint64
	maxData  int
	sessions map[int64]*session
	leases   map[int64]map[int64]struct{} // the leases of each client session that has some
	owners   map[*node]int64              // the owner session of each ephemeral
	acls     *aclTable

	// Housekeeping indexes: paths of containers and of TTL nodes (with
	// their ttl), so TxnReap never scans the whole tree.
	containers map[string]struct{}
	ttls       map[string]int64
	// quotas are the paths with a quota (a limits node), with their
	// limits and usage (quota.go).
	quotas map[string]*quota

	// Of the txn being applied: the quota limits it went over, whether it
	// made a quota (a txn makes one at most), whether hard limits let it
	// through (Cause.quotaExempt).
	breaches  []QuotaBreach
	quotaMade bool
	exempt    bool

	events []Event
	undo   []func() // set while a multi applies: how to roll back each step

	// group is the raft group whose shard the tree is (WithGroup), and
	// shards the partition map as the tree holds it (shards.go): nil
	// while it holds none, when it serves every path.
	group  uint64
	shards *shardmap.Map

	// views are the views not yet released (Freeze), and fresh the nodes
	// made or copied since the last freeze, which no view has (view.go).
	views []*View
	fresh map[*node]struct{}
}

// Option configures a Tree.
type Option func(*Tree)

// WithMaxDataSize sets the limit on a znode's data length.
func WithMaxDataSize(n int) Option { return func(t *Tree) { t.maxData = n } }

// WithGroup makes the tree the state of shard group's raft group
// (docs/scale-out.md): once it holds a partition map, it takes the
// writes of the paths the map says group serves, and refuses the others
// with WrongShard. The default is the meta group, 0.
func WithGroup(group uint64) Option { return func(t *Tree) { t.group = group } }

// New returns a new tree: the root, "/", and ZooKeeper's system nodes
// under it, /zookeeper, /zookeeper/quota and /zookeeper/config (see
// wire.ZooKeeperPath).
func New(opts ...Option) *Tree {
	t := newBare(opts...)
	t.addSystemNodes()
	return t
}

// newBare returns a tree holding only the root.
func newBare(opts ...Option) *Tree {
	t := &Tree{
		root:       &node{},
		count:      1,
		maxData:    DefaultMaxDataSize,
		sessions:   map[int64]*session{},
		leases:     map[int64]map[int64]struct{}{},
		owners:     map[*node]int64{},
		acls:       newACLTable(),
		containers: map[string]struct{}{},
		ttls:       map[string]int64{},
		quotas:     map[string]*quota{},
	}
	for _, o := range opts {
		o(t)
	}
	t.root.dataHash = hashData(nil)
	t.digest = t.nodeDigest("/", t.root)
	t.dataSize = nodeSize("/", t.root)
	return t
}

// Zxid is the zxid of the last txn applied.
func (t *Tree) Zxid() int64 { return t.zxid }

// Count is the number of znodes, the root and the system nodes included.
func (t *Tree) Count() int { return t.count }

// DataSize is the sum, over every znode, of the length of its path and of
// its data: ZooKeeper's approximate data size (zk_approximate_data_size),
// kept as the tree changes rather than counted on demand.
func (t *Tree) DataSize() int64 { return t.dataSize }

// nodeSize is what n at path adds to DataSize.
func nodeSize(path string, n *node) int64 { return int64(len(path) + len(n.data)) }

// MaxDataSize is the limit on a znode's data length.
func (t *Tree) MaxDataSize() int { return t.maxData }

// lookup finds the node at an already validated path.
func (t *Tree) lookup(path string) *node {
	n := t.root
	for i := 1; i < len(path) && n != nil; {
		j := strings.IndexByte(path[i:], '/')
		if j < 0 {
			j = len(path) - i
		}
		n = n.children.get(path[i : i+j])
		i += j + 1
	}
	return n
}

// find validates path and returns its node, or ErrBadArguments / ErrNoNode.
func (t *Tree) find(path string) (*node, error) {
	if err := wire.ValidatePath(path, false); err != nil {
		return nil, err
	}
	n := t.lookup(path)
	if n == nil {
		return nil, wire.ErrNoNode
	}
	return n, nil
}

// splitPath returns the parent path and the last segment of a valid path
// other than the root.
func splitPath(path string) (parent, name string) {
	i := strings.LastIndexByte(path, '/')
	if i == 0 {
		return "/", path[1:]
	}
	return path[:i], path[i+1:]
}

// Get returns a node's data and Stat. The data is shared with the tree and
// must not be modified; the tree never modifies it either (setData replaces
// it), so it stays valid after the caller's lock is released.
func (t *Tree) Get(path string) ([]byte, wire.Stat, error) {
	n, err := t.find(path)
	if err != nil {
		return nil, wire.Stat{}, err
	}
	return n.data, t.stat(n), nil
}

// Exists returns a node's Stat, or ErrNoNode.
func (t *Tree) Exists(path string) (wire.Stat, error) {
	n, err := t.find(path)
	if err != nil {
		return wire.Stat{}, err
	}
	return t.stat(n), nil
}

// Children returns the names of a node's children, sorted, and its Stat.
func (t *Tree) Children(path string) ([]string, wire.Stat, error) {
	n, err := t.find(path)
	if err != nil {
		return nil, wire.Stat{}, err
	}
	return sortedNames(n), t.stat(n), nil
}

func sortedNames(n *node) []string {
	names := make([]string, 0, n.children.len())
	for c := range n.children.all {
		names = append(names, c.name)
	}
	slices.Sort(names)
	return names
}

// Session returns a live session.
func (t *Tree) Session(id int64) (Session, bool) {
	s, ok := t.sessions[id]
	if !ok {
		return Session{}, false
	}
	return s.view(id), true
}

// Lease returns the live lease id: a session that is one. It is Session
// without the copies, for the paths that look up a lease per renewal or
// per lock node.
func (t *Tree) Lease(id int64) (Lease, bool) {
	s, ok := t.sessions[id]
	if !ok || s.lease == nil {
		return Lease{}, false
	}
	return *s.lease, true
}

func (s *session) view(id int64) Session {
	v := Session{ID: id, TimeoutMs: s.timeoutMs, Password: s.password}
	if s.lease != nil {
		l := *s.lease
		v.Lease = &l
	}
	return v
}

// Sessions returns every live session, ordered by id.
func (t *Tree) Sessions() []Session {
	out := make([]Session, 0, len(t.sessions))
	for id, s := range t.sessions {
		out = append(out, s.view(id))
	}
	slices.SortFunc(out, func(a, b Session) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Leases returns the leases of the session id, sorted: they end with it.
func (t *Tree) Leases(id int64) []int64 {
	return slices.Sorted(maps.Keys(t.leases[id]))
}

// SessionCount returns the number of sessions (leases included).
func (t *Tree) SessionCount() int { return len(t.sessions) }

// Ephemerals returns the paths of a session's ephemeral nodes, sorted.
func (t *Tree) Ephemerals(id int64) []string {
	s, ok := t.sessions[id]
	if !ok {
		return nil
	}
	return s.ephemerals.sorted()
}

// EphemeralCount is the number of ephemeral nodes of all sessions.
func (t *Tree) EphemeralCount() int {
	n := 0
	for _, s := range t.sessions {
		n += s.ephemerals.len()
	}
	return n
}

// SessionEphemeralCount is the number of ephemeral nodes session id owns,
// counting its leases and their ephemerals as its own: what the
// per-session ephemeral limit holds.
func (t *Tree) SessionEphemeralCount(id int64) int {
	s, ok := t.sessions[id]
	if !ok {
		return 0
	}
	n := s.ephemerals.len()
	for lease := range t.leases[id] {
		n += 1 + t.sessions[lease].ephemerals.len()
	}
	return n
}

// EphemeralsWithPrefix returns the paths of a session's ephemeral nodes
// that start with prefix, sorted: ZooKeeper's getEphemerals, which matches
// a string prefix ("/app" matches "/app2/x" too) and so gives them all for
// "/".
func (t *Tree) EphemeralsWithPrefix(id int64, prefix string) []string {
	s, ok := t.sessions[id]
	if !ok {
		return nil
	}
	var out []string
	for p := range s.ephemerals.all() {
		if strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// Descendants returns the number of nodes below path at any depth, path
// itself not counted (ZooKeeper's getAllChildrenNumber), or ErrNoNode. It
// walks the subtree, except for the root.
func (t *Tree) Descendants(path string) (int, error) {
	n, err := t.find(path)
	if err != nil {
		return 0, err
	}
	if n == t.root {
		return t.count - 1, nil
	}
	count := 0
	stack := []*node{n}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		count += n.children.len()
		for child := range n.children.all {
			if child.children.len() > 0 {
				stack = append(stack, child)
			}
		}
	}
	return count, nil
}

// keptName is what a node of kind keeps as its name, the last segment of
// the path it is created at: for a kind the indexes keep that path for as
// long as the node lives (an ephemeral, a container, a TTL node), a slice
// of it, which costs nothing more; for any other a clone, since as a slice
// it would keep the whole path alive.
func keptName(kind uint8, name string) string {
	if kind == kindPersistent {
		return strings.Clone(name)
	}
	return name
}

// sequenceName is ZooKeeper's sequential suffix: the parent's cversion,
// zero-padded to ten digits.
func sequenceName(prefix string, cversion int32) string {
	return fmt.Sprintf("%s%010d", prefix, cversion)
}
