package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"github.com/cockroachdb/pebble"
	"go.uber.org/zap"
)

// Defaults of the watch history's retention (Config.WatchHistoryEvents,
// WatchHistoryAge and WatchHistoryBytes).
const (
	DefaultWatchHistoryEvents = 100_000
	DefaultWatchHistoryAge    = time.Hour
	DefaultWatchHistoryBytes  = 64 << 20
)

// historyLimits bound the history. Each is a maximum: once one is passed,
// the oldest txns' events are dropped until the history is back under a
// tenth below it, so that trimming is paid for once per tenth.
type historyLimits struct {
	events int           // events kept at most
	age    time.Duration // events older than this before the newest txn go
	bytes  int64         // bytes of keys and values kept at most
}

// Keys of the history's store. An event is 'e', its txn's zxid (8 bytes)
// and its place among that txn's events (4 bytes), big-endian, so that the
// keys sort in zxid order; its value is
//
//	type (1 byte) | txn time ms (uvarint) | path (uvarint length, bytes) | ACL
//
//	| node (0: none; 1: data, length-prefixed, and the 11 fields of Stat as varints)
//
// where the ACL is 0 for the open ACL, else its length + 1 (uvarint) and,
// per entry, perms, scheme and id (uvarints and length-prefixed strings),
// and the node is a NodeCreated's or NodeDataChanged's, as a lasting
// watch's live notification carries it.
// The one other key, 'm', holds floor and applied (8 bytes each). A
// shard's history (docs/scale-out.md) has the same keys behind a prefix,
// 'G' and its group (8 bytes), in the same store, and 's', the index of
// the split its shard was seeded from on this member (seededAt).
const (
	historyEventKey = 'e'
	historyMetaKey  = 'm'
	historySeedKey  = 's'
	historyShardKey = 'G' // a shard's history: G, its group (8 bytes), then its own keys
)

// watchHistory is this member's durable, bounded record of the events its
// applied txns fired: for each, the zxid, type, path, the node's ACL (so
// that a replay shows a watcher only what it may read, as a live event
// does) and its txn's time. It holds no data: a replayed event is a
// ZooKeeper event, and the watcher reads the node if it needs its value.
// It lives in a pebble store of its own (DataDir/history), apart from the
// raft log, whose compaction follows snapshots and whose keys are
// raftnode's.
//
// It is derived from the applied log alone (the txns' times included), so
// every member records the same events; only where trimming cuts differs.
//
// Durability: events are written without an fsync, in one batch per txn,
// on the apply goroutine. What a crash loses is regenerated: on restart
// raftnode restores the last snapshot and applies the log from there, and
// record takes again every txn after the last one it holds. So the history
// must be synced only before the log behind a snapshot is compacted away:
// sync does that, in fsm.Snapshot, which raftnode calls before it
// compacts. A restore from another member's snapshot leaves a gap the log
// cannot fill: the history then starts after it (restored).
//
// record and restored run on the apply goroutine under the fsm's write
// lock; since and oldest under its read lock (so no record runs while a
// replay reads); sync on the apply goroutine. mu guards the fields below.
type watchHistory struct {
	db     *pebble.DB
	log    *zap.Logger
	limits historyLimits
	// prefix starts every key of this history: none for the meta group's,
	// which owns the store (owner), and G + be64(group) for a shard's,
	// which shares it (shard).
	prefix []byte
	owner  bool

	mu      sync.Mutex
	floor   int64 // the events of every txn from floor on are kept
	applied int64 // the last txn recorded, with or without events
	count   int   // events kept
	bytes   int64 // their keys' and values' bytes
	oldest  int64 // time (ms) of the oldest event kept
	newest  int64 // time (ms) of the latest txn recorded
	seed    int64 // the index of the split its shard was seeded from here; 0: none
}

// openHistory opens (or creates) the history in dir and reads back what it
// holds.
func openHistory(dir string, limits historyLimits, log *zap.Logger) (*watchHistory, error) {
	db, err := pebble.Open(dir, &pebble.Options{
		Logger:       historyLogger{log.Sugar()},
		MemTableSize: 4 << 20,
		Cache:        nil,
	})
	if err != nil {
		return nil, fmt.Errorf("open the watch history: %w", err)
	}
	h := &watchHistory{db: db, log: log, limits: limits, floor: 1, owner: true}
	if err := h.start(); err != nil {
		db.Close()
		return nil, err
	}
	return h, nil
}

