package fence

import (
	"errors"
	"math"
	"testing"
)

func TestCheckAcceptsTheHighestTokenAndNewerOnesAndRefusesOlderOnes(t *testing.T) {
	tests := []struct {
		name           string
		highest, token int64
		stale, invalid bool
	}{
		{"a first write with any token is accepted", 0, 5, false, false},
		{"token 0 on a lock never written is accepted", 0, 0, false, false},
		{"a newer holder is accepted", 5, 7, false, false},
		{"the same holder writing again is accepted", 7, 7, false, false},
		{"an older holder is refused", 7, 5, true, false},
		{"an older holder by one is refused", 7, 6, true, false},
		{"the largest token is accepted", 7, math.MaxInt64, false, false},
		{"token 0 after a holder is refused", 7, 0, true, false},
		{"a negative token is invalid", 0, -1, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check("accounts", tt.highest, tt.token)
			if got := errors.Is(err, ErrStaleToken); got != tt.stale {
				t.Errorf("Check(%d, %d) = %v; stale %v, want %v", tt.highest, tt.token, err, got, tt.stale)
			}
			if got := errors.Is(err, ErrInvalid); got != tt.invalid {
				t.Errorf("Check(%d, %d) = %v; invalid %v, want %v", tt.highest, tt.token, err, got, tt.invalid)
			}
		})
	}
}

func TestARefusalNamesTheLockTheTokenAndTheHighest(t *testing.T) {
	err := Check("accounts", 7, 5)
	var stale *StaleTokenError
	if !errors.As(err, &stale) || *stale != (StaleTokenError{Lock: "accounts", Token: 5, Highest: 7}) {
		t.Fatalf("Check = %#v, want a *StaleTokenError for accounts, 5, 7", err)
	}
	if want := `fence: lock "accounts": token 5 is older than 7, the highest seen`; err.Error() != want {
		t.Fatalf("Check = %q, want %q", err, want)
	}
}
