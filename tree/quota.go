package tree

import (
	"bytes"
	"strings"

	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/wire"
)

// Quotas are ZooKeeper's: a client sets one on /app by writing
// /zookeeper/quota/app/zookeeper_limits (package quotas has the format),
// and the tree keeps the subtree's usage in
// /zookeeper/quota/app/zookeeper_stats as ZooKeeper's DataTree does: it
// rewrites the node's data in place (no version, no mzxid, no event), at
// each create, delete and setData in the subtree. The tree indexes the
// paths that have a limits node (t.quotas, rebuilt at restore); a write
// finds the quota above it by walking down /zookeeper/quota along its
// path, which stops where that path's mirror ends (at once, for most
// paths), and costs nothing while no quota is set.
//
// Quotas do not nest: a limits node with a quota above or below it is
// refused (zkCli refuses to set such a quota; ZooKeeper's server takes
// the node and then counts a change in the deepest quota alone), so a
// change is counted in one quota at most, and a quota's usage is always
// its subtree's. A txn makes one limits node at most: each is a count of
// its subtree (ZooKeeper's, when it indexes a new quota), so a txn costs
// one such count at most. A hard limit refuses the write that would take
// a subtree over it (QuotaExceeded, nothing changed); a soft limit lets
// it through and the Result reports it. The lock-delays a member puts
// (see Txn.Cause) are not refused by hard limits: they are counted, and
// reported as exempt.

// quota is the state of one path's quota.
type quota struct {
	// statPath is where its usage is written: the StatNode beside its
	// limits node, in its directory /zookeeper/quota + the path.
	statPath string
	limits   quotas.Limits
	// count and bytes are the subtree's usage: its nodes, the quota's
	// node included, and the bytes of their data.
	count, bytes int64
}

// limitsOf reads a limits node's data; data that does not parse (only a
// snapshot from before quotas can hold it) sets no limit.
func limitsOf(data []byte) quotas.Limits {
	st, err := quotas.Parse(string(data))
	if err != nil {
		return quotas.NoLimits
	}
	return st.Limits()
}

// QuotaBreach is a write that took, or would have taken, the subtree
// under a quota over one of its limits.
type QuotaBreach struct {
	Path  string // the path the quota is on
	Bytes bool   // the limit on bytes of data, else the one on nodes
	// Hard is set for a hard limit: the write was refused with
	// ErrQuotaExceeded, unless Exempt.
	Hard bool
	// Exempt is set for a hard limit that a txn exempt from them went
	// over: a member's lock-delay (see Txn.Cause), which went through.
	Exempt bool
	Limit  int64
	Usage  int64 // what the subtree would hold with the write
}

// Kind is "bytes" or "count".
func (b QuotaBreach) Kind() string {
	if b.Bytes {
		return "bytes"
	}
	return "count"
}

// quotasAbove calls fn for each quota on path or one of its ancestors,
// from the root down: one at most, but in a tree restored from a
// snapshot written before quotas could not nest.
func (t *Tree) quotasAbove(path string, fn func(qpath string, q *quota)) {
	if len(t.quotas) == 0 {
		return
	}
	dir := t.lookup(wire.QuotaPath)
	for i := 1; i < len(path) && dir != nil; {
		j := strings.IndexByte(path[i:], '/')
		if j < 0 {
			j = len(path) - i
		}
		dir = dir.children.get(path[i : i+j])
		i += j + 1
		if dir != nil && dir.children.get(quotas.LimitNode) != nil {
			if qpath := path[:i-1]; t.quotas[qpath] != nil {
				fn(qpath, t.quotas[qpath])
			}
		}
	}
}

