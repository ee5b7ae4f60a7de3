package fence

import (
	"errors"
	"fmt"
)

// ErrStaleToken is matched (errors.Is) by the error of a write whose token
// is older than the highest token seen for its lock: a newer holder has
// the lock, and the write is refused.
var ErrStaleToken = errors.New("fence: stale fencing token")

// ErrInvalid is matched by the error of a call with bad input: an empty or
// unsafe name, a negative token. Such a call changes nothing. Like the
// errors of package io/fs, it is always wrapped in one that says more.
var ErrInvalid = errors.New("invalid argument")

// ErrCorrupt is matched by the error of a read or write that found a file
// of the directory damaged: its header or data fail their checksums, or
// it names another lock or key than its place. Writes under a lock whose
// highest token cannot be read are refused until the file is repaired. It
// too is always wrapped.
var ErrCorrupt = errors.New("corrupt file")

// StaleTokenError is the error of a refused write. It matches
// ErrStaleToken.
type StaleTokenError struct {
	Lock    string // the lock the write was made under
	Token   int64  // the write's token
	Highest int64  // the highest token seen for the lock
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fence: lock %q: token %d is older than %d, the highest seen", e.Lock, e.Token, e.Highest)
}

// Unwrap returns ErrStaleToken.
func (e *StaleTokenError) Unwrap() error { return ErrStaleToken }

// Check is the fencing rule. It returns nil when a write with token may go
// ahead under lock, whose highest token seen so far is highest (0 when
// none): token must be at least highest. The caller then records token as
// the lock's highest, in the same transaction as the write. An equal
// token is accepted, since a holder writes with the same token as often
// as it likes; an older one gets a *StaleTokenError. A negative token is
// invalid (fencing tokens are zxids, never negative).
//
// Check keeps no state: the lock name is only for the error.
func Check(lock string, highest, token int64) error {
	if token < 0 {
		return fmt.Errorf("fence: lock %q: token %d is negative: %w", lock, token, ErrInvalid)
	}
	if token < highest {
		return &StaleTokenError{Lock: lock, Token: token, Highest: highest}
	}
	return nil
}
