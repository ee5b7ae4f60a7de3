package client

import (
	"errors"
	"fmt"

	"github.com/arbor-coord/arbor/wire"
)

// Sentinel errors. Compare with errors.Is: the errors the client returns
// wrap them with the operation and path ("get /x: no node", an *OpError).
// Except ErrClosed, they are the wire package's sentinels, so one table
// serves the server and the client, and an error matches by its protocol
// code.
var (
	// ErrNoNode: the node (or, for a create, its parent) does not exist.
	ErrNoNode error = wire.ErrNoNode
	// ErrNodeExists: a create found the node already there.
	ErrNodeExists error = wire.ErrNodeExists
	// ErrBadVersion: the expected version of a set, delete or check did not
	// match.
	ErrBadVersion error = wire.ErrBadVersion
	// ErrNotEmpty: a delete of a node that has children.
	ErrNotEmpty error = wire.ErrNotEmpty
	// ErrNoChildrenForEphemerals: a create under an ephemeral node.
	ErrNoChildrenForEphemerals error = wire.ErrNoChildrenForEphemerals
	// ErrInvalidPath: a malformed path, refused by the client before any
	// round trip (or by the server). It is the same code as ErrBadArguments.
	ErrInvalidPath error = wire.ErrBadArguments
	// ErrBadArguments: an argument the server (or the client) refused, such
	// as a bad create mode or TTL.
	ErrBadArguments error = wire.ErrBadArguments
	// ErrSessionExpired: the session is gone, with its ephemerals and
	// watches. The Client cannot be used any more; Dial a new one.
	ErrSessionExpired error = wire.ErrSessionExpired
	// ErrConnectionLoss: the connection broke while the request was in
	// flight. The request may or may not have been applied. The client
	// reconnects by itself; the session survives if it reconnects in time.
	ErrConnectionLoss error = wire.ErrConnectionLoss
	// ErrRuntimeInconsistency marks, in a failed multi, the ops after the
	// one that failed (none of the ops was applied).
	ErrRuntimeInconsistency error = wire.ErrRuntimeInconsistency

	// ErrNoAuth: the node's ACL (for a create or a delete, the parent's)
	// does not grant the connection's identities the permission the
	// request needs.
	ErrNoAuth error = wire.ErrNoAuth
	// ErrInvalidACL: an ACL the server (or the client) refused: empty, an
	// unknown scheme, a malformed id, or scheme auth without an identity.
	ErrInvalidACL error = wire.ErrInvalidACL
	// ErrAuthFailed: the server refused a credential (see AddAuth).
	ErrAuthFailed error = wire.ErrAuthFailed

	ErrSystemError        error = wire.ErrSystemError
	ErrUnimplemented      error = wire.ErrUnimplemented
	ErrOperationTimeout   error = wire.ErrOperationTimeout
	ErrSessionMoved       error = wire.ErrSessionMoved
	ErrRequestTimeout     error = wire.ErrRequestTimeout
	ErrQuotaExceeded      error = wire.ErrQuotaExceeded
	ErrThrottled          error = wire.ErrThrottled
	ErrDataTooLarge       error = wire.ErrDataTooLarge
	ErrNoQuorum           error = wire.ErrNoQuorum
	ErrTooManyConnections error = wire.ErrTooManyConnections
	ErrBadPassword        error = wire.ErrBadPassword
	ErrFrameTooLarge      error = wire.ErrFrameTooLarge
	ErrMalformed          error = wire.ErrMalformed
	ErrShuttingDown       error = wire.ErrShuttingDown
	ErrNotCaughtUp        error = wire.ErrNotCaughtUp
	ErrLeaseExpired       error = wire.ErrLeaseExpired
	ErrNoWatcher          error = wire.ErrNoWatcher
	// ErrCrossShard: a multi's paths are in different shards of a sharded
	// cluster (docs/scale-out.md), and nothing of it was done.
	ErrCrossShard error = wire.ErrCrossShard
	// ErrHistoryCompacted: a watch was to resume from a zxid the server's
	// change history no longer goes back to. errors.As finds a
	// *HistoryCompactedError, with the oldest zxid a watch can resume
	// from: read the state again and watch from there.
	ErrHistoryCompacted error = wire.ErrHistoryCompacted
	// ErrUnsupported: the server speaks an older protocol version that
	// lacks what the call needs (such as FromZxid). It has no protocol
	// code.
	ErrUnsupported = errors.New("not supported by the server's protocol version")

	// ErrClosed: the Client was closed by Close. It has no protocol code.
	ErrClosed = errors.New("client is closed")

	// ErrEventsLost: a persistent or recursive watch was dropped because
	// some of its events could not be delivered (its reader fell behind,
	// or the server no longer had them after a reconnect). It has no
	// protocol code.
	ErrEventsLost = errors.New("watch events lost")
)

// HistoryCompactedError is the error of an AddWatch with FromZxid, or of
// a watch's last event after a reconnect, when the server's change
// history no longer holds every event after the zxid asked for. It
// matches ErrHistoryCompacted.
type HistoryCompactedError struct {
	// Oldest is the oldest zxid a watch can resume from: the server holds
	// every event after it.
	Oldest int64
}

func (e *HistoryCompactedError) Error() string {
	return fmt.Sprintf("%v: watches can resume from zxid %d on", ErrHistoryCompacted, e.Oldest)
}

// Unwrap returns ErrHistoryCompacted.
func (e *HistoryCompactedError) Unwrap() error { return ErrHistoryCompacted }

// errNotSent reports that a request was not handed to a connection because
// the connection had already broken: it is safe to retry on the next one.
var errNotSent = errors.New("connection already broken; request not sent")

// connLoss returns an error matching ErrConnectionLoss that keeps the cause.
func connLoss(cause error) error {
	if cause == nil || errors.Is(cause, ErrConnectionLoss) {
		return ErrConnectionLoss
	}
	return fmt.Errorf("%w: %w", ErrConnectionLoss, cause)
}

// MultiError is the error of a multi whose op Index failed. It matches the
// failing op's sentinel under errors.Is (for example ErrBadVersion). None of
// the ops was applied.
type MultiError struct {
	Index int    // index of the failed op in the Multi call, -1 if unknown
	Op    string // "create", "delete", "set" or "check"
	Path  string
	Err   error // the failed op's sentinel
}

func (e *MultiError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("multi: %v", e.Err)
	}
	return fmt.Sprintf("multi: op %d (%s %s): %v", e.Index, e.Op, e.Path, e.Err)
}

// Unwrap returns the failed op's sentinel.
func (e *MultiError) Unwrap() error { return e.Err }

// OpError is the error of one operation: its name ("get", "delete",
// "children", ...), the path it was on, and the cause, which matches a
// sentinel of this package under errors.Is. Every method on a node returns
// its errors as an *OpError, so that errors.As finds the node that failed,
// which matters for Walk and DeleteAll, whose requests are on many nodes.
// Path is empty, or what else the operation names (an auth scheme, a
// member's id), for an operation on no node. Multi returns a *MultiError
// instead.
type OpError struct {
	Op   string
	Path string
	Err  error
}

// Error reads "op path: cause", as "get /x: no node".
func (e *OpError) Error() string { return e.Op + " " + e.Path + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// opError returns err as the error of op on path.
func opError(op, path string, err error) error { return &OpError{Op: op, Path: path, Err: err} }