// checkQuota checks that adding dCount nodes and dBytes bytes of data at
// path takes no subtree over a hard limit: it fails with
// ErrQuotaExceeded, and reports the breach, if one would, unless the txn
// is exempt (t.exempt), when it reports the breach as such. Otherwise it
// reports the soft limits the change goes over: the caller must then
// make it. Only growth is checked: a change that shrinks a subtree
// already over its limit goes through.
func (t *Tree) checkQuota(path string, dCount, dBytes int64) error {
	var hard QuotaBreach // Hard set when there is one
	var soft []QuotaBreach
	t.quotasAbove(path, func(qpath string, q *quota) {
		for _, c := range [...]struct {
			bytes       bool
			d, have     int64
			limit, hard quotas.Limit
		}{
			{false, dCount, q.count, quotas.Count, quotas.CountHard},
			{true, dBytes, q.bytes, quotas.Bytes, quotas.BytesHard},
		} {
			if c.d <= 0 {
				continue
			}
			b := QuotaBreach{Path: qpath, Bytes: c.bytes, Usage: c.have + c.d}
			switch lim := q.limits; {
			case lim[c.hard] >= 0 && b.Usage > lim[c.hard]:
				b.Hard, b.Limit, b.Exempt = true, lim[c.hard], t.exempt
				if b.Exempt {
					soft = append(soft, b)
				} else if !hard.Hard {
					hard = b
				}
			case lim[c.limit] >= 0 && b.Usage > lim[c.limit]:
				b.Limit = lim[c.limit]
				soft = append(soft, b)
			}
		}
	})
	if hard.Hard {
		t.breaches = append(t.breaches, hard)
		unit := "nodes"
		if hard.Bytes {
			unit = "bytes"
		}
		return wire.Errorf(wire.CodeQuotaExceeded, "quota of %s exceeded: its subtree would hold %d %s, over its hard limit of %d",
			hard.Path, hard.Usage, unit, hard.Limit)
	}
	t.breaches = append(t.breaches, soft...)
	return nil
}

// chargeQuota adds dCount nodes and dBytes bytes at path to the usage of
// the quota above it.
func (t *Tree) chargeQuota(path string, dCount, dBytes int64) {
	if dCount == 0 && dBytes == 0 {
		return
	}
	t.quotasAbove(path, func(qpath string, q *quota) {
		q.count += dCount
		q.bytes += dBytes
		if t.undo != nil {
			t.undo = append(t.undo, func() { q.count -= dCount; q.bytes -= dBytes })
		}
		t.writeUsage(q)
	})
}

// writeUsage writes q's usage into its stats node, if there is one, as
// ZooKeeper does: the data alone changes, and no watch fires.
func (t *Tree) writeUsage(q *quota) {
	path := q.statPath
	n := t.lookup(path)
	if n == nil {
		return
	}
	// A new slice: the old one may be held by readers, and stays as it is.
	data := quotas.AppendUsage(make([]byte, 0, 32), q.count, q.bytes)
	if bytes.Equal(n.data, data) {
		return
	}
	n = t.own(path, n)
	old, oldHash := n.data, n.dataHash
	t.digest -= t.nodeDigest(path, n)
	t.dataSize += int64(len(data) - len(n.data))
	n.data, n.dataHash = data, hashData(data)
	t.digest += t.nodeDigest(path, n)
	if t.undo != nil {
		t.undo = append(t.undo, func() {
			t.digest -= t.nodeDigest(path, n)
			t.dataSize += int64(len(old) - len(n.data))
			n.data, n.dataHash = old, oldHash
			t.digest += t.nodeDigest(path, n)
		})
	}
}

// quotaData is the data a create or setData of the node at path stores:
// data, but for a quota's stats node, whose data is its quota's usage
// whatever the client wrote, so that it always tells the truth. Limits
// that do not parse are BadArguments.
func (t *Tree) quotaData(path string, data []byte) ([]byte, error) {
	qpath, name, ok := quotas.Split(path)
	switch {
	case !ok:
		return data, nil
	case name == quotas.LimitNode:
		if _, err := quotas.Parse(string(data)); err != nil {
			return nil, wire.Errorf(wire.CodeBadArguments, "%s: %v", path, err)
		}
	case t.quotas[qpath] != nil:
		q := t.quotas[qpath]
		return []byte(quotas.Usage(q.count, q.bytes)), nil
	}
	return data, nil
}

// checkNewQuota refuses a create of the limits node at path that would
// nest quotas, or that would be the txn's second: each new quota is a
// count of its subtree.
func (t *Tree) checkNewQuota(path string) error {
	qpath, name, ok := quotas.Split(path)
	if !ok || name != quotas.LimitNode {
		return nil
	}
	if t.quotaMade {
		return wire.Errorf(wire.CodeBadArguments, "%s: one txn makes one quota at most (each costs a count of its subtree)", path)
	}
	if t.shards != nil && t.shards.Spreads(qpath) {
		// A quota counts in one shard.
		return wire.Errorf(wire.CodeBadArguments, "%s: %s is or holds a partitioned parent whose children are spread over several shards: set quotas on the children", path, qpath)
	}
	var above string
	t.quotasAbove(qpath, func(p string, _ *quota) {
		if above == "" {
			above = p
		}
	})
	if above != "" {
		return wire.Errorf(wire.CodeBadArguments, "%s: %s has a quota already, and quotas do not nest", path, above)
	}
	if below := t.quotaBelow(qpath); below != "" {
		return wire.Errorf(wire.CodeBadArguments, "%s: %s below it has a quota already, and quotas do not nest", path, below)
	}
	return nil
}

