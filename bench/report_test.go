package bench

import (
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/client"
)

func TestTheTextReportHintsAtThePerIPLimitWhenConnectionsWereRefused(t *testing.T) {
	for _, tc := range []struct {
		kinds map[string]int64
		hint  bool
	}{
		{map[string]int64{client.ErrTooManyConnections.Error(): 3}, true},
		{map[string]int64{client.ErrConnectionLoss.Error(): 3}, false},
		{nil, false},
	} {
		rep := Report{Workload: "session", ErrorKinds: tc.kinds}
		var b strings.Builder
		if err := rep.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "--max-conns-per-ip"); got != tc.hint {
			t.Errorf("errors %v: hint shown %v, want %v:\n%s", tc.kinds, got, tc.hint, b.String())
		}
	}
}
