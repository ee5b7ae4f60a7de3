package wire

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// FrameHeaderSize is the length of the big-endian length prefix.
const FrameHeaderSize = 4

// FrameTooLargeError reports a frame whose declared length is over the
// reader's limit. It wraps ErrFrameTooLarge, so errors.Is matches it and
// CodeOf gives CodeFrameTooLarge.
type FrameTooLargeError struct {
	Size  int // the length the frame declared (math.MaxInt if that does not fit an int)
	Limit int // the reader's limit
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("frame of %d bytes is over the %d-byte limit", e.Size, e.Limit)
}

// Unwrap returns ErrFrameTooLarge.
func (e *FrameTooLargeError) Unwrap() error { return ErrFrameTooLarge }

// ReadFrame reads one frame from r and returns its body. The body is read
// into buf when it fits (buf is grown otherwise), so the caller may reuse buf
// once it is done with the body. A declared length over limit is refused
// with a *FrameTooLargeError before anything is allocated for it.
func ReadFrame(r io.Reader, buf []byte, limit int) ([]byte, error) {
	var hdr [FrameHeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	// Compared as uint64: on a 32-bit platform a length of 2^31 or more
	// would turn negative as an int and pass the check.
	size := uint64(binary.BigEndian.Uint32(hdr[:]))
	if limit < 0 || size > uint64(limit) {
		return nil, &FrameTooLargeError{Size: int(min(size, math.MaxInt)), Limit: limit}
	}
	n := int(size)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// beginFrame appends room for a length prefix and returns where it starts.
func beginFrame(dst []byte) ([]byte, int) {
	return append(dst, 0, 0, 0, 0), len(dst)
}

// endFrame fills in the length prefix reserved at start.
func endFrame(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-FrameHeaderSize))
	return dst
}
