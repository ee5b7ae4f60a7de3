package client

import (
	"errors"
	"os"
	"testing"
)

// timeoutError is a network timeout, as a dial or a write cut by its
// deadline returns.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// TestADialReportsTheTellingerOfItsErrors: a try that timed out does not
// hide a server's answer before it (a refused certificate on a loaded
// machine), but any other error, or a first one, is the one reported.
func TestADialReportsTheTellingerOfItsErrors(t *testing.T) {
	refused := errors.New("remote error: tls: certificate required")
	closed := errors.New("EOF")
	timeout := error(timeoutError{})
	for _, tc := range []struct {
		name            string
		last, err, want error
	}{
		{"a first timeout", nil, timeout, timeout},
		{"a timeout after a refusal", refused, timeout, refused},
		{"a timeout after a timeout", timeout, os.ErrDeadlineExceeded, os.ErrDeadlineExceeded},
		{"a refusal after a timeout", timeout, refused, refused},
		{"another error after a refusal", refused, closed, closed},
	} {
		if got := tellingerError(tc.last, tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
