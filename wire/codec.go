package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/arbor-coord/arbor/internal/msgp"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// appendWriter lets a msgpack.Encoder append to a byte slice. It never fails,
// so encoding into it cannot return an error.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *appendWriter) WriteByte(c byte) error      { w.b = append(w.b, c); return nil }

// encoder wraps a msgpack.Encoder and keeps the first error, so a message's
// layout reads as a plain list of fields.
type encoder struct {
	e   *msgpack.Encoder
	w   appendWriter
	err error
}

var encoders = sync.Pool{New: func() any {
	enc := &encoder{}
	enc.e = msgpack.NewEncoder(&enc.w)
	return enc
}}

// getEncoder returns a pooled encoder appending to dst.
func getEncoder(dst []byte) *encoder {
	enc := encoders.Get().(*encoder)
	enc.w.b = dst
	enc.err = nil
	return enc
}

// finish returns the appended bytes and puts enc back in the pool.
func (enc *encoder) finish() []byte {
	b := enc.w.b
	enc.w.b = nil
	encoders.Put(enc)
	return b
}

func (enc *encoder) array(n int) {
	if enc.err == nil {
		enc.err = enc.e.EncodeArrayLen(n)
	}
}

// int appends v in the smallest msgpack integer format, the bytes msgpack's
// EncodeInt writes, but straight into the buffer (internal/msgp): through
// the Encoder a multi-byte integer costs two interface calls, and a reply
// with a Stat has over a dozen integers.
func (enc *encoder) int(v int64) {
	if enc.err == nil {
		enc.w.b = msgp.AppendInt(enc.w.b, v)
	}
}

func (enc *encoder) bool(v bool) {
	if enc.err == nil {
		enc.err = enc.e.EncodeBool(v)
	}
}

func (enc *encoder) str(s string) {
	if enc.err == nil {
		enc.err = enc.e.EncodeString(s)
	}
}

func (enc *encoder) bytes(b []byte) {
	if enc.err == nil {
		enc.err = enc.e.EncodeBytes(b)
	}
}

func (enc *encoder) strs(ss []string) {
	enc.array(len(ss))
	for _, s := range ss {
		enc.str(s)
	}
}

func (enc *encoder) ints(vs []int64) {
	enc.array(len(vs))
	for _, v := range vs {
		enc.int(v)
	}
}

// decoder wraps a msgpack.Decoder over a byte slice and keeps the first
// error; after an error every read returns a zero value.
//
// Strings, byte slices and skipped values are cut straight from body rather
// than read through msgpack's Decoder: their length comes from the input, so
// it is checked against what is left before anything is allocated, and the
// Decoder's internal buffer (which lives on in the pool) never grows for them.
type decoder struct {
	d    *msgpack.Decoder
	r    bytes.Reader // reads body; the Decoder reads r directly, unbuffered
	body []byte
	err  error
}

var decoders = sync.Pool{New: func() any {
	dec := &decoder{}
	dec.d = msgpack.NewDecoder(nil)
	return dec
}}

func getDecoder(body []byte) *decoder {
	dec := decoders.Get().(*decoder)
	dec.body = body
	dec.r.Reset(body)
	dec.d.Reset(&dec.r)
	dec.err = nil
	return dec
}

// finish reports the first error, or an error if bytes are left over, and
// puts dec back in the pool.
func (dec *decoder) finish() error {
	err := dec.err
	if err == nil && dec.r.Len() > 0 {
		err = fmt.Errorf("%d trailing bytes", dec.r.Len())
	}
	dec.d.Reset(nil)
	dec.r.Reset(nil)
	dec.body = nil
	decoders.Put(dec)
	if err != nil {
		return &Error{Code: CodeMalformed, Msg: "malformed frame: " + err.Error()}
	}
	return nil
}

func (dec *decoder) fail(format string, args ...any) {
	if dec.err == nil {
		dec.err = fmt.Errorf(format, args...)
	}
}

// array reads an array header that must have at least min elements and
// returns how many it has. A length that could not fit in the remaining
// bytes is refused before anything is allocated for it.
func (dec *decoder) array(min int) int {
	if dec.err != nil {
		return 0
	}
	n, err := dec.d.DecodeArrayLen()
	switch {
	case err != nil:
		dec.err = err
	case n < min:
		dec.fail("array of %d elements, want at least %d", n, min)
	case n > dec.r.Len():
		dec.fail("array of %d elements in %d bytes", n, dec.r.Len())
	default:
		return n
	}
	return 0
}

// skip skips n values: the fields a later protocol version appended. It
// counts the elements of nested arrays and maps into n instead of recursing
// (msgpack's Skip recurses, so a 1 MiB frame of nested arrays would take
// over 100 MiB of stack), and checks every declared length against what is
// left.
func (dec *decoder) skip(n int) {
	for ; n > 0 && dec.err == nil; n-- {
		c, err := dec.d.PeekCode()
		if err != nil {
			dec.err = err
			return
		}
		switch {
		case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
			n += dec.array(0)
		case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
			m, err := dec.d.DecodeMapLen()
			if err == nil && (m < 0 || m > dec.r.Len()/2) {
				err = fmt.Errorf("map of %d entries in %d bytes", m, dec.r.Len())
			}
			if dec.err = err; err == nil {
				n += 2 * m
			}
		case msgpcode.IsString(c) || msgpcode.IsBin(c):
			m, err := dec.d.DecodeBytesLen()
			dec.err = err
			dec.take(m)
		case msgpcode.IsExt(c):
			_, m, err := dec.d.DecodeExtHeader()
			dec.err = err
			dec.take(m)
		default: // a scalar of at most 9 bytes
			dec.err = dec.d.Skip()
		}
		if dec.err == nil && n > dec.r.Len()+1 {
			dec.fail("%d values left to skip in %d bytes", n-1, dec.r.Len())
		}
	}
}

