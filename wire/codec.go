package wire

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
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

func (enc *encoder) int(v int64) {
	if enc.err == nil {
		enc.err = enc.e.EncodeInt(v)
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

// decoder wraps a msgpack.Decoder over a byte slice and keeps the first
// error; after an error every read returns a zero value.
type decoder struct {
	d   *msgpack.Decoder
	r   bytes.Reader
	err error
}

var decoders = sync.Pool{New: func() any {
	dec := &decoder{}
	dec.d = msgpack.NewDecoder(nil)
	return dec
}}

func getDecoder(body []byte) *decoder {
	dec := decoders.Get().(*decoder)
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

// skip skips n values: the fields a later protocol version appended.
func (dec *decoder) skip(n int) {
	for ; n > 0 && dec.err == nil; n-- {
		dec.err = dec.d.Skip()
	}
}

func (dec *decoder) int64() int64 {
	if dec.err != nil {
		return 0
	}
	v, err := dec.d.DecodeInt64()
	dec.err = err
	return v
}

func (dec *decoder) int32() int32 {
	if dec.err != nil {
		return 0
	}
	v, err := dec.d.DecodeInt32()
	dec.err = err
	return v
}

func (dec *decoder) bool() bool {
	if dec.err != nil {
		return false
	}
	v, err := dec.d.DecodeBool()
	dec.err = err
	return v
}

func (dec *decoder) str() string {
	if dec.err != nil {
		return ""
	}
	v, err := dec.d.DecodeString()
	dec.err = err
	return v
}

func (dec *decoder) bytes() []byte {
	if dec.err != nil {
		return nil
	}
	v, err := dec.d.DecodeBytes()
	dec.err = err
	return v
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
