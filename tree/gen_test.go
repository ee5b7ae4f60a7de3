package tree_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// txnGen makes txns over a small path alphabet, so that they collide often
// enough to exercise every error, from a stream of bytes: a seeded random
// source for the determinism tests, the fuzzer's input for FuzzApply.
type txnGen struct {
	next    func() byte
	now     int64    // the clock: every txn moves it on by a few ms
	known   []string // paths that were created, sequential ones included
	maxData int      // data lengths go a little over this
}

func randGen(r *rand.Rand, maxData int) *txnGen {
	return &txnGen{next: func() byte { return byte(r.Uint32()) }, now: baseTime, maxData: maxData}
}

// byteGen reads b and then zeros; ok reports whether b is used up.
func byteGen(b []byte, maxData int) (g *txnGen, ok func() bool) {
	i := 0
	g = &txnGen{next: func() byte {
		if i >= len(b) {
			return 0
		}
		i++
		return b[i-1]
	}, now: baseTime, maxData: maxData}
	return g, func() bool { return i < len(b) }
}

// observe keeps known up to date with the nodes a txn created and deleted,
// so that later txns mostly name nodes that exist.
func (g *txnGen) observe(events []tree.Event) {
	for _, e := range events {
		switch e.Type {
		case wire.EventNodeCreated:
			if len(g.known) >= 48 {
				g.known = g.known[1:]
			}
			g.known = append(g.known, e.Path)
		case wire.EventNodeDeleted:
			g.known = slices.DeleteFunc(g.known, func(p string) bool { return p == e.Path })
		}
	}
}

func (g *txnGen) txn() tree.Txn {
	g.now += int64(g.next() % 32)
	var txn tree.Txn
	switch k := g.next() % 23; {
	case k < 6:
		txn = g.create()
	case k < 9:
		txn = g.simple(wire.OpDelete)
	case k < 12:
		txn = g.simple(wire.OpSetData)
	case k < 13:
		txn = g.simple(wire.OpCheck)
	case k < 16:
		n := int(g.next() % 5)
		txn = tree.Txn{Type: wire.OpMulti, Ops: make([]tree.Txn, n)}
		if b := g.next(); b < 24 {
			// A member's break or lock-delays, which hard quota limits let through.
			txn.Cause = [...]tree.Cause{tree.CauseBreak, tree.CauseLockDelay, tree.CauseDeadlock}[b%3]
		}
		for i := range txn.Ops {
			switch g.next() % 20 {
			case 0, 1, 2, 3, 4, 5, 6:
				txn.Ops[i] = g.create()
			case 7, 8, 9, 10:
				txn.Ops[i] = g.simple(wire.OpDelete)
			case 11, 12, 13, 14:
				txn.Ops[i] = g.simple(wire.OpSetData)
			case 15, 16, 17, 18:
				txn.Ops[i] = g.simple(wire.OpCheck)
			default:
				txn.Ops[i] = tree.Txn{Type: tree.TxnCreateSession, Session: g.session()}
			}
		}
	case k < 17 || (k < 18 && g.next()%2 == 0):
		id := g.session()
		txn = tree.Txn{Type: tree.TxnCreateSession, Session: id, TimeoutMs: int32(g.next()) * 100,
			Password: []byte(fmt.Sprintf("pw%d", g.next()))}
	case k < 18:
		txn = tree.Txn{Type: tree.TxnCloseSession, Session: g.session()}
	case k < 19 || (k < 20 && g.next()%4 != 0):
		txn = tree.Txn{Type: tree.TxnReap}
	case k < 20:
		txn = tree.Txn{Type: tree.TxnSetConfig, Data: g.data(), Version: g.version()}
	case k < 21:
		txn = g.simple(wire.OpSetACL)
		txn.Version = g.version() // of the ACL
		txn.ACL = g.acl()
	default:
		txn = g.setQuota()
	}
	if txn.Type.IsWrite() {
		txn.Identities = genIdentities[int(g.next())%len(genIdentities)]
	}
	txn.Time = g.now
	for i := range txn.Ops {
		txn.Ops[i].Time = g.now
	}
	return txn
}

