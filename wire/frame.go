package wire

import (
	"encoding/binary"
	"fmt"
	"io"
)

// FrameHeaderSize is the length of the big-endian length prefix.
const FrameHeaderSize = 4

// FrameTooLargeError reports a frame whose declared length is over the
// reader's limit. It matches ErrFrameTooLarge under errors.Is.
type FrameTooLargeError struct {
	Size  int // the length the frame declared
	Limit int // the reader's limit
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("frame of %d bytes is over the %d-byte limit", e.Size, e.Limit)
}

// Is makes errors.Is(err, ErrFrameTooLarge) true.
func (e *FrameTooLargeError) Is(target error) bool { return target == ErrFrameTooLarge }

// ReadFrame reads one frame from r and returns its body. The body is read
// into buf when it fits (buf is grown otherwise), so the caller may reuse buf
// once it is done with the body. A declared length over limit is refused
// with a *FrameTooLargeError before anything is allocated for it.
func ReadFrame(r io.Reader, buf []byte, limit int) ([]byte, error) {
	var hdr [FrameHeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > limit {
		return nil, &FrameTooLargeError{Size: n, Limit: limit}
	}
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
