package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/server"
	"go.uber.org/zap/zaptest"
)

func TestTheRecoveryFlagsGoAlone(t *testing.T) {
	for _, tc := range []struct {
		restore     string
		force, join bool
		bump        uint64
		ok          bool
	}{
		{"", false, false, 0, true},
		{"b.arbor", false, false, 0, true},
		{"b.arbor", false, false, 1 << 20, true},
		{"", true, false, 0, true},
		{"", false, true, 0, true},
		{"b.arbor", true, false, 0, false},
		{"b.arbor", false, true, 0, false},
		{"", true, true, 0, false},
		{"", false, false, 1 << 20, false},
		{"", true, false, 1 << 20, false},
	} {
		if err := checkRecovery(tc.restore, tc.force, tc.join, tc.bump); (err == nil) != tc.ok {
			t.Errorf("--restore %q --force-new-cluster=%v --join=%v --bump-zxid %d: %v", tc.restore, tc.force, tc.join, tc.bump, err)
		}
	}
	if err := run([]string{"--restore", "b.arbor", "--force-new-cluster", "--data", t.TempDir()}); err == nil {
		t.Error("arbord took --restore with --force-new-cluster")
	}
}

func TestPrintStateShowsWhereAStoppedMembersLogEnds(t *testing.T) {
	dir := t.TempDir()
	s, err := server.New(server.Config{Listen: "127.0.0.1:0", HTTP: "-", DataDir: dir, TickInterval: 10 * time.Millisecond,
		Peers: map[uint64]string{1: "127.0.0.1:2381"}, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	applied := s.Status().Applied
	s.Close()
	var out bytes.Buffer
	if err := printState(&out, dir); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"data = " + dir + "\n", "voters = 1\n", "learners = \n", "learned_peers = \n", "last_term = 2\n", "term = 2\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("print-state printed %q, without %q", out.String(), want)
		}
	}
	if !strings.Contains(out.String(), "commit = ") || applied == 0 {
		t.Errorf("print-state printed %q", out.String())
	}
	if err := run([]string{"--print-state", "--data", t.TempDir()}); err == nil {
		t.Error("print-state of an empty directory succeeded")
	}
}