// take returns the next n bytes of the body, n being a length read from the
// input, and moves past them. The bytes belong to the body: copy them to keep
// them.
func (dec *decoder) take(n int) []byte {
	if dec.err != nil {
		return nil
	}
	if n < 0 || n > dec.r.Len() { // n < 0: a 32-bit length that overflowed int
		dec.fail("%d bytes declared, %d left", n, dec.r.Len())
		return nil
	}
	off := len(dec.body) - dec.r.Len()
	_, _ = dec.r.Seek(int64(n), io.SeekCurrent) // cannot fail: n is within the body
	return dec.body[off : off+n]
}

// int64 reads an integer in any msgpack integer format (nil reads as 0)
// straight from the body, for the same reason as encoder.int. A uint64
// above MaxInt64 is refused rather than wrapped to a negative number.
func (dec *decoder) int64() int64 {
	if dec.err != nil {
		return 0
	}
	b := dec.body[len(dec.body)-dec.r.Len():]
	if len(b) == 0 {
		dec.err = io.ErrUnexpectedEOF
		return 0
	}
	c := b[0]
	size := 1
	switch c {
	case msgpcode.Uint8, msgpcode.Int8:
		size = 2
	case msgpcode.Uint16, msgpcode.Int16:
		size = 3
	case msgpcode.Uint32, msgpcode.Int32:
		size = 5
	case msgpcode.Uint64, msgpcode.Int64:
		size = 9
	}
	if len(b) < size {
		dec.err = io.ErrUnexpectedEOF
		return 0
	}
	var v int64
	switch {
	case msgpcode.IsFixedNum(c):
		v = int64(int8(c))
	case c == msgpcode.Nil:
		v = 0
	case c == msgpcode.Uint8:
		v = int64(b[1])
	case c == msgpcode.Int8:
		v = int64(int8(b[1]))
	case c == msgpcode.Uint16:
		v = int64(binary.BigEndian.Uint16(b[1:]))
	case c == msgpcode.Int16:
		v = int64(int16(binary.BigEndian.Uint16(b[1:])))
	case c == msgpcode.Uint32:
		v = int64(binary.BigEndian.Uint32(b[1:]))
	case c == msgpcode.Int32:
		v = int64(int32(binary.BigEndian.Uint32(b[1:])))
	case c == msgpcode.Uint64:
		u := binary.BigEndian.Uint64(b[1:])
		if u > math.MaxInt64 {
			dec.fail("%d is out of the int64 range", u)
			return 0
		}
		v = int64(u)
	case c == msgpcode.Int64:
		v = int64(binary.BigEndian.Uint64(b[1:]))
	default:
		dec.fail("msgpack: invalid code=%x decoding int64", c)
		return 0
	}
	_, _ = dec.r.Seek(int64(size), io.SeekCurrent) // cannot fail: size bytes are there
	return v
}

// int32 refuses a value out of int32's range rather than truncating it: a
// version of 2^32-1 must not be read as -1 ("any version").
func (dec *decoder) int32() int32 {
	v := dec.int64()
	if dec.err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		dec.fail("%d is out of the int32 range", v)
		return 0
	}
	return int32(v)
}

func (dec *decoder) bool() bool {
	if dec.err != nil {
		return false
	}
	v, err := dec.d.DecodeBool()
	dec.err = err
	return v
}

// str reads a string (msgpack str or bin; nil reads as "").
func (dec *decoder) str() string {
	if dec.err != nil {
		return ""
	}
	n, err := dec.d.DecodeBytesLen()
	if dec.err = err; err != nil || n == -1 {
		return ""
	}
	return string(dec.take(n))
}

// bytes reads a byte slice (msgpack bin or str). Msgpack nil reads as nil and
// an empty bin as an empty, non-nil slice.
func (dec *decoder) bytes() []byte {
	if dec.err != nil {
		return nil
	}
	n, err := dec.d.DecodeBytesLen()
	if dec.err = err; err != nil || n == -1 {
		return nil
	}
	v := dec.take(n)
	if dec.err != nil {
		return nil
	}
	return append(make([]byte, 0, n), v...)
}

func (dec *decoder) ints() []int64 {
	n := dec.array(0)
	if n == 0 {
		return nil
	}
	vs := make([]int64, 0, n)
	for i := 0; i < n && dec.err == nil; i++ {
		vs = append(vs, dec.int64())
	}
	return vs
}

func (dec *decoder) strs() []string {
	n := dec.array(0)
	if n == 0 {
		return nil
	}
	ss := make([]string, 0, n)
	for i := 0; i < n && dec.err == nil; i++ {
		ss = append(ss, dec.str())
	}
	return ss
}
