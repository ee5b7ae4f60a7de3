package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// lines returns the lines of s, without the last newline.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func TestWatchPrintsEachChange(t *testing.T) {
	t.Parallel()
	addr, metrics := startServer(t)
	must(t, addr, "create", "/w")
	w := start(t, addr, "watch", "-n", "4", "/w")
	waitFor(t, "watch armed", func() bool { return watches(t, metrics) == 1 })
	// One persistent watch, never re-armed: changes made back to back each
	// print a line (one-shot watches used to merge them).
	for _, args := range [][]string{{"set", "/w", "a"}, {"create", "/w/kid"}, {"delete", "/w/kid"}, {"delete", "/w"}} {
		must(t, addr, args...)
	}
	code := w.wait(t)
	want := "NodeDataChanged /w\nNodeChildrenChanged /w\nNodeChildrenChanged /w\nNodeDeleted /w\n"
	if code != 0 || w.stdout.String() != want {
		t.Fatalf("watch = %d, %q (stderr %q); want 0, %q", code, w.stdout, w.stderr, want)
	}
}

func TestWatchStopsWithStatus0OnInterrupt(t *testing.T) {
	t.Parallel()
	addr, metrics := startServer(t)
	must(t, addr, "create", "/w")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			w := start(t, addr, "watch", "/w")
			waitFor(t, "watch armed", func() bool { return watches(t, metrics) == 1 })
			must(t, addr, "set", "/w", sig.String())
			waitFor(t, "event printed", func() bool { return w.stdout.String() == "NodeDataChanged /w\n" })
			if code := w.stop(t, sig); code != 0 || w.stderr.String() != "" {
				t.Fatalf("watch ended with %d, stderr %q", code, w.stderr)
			}
			waitFor(t, "the watch gone with the session", func() bool { return watches(t, metrics) == 0 })
		})
	}
}

func TestWatchOfAMissingNodeSeesItsCreation(t *testing.T) {
	t.Parallel()
	addr, metrics := startServer(t)
	w := start(t, addr, "watch", "-n", "2", "-o", "json", "/later")
	waitFor(t, "watch armed", func() bool { return watches(t, metrics) == 1 })
	must(t, addr, "create", "/later", "born")
	must(t, addr, "delete", "/later")
	if code := w.wait(t); code != 0 {
		t.Fatalf("watch = %d, stderr %q", code, w.stderr)
	}
	var got []jEvent
	for _, l := range lines(w.stdout.String()) {
		got = append(got, decode[jEvent](t, l))
	}
	if len(got) != 2 || got[0].Type != "NodeCreated" || got[0].Path != "/later" || got[0].Zxid == 0 ||
		got[0].Data == nil || *got[0].Data != "born" || got[0].Encoding != "utf8" ||
		got[1].Type != "NodeDeleted" || got[1].Zxid <= got[0].Zxid || got[1].Data != nil {
		t.Fatalf("events %+v, want NodeCreated with its data then NodeDeleted of /later with rising zxids", got)
	}
}

// A shell's session outlives the watch commands it runs: their watches
// must not.
func TestWatchInTheShellRemovesItsWatch(t *testing.T) {
	t.Parallel()
	addr, metrics := startServer(t)
	must(t, addr, "create", "/w")
	for _, args := range []string{"watch -n 1 /w", "watch -R -n 1 /w"} {
		t.Run(args, func(t *testing.T) {
			sh := exec.Command(arborBin, "--servers", addr, "shell")
			sh.Env = testEnv()
			stdin, err := sh.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			var out syncBuffer
			sh.Stdout, sh.Stderr = &out, &out
			if err := sh.Start(); err != nil {
				t.Fatal(err)
			}
			defer sh.Process.Kill()
			fmt.Fprintln(stdin, args)
			waitFor(t, "watch armed", func() bool { return watches(t, metrics) == 1 })
			must(t, addr, "set", "/w", args)
			waitFor(t, "the event", func() bool { return out.String() == "NodeDataChanged /w\n" })
			waitFor(t, "the watch removed, the shell still running", func() bool { return watches(t, metrics) == 0 })
			stdin.Close()
			if err := sh.Wait(); err != nil {
				t.Fatalf("shell: %v, printed %q", err, out.String())
			}
		})
	}
}

