package snapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

var headers = []Header{
	{Member: 1, Index: 42, Members: []Member{{ID: 1, Peer: "127.0.0.1:2381"}}, Znodes: 3, Sessions: 1, Size: 5, Created: "2025-01-02T03:04:05Z"},
	{Member: 3, Index: 1 << 40, Members: []Member{{ID: 1, Peer: "10.0.0.1:2381"}, {ID: 3, Peer: "10.0.0.3:2381"}, {ID: 4, Peer: "10.0.0.4:2381", Learner: true}},
		Znodes: 1_000_000, Sessions: 5000, Size: 1, Created: "2025-06-30T23:59:59.123456789Z"},
	{Member: 7, Index: 1, Size: 300},
	// A sharded cluster's: the meta group's state (100 bytes), then two
	// shards'; a file of version 2.
	{Member: 2, Index: 90, Znodes: 5, Size: 300, Created: "2026-11-29T08:00:00Z",
		Shards: []Shard{{Group: 1, Index: 70, Znodes: 9, Size: 150}, {Group: 3, Index: 12, Znodes: 6, Size: 50}}},
}

// file writes a backup file of h with a state of h.Size bytes.
func file(t testing.TB, h Header) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := NewWriter(&b, h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(state(h.Size)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func state(n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

func read(b []byte) (Header, []byte, error) {
	h, r, err := Read(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return h, nil, err
	}
	data, err := io.ReadAll(r)
	return h, data, err
}

func TestAFileReadsBackAsWritten(t *testing.T) {
	for _, h := range headers {
		got, data, err := read(file(t, h))
		if err != nil {
			t.Fatalf("Read of %+v: %v", h, err)
		}
		if !reflect.DeepEqual(got, h) || !bytes.Equal(data, state(h.Size)) {
			t.Fatalf("Read = %+v and %d bytes; want %+v and its %d bytes", got, len(data), h, h.Size)
		}
	}
}

func TestAStateWrittenInPiecesMakesTheSameFile(t *testing.T) {
	h := headers[2]
	var b bytes.Buffer
	w, err := NewWriter(&b, h)
	if err != nil {
		t.Fatal(err)
	}
	for p := state(h.Size); len(p) > 0; p = p[min(len(p), 7):] {
		if _, err := w.Write(p[:min(len(p), 7)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), file(t, h)) {
		t.Fatal("a state written 7 bytes at a time makes another file than one written whole")
	}
}

func TestAWriterHoldsTheStateToItsAnnouncedSize(t *testing.T) {
	h := headers[0]
	w, _ := NewWriter(io.Discard, h)
	if _, err := w.Write(state(h.Size + 1)); err == nil {
		t.Fatal("a write past the announced size succeeded")
	}
	w, _ = NewWriter(io.Discard, h)
	if _, err := w.Write(state(h.Size - 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close of a file one byte short succeeded")
	}
}

func TestAWriterRefusesAHeaderThatDescribesNoState(t *testing.T) {
	for name, h := range map[string]Header{
		"no member":                        {Index: 1, Size: 1},
		"no index":                         {Member: 1, Size: 1},
		"an empty state":                   {Member: 1, Index: 1},
		"a negative size":                  {Member: 1, Index: 1, Size: -1},
		"shards that take the whole state": {Member: 1, Index: 1, Size: 10, Shards: []Shard{{Group: 1, Index: 1, Size: 10}}},
		"a shard of group 0":               {Member: 1, Index: 1, Size: 10, Shards: []Shard{{Group: 0, Index: 1, Size: 1}}},
		"a shard twice":                    {Member: 1, Index: 1, Size: 10, Shards: []Shard{{Group: 1, Index: 1, Size: 1}, {Group: 1, Index: 2, Size: 1}}},
		"a shard at index 0":               {Member: 1, Index: 1, Size: 10, Shards: []Shard{{Group: 1, Size: 1}}},
	} {
		if _, err := NewWriter(io.Discard, h); err == nil {
			t.Errorf("NewWriter with %s succeeded", name)
		}
	}
}

// TestADamagedFileIsRefused changes a good file in the ways disks, copies
// and people do, and expects each refused with the right error.
func TestADamagedFileIsRefused(t *testing.T) {
	good := file(t, headers[0])
	hlen := int(binary.BigEndian.Uint32(good[12:]))
	dataAt := prefixLen + hlen
	withHeader := func(json string) []byte {
		b := append([]byte(Magic), 0, 0, 0, 1)
		b = binary.BigEndian.AppendUint32(b, uint32(len(json)))
		b = append(b, json...)
		b = append(b, state(5)...)
		return append(b, make([]byte, sumLen)...)
	}
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"an empty file", nil, ErrCorrupt},
		{"a file of the magic alone", []byte(Magic), ErrCorrupt},
		{"another kind of file", append([]byte("SQLite format 3\x00"), good[16:]...), ErrCorrupt},
		{"a file of a later version", setUint32(good, 8, Version+1), ErrVersion},
		{"a file of one shard that says version 2", setUint32(good, 8, 2), ErrCorrupt},
		{"a file of version 0", setUint32(good, 8, 0), ErrVersion},
		{"a header longer than the file", setUint32(good, 12, uint32(len(good))), ErrCorrupt},
		{"a header longer than any", setUint32(good, 12, MaxHeader+1), ErrCorrupt},
		{"an empty header", append([]byte(Magic), 0, 0, 0, 1, 0, 0, 0, 0), ErrCorrupt},
		{"a header cut in the middle", good[:prefixLen+hlen/2], ErrCorrupt},
		{"a file cut in its state", good[:dataAt+2], ErrCorrupt},
		{"a file without its checksum", good[:len(good)-sumLen], ErrCorrupt},
		{"a file cut by one byte", good[:len(good)-1], ErrCorrupt},
		{"a file with a byte more", append(bytes.Clone(good), 0), ErrCorrupt},
		{"a changed byte of state", flip(good, dataAt+1), ErrCorrupt},
		{"a changed byte of the checksum", flip(good, len(good)-1), ErrCorrupt},
		{"a changed byte of the header's JSON", flip(good, prefixLen+len(`{"member":`)), ErrCorrupt},
		{"a header that is not JSON", withHeader(`{"member":1,`), ErrCorrupt},
		{"a header with a field this build does not know", withHeader(`{"member":1,"index":1,"members":null,"znodes":0,"sessions":0,"size":5,"created":"","cluster":9}`), ErrCorrupt},
		{"a header in another form than written", withHeader(`{"member":1, "index":1,"members":null,"znodes":0,"sessions":0,"size":5,"created":""}`), ErrCorrupt},
		{"a header without a member", withHeader(`{"member":0,"index":1,"members":null,"znodes":0,"sessions":0,"size":5,"created":""}`), ErrCorrupt},
		{"a header announcing more state than any file holds", withHeader(`{"member":1,"index":1,"members":null,"znodes":0,"sessions":0,"size":9223372036854775807,"created":""}`), ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := read(tt.b)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Read = %v, want an error matching %v", err, tt.want)
			}
			if tt.want == ErrCorrupt && errors.Is(err, ErrVersion) || tt.want == ErrVersion && errors.Is(err, ErrCorrupt) {
				t.Fatalf("Read = %v, which matches both errors", err)
			}
		})
	}
}

func TestAFileWithAValidFrameButWrongChecksumNamesTheChecksum(t *testing.T) {
	good := file(t, headers[1])
	_, _, err := read(flip(good, len(good)-sumLen-1))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("Read = %v, want ErrCorrupt naming the checksum", err)
	}
}

