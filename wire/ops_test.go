package wire_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// opRow is what one op is. The rows were written from the switches that
// decided it before wire had one table: IsWrite, RequestXidAllowed and the
// multi decoder here, and in the server the read path (answerRead), the
// other answers (answer), isAdmin and the membership rights check.
type opRow struct {
	op    wire.Op
	name  string
	class string // read, write, watch, session or admin
	admin bool   // needs the right to change the members
	multi bool   // may be a sub-request of a multi
	xid   int32  // the reserved xid it may carry; 0: none
}

var opRows = []opRow{
	{op: wire.OpCreate, name: "create", class: "write", multi: true},
	{op: wire.OpDelete, name: "delete", class: "write", multi: true},
	{op: wire.OpSetData, name: "setData", class: "write", multi: true},
	{op: wire.OpCheck, name: "check", class: "write", multi: true},
	{op: wire.OpMulti, name: "multi", class: "write"},
	{op: wire.OpSetACL, name: "setACL", class: "write"},

	{op: wire.OpGetData, name: "getData", class: "read"},
	{op: wire.OpExists, name: "exists", class: "read"},
	{op: wire.OpGetChildren, name: "getChildren", class: "read"},
	{op: wire.OpGetACL, name: "getACL", class: "read"},
	{op: wire.OpGetEphemerals, name: "getEphemerals", class: "read"},
	{op: wire.OpGetAllChildrenNumber, name: "getAllChildrenNumber", class: "read"},

	{op: wire.OpSetWatches, name: "setWatches", class: "watch", xid: wire.XidSetWatches},
	{op: wire.OpSetWatches2, name: "setWatches2", class: "watch", xid: wire.XidSetWatches},
	{op: wire.OpAddWatch, name: "addWatch", class: "watch"},
	{op: wire.OpRemoveWatches, name: "removeWatches", class: "watch"},

	{op: wire.OpPing, name: "ping", class: "session", xid: wire.XidPing},
	{op: wire.OpClose, name: "close", class: "session"},
	{op: wire.OpSync, name: "sync", class: "session"},
	{op: wire.OpAuth, name: "auth", class: "session"},
	{op: wire.OpWhoAmI, name: "whoAmI", class: "session"},

	{op: wire.OpMembers, name: "members", class: "admin"},
	{op: wire.OpStatus, name: "status", class: "admin"},
	{op: wire.OpMemberAdd, name: "memberAdd", class: "admin", admin: true},
	{op: wire.OpMemberRemove, name: "memberRemove", class: "admin", admin: true},
	{op: wire.OpMemberPromote, name: "memberPromote", class: "admin", admin: true},
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
	if op := wire.Op(99); op.Known() || op.String() != "op(99)" {
		t.Errorf("an undefined op is Known %v and named %q", op.Known(), op)
	}
}

func TestEachOpIsWhatItsRowSays(t *testing.T) {
	for _, row := range opRows {
		t.Run(row.name, func(t *testing.T) {
			if got := row.op.String(); got != row.name {
				t.Errorf("String = %q", got)
			}
			if got, want := row.op.IsWrite(), row.class == "write"; got != want {
				t.Errorf("IsWrite = %v, want %v for a %s op", got, want, row.class)
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
