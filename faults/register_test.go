package faults

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/arbor-coord/arbor/client"
)

// The register workload: clients read and write a few keys, each a
// register that may be absent. Writes (set, versioned set, create,
// delete), sync+get reads and linearizable gets go into a history checked for
// linearizability; plain gets, which a follower serves from its own state
// (sequentially consistent, as ZooKeeper's), are checked separately: each
// must show a value some write wrote, and no older a state than its
// session has already seen.

type regOp int

const (
	opSyncGet regOp = iota // Sync then Get: the linearizable read
	opSet                  // Set with version -1
	opCAS                  // Set with an expected version
	opCreate               // Create, persistent
	opDelete               // Delete with version -1
	opGet                  // a plain Get (not in the linearizable history)
	opLinGet               // a Get with client.Linearizable: the read index in one request
	numRegOps
)

var regOpNames = [numRegOps]string{"sync+get", "set", "cas", "create", "delete", "get", "lin-get"}

func (o regOp) String() string { return regOpNames[o] }

// regInput is an operation on one key.
type regInput struct {
	op      regOp
	key     string
	value   string
	version int32 // opCAS: the expected version
}

// regOutcome is how an operation ended: a definite result, or unknown.
type regOutcome int

const (
	outOK regOutcome = iota
	outNoNode
	outExists
	outBadVersion
	outUnknown // timed out, connection lost, leader changed...: applied or not
)

var regOutcomeNames = [...]string{"ok", "no node", "exists", "bad version", "unknown"}

// regOutput is what an operation returned.
type regOutput struct {
	outcome regOutcome
	exists  bool   // reads: the node was there
	value   string // reads: its data
	version int32  // reads: its version; set and cas: the new version
}

// regState is one key's state: absent, or a value at a version.
type regState struct {
	exists  bool
	value   string
	version int32
}

// regStep is the register's sequential specification (ZooKeeper's
// semantics for one node).
func regStep(s regState, in regInput, out regOutput) (bool, regState) {
	unknown := out.outcome == outUnknown
	switch in.op {
	case opSyncGet, opLinGet:
		if !s.exists {
			return out.outcome == outNoNode, s
		}
		return out.outcome == outOK && out.value == s.value && out.version == s.version, s
	case opSet, opCAS:
		switch {
		case !s.exists:
			return unknown || out.outcome == outNoNode, s
		case in.op == opCAS && s.version != in.version:
			return unknown || out.outcome == outBadVersion, s
		}
		next := regState{exists: true, value: in.value, version: s.version + 1}
		return unknown || out.outcome == outOK && out.version == next.version, next
	case opCreate:
		if s.exists {
			return unknown || out.outcome == outExists, s
		}
		return unknown || out.outcome == outOK, regState{exists: true, value: in.value}
	case opDelete:
		if !s.exists {
			return unknown || out.outcome == outNoNode, s
		}
		return unknown || out.outcome == outOK, regState{}
	}
	return false, s
}

// registerModel is the porcupine model: one register per key.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(regInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		return regStep(state.(regState), input.(regInput), output.(regOutput))
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		var arg string
		switch in.op {
		case opSet, opCreate:
			arg = fmt.Sprintf("(%q)", in.value)
		case opCAS:
			arg = fmt.Sprintf("(%q, v%d)", in.value, in.version)
		}
		res := regOutcomeNames[out.outcome]
		switch {
		case (in.op == opSyncGet || in.op == opLinGet) && out.outcome == outOK:
			res = fmt.Sprintf("%q v%d", out.value, out.version)
		case (in.op == opSet || in.op == opCAS) && out.outcome == outOK:
			res = fmt.Sprintf("ok v%d", out.version)
		}
		return fmt.Sprintf("%s %s%s -> %s", in.op, in.key, arg, res)
	},
	DescribeState: func(state any) string {
		s := state.(regState)
		if !s.exists {
			return "absent"
		}
		return fmt.Sprintf("%q v%d", s.value, s.version)
	},
}

// outcomeOf classifies a write's error: only a success and the errors
// that the tree returns on apply are definite.
func outcomeOf(err error) regOutcome {
	switch {
	case err == nil:
		return outOK
	case errors.Is(err, client.ErrNoNode):
		return outNoNode
	case errors.Is(err, client.ErrNodeExists):
		return outExists
	case errors.Is(err, client.ErrBadVersion):
		return outBadVersion
	}
	return outUnknown
}

// plainRead is a plain Get, checked outside porcupine.
type plainRead struct {
	worker, session int
	key             string
	exists          bool
	value           string
	mzxid           int64
	at              time.Duration
}

