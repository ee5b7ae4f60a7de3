package tree

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/arbor-coord/arbor/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// A txn travels in the raft log as one msgpack array:
//
//	[type, time, session, path, data, version, mode, ttl, timeoutMs, password, ops,
//	 acl, identities, lease, cause]
//
// where ops is an array of txns of the same layout (empty outside a multi
// and a batch of renewals),
// acl an array of [perms, scheme, id], identities an array of [scheme, id]
// and lease [leaseTTL, leaseParent, leaseOwner, leaseVersion,
// leaseMaxHold], or an empty array when the txn has none of them, and
// cause [cause, reason], or an empty array for none. Decoders skip fields
// appended by a later version. acl and identities came with ACLs: a txn
// written before has neither, which decodes as the open ACL and no
// identities, as everything was open then; lease came with leases and
// cause with the lock history.

const (
	txnFields    = 15
	txnFieldsMin = 11 // before ACLs
)

// ErrBadTxn is returned by DecodeTxn for bytes that are not a txn.
var ErrBadTxn = errors.New("tree: malformed txn")

// AppendTxn appends the encoding of txn to dst.
func AppendTxn(dst []byte, txn *Txn) []byte {
	w := &appendBuffer{b: dst}
	enc := msgpack.NewEncoder(w)
	encodeTxn(enc, txn)
	return w.b
}

type appendBuffer struct{ b []byte }

func (w *appendBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *appendBuffer) WriteByte(c byte) error      { w.b = append(w.b, c); return nil }

// encodeTxn writes txn; the writer is an appendBuffer, which cannot fail.
func encodeTxn(enc *msgpack.Encoder, txn *Txn) {
	_ = enc.EncodeArrayLen(txnFields)
	_ = enc.EncodeInt(int64(txn.Type))
	_ = enc.EncodeInt(txn.Time)
	_ = enc.EncodeInt(txn.Session)
	_ = enc.EncodeString(txn.Path)
	_ = enc.EncodeBytes(txn.Data)
	_ = enc.EncodeInt(int64(txn.Version))
	_ = enc.EncodeInt(int64(txn.Mode))
	_ = enc.EncodeInt(txn.TTL)
	_ = enc.EncodeInt(int64(txn.TimeoutMs))
	_ = enc.EncodeBytes(txn.Password)
	_ = enc.EncodeArrayLen(len(txn.Ops))
	for i := range txn.Ops {
		encodeTxn(enc, &txn.Ops[i])
	}
	_ = enc.EncodeArrayLen(len(txn.ACL))
	for _, a := range txn.ACL {
		_ = enc.EncodeArrayLen(3)
		_ = enc.EncodeInt(int64(a.Perms))
		_ = enc.EncodeString(a.Scheme)
		_ = enc.EncodeString(a.ID)
	}
	_ = enc.EncodeArrayLen(len(txn.Identities))
	for _, id := range txn.Identities {
		_ = enc.EncodeArrayLen(2)
		_ = enc.EncodeString(id.Scheme)
		_ = enc.EncodeString(id.ID)
	}
	if txn.LeaseTTL == 0 && txn.LeaseParent == 0 && txn.LeaseOwner == "" && txn.LeaseVersion == 0 && txn.LeaseMaxHold == 0 {
		_ = enc.EncodeArrayLen(0)
	} else {
		_ = enc.EncodeArrayLen(5)
		_ = enc.EncodeInt(txn.LeaseTTL)
		_ = enc.EncodeInt(txn.LeaseParent)
		_ = enc.EncodeString(txn.LeaseOwner)
		_ = enc.EncodeInt(txn.LeaseVersion)
		_ = enc.EncodeInt(txn.LeaseMaxHold)
	}
	if txn.Cause == CauseNone && txn.Reason == "" {
		_ = enc.EncodeArrayLen(0)
		return
	}
	_ = enc.EncodeArrayLen(2)
	_ = enc.EncodeInt(int64(txn.Cause))
	_ = enc.EncodeString(txn.Reason)
}

// DecodeTxn decodes a txn encoded by AppendTxn. Only a multi, a batch of
// renewals and a stub have ops, and none of their ops has any, so nesting
// is at most one level deep.
func DecodeTxn(b []byte) (Txn, error) {
	r := bytes.NewReader(b)
	dec := msgpack.NewDecoder(r)
	var txn Txn
	if err := decodeTxn(dec, r, &txn, true); err != nil {
		return Txn{}, fmt.Errorf("%w: %w", ErrBadTxn, err)
	}
	if r.Len() != 0 {
		return Txn{}, fmt.Errorf("%w: %d trailing bytes", ErrBadTxn, r.Len())
	}
	return txn, nil
}

