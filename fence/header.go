package fence

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A file of a Dir is a header followed by the data. The header, its
// integers big-endian:
//
//	magic     8 bytes  "ARBFENC1"
//	token     8 bytes  the token the file was written with
//	size      8 bytes  the length of the data
//	data sum  4 bytes  CRC-32C of the data
//	lock len  2 bytes
//	key len   2 bytes
//	lock      the lock's name
//	key       the object's key (empty in a lock's token record)
//	head sum  4 bytes  CRC-32C of the header before it
//
// The lock and key repeat the file's place, so a file moved by hand is
// noticed rather than taken for another object.
const magic = "ARBFENC1"

const (
	fixedHeader = len(magic) + 8 + 8 + 4 + 2 + 2
	maxHeader   = fixedHeader + 2*maxName + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is the decoded header of a file.
type header struct {
	lock    string
	key     string
	token   int64
	size    uint64
	dataSum uint32
}

// newHeader returns the header of a file holding data.
func newHeader(lock, key string, token int64, data []byte) header {
	return header{lock: lock, key: key, token: token, size: uint64(len(data)), dataSum: crc32.Checksum(data, castagnoli)}
}

// appendHeader appends h, encoded, to b. The names must be at most maxName
// bytes.
func appendHeader(b []byte, h header) []byte {
	start := len(b)
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint64(b, uint64(h.token))
	b = binary.BigEndian.AppendUint64(b, h.size)
	b = binary.BigEndian.AppendUint32(b, h.dataSum)
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.lock)))
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.key)))
	b = append(b, h.lock...)
	b = append(b, h.key...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// decodeHeader decodes the header at the start of b and returns it with
// its length. Any damage is an error matching ErrCorrupt.
func decodeHeader(b []byte) (header, int, error) {
	if len(b) < fixedHeader {
		return header{}, 0, fmt.Errorf("%w: a header of %d bytes is short", ErrCorrupt, len(b))
	}
	if string(b[:len(magic)]) != magic {
		return header{}, 0, fmt.Errorf("%w: no header (magic %q)", ErrCorrupt, b[:len(magic)])
	}
	p := b[len(magic):]
	h := header{
		token:   int64(binary.BigEndian.Uint64(p)),
		size:    binary.BigEndian.Uint64(p[8:]),
		dataSum: binary.BigEndian.Uint32(p[16:]),
	}
	lockLen := int(binary.BigEndian.Uint16(p[20:]))
	keyLen := int(binary.BigEndian.Uint16(p[22:]))
	n := fixedHeader + lockLen + keyLen + 4
	if len(b) < n {
		return header{}, 0, fmt.Errorf("%w: a header of %d bytes is short of %d", ErrCorrupt, len(b), n)
	}
	if got, want := crc32.Checksum(b[:n-4], castagnoli), binary.BigEndian.Uint32(b[n-4:]); got != want {
		return header{}, 0, fmt.Errorf("%w: header checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	if h.token < 0 {
		return header{}, 0, fmt.Errorf("%w: negative token %d", ErrCorrupt, h.token)
	}
	h.lock = string(b[fixedHeader : fixedHeader+lockLen])
	h.key = string(b[fixedHeader+lockLen : n-4])
	return h, n, nil
}