// registerWorkload runs the register workers and keeps their history.
type registerWorkload struct {
	fleet   *fleet
	clock   *clock
	workers int
	keys    int           // keys per generation
	keyLife time.Duration // workers move to fresh keys this often, keeping each key's history short
	maxOps  int           // per worker

	mu       sync.Mutex // guards the fields below
	history  []porcupine.Operation
	reads    []plainRead
	written  map[string]map[string]bool // key -> values any write (even unknown) tried to write
	stale    []string                   // plain reads that went back in time, found as they happened
	counts   [numRegOps][5]int          // op -> outcome
	readErrs int                        // reads that failed (not in the history)
}

func newRegisterWorkload(f *fleet, workers int) *registerWorkload {
	// Four keys, new every 2 s: each key's history, with the unknown
	// outcomes a crash of every member leaves, stays one that porcupine
	// checks in seconds under -race on a loaded machine (three keys for
	// 3 s once took it past a minute).
	return &registerWorkload{fleet: f, clock: f.clock, workers: workers, keys: 4,
		keyLife: 2 * time.Second, maxOps: 1 << 20, written: map[string]map[string]bool{}}
}

// key returns key i of the generation in force now.
func (w *registerWorkload) key(i int) string {
	return fmt.Sprintf("/lin/g%d-k%d", int(w.clock.now()/w.keyLife), i)
}

func (w *registerWorkload) run(ctx context.Context, wg *sync.WaitGroup, seed int64) {
	for id := range w.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.worker(ctx, id, rand.New(rand.NewPCG(uint64(seed), uint64(id))))
		}()
	}
}

// opTimeout bounds one operation; past it the outcome is unknown.
const opTimeout = 5 * time.Second

// thinkTime is the mean pause of a worker between operations: enough
// operations to keep every key contended, few enough that the test
// process, which also carries the peer traffic, keeps up on two cores.
const thinkTime = 5 * time.Millisecond

func (w *registerWorkload) worker(ctx context.Context, id int, rng *rand.Rand) {
	session := 0
	var c *tracked
	seen := map[string]int64{}    // this session's highest mzxid per key
	version := map[string]int32{} // the last version this worker saw per key
	// The keys this worker wrote with an unknown outcome, which it only
	// reads from then on: an unknown write stays pending to the end of
	// the history, and porcupine's search grows with the writes pending
	// on a key at once, so a key has at most one per worker. (A crash of
	// every member left a worker dozens on one key, and the check, after
	// a minute, proved nothing.)
	unknown := map[string]bool{}
	for n := 0; n < w.maxOps && ctx.Err() == nil; n++ {
		if c == nil || c.Err() != nil {
			var err error
			if c, err = w.fleet.dial(ctx, fmt.Sprintf("register-%d", id)); err != nil {
				return
			}
			session++
			clear(seen)
		}
		in := regInput{key: w.key(rng.IntN(w.keys)), value: fmt.Sprintf("w%d-%d", id, n)}
		switch r := rng.IntN(100); {
		case r < 12:
			in.op = opSyncGet
		case r < 25:
			in.op = opLinGet
		case r < 40:
			in.op = opGet
		case r < 58:
			in.op = opSet
		case r < 73:
			in.op = opCAS
			in.version = version[in.key]
		case r < 90:
			in.op = opCreate
		default:
			in.op = opDelete
		}
		write := in.op != opSyncGet && in.op != opLinGet && in.op != opGet
		if write && unknown[in.key] {
			in.op, write = opSyncGet, false
		}
		if w.do(ctx, c, id, session, in, seen, version) == outUnknown && write {
			unknown[in.key] = true
		}
		sleep(ctx, time.Duration(rng.IntN(int(2*thinkTime))))
	}
}

