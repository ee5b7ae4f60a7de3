package fence

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var headerTests = []header{
	newHeader("invoices", "march", 7, []byte("final by B")),
	newHeader("invoices", "", 4294967331, nil),
	newHeader("a", "b", 0, []byte{}),
	newHeader(strings.Repeat("l", maxName), strings.Repeat("k", maxName), 1<<62, []byte("x")),
}

func TestAHeaderReadsBackAsWritten(t *testing.T) {
	for _, h := range headerTests {
		b := appendHeader([]byte("prefix"), h)[len("prefix"):]
		got, n, err := decodeHeader(append(b, "data"...))
		if err != nil || got != h || n != len(b) {
			t.Errorf("decodeHeader(appendHeader(%+v)) = %+v, %d, %v; want it back, %d", h, got, n, err, len(b))
		}
	}
}

func TestADamagedHeaderIsCorrupt(t *testing.T) {
	good := appendHeader(nil, headerTests[0])
	tests := []struct {
		name string
		b    []byte
	}{
		{"an empty file", nil},
		{"a header cut short", good[:len(good)-1]},
		{"a fixed part cut short", good[:fixedHeader-1]},
		{"another magic", append([]byte("ARBFENC2"), good[len(magic):]...)},
		{"a flipped token bit", flip(good, len(magic)+7)},
		{"a flipped name bit", flip(good, fixedHeader+1)},
		{"a flipped checksum bit", flip(good, len(good)-1)},
		{"a name longer than the file", flip(good, fixedHeader-3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := decodeHeader(tt.b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeHeader = %v, want ErrCorrupt", err)
			}
		})
	}
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x40
	return b
}

// FuzzDecodeHeader checks that a decoded header is exactly the bytes it
// was decoded from, encoded again, and that nothing panics.
func FuzzDecodeHeader(f *testing.F) {
	for _, h := range headerTests {
		b := appendHeader(nil, h)
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(flip(b, len(magic)))
	}
	f.Add([]byte{})
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := decodeHeader(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeHeader(%q) = %v, not ErrCorrupt", b, err)
			}
			return
		}
		if h.token < 0 || n > len(b) {
			t.Fatalf("decodeHeader(%q) = %+v, %d", b, h, n)
		}
		if again := appendHeader(nil, h); !bytes.Equal(again, b[:n]) {
			t.Fatalf("decodeHeader(%q) = %+v, which encodes as %q", b[:n], h, again)
		}
	})
}
