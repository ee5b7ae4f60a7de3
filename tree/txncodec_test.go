package tree

import (
	"errors"
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

var txnCodecCases = []struct {
	name string
	txn  Txn
}{
	{"a persistent create round-trips", Txn{Type: wire.OpCreate, Time: 1700000000000, Path: "/a", Data: []byte("x")}},
	{"an ephemeral sequential create keeps its owner", Txn{Type: wire.OpCreate, Session: 0x0100000000000001, Path: "/l/lock-", Mode: wire.ModeEphemeralSequential}},
	{"a TTL create keeps its ttl", Txn{Type: wire.OpCreate, Path: "/t", Mode: wire.ModePersistentWithTTL, TTL: 5000}},
	{"a conditional setData keeps its version", Txn{Type: wire.OpSetData, Path: "/a", Data: []byte{}, Version: 7}},
	{"a delete of any version", Txn{Type: wire.OpDelete, Path: "/a", Version: -1}},
	{"a new session keeps id, timeout and password", Txn{Type: TxnCreateSession, Session: 42, TimeoutMs: 4000, Password: []byte("0123456789abcdef")}},
	{"a session close", Txn{Type: TxnCloseSession, Session: 42}},
	{"a reap carries its time", Txn{Type: TxnReap, Time: 99}},
	{"a create keeps its ACL and identities", Txn{Type: wire.OpCreate, Path: "/a",
		ACL:        []wire.ACL{{Perms: wire.PermRead, Scheme: "world", ID: "anyone"}, {Perms: wire.PermAll, Scheme: "digest", ID: "u:h"}},
		Identities: []wire.Identity{{Scheme: "ip", ID: "127.0.0.1"}, {Scheme: "digest", ID: "u:h"}}}},
	{"a setACL keeps its ACL and aversion", Txn{Type: wire.OpSetACL, Path: "/a", Version: 3, ACL: []wire.ACL{{Perms: wire.PermAdmin, Scheme: "ip", ID: "10.0.0.0/8"}}}},
	{"a multi carries its ops", Txn{Type: wire.OpMulti, Ops: []Txn{
		{Type: wire.OpCheck, Path: "/a", Version: 1},
		{Type: wire.OpCreate, Path: "/b", Data: []byte("y")},
		{Type: wire.OpDelete, Path: "/c", Version: -1},
	}}},
	{"a break carries its cause and reason", Txn{Type: wire.OpMulti, Cause: CauseBreak, Reason: "stuck since 3am",
		Identities: []wire.Identity{{Scheme: "super", ID: ""}},
		Ops:        []Txn{{Type: wire.OpDelete, Path: "/l/_c_a-lock-0000000001", Version: -1}}}},
	{"a batch of renewals carries each lease and TTL", Txn{Type: TxnRenewLeases, Time: 1700000000000, Ops: []Txn{
		{Type: TxnRenewLease, Session: 7},
		{Type: TxnRenewLease, Session: 8, LeaseTTL: 9000},
	}}},
	{"a deadlock's end carries its cause", Txn{Type: wire.OpDelete, Path: "/l/_c_b-lock-0000000002", Version: -1, Cause: CauseDeadlock}},
}

// A txn written before the lock history (14 fields, no cause) decodes with
// no cause.
func TestTxnWithoutCauseDecodes(t *testing.T) {
	want := Txn{Type: wire.OpDelete, Path: "/a", Version: -1}
	b := AppendTxn(nil, &want)
	if b[0] != 0x9f || b[len(b)-1] != 0x90 {
		t.Fatalf("encoding starts %#x and ends %#x: not a fixarray of 15 ending with an empty cause", b[0], b[len(b)-1])
	}
	old := append([]byte{0x9e}, b[1:len(b)-1]...)
	got, err := DecodeTxn(old)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestTxnCodec(t *testing.T) {
	for _, tc := range txnCodecCases {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendTxn(nil, &tc.txn)
			got, err := DecodeTxn(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.txn) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tc.txn)
			}
			for i := range b {
				if _, err := DecodeTxn(b[:i]); !errors.Is(err, ErrBadTxn) {
					t.Fatalf("truncated to %d bytes: err %v, want ErrBadTxn", i, err)
				}
			}
		})
	}
}

func TestDecodeTxnRefusesNestedMulti(t *testing.T) {
	inner := Txn{Type: wire.OpMulti, Ops: []Txn{{Type: wire.OpCheck, Path: "/a"}}}
	b := AppendTxn(nil, &Txn{Type: wire.OpMulti, Ops: []Txn{inner}})
	if _, err := DecodeTxn(b); !errors.Is(err, ErrBadTxn) {
		t.Fatalf("nested multi: err %v, want ErrBadTxn", err)
	}
}

func FuzzDecodeTxn(f *testing.F) {
	for _, tc := range txnCodecCases {
		f.Add(AppendTxn(nil, &tc.txn))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		txn, err := DecodeTxn(b)
		if err != nil {
			return
		}
		again, err := DecodeTxn(AppendTxn(nil, &txn))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(again, txn) {
			t.Fatalf("re-encode changed the txn:\n%+v\n%+v", again, txn)
		}
	})
}
