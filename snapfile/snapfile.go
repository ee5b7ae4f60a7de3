// Package snapfile reads and writes Arbor's backup files: one member's
// state (the tree with its sessions, leases and ACLs, and the lock
// history), as the member's raft snapshot holds it, behind a header that
// says what it is and where it came from, and followed by a checksum of the
// whole file.
//
// `arbor snapshot save` writes one; `arbord --restore` reads one into a new
// data directory. The package is pure encoding: it imports nothing of
// Arbor's, and checks only the file's frame (the state itself carries a
// digest of its own, which the restore checks).
//
// # Layout
//
// Integers are big-endian:
//
//	magic    8 bytes   "ARBORSNP"
//	version  4 bytes   1, or 2 for a sharded cluster's
//	hlen     4 bytes   the header's length, at most MaxHeader
//	header   hlen bytes, JSON: Header, exactly as json.Marshal writes it
//	data     Header.Size bytes: the state
//	sum      32 bytes  SHA-256 of everything before it
//
// The state of a sharded cluster's backup (version 2, Header.Shards) is
// the meta group's state, then each shard's in the header's order; a
// reader of version 1 refuses it rather than take the meta group's state
// for the whole. A file of a version this build does not read is refused
// with ErrVersion, before anything else of it is read; any other damage
// (a file cut short, bytes changed, a header that is not exactly the JSON
// this package writes) with ErrCorrupt.
package snapfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
)

// Magic starts every backup file.
const Magic = "ARBORSNP"

// Version is the newest layout this package writes and reads: 2, whose
// state may hold several shards' (it writes 1 for a state without).
const Version = 2

// MaxHeader bounds a header's length, so that a damaged length cannot
// make a reader allocate much.
const MaxHeader = 1 << 20

const (
	prefixLen = len(Magic) + 4 + 4
	sumLen    = sha256.Size
)

// Errors of Read, matched with errors.Is.
var (
	// ErrCorrupt is a file that is not a whole backup file: cut short,
	// changed since it was written, or not a backup file at all.
	ErrCorrupt = errors.New("snapfile: not a whole backup file")
	// ErrVersion is a backup file of a layout this build does not read.
	ErrVersion = errors.New("snapfile: unsupported backup file version")
)

// Header says what a backup file holds.
type Header struct {
	Member   uint64   `json:"member"`   // the member that took it
	Index    uint64   `json:"index"`    // the raft index (the zxid) the state is at
	Members  []Member `json:"members"`  // the cluster's membership then, as that member knew it
	Znodes   int64    `json:"znodes"`   // znodes in the tree, the root included
	Sessions int64    `json:"sessions"` // sessions and leases
	Size     int64    `json:"size"`     // bytes of state that follow the header
	Created  string   `json:"created"`  // when it was taken, RFC 3339, by the taker's clock
	// Shards are a sharded cluster's groups besides the meta group, whose
	// states follow the meta group's in the data, in this order. Index,
	// Znodes and Sessions above are then the meta group's.
	Shards []Shard `json:"shards,omitempty"`
}

// Shard is one shard's state in a backup of a sharded cluster.
type Shard struct {
	Group  uint64 `json:"group"`
	Index  uint64 `json:"index"`  // of its own log
	Znodes int64  `json:"znodes"` // in its tree, the root and the ways to its own included
	Size   int64  `json:"size"`   // bytes of its state
}

// MetaSize is the bytes of the meta group's state: the whole state, but
// for the shards'.
func (h *Header) MetaSize() int64 {
	size := h.Size
	for _, s := range h.Shards {
		size -= s.Size
	}
	return size
}

// version is the layout of a file with h.
func (h *Header) version() uint32 {
	if len(h.Shards) > 0 {
		return 2
	}
	return 1
}

// Member is a member of the cluster a backup was taken from.
type Member struct {
	ID      uint64 `json:"id"`
	Peer    string `json:"peer"`
	Learner bool   `json:"learner,omitempty"`
}

// check reports what makes h unfit for a file.
func (h *Header) check() error {
	switch {
	case h.Member == 0:
		return errors.New("no member id")
	case h.Index == 0:
		return errors.New("no index")
	case h.Size <= 0:
		return fmt.Errorf("a state of %d bytes", h.Size)
	}
	seen := map[uint64]bool{}
	for _, s := range h.Shards {
		switch {
		case s.Group == 0 || seen[s.Group]:
			return fmt.Errorf("shard %d listed as a group besides the meta group twice, or as group 0", s.Group)
		case s.Index == 0 || s.Size <= 0:
			return fmt.Errorf("shard %d at index %d, of %d bytes", s.Group, s.Index, s.Size)
		}
		seen[s.Group] = true
	}
	if h.MetaSize() <= 0 {
		return fmt.Errorf("the shards' states take %d bytes of the %d", h.Size-h.MetaSize(), h.Size)
	}
	return nil
}

// encodeHeader is h's JSON, the one form a file may hold.
func encodeHeader(h *Header) ([]byte, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxHeader {
		return nil, fmt.Errorf("a header of %d bytes (at most %d)", len(b), MaxHeader)
	}
	return b, nil
}

