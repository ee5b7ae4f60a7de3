package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/server"
	"github.com/arbor-coord/arbor/snapfile"
	"github.com/arbor-coord/arbor/tree"
	"go.uber.org/zap/zaptest"
)

// jSnapshot is the JSON of snapshot save and status as docs/cli.md
// documents it.
type jSnapshot struct {
	File     string `json:"file"`
	Member   uint64 `json:"member"`
	Zxid     uint64 `json:"zxid"`
	Size     int64  `json:"size"`
	Znodes   int64  `json:"znodes"`
	Sessions int64  `json:"sessions"`
	Members  []struct {
		ID   uint64 `json:"id"`
		Peer string `json:"peer"`
		Role string `json:"role"`
	} `json:"members"`
	Created string `json:"created"`
	Shards  []struct {
		Group  uint64 `json:"group"`
		Index  uint64 `json:"index"`
		Znodes int64  `json:"znodes"`
		Size   int64  `json:"size"`
	} `json:"shards"` // a sharded cluster's
}

func TestSnapshotSaveWritesABackupFileAndStatusDescribesIt(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	must(t, addr, "create", "/app", "cfg")
	must(t, addr, "create", "/app/a", "1")
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.arbor")

	saved := decode[jSnapshot](t, must(t, addr, "-o", "json", "snapshot", "save", file))
	if saved.File != file || saved.Member != 1 || saved.Zxid == 0 || saved.Znodes != int64(6+mapNode()) || saved.Size == 0 || saved.Sessions != 1 ||
		len(saved.Members) != 1 || saved.Members[0].ID != 1 || saved.Members[0].Role != "voter" || saved.Created == "" {
		t.Fatalf("snapshot save printed %+v", saved)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the directory holds %v, want the backup alone", entries)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	h, state, err := snapfile.Read(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tree.Restore(state)
	if err != nil {
		t.Fatal(err)
	}
	if data, _, err := tr.Get("/app/a"); err != nil || string(data) != "1" || h.Index != saved.Zxid || uint64(tr.Zxid()) > h.Index {
		t.Fatalf("the file holds /app/a = %q (%v), zxid %d of a state at %d; printed zxid %d", data, err, tr.Zxid(), h.Index, saved.Zxid)
	}

	text := must(t, addr, "snapshot", "status", file)
	for _, want := range []string{"file = " + file + "\n", "member = 1\n", fmt.Sprintf("znodes = %d\n", 6+mapNode()), "members = 1=", "(voter)"} {
		if !strings.Contains(text, want) {
			t.Errorf("snapshot status printed %q, without %q", text, want)
		}
	}
	status := decode[jSnapshot](t, must(t, "127.0.0.1:1", "-o", "json", "snapshot", "status", file)) // no server needed
	if status.Zxid != saved.Zxid || status.Size != saved.Size || status.Created != saved.Created {
		t.Fatalf("snapshot status %+v, snapshot save %+v", status, saved)
	}

	// A second save replaces the file with a later state.
	must(t, addr, "create", "/app/b")
	again := decode[jSnapshot](t, must(t, addr, "-o", "json", "snapshot", "save", file))
	if again.Zxid <= saved.Zxid || again.Znodes != int64(7+mapNode()) {
		t.Fatalf("a second save: %+v, after %+v", again, saved)
	}
}

func TestSnapshotStatusRefusesADamagedFile(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	file := filepath.Join(t.TempDir(), "backup.arbor")
	must(t, addr, "snapshot", "save", file)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.arbor")
	if err := os.WriteFile(cut, b[:len(b)-1], 0o600); err != nil {
		t.Fatal(err)
	}
	runSteps(t, addr, []step{
		{"a file cut short is refused", []string{"snapshot", "status", cut}, 1, "", "not a whole backup file: cut short"},
		{"a missing file is refused", []string{"snapshot", "status", cut + ".none"}, 1, "", "no such file"},
		{"a save into a missing directory fails", []string{"snapshot", "save", filepath.Join(cut+".none", "b")}, 1, "", "no such file"},
		{"save needs a file", []string{"snapshot", "save"}, 2, "", "accepts 1 arg"},
	})
}

func TestSnapshotSaveNeedsTheSuperuserOnceThereIsOne(t *testing.T) {
	t.Parallel()
	s := newServer(t, server.Config{
		Listen: "127.0.0.1:0", HTTP: "-", DataDir: t.TempDir(), TickInterval: 10 * time.Millisecond,
		SuperDigest: "root:NAT1tTH69JdUHxWSdThqAfhdMW0=", // root:rootpw
		Logger:      zaptest.NewLogger(t),
	})
	addr := s.Addr().String()
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.arbor")
	runSteps(t, addr, []step{
		{"a backup without auth is refused", []string{"snapshot", "save", file}, 1, "", "not allowed to take a backup"},
	})
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused save left %v", entries)
	}
	must(t, addr, "--auth", "digest:root:rootpw", "snapshot", "save", file)
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
}
