package zkwire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/arbor-coord/arbor/wire"
)

// Errors of the decoders. Compare with errors.Is.
var (
	// ErrMalformed reports bytes that do not hold the record they should:
	// too short, a negative length other than -1, a length past the end.
	ErrMalformed = errors.New("zkwire: malformed record")
	// ErrUnknownOp reports a request header whose op this package does not
	// know; DecodeRequest has set the request's Xid and Op.
	ErrUnknownOp = errors.New("zkwire: unknown op")
)

// appendInt appends a jute int.
func appendInt(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }

// appendLong appends a jute long.
func appendLong(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

// appendBool appends a jute boolean: one byte, 1 or 0.
func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendBuffer appends a jute buffer; nil is written as length -1, as the
// Java client writes a null buffer.
func appendBuffer(b []byte, v []byte) []byte {
	if v == nil {
		return appendInt(b, -1)
	}
	return append(appendInt(b, int32(len(v))), v...)
}

// appendString appends a jute ustring.
func appendString(b []byte, s string) []byte {
	return append(appendInt(b, int32(len(s))), s...)
}

// appendStrings appends a vector<ustring>; nil is written as an empty
// vector (ZooKeeper's server never sends a null vector).
func appendStrings(b []byte, v []string) []byte {
	b = appendInt(b, int32(len(v)))
	for _, s := range v {
		b = appendString(b, s)
	}
	return b
}

// appendStat appends a Stat in jute's field order, which is not wire's:
// pzxid comes last.
func appendStat(b []byte, s *wire.Stat) []byte {
	b = appendLong(b, s.Czxid)
	b = appendLong(b, s.Mzxid)
	b = appendLong(b, s.Ctime)
	b = appendLong(b, s.Mtime)
	b = appendInt(b, s.Version)
	b = appendInt(b, s.Cversion)
	b = appendInt(b, s.Aversion)
	b = appendLong(b, s.EphemeralOwner)
	b = appendInt(b, s.DataLength)
	b = appendInt(b, s.NumChildren)
	return appendLong(b, s.Pzxid)
}

// statSize is the length of an encoded Stat.
const statSize = 5*8 + 5*4 + 8

func appendACLs(b []byte, acl []ACL) []byte {
	b = appendInt(b, int32(len(acl)))
	for _, a := range acl {
		b = appendInt(b, a.Perms)
		b = appendString(b, a.ID.Scheme)
		b = appendString(b, a.ID.ID)
	}
	return b
}

// beginFrame appends room for a length prefix and returns where it starts.
func beginFrame(dst []byte) ([]byte, int) { return append(dst, 0, 0, 0, 0), len(dst) }

// endFrame fills in the length prefix reserved at start.
func endFrame(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// decoder reads jute values from a frame body. It keeps the first error;
// after one every read returns a zero value, so a record reads as a plain
// list of fields and is checked once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
}

// take returns the next n bytes, or nil after failing.
func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.fail("%s needs %d bytes, %d left", what, n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int32 {
	b := d.take(4, "int")
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (d *decoder) long() int64 {
	b := d.take(8, "long")
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// bool reads a jute boolean: any byte but 0 is true, as Java reads it.
func (d *decoder) bool() bool {
	b := d.take(1, "boolean")
	return b != nil && b[0] != 0
}

// length reads a buffer, string or vector length: -1 means null (reported
// as ok and null), any other negative value is malformed.
func (d *decoder) length(what string) (n int, null bool) {
	v := d.int()
	switch {
	case d.err != nil:
		return 0, true
	case v == -1:
		return 0, true
	case v < 0:
		d.fail("%s has length %d", what, v)
		return 0, true
	}
	return int(v), false
}

// buffer reads a jute buffer: nil for null. The bytes are copied, so they
// outlive the frame's buffer.
func (d *decoder) buffer() []byte {
	n, null := d.length("buffer")
	if null {
		return nil
	}
	b := d.take(n, "buffer")
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, n), b...)
}

// string reads a jute ustring; null reads as "".
func (d *decoder) string() string {
	n, null := d.length("string")
	if null {
		return ""
	}
	return string(d.take(n, "string"))
}

// count reads a vector's count; each element takes at least min bytes, so a
// count the rest of the frame cannot hold is malformed before anything is
// allocated for it.
func (d *decoder) count(min int) (int, bool) {
	n, null := d.length("vector")
	if null {
		return 0, true
	}
	if n > len(d.b)/min {
		d.fail("vector of %d elements in %d bytes", n, len(d.b))
		return 0, true
	}
	return n, false
}

// strings reads a vector<ustring>; null and empty read as nil.
func (d *decoder) strings() []string {
	n, null := d.count(4)
	if null || n == 0 {
		return nil
	}
	v := make([]string, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		v = append(v, d.string())
	}
	return v
}

func (d *decoder) stat(s *wire.Stat) {
	s.Czxid = d.long()
	s.Mzxid = d.long()
	s.Ctime = d.long()
	s.Mtime = d.long()
	s.Version = d.int()
	s.Cversion = d.int()
	s.Aversion = d.int()
	s.EphemeralOwner = d.long()
	s.DataLength = d.int()
	s.NumChildren = d.int()
	s.Pzxid = d.long()
}

func (d *decoder) acls() []ACL {
	n, null := d.count(12)
	if null || n == 0 {
		return nil
	}
	v := make([]ACL, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		v = append(v, ACL{Perms: d.int(), ID: ID{Scheme: d.string(), ID: d.string()}})
	}
	return v
}