// Writer writes a backup file: NewWriter the magic, version and header,
// Write the state, Close the checksum.
type Writer struct {
	w    io.Writer
	sum  hash.Hash
	left int64 // bytes of state still to come
	err  error
}

// NewWriter writes the start of a backup file of h to w. The caller then
// writes exactly h.Size bytes of state and calls Close.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	if err := h.check(); err != nil {
		return nil, fmt.Errorf("snapfile: header: %w", err)
	}
	hb, err := encodeHeader(&h)
	if err != nil {
		return nil, fmt.Errorf("snapfile: header: %w", err)
	}
	sw := &Writer{w: w, sum: sha256.New(), left: h.Size}
	start := make([]byte, 0, prefixLen+len(hb))
	start = append(start, Magic...)
	start = binary.BigEndian.AppendUint32(start, h.version())
	start = binary.BigEndian.AppendUint32(start, uint32(len(hb)))
	start = append(start, hb...)
	if _, err := sw.write(start); err != nil {
		return nil, err
	}
	return sw, nil
}

func (w *Writer) write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.sum.Write(p)
	n, err := w.w.Write(p)
	w.err = err
	return n, err
}

// Write writes state; more than the header's Size in all is an error.
func (w *Writer) Write(p []byte) (int, error) {
	if int64(len(p)) > w.left {
		return 0, fmt.Errorf("snapfile: %d bytes of state past the %d the header announced", int64(len(p))-w.left, w.left)
	}
	n, err := w.write(p)
	w.left -= int64(n)
	return n, err
}

// Close writes the checksum. It fails if less state was written than the
// header announced. It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.left != 0 {
		return fmt.Errorf("snapfile: %d bytes of state missing", w.left)
	}
	_, err := w.w.Write(w.sum.Sum(nil))
	w.err = errors.New("snapfile: writer closed")
	return err
}

// Read checks the backup file r, of size bytes, and returns its header and
// a reader of its state. It reads the whole file once to check its
// checksum: a file it accepts was written whole by a Writer and not
// changed since.
func Read(r io.ReaderAt, size int64) (Header, *io.SectionReader, error) {
	var h Header
	if size < int64(prefixLen) {
		return h, nil, fmt.Errorf("%w: %d bytes, too short to be one", ErrCorrupt, size)
	}
	prefix := make([]byte, prefixLen)
	if _, err := r.ReadAt(prefix, 0); err != nil {
		return h, nil, fmt.Errorf("snapfile: read: %w", err)
	}
	if string(prefix[:len(Magic)]) != Magic {
		return h, nil, fmt.Errorf("%w: it starts with %q, not %q", ErrCorrupt, prefix[:len(Magic)], Magic)
	}
	v := binary.BigEndian.Uint32(prefix[len(Magic):])
	if v == 0 || v > Version {
		return h, nil, fmt.Errorf("%w: version %d (this build reads versions 1 to %d)", ErrVersion, v, Version)
	}
	hlen := int64(binary.BigEndian.Uint32(prefix[len(Magic)+4:]))
	if hlen == 0 || hlen > MaxHeader || int64(prefixLen)+hlen > size {
		return h, nil, fmt.Errorf("%w: a header of %d bytes in a file of %d", ErrCorrupt, hlen, size)
	}
	hb := make([]byte, hlen)
	if _, err := r.ReadAt(hb, int64(prefixLen)); err != nil {
		return h, nil, fmt.Errorf("snapfile: read: %w", err)
	}
	if err := decodeHeader(hb, &h); err != nil {
		return Header{}, nil, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	if h.version() != v {
		return Header{}, nil, fmt.Errorf("%w: a version %d file with a header of version %d", ErrCorrupt, v, h.version())
	}
	dataAt := int64(prefixLen) + hlen
	if h.Size > size {
		return Header{}, nil, fmt.Errorf("%w: cut short: the header announces %d bytes of state in a file of %d", ErrCorrupt, h.Size, size)
	}
	if want := dataAt + h.Size + sumLen; size != want {
		what := "cut short"
		if size > want {
			what = "longer than written"
		}
		return Header{}, nil, fmt.Errorf("%w: %s: %d bytes where the header makes %d", ErrCorrupt, what, size, want)
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, io.NewSectionReader(r, 0, size-sumLen)); err != nil {
		return Header{}, nil, fmt.Errorf("snapfile: read: %w", err)
	}
	stored := make([]byte, sumLen)
	if _, err := r.ReadAt(stored, size-sumLen); err != nil {
		return Header{}, nil, fmt.Errorf("snapfile: read: %w", err)
	}
	if !bytes.Equal(sum.Sum(nil), stored) {
		return Header{}, nil, fmt.Errorf("%w: its checksum does not match its contents", ErrCorrupt)
	}
	return h, io.NewSectionReader(r, dataAt, h.Size), nil
}

// decodeHeader decodes b into h: JSON with exactly Header's fields, in
// the form encodeHeader writes, describing a state.
func decodeHeader(b []byte, h *Header) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(h); err != nil {
		return err
	}
	if err := h.check(); err != nil {
		return err
	}
	again, err := encodeHeader(h)
	if err != nil {
		return err
	}
	if !bytes.Equal(again, b) {
		return errors.New("not in the form a writer writes")
	}
	return nil
}