// shard opens the history of shard group g in h's store, under a prefix of
// its own: a shard's events and zxids are its own (docs/scale-out.md), and
// one store serves every shard however many there are. It is closed
// before h.
func (h *watchHistory) shard(g uint64, log *zap.Logger) (*watchHistory, error) {
	sh := &watchHistory{db: h.db, log: log, limits: h.limits, floor: 1,
		prefix: binary.BigEndian.AppendUint64([]byte{historyShardKey}, g)}
	if err := sh.start(); err != nil {
		return nil, err
	}
	return sh, nil
}

// start reads back what the history holds.
func (h *watchHistory) start() error {
	if err := h.load(); err != nil {
		// The history is derived from the log: a damaged one is started
		// afresh rather than keep the member from starting. Watches can
		// resume from the first txn it records.
		h.log.Warn("the watch history is damaged: starting it afresh", zap.Error(err))
		if err := h.wipe(); err != nil {
			return fmt.Errorf("start the watch history afresh: %w", err)
		}
	}
	return nil
}

// wipe empties the history: nothing is kept until the next txn recorded,
// from which it is complete (record).
func (h *watchHistory) wipe() error {
	b := h.db.NewBatch()
	defer b.Close()
	if err := errors.Join(b.DeleteRange(h.eventKey(0, 0), h.eventKey(math.MaxInt64, 0), nil),
		b.Delete(h.metaKey(), nil)); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	h.floor, h.applied = wipedFloor, 0
	h.count, h.bytes, h.oldest, h.newest = 0, 0, 0, 0
	return nil
}

// wipedFloor is the floor of a history started afresh: complete from
// nothing until its first txn.
const wipedFloor = math.MaxInt64

// load reads the meta and seed keys and counts the events kept.
func (h *watchHistory) load() error {
	if v, closer, err := h.db.Get(h.key(historySeedKey)); err == nil {
		if len(v) == 8 {
			h.seed = int64(binary.BigEndian.Uint64(v))
		}
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	v, closer, err := h.db.Get(h.metaKey())
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return err
	default:
		if len(v) == 16 {
			h.floor = int64(binary.BigEndian.Uint64(v))
			h.applied = int64(binary.BigEndian.Uint64(v[8:]))
		}
		closer.Close()
	}
	it, err := h.db.NewIter(h.eventBounds())
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		zxid, _, ok := h.decodeEventKey(it.Key())
		_, t, err := decodeEventValue(it.Value())
		if !ok || err != nil {
			return fmt.Errorf("event % x: %w", it.Key(), errors.Join(err, errors.New("malformed")))
		}
		if h.count == 0 {
			h.oldest = t
		}
		h.count++
		h.bytes += int64(len(it.Key()) + len(it.Value()))
		h.newest = max(h.newest, t)
		h.applied = max(h.applied, zxid)
	}
	return it.Error()
}