func TestWatchRecursiveFollowsTheSubtree(t *testing.T) {
	t.Parallel()
	addr, metrics := startServer(t)
	must(t, addr, "create", "/r")
	must(t, addr, "create", "/r/old")
	must(t, addr, "create", "/other")
	text := start(t, addr, "watch", "-R", "/r")
	js := start(t, addr, "watch", "-R", "-o", "json", "/r")
	waitFor(t, "both watches armed", func() bool { return watches(t, metrics) == 2 })
	// The changes follow each other with no wait: a recursive watch is
	// never re-armed, so each prints its line, in the order made.
	steps := []struct {
		args  []string
		event string
		data  string // the data a NodeCreated or NodeDataChanged carries
	}{
		{[]string{"create", "/r/a"}, "NodeCreated /r/a", ""},
		{[]string{"set", "/r/a", "x"}, "NodeDataChanged /r/a", "x"},
		{[]string{"create", "/r/a/b", "deep"}, "NodeCreated /r/a/b", "deep"},
		{[]string{"set", "/other", "elsewhere"}, "", ""}, // not below /r
		{[]string{"set", "/r/a/b", "deeper"}, "NodeDataChanged /r/a/b", "deeper"},
		{[]string{"delete", "/r/a/b"}, "NodeDeleted /r/a/b", ""},
		{[]string{"delete", "/r/a"}, "NodeDeleted /r/a", ""},
		{[]string{"delete", "/r/old"}, "NodeDeleted /r/old", ""},
		{[]string{"set", "/r", "root"}, "NodeDataChanged /r", "root"},
		{[]string{"delete", "/r"}, "NodeDeleted /r", ""},
		{[]string{"create", "/r", "again"}, "NodeCreated /r", "again"},
		{[]string{"create", "/r/new"}, "NodeCreated /r/new", ""},
	}
	var want []string
	for _, s := range steps {
		must(t, addr, s.args...)
		if s.event != "" {
			want = append(want, s.event)
		}
	}
	waitFor(t, "every event", func() bool {
		return len(lines(text.stdout.String())) >= len(want) && len(lines(js.stdout.String())) >= len(want)
	})
	for _, w := range []*background{text, js} {
		if code := w.stop(t, syscall.SIGINT); code != 0 || w.stderr.String() != "" {
			t.Fatalf("watch -R ended with %d, stderr %q", code, w.stderr)
		}
	}
	if got := lines(text.stdout.String()); !slices.Equal(got, want) {
		t.Fatalf("watch -R printed\n%s\nwant\n%s", text.stdout, strings.Join(want, "\n"))
	}
	got := lines(js.stdout.String())
	if len(got) != len(want) {
		t.Fatalf("watch -R -o json printed %d lines, want %d: %s", len(got), len(want), js.stdout)
	}
	var last int64
	i := 0
	for _, s := range steps {
		if s.event == "" {
			continue
		}
		ev := decode[jEvent](t, got[i])
		i++
		typ, path, _ := strings.Cut(s.event, " ")
		carries := typ != "NodeDeleted"
		if ev.Type != typ || ev.Path != path || ev.Zxid <= last || (ev.Data != nil) != carries ||
			(carries && (*ev.Data != s.data || ev.Encoding != "utf8")) {
			t.Errorf("event %d = %s, want %s with data %q after zxid %d", i, got[i-1], s.event, s.data, last)
		}
		last = ev.Zxid
	}
}

