package wire

import (
	"errors"
	"fmt"
)

// Code is an error code carried in a reply. Zero means success. The values
// from -1 to -127 are ZooKeeper's; -200 and below are Arbor's own.
type Code int32

// Error codes.
const (
	CodeOK                      Code = 0
	CodeSystemError             Code = -1
	CodeRuntimeInconsistency    Code = -2 // in a failed multi: this op came after the one that failed
	CodeDataInconsistency       Code = -3
	CodeConnectionLoss          Code = -4
	CodeMarshallingError        Code = -5
	CodeUnimplemented           Code = -6
	CodeOperationTimeout        Code = -7
	CodeBadArguments            Code = -8
	CodeUnknownSession          Code = -12
	CodeAPIError                Code = -100
	CodeNoNode                  Code = -101
	CodeNoAuth                  Code = -102
	CodeBadVersion              Code = -103
	CodeNoChildrenForEphemerals Code = -108
	CodeNodeExists              Code = -110
	CodeNotEmpty                Code = -111
	CodeSessionExpired          Code = -112
	CodeInvalidACL              Code = -114
	CodeAuthFailed              Code = -115
	CodeSessionMoved            Code = -118
	CodeNotReadOnly             Code = -119 // a change asked of a member serving read-only (ZooKeeper's NOTREADONLY)
	CodeNoWatcher               Code = -121
	CodeRequestTimeout          Code = -122
	CodeQuotaExceeded           Code = -125
	CodeThrottled               Code = -127

	CodeDataTooLarge       Code = -200 // a znode's data is over the server's limit
	CodeNoQuorum           Code = -201 // the server cannot reach a majority of the cluster
	CodeTooManyConnections Code = -202 // the server is at its connection limit
	CodeBadPassword        Code = -203 // the session exists but the password is wrong
	CodeFrameTooLarge      Code = -204 // a frame is over the length limit
	CodeMalformed          Code = -205 // a frame could not be decoded
	CodeShuttingDown       Code = -206 // the server is stopping
	CodeNotCaughtUp        Code = -207 // the server has not yet applied what the client has seen
	CodeLeaseExpired       Code = -208 // the lease ended (expired, closed, or its session ended), or never was
	CodeHistoryCompacted   Code = -209 // the events after a watch's FromZxid are no longer all kept (Reply.OldestZxid says from where they are)
	CodeWrongShard         Code = -210 // the shard that took a write does not serve its path (docs/scale-out.md): route it by the current partition map
	CodeCrossShard         Code = -211 // a request's paths are in different shards (a multi across shards): nothing of it was done
)

// Error is an error with a protocol code. Two Errors match under errors.Is
// when their codes are equal, so a detailed error such as
// Errorf(CodeNoNode, "no node at %s", p) still matches ErrNoNode.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an *Error with code c and a formatted message.
func Errorf(c Code, format string, args ...any) error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...)}
}

// Sentinel errors, one per code. Compare with errors.Is.
var (
	ErrSystemError             = newSentinel(CodeSystemError, "system error")
	ErrRuntimeInconsistency    = newSentinel(CodeRuntimeInconsistency, "not applied: an earlier operation in the multi failed")
	ErrDataInconsistency       = newSentinel(CodeDataInconsistency, "data inconsistency")
	ErrConnectionLoss          = newSentinel(CodeConnectionLoss, "connection lost")
	ErrMarshallingError        = newSentinel(CodeMarshallingError, "marshalling error")
	ErrUnimplemented           = newSentinel(CodeUnimplemented, "operation not implemented")
	ErrOperationTimeout        = newSentinel(CodeOperationTimeout, "operation timed out")
	ErrBadArguments            = newSentinel(CodeBadArguments, "bad arguments")
	ErrUnknownSession          = newSentinel(CodeUnknownSession, "unknown session")
	ErrAPIError                = newSentinel(CodeAPIError, "api error")
	ErrNoNode                  = newSentinel(CodeNoNode, "no node")
	ErrNoAuth                  = newSentinel(CodeNoAuth, "not authorized")
	ErrBadVersion              = newSentinel(CodeBadVersion, "version does not match")
	ErrNoChildrenForEphemerals = newSentinel(CodeNoChildrenForEphemerals, "ephemeral nodes cannot have children")
	ErrNodeExists              = newSentinel(CodeNodeExists, "node already exists")
	ErrNotEmpty                = newSentinel(CodeNotEmpty, "node has children")
	ErrSessionExpired          = newSentinel(CodeSessionExpired, "session expired")
	ErrInvalidACL              = newSentinel(CodeInvalidACL, "invalid ACL")
	ErrAuthFailed              = newSentinel(CodeAuthFailed, "authentication failed")
	ErrSessionMoved            = newSentinel(CodeSessionMoved, "session moved to another server")
	ErrNotReadOnly             = newSentinel(CodeNotReadOnly, "the server is read-only: it cannot reach a quorum")
	ErrNoWatcher               = newSentinel(CodeNoWatcher, "no such watcher")
	ErrRequestTimeout          = newSentinel(CodeRequestTimeout, "request timed out")
	ErrQuotaExceeded           = newSentinel(CodeQuotaExceeded, "quota exceeded")
	ErrThrottled               = newSentinel(CodeThrottled, "throttled")
	ErrDataTooLarge            = newSentinel(CodeDataTooLarge, "data too large")
	ErrNoQuorum                = newSentinel(CodeNoQuorum, "no quorum")
	ErrTooManyConnections      = newSentinel(CodeTooManyConnections, "too many connections")
	ErrBadPassword             = newSentinel(CodeBadPassword, "wrong session password")
	ErrFrameTooLarge           = newSentinel(CodeFrameTooLarge, "frame too large")
	ErrMalformed               = newSentinel(CodeMalformed, "malformed frame")
	ErrShuttingDown            = newSentinel(CodeShuttingDown, "server shutting down")
	ErrNotCaughtUp             = newSentinel(CodeNotCaughtUp, "server is behind the client's last seen zxid")
	ErrLeaseExpired            = newSentinel(CodeLeaseExpired, "lease expired")
	ErrHistoryCompacted        = newSentinel(CodeHistoryCompacted, "the change history no longer goes back that far")
	ErrWrongShard              = newSentinel(CodeWrongShard, "wrong shard")
	ErrCrossShard              = newSentinel(CodeCrossShard, "the paths are in different shards")
)

