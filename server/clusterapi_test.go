package server

import (
	"testing"
	"time"
)

func TestTheOverviewKeepsTenMinutesOfRates(t *testing.T) {
	t.Parallel()
	var rt rates
	t0 := time.Unix(1000, 0)
	rt.sample(t0, 100, 50, RatePoint{Znodes: 7})
	if len(rt.list()) != 0 {
		t.Fatal("a first sample has no rate yet")
	}
	rt.sample(t0.Add(5*time.Second), 150, 60, RatePoint{Znodes: 9, Sessions: 2, Watches: 3})
	ps := rt.list()
	if len(ps) != 1 || ps[0].Writes != 10 || ps[0].Reads != 2 || ps[0].Znodes != 9 || ps[0].Sessions != 2 || ps[0].Watches != 3 {
		t.Fatalf("after two samples: %+v; want 10 writes/s, 2 reads/s and the counts of the second", ps)
	}
	for i := 2; i <= rateSamples+10; i++ {
		rt.sample(t0.Add(time.Duration(i)*rateStep), 150, 60, RatePoint{})
	}
	if ps := rt.list(); len(ps) != rateSamples || ps[len(ps)-1].Writes != 0 {
		t.Errorf("kept %d samples, want the last %d", len(ps), rateSamples)
	}
}

func TestReachableAddrUsesThePeersHostForAnUnspecifiedOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ addr, peer, want string }{
		{"127.0.0.1:2481", "10.0.0.1:2381", "127.0.0.1:2481"},
		{"0.0.0.0:2481", "10.0.0.1:2381", "10.0.0.1:2481"},
		{"[::]:2481", "[fd00::1]:2381", "[fd00::1]:2481"},
		{":2481", "host:2381", "host:2481"},
		{"", "10.0.0.1:2381", ""},
		{"0.0.0.0:2481", "nonsense", ""},
	} {
		if got := ReachableAddr(tc.addr, tc.peer); got != tc.want {
			t.Errorf("ReachableAddr(%q, %q) = %q, want %q", tc.addr, tc.peer, got, tc.want)
		}
	}
}