var (
	genNames       = []string{"a", "b", "c"}
	genSystemPaths = []string{wire.ZooKeeperPath, wire.QuotaPath, wire.ConfigPath}
	// genQuotaPaths are the nodes of quotas on /a, /a/b and /b, and their
	// parents, so that quotas are set, nested, enforced and dropped.
	genQuotaPaths = []string{
		"/zookeeper/quota/a", "/zookeeper/quota/a/zookeeper_limits", "/zookeeper/quota/a/zookeeper_stats",
		"/zookeeper/quota/a/b", "/zookeeper/quota/a/b/zookeeper_limits", "/zookeeper/quota/a/b/zookeeper_stats",
		"/zookeeper/quota/b", "/zookeeper/quota/b/zookeeper_limits", "/zookeeper/quota/b/zookeeper_stats",
	}
	// genLimits are what a limits node is given: hard and soft limits
	// the small trees reach, none, zkCli's form (within fuzzMaxData), and
	// one that does not parse.
	genLimits = []string{
		"countHardLimit=3",
		"byteHardLimit=6",
		"count=2,bytes=4",
		"count=1;countHardLimit=5",
		"bytes=3;byteHardLimit=9",
		"",
		"count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=3",
		"count=-1,bytes=-1=;byteHardLimit=5;countHardLimit=-1",
		"count",
	}
	genBadPaths = []string{"", "a", "/a/", "//", "/a/..", "/\x01"}
	genModes    = []wire.CreateMode{
		wire.ModePersistent, wire.ModePersistent, wire.ModeEphemeral, wire.ModePersistentSequential,
		wire.ModeEphemeralSequential, wire.ModeContainer, wire.ModeContainer, wire.ModePersistentWithTTL,
		wire.ModePersistentSequentialWithTTL,
	}
)

// path picks a path: often one already created or a child of one, else one
// of /a to /c/c/c, rarely the root or an invalid path.
func (g *txnGen) path() string {
	b := g.next()
	switch {
	case b < 8:
		return genBadPaths[int(b)%len(genBadPaths)]
	case b < 11:
		return "/"
	case b < 12:
		return genSystemPaths[int(g.next())%len(genSystemPaths)]
	case b < 40:
		return genQuotaPaths[int(g.next())%len(genQuotaPaths)]
	case b < 130 && len(g.known) > 0:
		return g.known[int(g.next())%len(g.known)]
	case b < 190 && len(g.known) > 0:
		return g.known[int(g.next())%len(g.known)] + "/" + genNames[int(b)%len(genNames)]
	}
	depth := 1 // deeper paths rarely have a parent yet
	if b%4 == 0 {
		depth += 1 + int(b/4)%2
	}
	p := ""
	for range depth {
		p += "/" + genNames[int(g.next())%len(genNames)]
	}
	return p
}

// session picks a session id: usually one of 1 to 3, rarely 0 (reserved)
// or 4.
func (g *txnGen) session() int64 {
	b := g.next()
	if b < 16 {
		return int64(b%2) * 4
	}
	return 1 + int64(b%3)
}

func (g *txnGen) version() int32 {
	b := g.next()
	if b < 128 {
		return -1
	}
	return int32(b % 4)
}

func (g *txnGen) data() []byte {
	b := g.next()
	n := int(b % 8)
	if b >= 240 {
		n = g.maxData - 2 + int(b%4) // around the limit
	}
	if n == 0 && b%16 == 0 {
		return nil
	}
	d := make([]byte, n)
	for i := range d {
		d[i] = 'a' + byte(i)%26
	}
	if n > 0 {
		d[0] = b
	}
	return d
}

