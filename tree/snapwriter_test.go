package tree

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestSnapWriterWritesWhatMsgpacksEncoderWrites: the snapshot's hand-made
// encoding is byte for byte msgpack's own, at every size boundary.
func TestSnapWriterWritesWhatMsgpacksEncoderWrites(t *testing.T) {
	var want bytes.Buffer
	enc := msgpack.NewEncoder(&want)
	var sw snapWriter
	check := func(what string, encode func() error, write func()) {
		t.Helper()
		want.Reset()
		sw.buf = sw.buf[:0]
		if err := encode(); err != nil {
			t.Fatal(err)
		}
		write()
		if !bytes.Equal(sw.buf, want.Bytes()) {
			t.Errorf("%s: wrote % x, msgpack writes % x", what, sw.buf, want.Bytes())
		}
	}
	ints := []int64{0, 1, 127, 128, 255, 256, math.MaxUint16, math.MaxUint16 + 1, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, math.MinInt8, math.MinInt8 - 1, math.MinInt16, math.MinInt16 - 1, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	for _, v := range ints {
		check("int", func() error { return enc.EncodeInt(v) }, func() { sw.int(v) })
	}
	for _, v := range []uint64{0, 127, 128, 255, 256, math.MaxUint16 + 1, math.MaxUint32 + 1, math.MaxUint64} {
		check("uint", func() error { return enc.EncodeUint(v) }, func() { sw.uint(v) })
	}
	for _, n := range []int{0, 15, 16, math.MaxUint16, math.MaxUint16 + 1} {
		check("array", func() error { return enc.EncodeArrayLen(n) }, func() { sw.array(n) })
	}
	for _, n := range []int{0, 31, 32, 255, 256, math.MaxUint16, math.MaxUint16 + 1} {
		s := strings.Repeat("a", n)
		check("str", func() error { return enc.EncodeString(s) }, func() { sw.str(s) })
		check("str of bytes", func() error { return enc.EncodeString(s) }, func() { sw.strBytes([]byte(s)) })
		b := []byte(s)
		check("bin", func() error { return enc.EncodeBytes(b) }, func() { sw.bytes(b) })
	}
	check("nil bin", func() error { return enc.EncodeBytes(nil) }, func() { sw.bytes(nil) })
}