// do runs one operation, records it, and says how it ended.
func (w *registerWorkload) do(ctx context.Context, c *tracked, id, session int, in regInput, seen map[string]int64, version map[string]int32) regOutcome {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	call := w.clock.now()
	var out regOutput
	var st client.Stat
	var err error
	switch in.op {
	case opSyncGet, opGet, opLinGet:
		if in.op == opSyncGet {
			err = c.Sync(octx, in.key)
		}
		var opts []client.ReadOption
		if in.op == opLinGet {
			opts = append(opts, client.Linearizable())
		}
		var data []byte
		if err == nil {
			data, st, err = c.Get(octx, in.key, opts...)
		}
		out = regOutput{outcome: outcomeOf(err), exists: err == nil, value: string(data), version: st.Version}
	case opSet, opCAS:
		v := int32(-1)
		if in.op == opCAS {
			v = in.version
		}
		st, err = c.Set(octx, in.key, []byte(in.value), v)
		out = regOutput{outcome: outcomeOf(err), version: st.Version}
	case opCreate:
		_, st, err = c.CreateStat(octx, in.key, []byte(in.value), client.Persistent)
		out = regOutput{outcome: outcomeOf(err), version: st.Version}
	case opDelete:
		err = c.Delete(octx, in.key, -1)
		out = regOutput{outcome: outcomeOf(err)}
	}
	ret := w.clock.now()
	if ctx.Err() != nil && out.outcome != outOK {
		// The run ended under the operation: a write stays in the history
		// as unknown, a read is dropped.
		out.outcome = outUnknown
	}
	isRead := in.op == opSyncGet || in.op == opGet || in.op == opLinGet
	if out.outcome == outOK && in.op != opDelete {
		// The data this session saw: for a later plain read's check, and
		// the version for the next compare-and-set.
		version[in.key] = st.Version
		if isRead && st.Mzxid < seen[in.key] && in.op == opGet {
			w.mu.Lock()
			w.stale = append(w.stale, fmt.Sprintf("worker %d session %d: get %s at %v returned mzxid %d after the session saw %d",
				id, session, in.key, call.Round(time.Millisecond), st.Mzxid, seen[in.key]))
			w.mu.Unlock()
		}
		seen[in.key] = max(seen[in.key], st.Mzxid)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[in.op][out.outcome]++
	if !isRead {
		if w.written[in.key] == nil {
			w.written[in.key] = map[string]bool{}
		}
		w.written[in.key][in.value] = true
	}
	switch {
	case in.op == opGet && out.outcome != outUnknown:
		w.reads = append(w.reads, plainRead{worker: id, session: session, key: in.key, exists: out.exists,
			value: out.value, mzxid: st.Mzxid, at: call})
	case isRead && out.outcome == outUnknown:
		w.readErrs++ // a read that failed has no effect
	case in.op == opGet:
	default:
		op := porcupine.Operation{ClientId: id, Input: in, Call: int64(call), Output: out, Return: int64(ret)}
		if out.outcome == outUnknown {
			op.Return = math.MaxInt64 // it may take effect at any time from its call on
		}
		w.history = append(w.history, op)
	}
	return out.outcome
}

// linearizabilityChecks lets one porcupine check run at a time, while the
// rounds of the two cluster sizes run at once.
var linearizabilityChecks sync.Mutex

// check runs porcupine on the history and checks the plain reads, and
// says how long porcupine took. A failing history is written, with
// porcupine's visualization, under outDir.
func (w *registerWorkload) check(timeout time.Duration, outDir string, violate func(format string, args ...any)) (took time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.stale {
		violate("plain reads: %s", s)
	}
	for _, r := range w.reads {
		if r.exists && !w.written[r.key][r.value] {
			violate("plain reads: worker %d read %q from %s at %v, which no write wrote", r.worker, r.value, r.key, r.at)
		}
	}
	linearizabilityChecks.Lock() // one at a time: each takes a core for seconds
	defer linearizabilityChecks.Unlock()
	start := time.Now()
	defer func() { took = time.Since(start) }()
	switch porcupine.CheckOperationsTimeout(registerModel, w.history, timeout) {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		violate("linearizability: porcupine gave up after %v on %d operations", timeout, len(w.history))
		return
	}
	_, info := porcupine.CheckOperationsVerbose(registerModel, w.history, timeout)
	path := filepath.Join(outDir, "history.html")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		violate("linearizability: the history of %d operations is not linearizable (and saving it failed: %v)", len(w.history), err)
		return
	}
	if err := porcupine.VisualizePath(registerModel, info, path); err != nil {
		violate("linearizability: the history of %d operations is not linearizable (and visualizing it failed: %v)", len(w.history), err)
		return
	}
	violate("linearizability: the history of %d operations is not linearizable; visualization in %s", len(w.history), path)
	return
}

// summary says how many operations ended how.
func (w *registerWorkload) summary() (ops, unknown int, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	text = ""
	for op, outs := range w.counts {
		n := 0
		for _, k := range outs {
			n += k
		}
		if n == 0 {
			continue
		}
		ops += n
		unknown += outs[outUnknown]
		text += fmt.Sprintf(" %s=%d(ok %d, unknown %d)", regOp(op), n, outs[outOK], outs[outUnknown])
	}
	return ops, unknown, text
}