// A watch fed faster than its output is read loses events; it must say
// so rather than go on as if it had printed every change.
func TestWatchThatFallsBehindExitsWith1(t *testing.T) {
	t.Parallel()
	addr, metrics := startServer(t)
	must(t, addr, "create", "/fast")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(arborBin, "--servers", addr, "watch", "-R", "-o", "json", "/fast")
	cmd.Env = testEnv()
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer cmd.Process.Kill()
	waitFor(t, "watch armed", func() bool { return watches(t, metrics) == 1 })
	// Nobody reads stdout: the pipe fills with a few dozen lines, then
	// the client's queue of client.DefaultWatchQueue events, and the next
	// event drops the watch.
	c := dial(t, addr)
	value := strings.Repeat("v", 1000)
	n := client.DefaultWatchQueue + 300
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for g := range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for i := g; i < n; i += 8 {
				if _, err := c.Set(ctx, "/fast", []byte(value), -1); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	out, err := io.ReadAll(r) // until the binary exits
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("watch exited with %d (%v), want 1; stderr %q", code, err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "arbor: the watch of /fast was dropped, so changes from then on were not printed: watch events lost") {
		t.Errorf("stderr %q", stderr.String())
	}
	// What it printed before is whole and in order.
	printed := lines(string(out))
	if len(printed) < client.DefaultWatchQueue || len(printed) >= n {
		t.Errorf("printed %d events of %d", len(printed), n)
	}
	var last int64
	for _, l := range printed {
		ev := decode[jEvent](t, l)
		if ev.Type != "NodeDataChanged" || ev.Zxid <= last {
			t.Fatalf("after zxid %d: %s", last, l)
		}
		last = ev.Zxid
	}
}

func TestGetAndLsWaitForOneEventWithW(t *testing.T) {
	t.Parallel()
	addr, metrics := startServer(t)
	must(t, addr, "create", "/g", "v1")
	for _, tc := range []struct {
		args   []string
		change []string
		want   string
	}{
		{[]string{"get", "-w", "/g"}, []string{"set", "/g", "v2"}, "v1\nNodeDataChanged /g\n"},
		{[]string{"ls", "-w", "/g"}, []string{"create", "/g/kid"}, "NodeChildrenChanged /g\n"},
		{[]string{"ls", "-w", "-o", "json", "/g"}, []string{"delete", "/g/kid"}, `{"path":"/g","children":["kid"]}` + "\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			w := start(t, addr, tc.args...)
			waitFor(t, "watch armed", func() bool { return watches(t, metrics) == 1 })
			must(t, addr, tc.change...)
			code := w.wait(t)
			out := w.stdout.String()
			if tc.args[len(tc.args)-2] == "json" {
				events := lines(out)
				if len(events) != 2 || events[0]+"\n" != tc.want {
					t.Fatalf("printed %q", out)
				}
				if ev := decode[jEvent](t, events[1]); ev.Type != "NodeChildrenChanged" || ev.Path != "/g" {
					t.Fatalf("event %+v", ev)
				}
			} else if out != tc.want {
				t.Fatalf("printed %q, want %q", out, tc.want)
			}
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, w.stderr)
			}
		})
	}
}

func TestWatchFromAZxidPrintsTheChangesAfterItThenTheLiveOnes(t *testing.T) {
	t.Parallel()
	addr, metrics := startServer(t)
	c := dial(t, addr)
	ctx := context.Background()
	if _, err := c.Create(ctx, "/w", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	_, st, err := c.CreateStat(ctx, "/w/a", nil, client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "/w/a", []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/other", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/w/b", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	w := start(t, addr, "watch", "-R", "--from", fmt.Sprintf("%#x", st.Czxid), "-n", "3", "/w")
	waitFor(t, "watch armed", func() bool { return watches(t, metrics) == 1 })
	must(t, addr, "delete", "/w/a")
	want := "NodeDataChanged /w/a\nNodeCreated /w/b\nNodeDeleted /w/a\n"
	if code := w.wait(t); code != 0 || w.stdout.String() != want {
		t.Fatalf("watch = %d, %q (stderr %q); want 0, %q", code, w.stdout, w.stderr, want)
	}

	r := arbor(t, addr, "watch", "--from", "zero", "/w")
	if r.code != 2 || !strings.Contains(r.stderr, "not a zxid") {
		t.Errorf("--from zero: %v", r)
	}
}
