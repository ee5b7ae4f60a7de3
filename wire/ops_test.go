package wire_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// opRow is what one op is. The rows were first written from the switches
// that decided it before wire had one table (IsWrite, RequestXidAllowed and
// the multi decoder here; in the server the read path, the other answers,
// isAdmin and the membership rights check) and checked against them; the
// logged, leader and limits columns say what the server does with each op.
type opRow struct {
	op     wire.Op
	name   string
	class  wire.OpClass
	logged bool  // changes replicated state through the raft log
	leader bool  // a member without a leader answers it NoQuorum
	admin  bool  // needs the right to change the members
	multi  bool  // may be a sub-request of a multi
	xid    int32 // the reserved xid it may carry; 0: none
	limits []wire.Limit
}

const (
	outstanding = wire.LimitOutstanding
	watches     = wire.LimitWatches
	ephemerals  = wire.LimitEphemerals
	dataSize    = wire.LimitDataSize
	listing     = wire.LimitListing
)

var allLimits = []wire.Limit{outstanding, watches, ephemerals, dataSize, listing}

var opRows = []opRow{
	{op: wire.OpCreate, name: "create", class: wire.ClassWrite, logged: true, leader: true, multi: true, limits: []wire.Limit{outstanding, ephemerals, dataSize}},
	{op: wire.OpDelete, name: "delete", class: wire.ClassWrite, logged: true, leader: true, multi: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpSetData, name: "setData", class: wire.ClassWrite, logged: true, leader: true, multi: true, limits: []wire.Limit{outstanding, dataSize}},
	{op: wire.OpCheck, name: "check", class: wire.ClassWrite, logged: true, leader: true, multi: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpMulti, name: "multi", class: wire.ClassWrite, logged: true, leader: true, limits: []wire.Limit{outstanding, ephemerals, dataSize}},
	{op: wire.OpSetACL, name: "setACL", class: wire.ClassWrite, logged: true, leader: true, limits: []wire.Limit{outstanding}},

	{op: wire.OpGetData, name: "getData", class: wire.ClassRead, limits: []wire.Limit{outstanding, watches}},
	{op: wire.OpExists, name: "exists", class: wire.ClassRead, limits: []wire.Limit{outstanding, watches}},
	{op: wire.OpGetChildren, name: "getChildren", class: wire.ClassRead, limits: []wire.Limit{outstanding, watches, listing}},
	{op: wire.OpGetACL, name: "getACL", class: wire.ClassRead, limits: []wire.Limit{outstanding}},
	{op: wire.OpGetEphemerals, name: "getEphemerals", class: wire.ClassRead, limits: []wire.Limit{outstanding, listing}},
	{op: wire.OpGetAllChildrenNumber, name: "getAllChildrenNumber", class: wire.ClassRead, limits: []wire.Limit{outstanding}},

	{op: wire.OpSetWatches, name: "setWatches", class: wire.ClassWatch, xid: wire.XidSetWatches, limits: []wire.Limit{outstanding, watches}},
	{op: wire.OpSetWatches2, name: "setWatches2", class: wire.ClassWatch, xid: wire.XidSetWatches, limits: []wire.Limit{outstanding, watches}},
	{op: wire.OpAddWatch, name: "addWatch", class: wire.ClassWatch, limits: []wire.Limit{outstanding, watches}},
	{op: wire.OpRemoveWatches, name: "removeWatches", class: wire.ClassWatch, limits: []wire.Limit{outstanding}},

	{op: wire.OpPing, name: "ping", class: wire.ClassSession, leader: true, xid: wire.XidPing},
	{op: wire.OpClose, name: "close", class: wire.ClassSession, logged: true, leader: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpSync, name: "sync", class: wire.ClassSession, leader: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpAuth, name: "auth", class: wire.ClassSession, limits: []wire.Limit{outstanding}},
	{op: wire.OpWhoAmI, name: "whoAmI", class: wire.ClassSession, limits: []wire.Limit{outstanding}},

	{op: wire.OpMembers, name: "members", class: wire.ClassAdmin, limits: []wire.Limit{outstanding}},
	{op: wire.OpStatus, name: "status", class: wire.ClassAdmin, limits: []wire.Limit{outstanding}},
	{op: wire.OpLeaseCreate, name: "leaseCreate", class: wire.ClassWrite, logged: true, leader: true, limits: []wire.Limit{outstanding, ephemerals}},
	{op: wire.OpLeaseRenew, name: "leaseRenew", class: wire.ClassWrite, logged: true, leader: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpLeaseClose, name: "leaseClose", class: wire.ClassWrite, logged: true, leader: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpLocks, name: "locks", class: wire.ClassRead, limits: []wire.Limit{outstanding}},
	{op: wire.OpDeadlocks, name: "deadlocks", class: wire.ClassRead, limits: []wire.Limit{outstanding}},
	{op: wire.OpLockHistory, name: "lockHistory", class: wire.ClassRead, limits: []wire.Limit{outstanding}},
	{op: wire.OpLockBreak, name: "lockBreak", class: wire.ClassWrite, logged: true, leader: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpMemberAdd, name: "memberAdd", class: wire.ClassAdmin, logged: true, leader: true, admin: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpMemberRemove, name: "memberRemove", class: wire.ClassAdmin, logged: true, leader: true, admin: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpMemberPromote, name: "memberPromote", class: wire.ClassAdmin, logged: true, leader: true, admin: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpReconfig, name: "reconfig", class: wire.ClassAdmin, logged: true, leader: true, admin: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpSnapshot, name: "snapshot", class: wire.ClassAdmin, leader: true, admin: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpShardPartition, name: "shardPartition", class: wire.ClassAdmin, logged: true, leader: true, admin: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpShardSplit, name: "shardSplit", class: wire.ClassAdmin, logged: true, leader: true, admin: true, limits: []wire.Limit{outstanding}},
	{op: wire.OpShardLead, name: "shardLead", class: wire.ClassAdmin, logged: true, leader: true, admin: true, limits: []wire.Limit{outstanding}},
}

