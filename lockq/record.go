package lockq

import (
	"encoding/json"
	"unicode/utf8"
)

// Record is what a lock node's data says about who holds or waits: the
// rest (the session, the fencing token, when it began to wait) is in the
// node's Stat. The server reads it to name holders and waiters and to
// build the wait-for graph, whose vertices are holders: one Owner (a
// process, say) can have many holders (a Mutex value each, or a MultiLock
// for all its locks), and two of its holders waiting for each other's
// locks are a deadlock, while two that are not do not look like one.
type Record struct {
	Owner  string `json:"owner"`            // who: "host:pid" unless the client said otherwise
	Holder string `json:"holder,omitempty"` // which holder of the owner: one vertex of the wait-for graph
	// DelayMs is the lock-delay the holder asks for: if it is lost
	// without releasing, nobody holds the lock for that long (Delay), at
	// most MaxLockDelay.
	DelayMs int64 `json:"delay_ms,omitempty"`
	// Parts is how many locks a multi-lock over HTTP holds with the same
	// lease: fewer nodes of its lease than that, and one was lost.
	Parts int `json:"parts,omitempty"`
}

// MaxOwner is the longest owner (and holder) a record keeps; a longer one
// is cut.
const MaxOwner = 256

// Encode returns r as a lock node's data: a small JSON object, readable
// with `arbor get`.
func (r Record) Encode() []byte {
	r.Owner, r.Holder, r.DelayMs = TrimOwner(r.Owner), TrimOwner(r.Holder), clampDelay(r.DelayMs)
	b, _ := json.Marshal(r) // two strings and a number: never fails
	return b
}

// DecodeRecord reads a lock node's data. Data that is not a record (a node
// made by an older client, whose data was a free-form description) is
// taken whole as the owner, when it is text, so that it is still shown.
func DecodeRecord(data []byte) Record {
	var r Record
	if len(data) > 0 && data[0] == '{' && json.Unmarshal(data, &r) == nil {
		return Record{Owner: TrimOwner(r.Owner), Holder: TrimOwner(r.Holder), DelayMs: clampDelay(r.DelayMs), Parts: max(r.Parts, 0)}
	}
	if utf8.Valid(data) {
		return Record{Owner: TrimOwner(string(data))}
	}
	return Record{}
}

// TrimOwner cuts an owner (or a holder id) to MaxOwner bytes, without
// splitting a character.
func TrimOwner(s string) string {
	n := MaxOwner
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// clampDelay keeps a lock-delay within 0 and MaxLockDelay.
func clampDelay(ms int64) int64 { return min(max(ms, 0), MaxLockDelay.Milliseconds()) }