func decodeTxn(dec *msgpack.Decoder, r *bytes.Reader, txn *Txn, top bool) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < txnFieldsMin || n > r.Len() {
		return fmt.Errorf("txn of %d fields", n)
	}
	var f [7]int64
	if err := decodeInts(dec, f[:3]); err != nil {
		return err
	}
	txn.Type, txn.Time, txn.Session = wire.Op(f[0]), f[1], f[2]
	if txn.Path, err = dec.DecodeString(); err != nil {
		return err
	}
	if txn.Data, err = dec.DecodeBytes(); err != nil {
		return err
	}
	if err := decodeInts(dec, f[3:7]); err != nil {
		return err
	}
	txn.Version, txn.Mode, txn.TTL, txn.TimeoutMs = int32(f[3]), wire.CreateMode(f[4]), f[5], int32(f[6])
	if txn.Password, err = dec.DecodeBytes(); err != nil {
		return err
	}
	nops, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if nops > r.Len() || (nops > 0 && (!top || txn.Type != wire.OpMulti && txn.Type != TxnRenewLeases && txn.Type != TxnStub)) {
		return fmt.Errorf("%d sub-txns in a %s txn", nops, txn.Type)
	}
	if nops > 0 {
		txn.Ops = make([]Txn, nops)
		for i := range txn.Ops {
			if err := decodeTxn(dec, r, &txn.Ops[i], false); err != nil {
				return err
			}
		}
	}
	if n > txnFieldsMin {
		if txn.ACL, err = decodeACL(dec, r); err != nil {
			return err
		}
	}
	if n > txnFieldsMin+1 {
		if txn.Identities, err = decodeIdentities(dec, r); err != nil {
			return err
		}
	}
	if n > txnFieldsMin+2 {
		if err := decodeLease(dec, txn); err != nil {
			return err
		}
	}
	if n > txnFieldsMin+3 {
		if err := decodeCause(dec, txn); err != nil {
			return err
		}
	}
	for i := txnFields; i < n; i++ {
		if err := dec.Skip(); err != nil {
			return err
		}
	}
	return nil
}

func decodeCause(dec *msgpack.Decoder, txn *Txn) error {
	n, err := dec.DecodeArrayLen()
	if err != nil || n <= 0 {
		return err
	}
	if n < 2 {
		return fmt.Errorf("cause of %d fields", n)
	}
	c, err := dec.DecodeInt8()
	if err != nil {
		return err
	}
	txn.Cause = Cause(c)
	if txn.Reason, err = dec.DecodeString(); err != nil {
		return err
	}
	for range n - 2 { // fields a later version appended
		if err := dec.Skip(); err != nil {
			return err
		}
	}
	return nil
}

func decodeLease(dec *msgpack.Decoder, txn *Txn) error {
	n, err := dec.DecodeArrayLen()
	if err != nil || n <= 0 {
		return err
	}
	if n < 4 {
		return fmt.Errorf("lease of %d fields", n)
	}
	if txn.LeaseTTL, err = dec.DecodeInt64(); err != nil {
		return err
	}
	if txn.LeaseParent, err = dec.DecodeInt64(); err != nil {
		return err
	}
	if txn.LeaseOwner, err = dec.DecodeString(); err != nil {
		return err
	}
	if txn.LeaseVersion, err = dec.DecodeInt64(); err != nil || n == 4 {
		return err // four fields: written before maximum holds
	}
	if txn.LeaseMaxHold, err = dec.DecodeInt64(); err != nil {
		return err
	}
	for range n - 5 { // fields a later version appended
		if err := dec.Skip(); err != nil {
			return err
		}
	}
	return nil
}

func decodeACL(dec *msgpack.Decoder, r *bytes.Reader) ([]wire.ACL, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	if n > r.Len() {
		return nil, fmt.Errorf("ACL of %d entries", n)
	}
	acl := make([]wire.ACL, n)
	for i := range acl {
		if err := decodeFixedArray(dec, 3); err != nil {
			return nil, err
		}
		perms, err := dec.DecodeInt32()
		if err != nil {
			return nil, err
		}
		acl[i].Perms = wire.Perms(perms)
		if acl[i].Scheme, err = dec.DecodeString(); err != nil {
			return nil, err
		}
		if acl[i].ID, err = dec.DecodeString(); err != nil {
			return nil, err
		}
	}
	return acl, nil
}

func decodeIdentities(dec *msgpack.Decoder, r *bytes.Reader) ([]wire.Identity, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	if n > r.Len() {
		return nil, fmt.Errorf("%d identities", n)
	}
	ids := make([]wire.Identity, n)
	for i := range ids {
		if err := decodeFixedArray(dec, 2); err != nil {
			return nil, err
		}
		if ids[i].Scheme, err = dec.DecodeString(); err != nil {
			return nil, err
		}
		if ids[i].ID, err = dec.DecodeString(); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func decodeFixedArray(dec *msgpack.Decoder, want int) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("array of %d, want %d", n, want)
	}
	return nil
}

func decodeInts(dec *msgpack.Decoder, dst []int64) error {
	for i := range dst {
		v, err := dec.DecodeInt64()
		if err != nil {
			return err
		}
		dst[i] = v
	}
	return nil
}
