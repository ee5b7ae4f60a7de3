package faults

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/arbor-coord/arbor/client"
)

// These tests feed the checkers histories that break the rules, so that a
// checker that cannot fail would be caught here.

// violations collects what a checker reports.
type violations []string

func (v *violations) add(format string, args ...any) { *v = append(*v, fmt.Sprintf(format, args...)) }

func op(client int, in regInput, call, ret int64, out regOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func TestTheRegisterModel(t *testing.T) {
	k := "/lin/k"
	create := regInput{op: opCreate, key: k, value: "a"}
	setB := regInput{op: opSet, key: k, value: "b"}
	read := regInput{op: opSyncGet, key: k}
	ok := regOutput{outcome: outOK}
	unknown := regOutput{outcome: outUnknown}
	sawA := regOutput{outcome: outOK, exists: true, value: "a", version: 0}
	sawB := regOutput{outcome: outOK, exists: true, value: "b", version: 1}
	for _, tc := range []struct {
		name    string
		history []porcupine.Operation
		want    porcupine.CheckResult
	}{
		{"a read after a write sees it", []porcupine.Operation{
			op(0, create, 0, 10, ok), op(0, setB, 20, 30, regOutput{outcome: outOK, version: 1}), op(1, read, 40, 50, sawB),
		}, porcupine.Ok},
		{"a read that returns an overwritten value after the overwrite was acknowledged is illegal", []porcupine.Operation{
			op(0, create, 0, 10, ok), op(0, setB, 20, 30, regOutput{outcome: outOK, version: 1}), op(1, read, 40, 50, sawA),
		}, porcupine.Illegal},
		{"a linearizable get that returns an overwritten value is illegal too", []porcupine.Operation{
			op(0, create, 0, 10, ok), op(0, setB, 20, 30, regOutput{outcome: outOK, version: 1}),
			op(1, regInput{op: opLinGet, key: k}, 40, 50, sawA),
		}, porcupine.Illegal},
		{"a read concurrent with the overwrite may see either", []porcupine.Operation{
			op(0, create, 0, 10, ok), op(0, setB, 20, 60, regOutput{outcome: outOK, version: 1}), op(1, read, 40, 50, sawA),
		}, porcupine.Ok},
		{"a write of unknown outcome may have been applied", []porcupine.Operation{
			op(0, create, 0, 10, ok), op(0, setB, 20, math.MaxInt64, unknown), op(1, read, 40, 50, sawB),
		}, porcupine.Ok},
		{"a write of unknown outcome may not have been applied", []porcupine.Operation{
			op(0, create, 0, 10, ok), op(0, setB, 20, math.MaxInt64, unknown), op(1, read, 40, 50, sawA),
		}, porcupine.Ok},
		{"once a read saw the unknown write, a later read cannot miss it", []porcupine.Operation{
			op(0, create, 0, 10, ok), op(0, setB, 20, math.MaxInt64, unknown), op(1, read, 40, 50, sawB), op(1, read, 60, 70, sawA),
		}, porcupine.Illegal},
		{"a compare-and-set at the wrong version fails", []porcupine.Operation{
			op(0, create, 0, 10, ok), op(0, regInput{op: opCAS, key: k, value: "c", version: 3}, 20, 30, regOutput{outcome: outBadVersion}),
			op(1, read, 40, 50, sawA),
		}, porcupine.Ok},
		{"a compare-and-set that succeeded at the wrong version is illegal", []porcupine.Operation{
			op(0, create, 0, 10, ok), op(0, regInput{op: opCAS, key: k, value: "c", version: 3}, 20, 30, regOutput{outcome: outOK, version: 1}),
		}, porcupine.Illegal},
		{"a second create of a node fails", []porcupine.Operation{
			op(0, create, 0, 10, ok), op(1, create, 20, 30, ok),
		}, porcupine.Illegal},
		{"a delete makes the node absent", []porcupine.Operation{
			op(0, create, 0, 10, ok), op(0, regInput{op: opDelete, key: k}, 20, 30, ok), op(1, read, 40, 50, regOutput{outcome: outNoNode}),
		}, porcupine.Ok},
		{"keys are independent", []porcupine.Operation{
			op(0, create, 0, 10, ok), op(1, regInput{op: opSyncGet, key: "/lin/other"}, 20, 30, regOutput{outcome: outNoNode}),
		}, porcupine.Ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperationsTimeout(registerModel, tc.history, 10*time.Second); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAFailingHistoryIsSavedWithItsVisualization(t *testing.T) {
	w := &registerWorkload{written: map[string]map[string]bool{}}
	k := "/lin/k"
	w.history = []porcupine.Operation{
		op(0, regInput{op: opCreate, key: k, value: "a"}, 0, 10, regOutput{outcome: outOK}),
		op(1, regInput{op: opSyncGet, key: k}, 20, 30, regOutput{outcome: outNoNode}),
	}
	var v violations
	dir := t.TempDir()
	w.check(10*time.Second, dir, v.add)
	if len(v) != 1 || !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, dir+"/history.html") }) {
		t.Fatalf("got %q, want one violation naming %s/history.html", v, dir)
	}
}

func TestPlainReadsMustShowWrittenValues(t *testing.T) {
	w := &registerWorkload{written: map[string]map[string]bool{"/lin/k": {"a": true}}}
	w.reads = []plainRead{
		{key: "/lin/k", exists: true, value: "a"},
		{key: "/lin/k"},
		{key: "/lin/k", exists: true, value: "invented"},
	}
	var v violations
	w.check(time.Second, t.TempDir(), v.add)
	if len(v) != 1 || !strings.Contains(v[0], "invented") {
		t.Fatalf("got %q, want one violation for the invented value", v)
	}
}

func TestTheLockCheck(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	good := func(holder string, token int64, from, to int) acquisition {
		return acquisition{holder: holder, token: token, locked: ms(from), unlocking: ms(to), unlocked: ms(to + 1), verified: true, writes: 1}
	}
	for _, tc := range []struct {
		name   string
		acqs   []acquisition
		fence  []fenceWrite // writes in order
		wantOK bool
	}{
		{"holds one after another", []acquisition{good("a", 10, 0, 10), good("b", 20, 20, 30)},
			[]fenceWrite{{10, "a"}, {20, "b"}}, true},
		{"two verified holds that overlap", []acquisition{good("a", 10, 0, 30), good("b", 20, 20, 40)},
			[]fenceWrite{{10, "a"}, {20, "b"}}, false},
		{"a token handed out twice", []acquisition{good("a", 10, 0, 10), good("b", 10, 20, 30)},
			[]fenceWrite{{10, "a"}, {10, "b"}}, false},
		{"a later holder with a lower token", []acquisition{good("a", 20, 0, 10), good("b", 10, 20, 30)},
			[]fenceWrite{{20, "a"}, {10, "b"}}, false},
		{"a lost holder's write refused", []acquisition{
			{holder: "a", token: 10, locked: ms(0), unlocking: ms(50), unlocked: ms(51), writes: 2, rejected: 1, lost: true},
			good("b", 20, 20, 30)},
			[]fenceWrite{{10, "a"}, {20, "b"}, {10, "a"}}, true},
		{"a write that the fence saw but no holder made", []acquisition{good("a", 10, 0, 10)},
			[]fenceWrite{{10, "a"}, {10, "a"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &lockWorkload{acqs: tc.acqs}
			for _, fw := range tc.fence {
				w.fence.write(fw.token, fw.holder)
			}
			var v violations
			w.check(v.add)
			if ok := len(v) == 0; ok != tc.wantOK {
				t.Fatalf("violations %q, want ok=%v", v, tc.wantOK)
			}
		})
	}
}

func TestTheFenceRefusesLowerTokens(t *testing.T) {
	var f fence
	for _, w := range []struct {
		token int64
		want  bool
	}{{5, true}, {5, true}, {7, true}, {6, false}, {8, true}, {1, false}} {
		if got := f.write(w.token, "h"); got != w.want {
			t.Fatalf("write with token %d: accepted %v, want %v", w.token, got, w.want)
		}
	}
	if len(f.accepted) != 4 || len(f.rejected) != 2 {
		t.Fatalf("accepted %d refused %d", len(f.accepted), len(f.rejected))
	}
}

func TestReplicasWithEqualZxidsMustHaveEqualDigests(t *testing.T) {
	r := &replicaWatch{seen: map[int64]sample{}}
	r.note(1, 7, "aa")
	r.note(2, 7, "aa")
	r.note(3, 8, "bb")
	if len(r.bad) != 0 {
		t.Fatalf("agreeing samples reported: %q", r.bad)
	}
	r.note(2, 8, "cc")
	if len(r.bad) != 1 {
		t.Fatalf("a differing digest at zxid 8 was not reported: %q", r.bad)
	}
}

func TestAChangeRevealedWithoutItsEventIsReported(t *testing.T) {
	w := &watchWorkload{}
	fired := make(chan client.Event, 1)
	fired <- client.Event{Type: client.EventNodeDataChanged, Path: "/k"}
	w.changed("/k", true, client.Stat{Mzxid: 1}, true, client.Stat{Mzxid: 2}, fired)
	if len(w.missed) != 0 {
		t.Fatalf("a fired watch was reported: %q", w.missed)
	}
	w.changed("/k", true, client.Stat{Mzxid: 1}, true, client.Stat{Mzxid: 2}, make(chan client.Event, 1))
	wrong := make(chan client.Event, 1)
	wrong <- client.Event{Type: client.EventNodeDeleted, Path: "/k"}
	w.changed("/k", false, client.Stat{}, true, client.Stat{Mzxid: 2}, wrong)
	if len(w.missed) != 2 {
		t.Fatalf("got %q, want a missing event and a wrong one", w.missed)
	}
}

func TestAStallOfTheTestProcessExplainsAnExpiry(t *testing.T) {
	s := &stallMonitor{clock: &clock{start: time.Now()}}
	s.note(2*time.Second, 3*time.Second, time.Second)
	s.note(4*time.Second, 4*time.Second+time.Millisecond, time.Millisecond) // not a stall
	ws := s.windows()
	if len(ws) != 1 {
		t.Fatalf("got %d stalls, want 1", len(ws))
	}
	if ok, why := sessionMayExpire(&tracked{}, 4*time.Second, ws); !ok || why != "machine-stall" {
		t.Fatalf("an expiry just after the stall: allowed %v (%q)", ok, why)
	}
}

func TestSpellsWithoutServiceAreFoundUnlessTheMachineStood(t *testing.T) {
	s := func(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }
	at := []time.Duration{s(1.5), s(0.5), s(2), s(5), s(5.5)} // unsorted, as several clients record them
	stall := window{kind: machineStall, start: s(2.5), end: s(3)}
	for _, tc := range []struct {
		name     string
		from, to time.Duration
		excused  []window
		want     []window
	}{
		{"a spell of 3s between two successes", 0, s(6), nil, []window{{start: s(2), end: s(5)}}},
		{"a spell the test process stood still in is excused", 0, s(6), []window{stall}, nil},
		{"a spell from the start before the first success", s(-2), s(6), nil, []window{{start: s(-2), end: s(0.5)}, {start: s(2), end: s(5)}}},
		{"a spell from the last success to the end", s(1), s(8), nil, []window{{start: s(2), end: s(5)}, {start: s(5.5), end: s(8)}}},
		{"no success at all", s(10), s(13), nil, []window{{start: s(10), end: s(13)}}},
		{"short spells only", s(4.5), s(6), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := unserved(at, tc.from, tc.to, 2*time.Second, tc.excused)
			if !slices.EqualFunc(got, tc.want, func(a, b window) bool { return a.start == b.start && a.end == b.end }) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := longestGap(at, 0, s(6)); got != s(3) {
		t.Fatalf("the longest gap is %v, want 3s", got)
	}
}