// record adds the events of the txn applied at zxid, made at timeMs. A
// txn recorded already (the log replayed after a restart) is skipped.
func (h *watchHistory) record(zxid, timeMs int64, events []tree.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if zxid <= h.applied {
		return
	}
	if h.floor == wipedFloor {
		h.floor = zxid
	}
	h.applied = zxid
	h.newest = max(h.newest, timeMs)
	if len(events) == 0 {
		return
	}
	b := h.db.NewBatch()
	defer b.Close()
	var n int64
	for i, ev := range events {
		k, v := h.eventKey(zxid, uint32(i)), appendEventValue(nil, ev, h.newest)
		n += int64(len(k) + len(v))
		if err := b.Set(k, v, nil); err != nil {
			h.lostLocked(zxid, err)
			return
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		h.lostLocked(zxid, err)
		return
	}
	if h.count == 0 {
		h.oldest = h.newest
	}
	h.count += len(events)
	h.bytes += n
	if err := h.trimLocked(); err != nil {
		h.log.Error("trimming the watch history failed", zap.Error(err))
	}
}

// lostLocked is told that the events of zxid could not be written: the
// history starts after it.
func (h *watchHistory) lostLocked(zxid int64, err error) {
	h.log.Error("writing the watch history failed: watches cannot resume from before this txn",
		zap.Int64("zxid", zxid), zap.Error(err))
	h.floor = zxid + 1
	// Durably at once: after a crash, the txns recorded past the gap would
	// set applied beyond it, the replayed log would skip it, and a floor
	// left below it would hide the gap.
	if err := h.db.Set(h.metaKey(), metaValue(h.floor, zxid), pebble.Sync); err != nil {
		h.log.Error("writing the watch history's floor failed: starting it afresh", zap.Error(err))
		if err := h.wipe(); err != nil {
			h.log.Error("starting the watch history afresh failed", zap.Error(err))
		}
	}
}

// over reports whether a limit is passed, scaled by num/den.
func (h *watchHistory) over(count int, bytes, oldest int64, num, den int64) bool {
	l := h.limits
	return l.events > 0 && int64(count)*den > int64(l.events)*num ||
		l.bytes > 0 && bytes*den > l.bytes*num ||
		l.age > 0 && count > 0 && (h.newest-oldest)*den > l.age.Milliseconds()*num
}

// trimLocked drops the oldest txns' events, whole txns at a time, once a
// limit is passed, until the history is a tenth below every limit.
func (h *watchHistory) trimLocked() error {
	if !h.over(h.count, h.bytes, h.oldest, 1, 1) {
		return nil
	}
	it, err := h.db.NewIter(h.eventBounds())
	if err != nil {
		return err
	}
	count, bytes, oldest := h.count, h.bytes, h.oldest
	cut := int64(-1) // the last zxid dropped
	for ok := it.First(); ok; ok = it.Next() {
		zxid, _, _ := h.decodeEventKey(it.Key())
		_, t, _ := decodeEventValue(it.Value())
		if zxid != cut && !h.over(count, bytes, t, 9, 10) {
			oldest = t
			break
		}
		cut = zxid
		count--
		bytes -= int64(len(it.Key()) + len(it.Value()))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	if cut < 0 {
		return nil
	}
	b := h.db.NewBatch()
	defer b.Close()
	floor := max(h.floor, cut+1)
	if err := errors.Join(b.DeleteRange(h.eventKey(0, 0), h.eventKey(cut+1, 0), nil),
		b.Set(h.metaKey(), metaValue(floor, h.applied), nil)); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	h.floor, h.count, h.bytes, h.oldest = floor, count, bytes, oldest
	return nil
}

// restored is told that the state machine was replaced by a snapshot taken
// at index. A restart restores its own last snapshot, which the history
// had reached (sync): the log replayed after it is recorded already. A
// snapshot from the leader jumps over txns this member never applied: the
// history starts again after it.
func (h *watchHistory) restored(index int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if index <= h.applied {
		return nil
	}
	b := h.db.NewBatch()
	defer b.Close()
	if err := errors.Join(b.DeleteRange(h.eventKey(0, 0), h.eventKey(index+1, 0), nil),
		b.Set(h.metaKey(), metaValue(index+1, index), nil)); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	h.floor, h.applied = index+1, index
	h.count, h.bytes, h.oldest = 0, 0, 0
	return nil
}

// seededAt records that the history's shard was seeded here from a split
// at index, its history starting then: a lasting watch over several
// shards set before the split, which had no event of this shard yet, is
// placed there (seedIndex).
func (h *watchHistory) seededAt(index int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.db.Set(h.key(historySeedKey), binary.BigEndian.AppendUint64(nil, uint64(index)), pebble.Sync); err != nil {
		return err
	}
	h.seed = index
	return nil
}

// seedIndex is the index of the split the history's shard was seeded from
// on this member (0: it was not, or it is the meta group's).
func (h *watchHistory) seedIndex() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seed
}

// sync makes everything recorded so far durable.
func (h *watchHistory) sync() error {
	h.mu.Lock()
	v := metaValue(h.floor, h.applied)
	h.mu.Unlock()
	return h.db.Set(h.metaKey(), v, pebble.Sync)
}

// oldestZxid is the oldest zxid a watch can resume from: every event after
// it is kept.
func (h *watchHistory) oldestZxid() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.floor - 1
}

