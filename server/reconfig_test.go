package server

import (
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/zkwire"
)

func spec(t *testing.T, line string) zkwire.ServerSpec {
	t.Helper()
	s, err := zkwire.ParseServer(line)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func specs(t *testing.T, lines ...string) []zkwire.ServerSpec {
	var out []zkwire.ServerSpec
	for _, l := range lines {
		out = append(out, spec(t, l))
	}
	return out
}

func TestPlanChanges(t *testing.T) {
	t.Parallel()
	members := []raftnode.Member{{ID: 1, Addr: "h:2381"}, {ID: 2, Addr: "h:2382"}, {ID: 3, Addr: "h:2383", Learner: true}}
	cur := specs(t, "server.1=h:2381:0:participant;h:2181", "server.2=h:2382:0:participant", "server.3=h:2383:0:observer")
	tests := []struct {
		name    string
		next    []string
		changes []raftnode.MemberChange
		changed []string // the specs the change carries
	}{
		{name: "the same configuration is no change",
			next: []string{"server.1=h:2381:0:participant;h:2181", "server.2=h:2382:0:participant", "server.3=h:2383:0:observer"}},
		{name: "a server that joins is added with its peer address and role",
			next:    []string{"server.1=h:2381:0:participant;h:2181", "server.2=h:2382:0:participant", "server.3=h:2383:0:observer", "server.4=h:2384:3884:observer;h:2184"},
			changes: []raftnode.MemberChange{{ID: 4, Addr: "h:2384", Learner: true}},
			changed: []string{"server.4=h:2384:3884:observer;h:2184"}},
		{name: "a server left out is removed",
			next:    []string{"server.1=h:2381:0:participant;h:2181", "server.3=h:2383:0:observer"},
			changes: []raftnode.MemberChange{{ID: 2, Remove: true}}},
		{name: "an observer made a participant is promoted, its address kept",
			next:    []string{"server.1=h:2381:0:participant;h:2181", "server.2=h:2382:0:participant", "server.3=h:2383:0:participant"},
			changes: []raftnode.MemberChange{{ID: 3}},
			changed: []string{"server.3=h:2383:0:participant"}},
		{name: "a participant made an observer becomes a learner",
			next:    []string{"server.1=h:2381:0:participant;h:2181", "server.2=h:2382:0:observer", "server.3=h:2383:0:observer"},
			changes: []raftnode.MemberChange{{ID: 2, Learner: true}},
			changed: []string{"server.2=h:2382:0:observer"}},
		{name: "a new peer address goes to raft",
			next:    []string{"server.1=g:2381:0:participant;h:2181", "server.2=h:2382:0:participant", "server.3=h:2383:0:observer"},
			changes: []raftnode.MemberChange{{ID: 1, Addr: "g:2381"}},
			changed: []string{"server.1=g:2381:0:participant;h:2181"}},
		{name: "a new client address is no change to raft but carries the spec",
			next:    []string{"server.1=h:2381:0:participant;h:2181", "server.2=h:2382:0:participant;h:2182", "server.3=h:2383:0:observer"},
			changes: []raftnode.MemberChange{{ID: 2}},
			changed: []string{"server.2=h:2382:0:participant;h:2182"}},
		{name: "several at once",
			next:    []string{"server.1=h:2381:0:participant;h:2181", "server.3=h:2383:0:participant", "server.5=h:2385:3885;h:2185"},
			changes: []raftnode.MemberChange{{ID: 3}, {ID: 5, Addr: "h:2385"}, {ID: 2, Remove: true}},
			changed: []string{"server.3=h:2383:0:participant", "server.5=h:2385:3885:participant;h:2185"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changes, changed := planChanges(members, cur, specs(t, tt.next...))
			if !reflect.DeepEqual(changes, tt.changes) || !reflect.DeepEqual(changed, specs(t, tt.changed...)) {
				t.Fatalf("planChanges = %+v, %v;\nwant %+v, %v", changes, changed, tt.changes, tt.changed)
			}
		})
	}
	t.Run("a member the configuration cannot list stays", func(t *testing.T) {
		alone := []raftnode.Member{{ID: 1}}
		changes, _ := planChanges(alone, nil, specs(t, "server.7=h:1:0:observer"))
		if !reflect.DeepEqual(changes, []raftnode.MemberChange{{ID: 7, Addr: "h:1", Learner: true}}) {
			t.Fatalf("changes %+v", changes)
		}
	})
}

func TestMergeConfig(t *testing.T) {
	t.Parallel()
	members := []raftnode.Member{{ID: 1, Addr: "h:2381"}, {ID: 2, Addr: "h:2382", Learner: true}, {ID: 3, Addr: "[::1]:2383"}, {ID: 4}}
	had := specs(t, "server.1=h:2381:3881:participant;h:2181", "server.2=h:2382:0:participant;h:2182", "server.9=h:2389:0:participant")
	given := specs(t, "server.2=h:2382:0:observer;g:2182")
	got := mergeConfig(had, members, given)
	want := specs(t,
		"server.1=h:2381:3881:participant;h:2181", // as it was
		"server.2=h:2382:0:observer;g:2182",       // as the change gave it
	) // 3 and 4 were never given a spec (a peer address known here is not the log's), 9 is no member
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mergeConfig:\n%v\nwant\n%v", got, want)
	}
	t.Run("raft says the role", func(t *testing.T) {
		got := mergeConfig(specs(t, "server.1=h:2381:0:observer"), []raftnode.Member{{ID: 1, Addr: "h:2381"}}, nil)
		if len(got) != 1 || got[0].Observer {
			t.Fatalf("%v", got)
		}
	})
}

func TestChangeMetaRoundTrips(t *testing.T) {
	t.Parallel()
	changed := specs(t, "server.4=h:2384:3884:observer;h:2184", "server.5=[::1]:1:2:participant;;[::1]:3")
	tm, got := parseChangeMeta(changeMeta(1_700_000_000_123, changed))
	if tm != 1_700_000_000_123 || !reflect.DeepEqual(got, changed) {
		t.Fatalf("parsed %d %v", tm, got)
	}
	if tm, got := parseChangeMeta([]byte("time=x\nserver.1=bad\nother=1\n")); tm != 0 || got != nil {
		t.Fatalf("a meta it cannot read: %d %v", tm, got)
	}
	if tm, got := parseChangeMeta(nil); tm != 0 || got != nil {
		t.Fatalf("no meta: %d %v", tm, got)
	}
}
