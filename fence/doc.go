// Package fence lets a resource refuse the writes of lock holders that
// lost their lock without knowing it.
//
// A holder can be paused (a long garbage collection, a stopped VM) while
// its lock passes on, and wake up still believing it holds it. Every
// grant of an Arbor lock carries a fencing token that grows from one
// holder of the lock to the next (recipes.Mutex.Token in Go, fencing_token
// in the HTTP lock API's acquire answer). The holder sends its token with
// every write; the resource keeps the highest token it has accepted for
// the lock together with the data, in the same transaction or file write,
// and refuses older tokens. The paused holder then fails at the resource,
// whatever it believes.
//
// The package imports nothing of Arbor's, so a resource owner imports it
// alone. Check is the rule, for resources that keep the token in a store
// of their own; Dir is a directory of objects that keeps the tokens with
// the objects on disk.
//
// # The rule
//
// A write with token t under a lock whose highest token is h is accepted
// when t >= h, and t becomes the lock's highest; a write with t < h is
// refused with an error matching ErrStaleToken. Equal tokens are
// accepted: a holder writes with its one token as often as it likes, and
// two holders of one lock never have the same token.
//
// Only holders that exclude each other should write under one fence: the
// holder of a Mutex, or the write side of an RWMutex. The readers of an
// RWMutex hold together, each with a token of its own. The lock name is
// the resource's: use one for each Arbor lock, and send every write made
// under that lock to it.
//
// # What it does not do
//
// A fence refuses a write only once it has seen a newer token. Until the
// new holder's first write, the old holder's writes still go in. A new
// holder that reads before it writes should first call Dir.Advance with
// its token, so that from then on the old holder is refused.
package fence