// since calls fn with every event after zxid from, in order, with its
// txn's zxid. It fails with ErrHistoryCompacted, naming the oldest zxid
// kept, when not every event after from is kept.
func (h *watchHistory) since(from int64, fn func(zxid int64, ev tree.Event)) error {
	return h.between(from, math.MaxInt64-1, fn)
}

// between is since, for the events up to zxid to.
func (h *watchHistory) between(from, to int64, fn func(zxid int64, ev tree.Event)) error {
	if oldest := h.oldestZxid(); from < oldest {
		return &historyCompactedError{oldest: oldest, from: from}
	}
	opts := h.eventBounds()
	opts.LowerBound, opts.UpperBound = h.eventKey(from+1, 0), h.eventKey(to+1, 0)
	it, err := h.db.NewIter(opts)
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		zxid, _, ok := h.decodeEventKey(it.Key())
		ev, _, err := decodeEventValue(it.Value())
		if !ok || err != nil {
			it.Close()
			return fmt.Errorf("watch history: malformed event at % x", it.Key())
		}
		fn(zxid, ev)
	}
	return errors.Join(it.Error(), it.Close())
}

// stats returns how many events are kept, their bytes and the oldest zxid
// a watch can resume from.
func (h *watchHistory) stats() (count int, bytes, oldest int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count, h.bytes, h.floor - 1
}

// close closes the store; later calls do nothing.
func (h *watchHistory) close() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.db == nil {
		return nil
	}
	db := h.db
	h.db = nil
	if !h.owner {
		return nil // a shard's: the store is the meta group's history's
	}
	return db.Close()
}

// historyCompactedError is wire.ErrHistoryCompacted with the oldest zxid a
// watch can resume from, which the reply carries.
type historyCompactedError struct {
	oldest, from int64
}

func (e *historyCompactedError) Error() string {
	return fmt.Sprintf("the change history no longer goes back to zxid %d: watches can resume from zxid %d on", e.from, e.oldest)
}

func (e *historyCompactedError) Unwrap() error { return wire.ErrHistoryCompacted }

func (h *watchHistory) eventBounds() *pebble.IterOptions {
	return &pebble.IterOptions{LowerBound: h.key(historyEventKey), UpperBound: h.key(historyEventKey + 1)}
}

// key is h's key of the one byte b (a kind of key).
func (h *watchHistory) key(b byte) []byte { return append(slices.Clip(h.prefix), b) }

func (h *watchHistory) metaKey() []byte { return h.key(historyMetaKey) }

func (h *watchHistory) eventKey(zxid int64, i uint32) []byte {
	return append(slices.Clip(h.prefix), eventKey(zxid, i)...)
}

func (h *watchHistory) decodeEventKey(k []byte) (zxid int64, i uint32, ok bool) {
	rest, found := bytes.CutPrefix(k, h.prefix)
	if !found {
		return 0, 0, false
	}
	return decodeEventKey(rest)
}

func eventKey(zxid int64, i uint32) []byte {
	k := make([]byte, 13)
	k[0] = historyEventKey
	binary.BigEndian.PutUint64(k[1:], uint64(zxid))
	binary.BigEndian.PutUint32(k[9:], i)
	return k
}

func decodeEventKey(k []byte) (zxid int64, i uint32, ok bool) {
	if len(k) != 13 || k[0] != historyEventKey {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(k[1:])), binary.BigEndian.Uint32(k[9:]), true
}

func metaValue(floor, applied int64) []byte {
	v := make([]byte, 16)
	binary.BigEndian.PutUint64(v, uint64(floor))
	binary.BigEndian.PutUint64(v[8:], uint64(applied))
	return v
}

