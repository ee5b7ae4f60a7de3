package cli

import (
	"slices"
	"strings"
	"syscall"
	"testing"
)

// lines returns the lines of s, without the last newline.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func TestWatchPrintsEachChange(t *testing.T) {
	addr, metrics := startServer(t)
	must(t, addr, "create", "/w")
	w := start(t, addr, "watch", "-n", "3", "/w")
	// Before each change, wait until the watch printed the previous event
	// and re-armed both its watches: a one-shot watch armed late would
	// merge two changes into one event.
	for i, args := range [][]string{{"set", "/w", "a"}, {"create", "/w/kid"}, {"delete", "/w/kid"}} {
		waitFor(t, "watch armed", func() bool { return len(lines(w.stdout.String())) == i && watches(t, metrics) == 2 })
		must(t, addr, args...)
	}
	code := w.wait(t)
	want := "NodeDataChanged /w\nNodeChildrenChanged /w\nNodeChildrenChanged /w\n"
	if code != 0 || w.stdout.String() != want {
		t.Fatalf("watch = %d, %q (stderr %q); want 0, %q", code, w.stdout, w.stderr, want)
	}
}

func TestWatchStopsWithStatus0OnInterrupt(t *testing.T) {
	addr, metrics := startServer(t)
	must(t, addr, "create", "/w")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			w := start(t, addr, "watch", "/w")
			waitFor(t, "watch armed", func() bool { return watches(t, metrics) == 2 })
			must(t, addr, "set", "/w", sig.String())
			waitFor(t, "event printed", func() bool { return w.stdout.String() == "NodeDataChanged /w\n" })
			if code := w.stop(t, sig); code != 0 || w.stderr.String() != "" {
				t.Fatalf("watch ended with %d, stderr %q", code, w.stderr)
			}
			waitFor(t, "the watches gone with the session", func() bool { return watches(t, metrics) == 0 })
		})
	}
}

func TestWatchOfAMissingNodeSeesItsCreation(t *testing.T) {
	addr, metrics := startServer(t)
	w := start(t, addr, "watch", "-n", "2", "-o", "json", "/later")
	waitFor(t, "exists watch armed", func() bool { return watches(t, metrics) == 1 })
	must(t, addr, "create", "/later")
	waitFor(t, "child watch armed", func() bool { return watches(t, metrics) == 2 })
	must(t, addr, "delete", "/later")
	if code := w.wait(t); code != 0 {
		t.Fatalf("watch = %d, stderr %q", code, w.stderr)
	}
	var got []jEvent
	for _, l := range lines(w.stdout.String()) {
		got = append(got, decode[jEvent](t, l))
	}
	if len(got) != 2 || got[0].Type != "NodeCreated" || got[0].Path != "/later" || got[0].Zxid == 0 ||
		got[1].Type != "NodeDeleted" || got[1].Zxid <= got[0].Zxid {
		t.Fatalf("events %+v, want NodeCreated then NodeDeleted of /later with rising zxids", got)
	}
}

func TestWatchRecursiveFollowsTheSubtree(t *testing.T) {
	addr, metrics := startServer(t)
	must(t, addr, "create", "/r")
	must(t, addr, "create", "/r/old")
	w := start(t, addr, "watch", "-R", "/r")
	printed := 0
	// Each step: a change, the events it must print (in any order: they
	// come from different watches), and the watches armed after it.
	for _, s := range []struct {
		args    []string
		events  []string
		watches int
	}{
		{nil, nil, 4}, // /r and /r/old, data and children each
		{[]string{"create", "/r/a"}, []string{"NodeChildrenChanged /r"}, 6},
		{[]string{"set", "/r/a", "x"}, []string{"NodeDataChanged /r/a"}, 6},
		{[]string{"create", "/r/a/b"}, []string{"NodeChildrenChanged /r/a"}, 8},
		{[]string{"set", "/r/a/b", "deep"}, []string{"NodeDataChanged /r/a/b"}, 8},
		{[]string{"delete", "/r/a/b"}, []string{"NodeChildrenChanged /r/a", "NodeDeleted /r/a/b"}, 6},
		{[]string{"delete", "/r/a"}, []string{"NodeChildrenChanged /r", "NodeDeleted /r/a"}, 4},
		{[]string{"delete", "/r/old"}, []string{"NodeChildrenChanged /r", "NodeDeleted /r/old"}, 2},
		{[]string{"delete", "/r"}, []string{"NodeDeleted /r"}, 1}, // an exists watch for its return
		{[]string{"create", "/r"}, []string{"NodeCreated /r"}, 2},
	} {
		if s.args != nil {
			must(t, addr, s.args...)
		}
		printed += len(s.events)
		waitFor(t, "events of "+strings.Join(s.args, " "), func() bool {
			return len(lines(w.stdout.String())) >= printed && watches(t, metrics) == s.watches
		})
		got := lines(w.stdout.String())[printed-len(s.events):]
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(s.events))) {
			t.Fatalf("after %v printed %q, want %q (all: %q)", s.args, got, s.events, w.stdout)
		}
	}
	if code := w.stop(t, syscall.SIGINT); code != 0 || w.stderr.String() != "" {
		t.Fatalf("watch -R ended with %d, stderr %q", code, w.stderr)
	}
	if n := len(lines(w.stdout.String())); n != printed {
		t.Fatalf("printed %d lines, want %d: %q", n, printed, w.stdout)
	}
}

func TestGetAndLsWaitForOneEventWithW(t *testing.T) {
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