// quotaBelow returns the first path, in byte order, below qpath that has
// a quota, or "": it looks through qpath's directory under
// /zookeeper/quota. (The first, so that the error naming it is the same
// on every replica: children are found in no fixed order.)
func (t *Tree) quotaBelow(qpath string) string {
	dir := t.lookup(quotas.QuotaPath(qpath))
	if dir == nil || len(t.quotas) == 0 {
		return ""
	}
	type item struct {
		path string
		n    *node
	}
	var stack []item
	for c := range dir.children.all {
		stack = append(stack, item{qpath + "/" + c.name, c})
	}
	first := ""
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.n.children.get(quotas.LimitNode) != nil && t.quotas[it.path] != nil && (first == "" || it.path < first) {
			first = it.path
		}
		for c := range it.n.children.all {
			stack = append(stack, item{it.path + "/" + c.name, c})
		}
	}
	return first
}

// quotaNodeAdded indexes a quota whose limits node n was just made at
// path: its usage is counted from its subtree, as ZooKeeper counts it.
func (t *Tree) quotaNodeAdded(path string, n *node) {
	qpath, name, ok := quotas.Split(path)
	if !ok || name != quotas.LimitNode {
		return
	}
	q := &quota{statPath: quotas.StatPath(qpath), limits: limitsOf(n.data)}
	q.count, q.bytes = t.usage(qpath)
	t.quotas[qpath] = q
	t.quotaMade = true
	if t.undo != nil {
		t.undo = append(t.undo, func() { delete(t.quotas, qpath) })
	}
	t.writeUsage(q)
}

// quotaNodeRemoved drops a quota whose limits node at path was just
// deleted. Its stats node, if it stays, keeps what it said last.
func (t *Tree) quotaNodeRemoved(path string) {
	qpath, name, ok := quotas.Split(path)
	if !ok || name != quotas.LimitNode {
		return
	}
	q := t.quotas[qpath]
	delete(t.quotas, qpath)
	if t.undo != nil && q != nil {
		t.undo = append(t.undo, func() { t.quotas[qpath] = q })
	}
}

// quotaLimitsSet takes the limits of a quota whose limits node at path
// was just given data.
func (t *Tree) quotaLimitsSet(path string, data []byte) {
	qpath, name, ok := quotas.Split(path)
	if !ok || name != quotas.LimitNode || t.quotas[qpath] == nil {
		return
	}
	q := t.quotas[qpath]
	old := q.limits
	q.limits = limitsOf(data)
	if t.undo != nil {
		t.undo = append(t.undo, func() { q.limits = old })
	}
}

// usage counts the nodes at and below path and the bytes of their data.
func (t *Tree) usage(path string) (count, bytes int64) {
	n := t.lookup(path)
	if n == nil {
		return 0, 0
	}
	stack := []*node{n}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		count++
		bytes += int64(len(n.data))
		for c := range n.children.all {
			stack = append(stack, c)
		}
	}
	return count, bytes
}

// rebuildQuotas indexes every quota under /zookeeper/quota and writes its
// usage, counted from its subtree, into its stats node (ZooKeeper's
// setupQuota, when it loads a snapshot): a snapshot this tree wrote holds
// the same usage already; one from before quotas may not.
func (t *Tree) rebuildQuotas() {
	root := t.lookup(wire.QuotaPath)
	if root == nil {
		return
	}
	type item struct {
		path string
		n    *node
	}
	stack := []item{{wire.QuotaPath, root}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if c := it.n.children.get(quotas.LimitNode); c != nil {
			t.quotaNodeAdded(it.path+"/"+quotas.LimitNode, c)
		}
		for c := range it.n.children.all {
			stack = append(stack, item{it.path + "/" + c.name, c})
		}
	}
	t.quotaMade = false
}