// genACLs are the ACLs creates and setACLs carry: mostly open (nil or
// written out), else ones that let some of genIdentities do some things.
var genACLs = [][]wire.ACL{
	nil, nil, nil, wire.OpenACL,
	{{Perms: wire.PermRead, Scheme: "world", ID: "anyone"}},
	{{Perms: wire.PermRead | wire.PermCreate, Scheme: "world", ID: "anyone"}},
	{{Perms: wire.PermAll, Scheme: "digest", ID: "alice:hash"}, {Perms: wire.PermRead, Scheme: "world", ID: "anyone"}},
	{{Perms: wire.PermAll, Scheme: "ip", ID: "10.0.0.1"}},
	{{Perms: wire.PermCreate | wire.PermDelete, Scheme: "digest", ID: "bob:hash"}},
}

// genIdentities are who a write comes from: nobody, an address, alice,
// bob, the superuser.
var genIdentities = [][]wire.Identity{
	nil,
	{{Scheme: "ip", ID: "10.0.0.1"}},
	{{Scheme: "ip", ID: "10.0.0.2"}, {Scheme: "digest", ID: "alice:hash"}},
	{{Scheme: "digest", ID: "bob:hash"}},
	{{Scheme: tree.SuperScheme, ID: "root"}},
}

func (g *txnGen) acl() []wire.ACL { return genACLs[int(g.next())%len(genACLs)] }

func (g *txnGen) create() tree.Txn {
	mode := genModes[int(g.next())%len(genModes)]
	txn := tree.Txn{Type: wire.OpCreate, Path: g.path(), Data: g.data(), Mode: mode, ACL: g.acl()}
	g.limits(&txn)
	if mode.IsSequential() && g.next()%2 == 0 {
		if txn.Path == "/" {
			txn.Path = "/s-"
		} else {
			txn.Path += "-"
		}
	}
	if mode.IsEphemeral() {
		txn.Session = g.session()
	}
	b := g.next()
	switch {
	case mode.IsTTL():
		txn.TTL = 1 + int64(b%200)
		if b >= 250 {
			txn.TTL = [...]int64{0, -1, tree.MaxTTL, tree.MaxTTL + 1, 0, 1}[b-250]
		}
	case b >= 252:
		txn.TTL = 10 // not allowed
	case b == 251:
		txn.Mode = wire.CreateMode(7)
	}
	return txn
}

func (g *txnGen) simple(op wire.Op) tree.Txn {
	path := ""
	if b := g.next(); b < 160 && len(g.known) > 0 {
		path = g.known[int(b)%len(g.known)] // mostly existing nodes
	} else {
		path = g.path()
	}
	txn := tree.Txn{Type: op, Path: path, Version: g.version()}
	if op == wire.OpSetData {
		txn.Data = g.data()
		g.limits(&txn)
	}
	return txn
}

// setQuota sets a quota on /a, /a/b or /b as zkCli's setquota does, in
// one multi: the quota's node, its limits, its stats.
func (g *txnGen) setQuota() tree.Txn {
	qpath := [...]string{"/a", "/a/b", "/b"}[g.next()%3]
	txn := tree.Txn{Type: wire.OpMulti}
	if qpath == "/a/b" && g.next()%2 == 0 {
		txn.Ops = append(txn.Ops, tree.Txn{Type: wire.OpCreate, Path: quotas.QuotaPath("/a")})
	}
	if g.next()%3 == 0 {
		txn.Ops = append(txn.Ops, tree.Txn{Type: wire.OpCreate, Path: quotas.QuotaPath(qpath)})
	}
	txn.Ops = append(txn.Ops,
		tree.Txn{Type: wire.OpCreate, Path: quotas.LimitPath(qpath), Data: []byte(genLimits[int(g.next())%len(genLimits)])},
		tree.Txn{Type: wire.OpCreate, Path: quotas.StatPath(qpath), Data: []byte("count=0,bytes=0")})
	return txn
}

// limits gives a write to a limits node limits for data, mostly.
func (g *txnGen) limits(txn *tree.Txn) {
	if strings.HasSuffix(txn.Path, "/"+quotas.LimitNode) && g.next() < 240 {
		txn.Data = []byte(genLimits[int(g.next())%len(genLimits)])
	}
}