// definedOps reads the package's source for its constants of type Op, so
// that an op added without a row is caught.
func definedOps(t *testing.T) map[wire.Op]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	ops := map[wire.Op]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				if typ, ok := vs.Type.(*ast.Ident); !ok || typ.Name != "Op" {
					continue
				}
				for i, id := range vs.Names {
					ops[wire.Op(constInt(t, vs.Values[i]))] = id.Name
				}
			}
		}
	}
	if len(ops) == 0 {
		t.Fatal("found no constants of type Op")
	}
	return ops
}

// constInt evaluates an op's value: an integer literal, maybe negated.
func constInt(t *testing.T, e ast.Expr) int64 {
	t.Helper()
	neg := false
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.SUB {
		neg, e = true, u.X
	}
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.INT {
		t.Fatalf("an Op constant's value is not an integer literal: %#v", e)
	}
	v, err := strconv.ParseInt(lit.Value, 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	if neg {
		v = -v
	}
	return v
}

func TestEveryDefinedOpHasARowAndNoRowIsForAnUndefinedOp(t *testing.T) {
	defined := definedOps(t)
	rows := map[wire.Op]bool{}
	for _, row := range opRows {
		if rows[row.op] {
			t.Errorf("%s has two rows", row.name)
		}
		rows[row.op] = true
		if _, ok := defined[row.op]; !ok {
			t.Errorf("the row of %s is for no defined op", row.name)
		}
	}
	for op, name := range defined {
		if !rows[op] {
			t.Errorf("%s (%d) has no row", name, int32(op))
		}
		if !op.Known() {
			t.Errorf("%s (%d) is not Known", name, int32(op))
		}
	}
	if op := wire.Op(99); op.Known() || op.String() != "op(99)" || op.Class() != 0 || op.IsLogged() || op.NeedsLeader() ||
		op.NeedsAdminRights() || op.InMulti() || op.Counts(outstanding) || wire.RequestXidAllowed(wire.XidPing, op) {
		t.Errorf("an undefined op is Known %v, named %q, of class %s, or has some property", op.Known(), op, op.Class())
	}
}

func TestEachOpIsWhatItsRowSays(t *testing.T) {
	for _, row := range opRows {
		t.Run(row.name, func(t *testing.T) {
			if got := row.op.String(); got != row.name {
				t.Errorf("String = %q", got)
			}
			if got := row.op.Class(); got != row.class {
				t.Errorf("Class = %s, want %s", got, row.class)
			}
			if got, want := row.op.IsWrite(), row.class == wire.ClassWrite; got != want {
				t.Errorf("IsWrite = %v, want %v for a %s op", got, want, row.class)
			}
			if got := row.op.IsLogged(); got != row.logged {
				t.Errorf("IsLogged = %v", got)
			}
			if got := row.op.NeedsLeader(); got != row.leader {
				t.Errorf("NeedsLeader = %v", got)
			}
			if got := row.op.NeedsAdminRights(); got != row.admin {
				t.Errorf("NeedsAdminRights = %v", got)
			}
			if got := row.op.InMulti(); got != row.multi {
				t.Errorf("InMulti = %v", got)
			}
			for _, l := range allLimits {
				if got, want := row.op.Counts(l), slices.Contains(row.limits, l); got != want {
					t.Errorf("Counts(%d) = %v, want %v", l, got, want)
				}
			}
			for _, xid := range []int32{wire.XidPing, wire.XidSetWatches, wire.XidNotification, wire.XidClosing} {
				if got, want := wire.RequestXidAllowed(xid, row.op), xid == row.xid; got != want {
					t.Errorf("RequestXidAllowed(%d) = %v, want %v", xid, got, want)
				}
			}
			if !wire.RequestXidAllowed(0, row.op) {
				t.Error("xid 0 is not allowed")
			}
			multi := wire.AppendRequest(nil, &wire.Request{Op: wire.OpMulti, Ops: []wire.Request{{Op: row.op, Path: "/a"}}})
			var req wire.Request
			if err := wire.DecodeRequest(multi[4:], &req); (err == nil) != row.multi {
				t.Errorf("a multi of it decodes with %v; it may be in a multi: %v", err, row.multi)
			}
		})
	}
}

func TestOpClassesAreNamed(t *testing.T) {
	for class, want := range map[wire.OpClass]string{
		wire.ClassRead: "read", wire.ClassWrite: "write", wire.ClassWatch: "watch",
		wire.ClassSession: "session", wire.ClassAdmin: "admin", 0: "OpClass(0)", 9: "OpClass(9)",
	} {
		if got := class.String(); got != want {
			t.Errorf("OpClass(%d).String() = %q, want %q", int8(class), got, want)
		}
	}
}
