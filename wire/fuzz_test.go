package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// The fuzz targets are seeded from the round-trip tables in wire_test.go,
// as they are and with an extra trailing field. Each checks that a decoder
// never panics, that it fails only with a protocol error, and that whatever
// it accepts survives encode+decode unchanged, encodes to the same bytes
// again, and does not point into the input.

// maxSeed leaves out the table's one very large entry (70 KB of data): the
// fuzzer minimizes every new interesting input, and minimizing one that size
// takes most of a short run.
const maxSeed = 4 << 10

// knownOps are the ops DecodeRequest must not call unimplemented.
var knownOps = []wire.Op{wire.OpCreate, wire.OpDelete, wire.OpExists, wire.OpGetData, wire.OpSetData,
	wire.OpGetChildren, wire.OpSync, wire.OpPing, wire.OpCheck, wire.OpMulti, wire.OpSetWatches, wire.OpClose,
	wire.OpGetEphemerals, wire.OpGetAllChildrenNumber, wire.OpAddWatch, wire.OpRemoveWatches, wire.OpSetWatches2}

// reencode is the property shared by all the targets. decode fills a fresh
// value from a body and returns it; encode returns a value's body. The input
// is overwritten after the first decode, so a value that kept pointers into
// it shows up as a difference.
func reencode[T any](t *testing.T, input []byte, decode func([]byte) (T, error), encode func(T) []byte) {
	body := bytes.Clone(input)
	first, err := decode(body)
	if err != nil {
		if !errors.Is(err, wire.ErrMalformed) {
			t.Fatalf("decode failed with %v, want an error matching ErrMalformed", err)
		}
		return
	}
	enc := encode(first)
	for i := range body {
		body[i] = 0xc1 // never valid msgpack
	}
	if again := encode(first); !bytes.Equal(again, enc) {
		t.Fatalf("the decoded value changed when its input was overwritten:\n  before % x\n  after  % x", enc, again)
	}
	second, err := decode(enc)
	if err != nil {
		t.Fatalf("re-encoded %+v as % x, which does not decode: %v", first, enc, err)
	}
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("round trip changed the value:\n  first  %+v\n  second %+v", first, second)
	}
	if third := encode(second); !bytes.Equal(third, enc) {
		t.Fatalf("encoding is not stable:\n  % x\n  % x", enc, third)
	}
}

func FuzzDecodeConnectRequest(f *testing.F) {
	for _, tc := range connectRequests {
		body := frameBody(f, wire.AppendConnectRequest(nil, &tc.m))
		f.Add(body)
		f.Add(withExtraFields(f, body, futureField))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		reencode(t, body,
			func(b []byte) (m wire.ConnectRequest, err error) { return m, wire.DecodeConnectRequest(b, &m) },
			func(m wire.ConnectRequest) []byte { return frameBody(t, wire.AppendConnectRequest(nil, &m)) })
	})
}

func FuzzDecodeConnectResponse(f *testing.F) {
	for _, tc := range connectResponses {
		body := frameBody(f, wire.AppendConnectResponse(nil, &tc.m))
		f.Add(body)
		f.Add(withExtraFields(f, body, futureField))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		reencode(t, body,
			func(b []byte) (m wire.ConnectResponse, err error) { return m, wire.DecodeConnectResponse(b, &m) },
			func(m wire.ConnectResponse) []byte { return frameBody(t, wire.AppendConnectResponse(nil, &m)) })
	})
}

func FuzzDecodeRequest(f *testing.F) {
	for _, tc := range requests {
		body := frameBody(f, wire.AppendRequest(nil, &tc.r))
		if len(body) > maxSeed {
			continue
		}
		f.Add(body)
		f.Add(withExtraFields(f, body, futureField))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r wire.Request
		if err := wire.DecodeRequest(body, &r); errors.Is(err, wire.ErrUnimplemented) {
			for _, op := range knownOps {
				if r.Op == op {
					t.Fatalf("known op %s reported unimplemented", op)
				}
			}
			return
		}
		reencode(t, body,
			func(b []byte) (r wire.Request, err error) { return r, wire.DecodeRequest(b, &r) },
			func(r wire.Request) []byte { return frameBody(t, wire.AppendRequest(nil, &r)) })
	})
}

