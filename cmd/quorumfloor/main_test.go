package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// inProcess runs serve in a goroutine and returns the address it listens on.
func inProcess(t *testing.T, serve func(out io.Writer) error) string {
	t.Helper()
	r, w := io.Pipe()
	go func() {
		if err := serve(w); err != nil {
			t.Error(err)
		}
	}()
	addr, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return addr[:len(addr)-1]
}

func TestEveryMemberHoldsEveryAnsweredRecord(t *testing.T) {
	const n, size = 20, 64
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	f1 := inProcess(t, func(out io.Writer) error { return serveFollower(dirs[1], size, out) })
	f2 := inProcess(t, func(out io.Writer) error { return serveFollower(dirs[2], size, out) })
	leader := inProcess(t, func(out io.Writer) error { return serveLeader(dirs[0], size, []string{f1, f2}, out) })

	ds, err := writes(leader, n, size, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != n {
		t.Fatalf("%d writes answered, want %d", len(ds), n)
	}
	// At the last answer the leader and one follower held every record;
	// the other follower catches up.
	held := func(dir string) int {
		b, err := os.ReadFile(filepath.Join(dir, "log"))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != logSize {
			t.Fatalf("%s holds %d bytes, want the preallocated %d", dir, len(b), logSize)
		}
		k := 0
		for k < n && binary.BigEndian.Uint64(b[k*size:]) == uint64(k+1) {
			k++
		}
		return k
	}
	if k := held(dirs[0]); k != n {
		t.Fatalf("the leader holds records 1..%d of %d", k, n)
	}
	if held(dirs[1]) != n && held(dirs[2]) != n {
		t.Fatalf("no follower holds all %d records", n)
	}
	for deadline := time.Now().Add(10 * time.Second); held(dirs[1]) != n || held(dirs[2]) != n; {
		if time.Now().After(deadline) {
			t.Fatalf("the followers hold records up to %d and %d of %d", held(dirs[1]), held(dirs[2]), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