func setUint32(b []byte, at int, v uint32) []byte {
	b = bytes.Clone(b)
	binary.BigEndian.PutUint32(b[at:], v)
	return b
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x20
	return b
}

// FuzzRead checks that Read never panics, fails only with its two errors,
// and accepts only what a Writer writes: a file it reads is, written again
// from what it read, the same bytes.
func FuzzRead(f *testing.F) {
	for _, h := range headers {
		b := file(f, h)
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(flip(b, len(b)-1))
		f.Add(setUint32(b, 8, 2))
	}
	f.Add([]byte{})
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, data, err := read(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("Read = %v, neither ErrCorrupt nor ErrVersion", err)
			}
			return
		}
		var again bytes.Buffer
		w, err := NewWriter(&again, h)
		if err != nil {
			t.Fatalf("Read accepted header %+v, which NewWriter refuses: %v", h, err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Bytes(), b) {
			t.Fatalf("Read accepted %q, which writes back as %q", b, again.Bytes())
		}
	})
}

// TestAShardedClustersFileIsOfVersion2: a reader of version 1 refuses it
// rather than take the meta group's state for the whole, and one that says
// version 1 with shards in its header is refused as damaged.
func TestAShardedClustersFileIsOfVersion2(t *testing.T) {
	plain, sharded := file(t, headers[0]), file(t, headers[3])
	if v := binary.BigEndian.Uint32(plain[8:]); v != 1 {
		t.Errorf("a one-group file is of version %d, want 1", v)
	}
	if v := binary.BigEndian.Uint32(sharded[8:]); v != 2 {
		t.Errorf("a sharded file is of version %d, want 2", v)
	}
	if h, _, err := read(sharded); err != nil || h.MetaSize() != 100 {
		t.Errorf("Read of the sharded file: meta group's state of %d bytes, %v; want 100", h.MetaSize(), err)
	}
	if _, _, err := read(setUint32(sharded, 8, 1)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a sharded file that says version 1: %v, want ErrCorrupt", err)
	}
}