func FuzzDecodeReply(f *testing.F) {
	for _, tc := range replies {
		body := frameBody(f, wire.AppendReply(nil, tc.op, &tc.r))
		f.Add(body, int32(tc.op))
		f.Add(withExtraFields(f, body, futureField), int32(tc.op))
	}
	f.Fuzz(func(t *testing.T, body []byte, op int32) {
		reencode(t, body,
			func(b []byte) (r wire.Reply, err error) { return r, wire.DecodeReply(b, wire.Op(op), &r) },
			func(r wire.Reply) []byte { return frameBody(t, wire.AppendReply(nil, wire.Op(op), &r)) })
	})
}

func FuzzReadFrame(f *testing.F) {
	for _, tc := range requests {
		if frame := wire.AppendRequest(nil, &tc.r); len(frame) <= maxSeed {
			f.Add(frame, uint32(wire.DefaultMaxFrame))
		}
	}
	for _, tc := range replies {
		frame := wire.AppendReply(nil, tc.op, &tc.r)
		f.Add(frame, uint32(len(frame)-wire.FrameHeaderSize))   // exactly at the limit
		f.Add(frame, uint32(len(frame)-wire.FrameHeaderSize-1)) // one over
		f.Add(frame[:len(frame)-1], uint32(wire.DefaultMaxFrame))
	}
	f.Fuzz(func(t *testing.T, data []byte, limit32 uint32) {
		limit := int(limit32 % (4 << 20))
		for _, buf := range [][]byte{nil, make([]byte, 0, 64)} {
			r := &countingReader{r: bytes.NewReader(data)}
			body, err := wire.ReadFrame(r, buf, limit)
			if len(data) < wire.FrameHeaderSize {
				want := io.ErrUnexpectedEOF
				if len(data) == 0 {
					want = io.EOF // a clean end between frames
				}
				if err != want {
					t.Fatalf("%d-byte input: err = %v, want %v", len(data), err, want)
				}
				continue
			}
			size := int(binary.BigEndian.Uint32(data))
			var tooLarge *wire.FrameTooLargeError
			switch {
			case size > limit:
				if !errors.As(err, &tooLarge) || tooLarge.Size != size || tooLarge.Limit != limit {
					t.Fatalf("%d-byte frame over a %d limit: err = %v", size, limit, err)
				}
				if r.n != wire.FrameHeaderSize {
					t.Fatalf("read %d bytes of a refused frame", r.n)
				}
			case len(data)-wire.FrameHeaderSize < size:
				if err != io.ErrUnexpectedEOF {
					t.Fatalf("%d-byte frame with %d bytes of body: err = %v", size, len(data)-wire.FrameHeaderSize, err)
				}
			default:
				if err != nil || !bytes.Equal(body, data[wire.FrameHeaderSize:wire.FrameHeaderSize+size]) {
					t.Fatalf("ReadFrame = % x, %v; want % x", body, err, data[wire.FrameHeaderSize:wire.FrameHeaderSize+size])
				}
				if r.n != wire.FrameHeaderSize+size {
					t.Fatalf("read %d bytes for a %d-byte frame", r.n, size)
				}
			}
		}
	})
}

func FuzzPeekXid(f *testing.F) {
	for _, tc := range replies {
		body := frameBody(f, wire.AppendReply(nil, tc.op, &tc.r))
		f.Add(body)
		f.Add(withExtraFields(f, body, futureField))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		xid, peekErr := wire.PeekXid(body)
		if peekErr != nil && !errors.Is(peekErr, wire.ErrMalformed) {
			t.Fatalf("PeekXid failed with %v, want an error matching ErrMalformed", peekErr)
		}
		// Whatever DecodeReply accepts, PeekXid reads the same xid from.
		for _, op := range append(knownOps, 0) {
			var r wire.Reply
			if err := wire.DecodeReply(body, op, &r); err != nil {
				continue
			}
			if peekErr != nil || xid != r.Xid {
				t.Fatalf("DecodeReply(%s) read xid %d; PeekXid = %d, %v", op, r.Xid, xid, peekErr)
			}
		}
	})
}
