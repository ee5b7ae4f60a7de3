package server

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/snapfile"
)

// backupFile writes a backup of the member c is connected to into a file
// in dir, as arbor snapshot save does, and returns its path.
func backupFile(t *testing.T, c *client.Client, dir string) string {
	t.Helper()
	info, data := takeBackup(t, c)
	h := snapfile.Header{Member: info.Member, Index: uint64(info.Index),
		Znodes: info.Znodes, Sessions: info.Sessions, Size: info.Size, Created: time.Now().UTC().Format(time.RFC3339)}
	for _, s := range info.Shards {
		h.Shards = append(h.Shards, snapfile.Shard{Group: uint64(s.Group), Index: uint64(s.Index), Znodes: s.Znodes, Size: s.Size})
	}
	return writeBackupFile(t, dir, h, data)
}

func writeBackupFile(t *testing.T, dir string, h snapfile.Header, data []byte) string {
	t.Helper()
	var b bytes.Buffer
	w, err := snapfile.NewWriter(&b, h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "backup.arbor")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestARestoredMemberServesTheBackupsStateAsANewCluster(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := dialClient(t, s, client.WithSessionTimeout(30*time.Second))
	ctx := context.Background()
	fill(t, c, 20, 100)
	if _, err := c.Create(ctx, "/eph", []byte("e"), client.Ephemeral); err != nil {
		t.Fatal(err)
	}
	path := backupFile(t, c, t.TempDir())
	before := s.Status()

	h, dir := restoreMember(t, path)
	if h.Index != before.Applied || h.Znodes != 26 {
		t.Fatalf("restored %+v; the member was at %d with 26 znodes", h, before.Applied)
	}
	r := startServer(t, dir)
	after := r.Status()
	if after.Digest != before.Digest || after.Znodes != before.Znodes || after.Sessions != before.Sessions || after.Applied < before.Applied {
		t.Fatalf("the restored member: %+v; the backed up one: %+v", after, before)
	}
	rc := dialClient(t, r)
	if data, _, err := rc.Get(ctx, "/fill/n0007"); err != nil || !bytes.Equal(data, bytes.Repeat([]byte{7}, 100)) {
		t.Fatalf("a node of the backup: %q, %v", data, err)
	}
	if _, st, err := rc.Get(ctx, "/eph"); err != nil || st.EphemeralOwner == 0 {
		t.Fatalf("the ephemeral of a session the backup holds: %+v, %v", st, err)
	}
	if _, err := rc.Create(ctx, "/new", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	if _, st, _ := rc.Get(ctx, "/new"); st.Czxid <= int64(h.Index) {
		t.Fatalf("a write to the new cluster at zxid %d, not past the backup's %d", st.Czxid, h.Index)
	}

	// Restored with a bump, the new cluster's zxids begin past it.
	const bump = 1 << 30
	dir = filepath.Join(t.TempDir(), "bumped")
	if _, err := Restore(path, bump, Config{ID: 1, DataDir: dir}); err != nil {
		t.Fatal(err)
	}
	b := startServer(t, dir)
	if st := b.Status(); st.Digest != before.Digest || st.Zxid != int64(h.Index)+bump {
		t.Fatalf("the member restored with a bump: %+v; want the backup's digest %s at zxid %d", st, before.Digest, int64(h.Index)+bump)
	}
	bc := dialClient(t, b)
	if _, st, err := bc.CreateStat(ctx, "/new", nil, client.Persistent); err != nil || st.Czxid <= int64(h.Index)+bump {
		t.Fatalf("a write to the bumped cluster: %+v, %v; want a zxid past %d", st, err, int64(h.Index)+bump)
	}
}

// TestABackupOfAShardedClusterRestoresEveryShard backs up a member whose
// meta group was split at "m": the backup holds both groups' states, and
// a member restored from it serves both shards as they were, the map
// included, and takes writes in each.
func TestABackupOfAShardedClusterRestoresEveryShard(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := dialClient(t, s, client.WithSessionTimeout(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.SplitShards(ctx, "/", []byte("m")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "shard 1 led", func() bool { return len(s.Status().Shards) == 1 && s.Status().Shards[0].Leader == 1 })
	for _, p := range []string{"/app", "/app/a", "/zoo", "/zoo/x"} {
		if _, err := c.Create(ctx, p, []byte(p), client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Create(ctx, "/zoo/eph", nil, client.Ephemeral); err != nil {
		t.Fatal(err)
	}
	path := backupFile(t, c, t.TempDir())
	before := s.Status()

	h, dir := restoreMember(t, path)
	if len(h.Shards) != 1 || h.Shards[0].Group != 1 || h.Shards[0].Index != before.Shards[0].Applied {
		t.Fatalf("restored %+v; the member was at %+v", h, before)
	}
	r := startServer(t, dir)
	waitFor(t, "the restored member's shard", func() bool { return len(r.Status().Shards) == 1 && r.Status().Shards[0].Leader == 1 })
	after := r.Status()
	if after.Digest != before.Digest || after.Znodes != before.Znodes || after.Shards[0].Digest != before.Shards[0].Digest {
		t.Fatalf("the restored member: %+v; the backed up one: %+v", after, before)
	}
	rc := dialClient(t, r)
	for _, p := range []string{"/app/a", "/zoo/x"} {
		if data, _, err := rc.Get(ctx, p); err != nil || string(data) != p {
			t.Errorf("%s after the restore: %q, %v", p, data, err)
		}
	}
	if _, st, err := rc.Get(ctx, "/zoo/eph"); err != nil || st.EphemeralOwner == 0 {
		t.Errorf("the ephemeral in the shard: %+v, %v", st, err)
	}
	for _, p := range []string{"/app/new", "/zoo/new"} {
		if _, err := rc.Create(ctx, p, nil, client.Persistent); err != nil {
			t.Errorf("a write of %s to the restored cluster: %v", p, err)
		}
	}

	// A file whose map names a shard it does not hold is refused.
	info, data := takeBackup(t, c)
	short := writeBackupFile(t, t.TempDir(), snapfile.Header{Member: 1, Index: uint64(info.Index), Znodes: info.Znodes,
		Sessions: info.Sessions, Size: info.Size - info.Shards[0].Size}, data[:info.Size-info.Shards[0].Size])
	if _, err := Restore(short, 0, Config{ID: 1, DataDir: filepath.Join(t.TempDir(), "short")}); err == nil || !strings.Contains(err.Error(), "names shard 1") {
		t.Errorf("a backup without its shard's state: %v", err)
	}
}

// testdata/backup-before-system-nodes.arbor is a backup that arbor
// snapshot save wrote from a member of the version before the system
// nodes (commit 0113a52): /app with data "app", /app/a with "12345",
// /zookeeper-not with "x", and the session of the arbor command that
// saved it. Its header counts the 4 znodes it held.
func TestABackupFromBeforeTheSystemNodesRestores(t *testing.T) {
	t.Parallel()
	h, dir := restoreMember(t, "testdata/backup-before-system-nodes.arbor")
	if h.Znodes != 4 || h.Index != 0xe {
		t.Fatalf("header %+v, want 4 znodes at zxid 0xe", h)
	}
	r := startServer(t, dir)
	if st := r.Status(); st.Znodes != 4+3 {
		t.Fatalf("the restored member holds %d znodes, want the backup's 4 and the 3 system nodes", st.Znodes)
	}
	c := dialClient(t, r)
	ctx := context.Background()
	if data, _, err := c.Get(ctx, "/app/a"); err != nil || string(data) != "12345" {
		t.Fatalf("/app/a: %q, %v", data, err)
	}
	for _, p := range []string{"/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
		if ok, _, err := c.Exists(ctx, p); err != nil || !ok {
			t.Fatalf("%s: %v, %v", p, ok, err)
		}
	}
	// And quotas work on it.
	if _, err := c.SetQuota(ctx, "/app", client.QuotaCountHard, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/app/b", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/app/c", nil, client.Persistent); !errors.Is(err, client.ErrQuotaExceeded) {
		t.Fatalf("a create past the quota: %v", err)
	}
}

func TestADamagedBackupIsRefusedWithNothingWritten(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := dialClient(t, s)
	fill(t, c, 5, 10)
	good, err := os.ReadFile(backupFile(t, c, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	info, state := takeBackup(t, c)
	header := snapfile.Header{Member: 1, Index: uint64(info.Index), Znodes: info.Znodes, Sessions: info.Sessions, Size: info.Size}
	badState := bytes.Clone(state)
	badState[len(badState)/2] ^= 1 // a bit flipped before the file's checksum was made
	wrongCount := header
	wrongCount.Znodes++
	tests := []struct {
		name string
		file func(dir string) string
		want string
	}{
		{"a missing file", func(dir string) string { return filepath.Join(dir, "none") }, "no such file"},
		{"an empty file", func(dir string) string { return write(t, dir, nil) }, "not a whole backup file"},
		{"a file cut short", func(dir string) string { return write(t, dir, good[:len(good)-100]) }, "cut short"},
		{"a file with a flipped bit", func(dir string) string { return write(t, dir, flipped(good, len(good)/2)) }, "checksum"},
		{"a file of another version", func(dir string) string { return write(t, dir, flipped(good, 11)) }, "unsupported backup file version"},
		{"a whole file whose state is damaged", func(dir string) string { return writeBackupFile(t, dir, header, badState) }, "does not read"},
		{"a file whose header miscounts its znodes", func(dir string) string { return writeBackupFile(t, dir, wrongCount, state) }, "znodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "data")
			_, err := Restore(tt.file(t.TempDir()), 0, Config{ID: 1, DataDir: dir})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Restore = %v, want an error saying %q", err, tt.want)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Fatalf("a refused restore left %v", entries)
			}
		})
	}
	t.Run("a good file into a data directory in use", func(t *testing.T) {
		path := write(t, t.TempDir(), good)
		if _, err := Restore(path, 0, Config{ID: 1, DataDir: s.cfg.DataDir}); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("Restore over a member's data = %v, want it refused", err)
		}
	})
	t.Run("a good file for a member the peers do not name", func(t *testing.T) {
		path := write(t, t.TempDir(), good)
		if _, err := Restore(path, 0, Config{ID: 4, Peers: map[uint64]string{1: "127.0.0.1:1"}, DataDir: filepath.Join(t.TempDir(), "d")}); err == nil {
			t.Fatal("Restore for a member outside the peers succeeded")
		}
	})
}

func write(t *testing.T, dir string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, "file")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func flipped(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x10
	return b
}

// restoreMember restores the backup at path into a new data directory of
// member 1, as arbord --restore does, and returns the backup's header and
// the directory.
func restoreMember(t *testing.T, path string) (snapfile.Header, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	h, err := Restore(path, 0, Config{ID: 1, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return h, dir
}
