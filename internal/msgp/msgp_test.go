package msgp

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// encoderBytes returns what msgpack's Encoder writes for encode.
func encoderBytes(t testing.TB, encode func(*msgpack.Encoder) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := encode(msgpack.NewEncoder(&buf)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var intBoundaries = []int64{0, 1, 127, 128, 255, 256, math.MaxUint16, math.MaxUint16 + 1, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
	-1, -32, -33, math.MinInt8, math.MinInt8 - 1, math.MinInt16, math.MinInt16 - 1, math.MinInt32, math.MinInt32 - 1, math.MinInt64}

// TestAppendWritesWhatMsgpacksEncoderWrites: every value is appended byte
// for byte as msgpack's own Encoder writes it, at every size boundary, and
// after what the slice already holds.
func TestAppendWritesWhatMsgpacksEncoderWrites(t *testing.T) {
	prefix := []byte("kept")
	check := func(what string, want []byte, got []byte) {
		t.Helper()
		if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Errorf("%s: appended % x, msgpack writes % x", what, got, want)
		}
	}
	app := func() []byte { return bytes.Clone(prefix) }
	for _, v := range intBoundaries {
		check("int", encoderBytes(t, func(e *msgpack.Encoder) error { return e.EncodeInt(v) }), AppendInt(app(), v))
	}
	for _, v := range []uint64{0, 127, 128, 255, 256, math.MaxUint16, math.MaxUint16 + 1, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64} {
		check("uint", encoderBytes(t, func(e *msgpack.Encoder) error { return e.EncodeUint(v) }), AppendUint(app(), v))
	}
	for _, n := range []int{0, 15, 16, math.MaxUint16, math.MaxUint16 + 1} {
		check("array", encoderBytes(t, func(e *msgpack.Encoder) error { return e.EncodeArrayLen(n) }), AppendArrayLen(app(), n))
	}
	for _, n := range []int{0, 31, 32, 255, 256, math.MaxUint16, math.MaxUint16 + 1} {
		s := strings.Repeat("a", n)
		str := encoderBytes(t, func(e *msgpack.Encoder) error { return e.EncodeString(s) })
		check("str", str, AppendString(app(), s))
		check("str of bytes", str, AppendStringBytes(app(), []byte(s)))
		b := []byte(s)
		check("bin", encoderBytes(t, func(e *msgpack.Encoder) error { return e.EncodeBytes(b) }), AppendBytes(app(), b))
	}
	check("nil bin", encoderBytes(t, func(e *msgpack.Encoder) error { return e.EncodeBytes(nil) }), AppendBytes(app(), nil))
}

// FuzzAppendInt: any integer is appended as the Encoder writes it and
// decodes back to itself.
func FuzzAppendInt(f *testing.F) {
	for _, v := range intBoundaries {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int64) {
		got := AppendInt(nil, v)
		if want := encoderBytes(t, func(e *msgpack.Encoder) error { return e.EncodeInt(v) }); !bytes.Equal(got, want) {
			t.Fatalf("%d: appended % x, msgpack writes % x", v, got, want)
		}
		back, err := msgpack.NewDecoder(bytes.NewReader(got)).DecodeInt64()
		if err != nil || back != v {
			t.Fatalf("%d: % x decodes to %d, %v", v, got, back, err)
		}
		if u := uint64(v); !bytes.Equal(AppendUint(nil, u), encoderBytes(t, func(e *msgpack.Encoder) error { return e.EncodeUint(u) })) {
			t.Fatalf("uint %d: appended % x", u, AppendUint(nil, u))
		}
	})
}
