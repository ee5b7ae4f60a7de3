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

func TestTheTextReportSaysWhetherEveryNextHolderWasToldWithinASecond(t *testing.T) {
	late := func(n int64) *int64 { return &n }
	handoffs := map[string]OpReport{"handoff": {Ops: 40}}
	for _, tc := range []struct {
		name string
		rep  Report
		want string
	}{
		{"all in time", Report{Workload: "locks", ByOp: handoffs, LateHandoffs: late(0)}, "told        all 40 next holders within 1s of the release\n"},
		{"some late", Report{Workload: "locks", ByOp: handoffs, LateHandoffs: late(3)}, "told        3 of 40 next holders more than 1s after the release\n"},
		{"no handoff", Report{Workload: "locks", LateHandoffs: late(0)}, ""},
		{"not counted", Report{Workload: "set", ByOp: handoffs}, ""},
	} {
		var b strings.Builder
		if err := tc.rep.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		_, line, _ := strings.Cut(b.String(), "\ntold")
		if line != "" {
			line = "told" + line
		}
		if line != tc.want {
			t.Errorf("%s: the told line is %q, want %q", tc.name, line, tc.want)
		}
	}
}
