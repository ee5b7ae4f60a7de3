package wire

// LockParty is a holder or a waiter of a lock, as locks and deadlocks
// replies give it: one acquisition, shown by its first node.
type LockParty struct {
	Node    string // the name of its first node under the lock's path
	Mode    string // what it holds or asks for: lock, read or write
	Owner   string // who
	Holder  string // which holder of the owner
	Session int64  // its session (the lease's, for a node bound to a lease)
	Lease   int64  // the lease its node is bound to; 0 if none
	Token   int64  // its fencing token
	Since   int64  // ms since the Unix epoch: holding since, or waiting since
	Expires int64  // a lease's: when it ends unless renewed (ms); 0 without a lease
}

// LockInfo is one lock: its holders and its waiters, in queue order.
type LockInfo struct {
	Path            string
	Holders         []LockParty
	Waiters         []LockParty
	EstimatedWaitMs int64 // what a new waiter could expect to wait, from recent hold times; 0 if unknown
}

// LockWait is one edge of a deadlock: Waiter waits for Lock, which Holder
// holds.
type LockWait struct {
	Waiter LockParty
	Lock   string
	Holder LockParty
}

// LockEvent is one entry of the lock history: an acquisition that began to
// hold, a hold that ended (and how), or a wait the server ended. Every
// member derives it from the same applied txns, so every member tells the
// same history.
type LockEvent struct {
	Zxid     int64  // the txn that made it
	Time     int64  // ms since the Unix epoch: the txn's time
	Lock     string // the lock's path
	Kind     string // one of the LockEvent kinds below
	Node     string // the acquisition's first node under the lock's path
	Mode     string // lock, read or write
	Owner    string
	Holder   string
	Session  int64  // its session (the lease's parent for a node bound to a lease)
	Lease    int64  // its lease, 0 if none
	Token    int64  // its fencing token
	WaitedMs int64  // acquired: how long it waited
	HeldMs   int64  // the end of a hold: how long it held
	By       string // broken, deadlock: who ended it ("scheme:id", comma-separated; for a deadlock, the member's own "super:member N")
	Reason   string // broken: the reason its breaker gave
}

// The kinds of LockEvent.
const (
	LockAcquired     = "acquired"      // began to hold
	LockReleased     = "released"      // its holder let go (deleted its node, or closed its lease)
	LockExpired      = "expired"       // its lease was not renewed in time, or reached its maximum hold
	LockSessionEnded = "session-ended" // its session ended (closed or expired) while it held
	LockBroken       = "broken"        // an admin broke the lock
	LockDeadlock     = "deadlock"      // the member ended this wait, the youngest of a deadlock
)

const (
	lockEventFields = 15
	lockPartyFields = 9
	lockInfoFields  = 4
	lockWaitFields  = 3
)

func (enc *encoder) lockParties(ps []LockParty) {
	enc.array(len(ps))
	for i := range ps {
		enc.lockParty(&ps[i])
	}
}

func (enc *encoder) lockParty(p *LockParty) {
	enc.array(lockPartyFields)
	enc.str(p.Node)
	enc.str(p.Mode)
	enc.str(p.Owner)
	enc.str(p.Holder)
	for _, v := range [...]int64{p.Session, p.Lease, p.Token, p.Since, p.Expires} {
		enc.int(v)
	}
}

func (enc *encoder) lockInfos(infos []LockInfo) {
	enc.array(len(infos))
	for i := range infos {
		info := &infos[i]
		enc.array(lockInfoFields)
		enc.str(info.Path)
		enc.lockParties(info.Holders)
		enc.lockParties(info.Waiters)
		enc.int(info.EstimatedWaitMs)
	}
}

func (enc *encoder) deadlocks(cycles [][]LockWait) {
	enc.array(len(cycles))
	for _, c := range cycles {
		enc.array(len(c))
		for i := range c {
			enc.array(lockWaitFields)
			enc.lockParty(&c[i].Waiter)
			enc.str(c[i].Lock)
			enc.lockParty(&c[i].Holder)
		}
	}
}

func (dec *decoder) lockParties() []LockParty {
	n := dec.array(0)
	var ps []LockParty
	for i := 0; i < n && dec.err == nil; i++ {
		ps = append(ps, dec.lockParty())
	}
	return ps
}

func (dec *decoder) lockParty() LockParty {
	n := dec.array(lockPartyFields)
	p := LockParty{Node: dec.str(), Mode: dec.str(), Owner: dec.str(), Holder: dec.str()}
	p.Session, p.Lease, p.Token, p.Since, p.Expires = dec.int64(), dec.int64(), dec.int64(), dec.int64(), dec.int64()
	dec.skip(n - lockPartyFields)
	return p
}

func (dec *decoder) lockInfos() []LockInfo {
	n := dec.array(0)
	var infos []LockInfo
	for i := 0; i < n && dec.err == nil; i++ {
		m := dec.array(lockInfoFields)
		info := LockInfo{Path: dec.str(), Holders: dec.lockParties(), Waiters: dec.lockParties(), EstimatedWaitMs: dec.int64()}
		dec.skip(m - lockInfoFields)
		infos = append(infos, info)
	}
	return infos
}

func (dec *decoder) deadlocks() [][]LockWait {
	n := dec.array(0)
	var cycles [][]LockWait
	for i := 0; i < n && dec.err == nil; i++ {
		m := dec.array(0)
		var c []LockWait
		for j := 0; j < m && dec.err == nil; j++ {
			k := dec.array(lockWaitFields)
			c = append(c, LockWait{Waiter: dec.lockParty(), Lock: dec.str(), Holder: dec.lockParty()})
			dec.skip(k - lockWaitFields)
		}
		cycles = append(cycles, c)
	}
	return cycles
}

func (enc *encoder) lockEvents(evs []LockEvent) {
	enc.array(len(evs))
	for i := range evs {
		e := &evs[i]
		enc.array(lockEventFields)
		enc.int(e.Zxid)
		enc.int(e.Time)
		for _, s := range [...]string{e.Lock, e.Kind, e.Node, e.Mode, e.Owner, e.Holder} {
			enc.str(s)
		}
		for _, v := range [...]int64{e.Session, e.Lease, e.Token, e.WaitedMs, e.HeldMs} {
			enc.int(v)
		}
		enc.str(e.By)
		enc.str(e.Reason)
	}
}

func (dec *decoder) lockEvents() []LockEvent {
	n := dec.array(0)
	var evs []LockEvent
	for i := 0; i < n && dec.err == nil; i++ {
		m := dec.array(lockEventFields)
		e := LockEvent{Zxid: dec.int64(), Time: dec.int64()}
		e.Lock, e.Kind, e.Node, e.Mode, e.Owner, e.Holder = dec.str(), dec.str(), dec.str(), dec.str(), dec.str(), dec.str()
		e.Session, e.Lease, e.Token, e.WaitedMs, e.HeldMs = dec.int64(), dec.int64(), dec.int64(), dec.int64(), dec.int64()
		e.By, e.Reason = dec.str(), dec.str()
		dec.skip(m - lockEventFields)
		evs = append(evs, e)
	}
	return evs
}