func appendEventValue(dst []byte, ev tree.Event, timeMs int64) []byte {
	dst = append(dst, byte(ev.Type))
	dst = binary.AppendUvarint(dst, uint64(timeMs))
	dst = appendString(dst, ev.Path)
	if slices.Equal(ev.ACL, wire.OpenACL) {
		dst = append(dst, 0)
	} else {
		dst = binary.AppendUvarint(dst, uint64(len(ev.ACL))+1)
		for _, a := range ev.ACL {
			dst = binary.AppendUvarint(dst, uint64(a.Perms))
			dst = appendString(dst, a.Scheme)
			dst = appendString(dst, a.ID)
		}
	}
	if ev.Stat.Czxid == 0 { // no node: not a NodeCreated or NodeDataChanged
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = appendString(dst, string(ev.Data))
	st := &ev.Stat
	for _, v := range statValues(st) {
		dst = binary.AppendVarint(dst, v)
	}
	return dst
}

// statValues lists a Stat's fields in the history's order.
func statValues(st *wire.Stat) [11]int64 {
	return [11]int64{st.Czxid, st.Mzxid, st.Pzxid, st.Ctime, st.Mtime, int64(st.Version), int64(st.Cversion),
		int64(st.Aversion), st.EphemeralOwner, int64(st.DataLength), int64(st.NumChildren)}
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

var errBadEvent = errors.New("malformed watch history event")

// decodeEventValue decodes an event's value: the event (with no data) and
// its txn's time.
func decodeEventValue(v []byte) (tree.Event, int64, error) {
	var ev tree.Event
	if len(v) < 1 {
		return ev, 0, errBadEvent
	}
	ev.Type = wire.EventType(int8(v[0]))
	v = v[1:]
	t, n := binary.Uvarint(v)
	if n <= 0 {
		return ev, 0, errBadEvent
	}
	v = v[n:]
	var ok bool
	if ev.Path, v, ok = readString(v); !ok {
		return ev, 0, errBadEvent
	}
	acls, n := binary.Uvarint(v)
	switch {
	case n <= 0 || acls > uint64(len(v)):
		return ev, 0, errBadEvent
	case acls == 0:
		ev.ACL = wire.OpenACL
	case acls > 1:
		ev.ACL = make([]wire.ACL, 0, acls-1)
	}
	v = v[n:]
	for range max(acls, 1) - 1 {
		perms, n := binary.Uvarint(v)
		if n <= 0 {
			return ev, 0, errBadEvent
		}
		a := wire.ACL{Perms: wire.Perms(perms)}
		if a.Scheme, v, ok = readString(v[n:]); !ok {
			return ev, 0, errBadEvent
		}
		if a.ID, v, ok = readString(v); !ok {
			return ev, 0, errBadEvent
		}
		ev.ACL = append(ev.ACL, a)
	}
	if len(v) < 1 || v[0] > 1 {
		return ev, 0, errBadEvent
	}
	if v[0] == 0 {
		return ev, int64(t), nil
	}
	data, v, ok := readString(v[1:])
	if !ok {
		return ev, 0, errBadEvent
	}
	var f [11]int64
	for i := range f {
		x, n := binary.Varint(v)
		if n <= 0 {
			return ev, 0, errBadEvent
		}
		f[i], v = x, v[n:]
	}
	ev.Data = []byte(data)
	ev.Stat = wire.Stat{Czxid: f[0], Mzxid: f[1], Pzxid: f[2], Ctime: f[3], Mtime: f[4], Version: int32(f[5]), Cversion: int32(f[6]),
		Aversion: int32(f[7]), EphemeralOwner: f[8], DataLength: int32(f[9]), NumChildren: int32(f[10])}
	return ev, int64(t), nil
}

func readString(v []byte) (string, []byte, bool) {
	l, n := binary.Uvarint(v)
	if n <= 0 || l > uint64(len(v)-n) {
		return "", nil, false
	}
	return string(v[n : n+int(l)]), v[n+int(l):], true
}

// historyLogger routes pebble's log into zap, its chatter at debug level.
type historyLogger struct{ l *zap.SugaredLogger }

func (p historyLogger) Infof(format string, args ...any)  { p.l.Debugf(format, args...) }
func (p historyLogger) Errorf(format string, args ...any) { p.l.Errorf(format, args...) }
func (p historyLogger) Fatalf(format string, args ...any) { p.l.Fatalf(format, args...) }
