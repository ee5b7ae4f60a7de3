// Package msgp appends msgpack values to a byte slice, each in its
// smallest format: the bytes msgpack's Encoder (vmihailenco/msgpack)
// writes for the same value, which is what the decoders on the other side
// read. The hot paths encode by hand with it rather than through an
// Encoder, where a multi-byte value costs two interface calls: wire's
// integers (a reply with a Stat has over a dozen) and tree's snapshots
// (every field of every znode).
//
// It is internal, and a leaf, so that wire and tree can share it without
// tree depending on the protocol package for an encoding detail, and
// without it becoming part of wire's public API.
package msgp

import (
	"encoding/binary"
	"math"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// AppendArrayLen appends the header of an array of n values.
func AppendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, msgpcode.FixedArrayLow|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, msgpcode.Array16), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, msgpcode.Array32), uint32(n))
	}
}

// AppendUint appends v in the smallest unsigned format.
func AppendUint(b []byte, v uint64) []byte {
	switch {
	case v <= math.MaxInt8:
		return append(b, byte(v)) // positive fixint
	case v <= math.MaxUint8:
		return append(b, msgpcode.Uint8, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, msgpcode.Uint16), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, msgpcode.Uint32), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, msgpcode.Uint64), v)
	}
}

// AppendInt appends v in the smallest format: unsigned for v >= 0, as
// msgpack's EncodeInt does.
func AppendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return AppendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v)) // negative fixint
	case v >= math.MinInt8:
		return append(b, msgpcode.Int8, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, msgpcode.Int16), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, msgpcode.Int32), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, msgpcode.Int64), uint64(v))
	}
}

// AppendString appends s as a str.
func AppendString(b []byte, s string) []byte {
	return append(appendStrHeader(b, len(s)), s...)
}

// AppendStringBytes appends s as a str, as AppendString(b, string(s))
// would without the conversion.
func AppendStringBytes(b, s []byte) []byte {
	return append(appendStrHeader(b, len(s)), s...)
}

// AppendBytes appends v as a bin, or nil as msgpack's nil, as the
// Encoder's EncodeBytes does.
func AppendBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, msgpcode.Nil)
	}
	switch n := len(v); {
	case n <= math.MaxUint8:
		b = append(b, msgpcode.Bin8, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, msgpcode.Bin16), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, msgpcode.Bin32), uint32(n))
	}
	return append(b, v...)
}

// appendStrHeader appends the header of a str of n bytes.
func appendStrHeader(b []byte, n int) []byte {
	switch {
	case n < 32:
		return append(b, msgpcode.FixedStrLow|byte(n))
	case n <= math.MaxUint8:
		return append(b, msgpcode.Str8, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, msgpcode.Str16), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, msgpcode.Str32), uint32(n))
	}
}