var sentinels = map[Code]*Error{}

func newSentinel(c Code, msg string) *Error {
	e := &Error{Code: c, Msg: msg}
	sentinels[c] = e
	return e
}

// Err returns the sentinel error for c, nil for CodeOK, and a new *Error for a
// code this package does not know.
func (c Code) Err() error {
	if c == CodeOK {
		return nil
	}
	if e, ok := sentinels[c]; ok {
		return e
	}
	return &Error{Code: c, Msg: fmt.Sprintf("error code %d", int32(c))}
}

func (c Code) String() string {
	if c == CodeOK {
		return "ok"
	}
	return c.Err().Error()
}

// CodeOf returns the protocol code of err: CodeOK for nil, the code of an
// *Error anywhere in err's chain, and CodeSystemError for anything else.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeSystemError
}

// codeNames are short stable names for metrics labels and logs.
var codeNames = map[Code]string{
	CodeOK:                      "ok",
	CodeSystemError:             "system_error",
	CodeRuntimeInconsistency:    "runtime_inconsistency",
	CodeDataInconsistency:       "data_inconsistency",
	CodeConnectionLoss:          "connection_loss",
	CodeMarshallingError:        "marshalling_error",
	CodeUnimplemented:           "unimplemented",
	CodeOperationTimeout:        "operation_timeout",
	CodeBadArguments:            "bad_arguments",
	CodeUnknownSession:          "unknown_session",
	CodeAPIError:                "api_error",
	CodeNoNode:                  "no_node",
	CodeNoAuth:                  "no_auth",
	CodeBadVersion:              "bad_version",
	CodeNoChildrenForEphemerals: "no_children_for_ephemerals",
	CodeNodeExists:              "node_exists",
	CodeNotEmpty:                "not_empty",
	CodeSessionExpired:          "session_expired",
	CodeInvalidACL:              "invalid_acl",
	CodeAuthFailed:              "auth_failed",
	CodeSessionMoved:            "session_moved",
	CodeNotReadOnly:             "not_read_only",
	CodeNoWatcher:               "no_watcher",
	CodeRequestTimeout:          "request_timeout",
	CodeQuotaExceeded:           "quota_exceeded",
	CodeThrottled:               "throttled",
	CodeDataTooLarge:            "data_too_large",
	CodeNoQuorum:                "no_quorum",
	CodeTooManyConnections:      "too_many_connections",
	CodeBadPassword:             "bad_password",
	CodeFrameTooLarge:           "frame_too_large",
	CodeMalformed:               "malformed",
	CodeShuttingDown:            "shutting_down",
	CodeNotCaughtUp:             "not_caught_up",
	CodeLeaseExpired:            "lease_expired",
	CodeHistoryCompacted:        "history_compacted",
	CodeWrongShard:              "wrong_shard",
	CodeCrossShard:              "cross_shard",
}

// Name returns a short stable name for c, such as "no_node", for metric
// labels.
func (c Code) Name() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("code_%d", -int32(c))
}
