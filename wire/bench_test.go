package wire_test

import (
	"bytes"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// The hot path: a client encodes a setData request and the server decodes
// it; the server encodes a getData reply and the client decodes it. The
// goal is at most 1 µs and 2 allocations for encode+decode of each, with
// the buffer and the decoded message reused as a connection would.

var benchSetData = wire.Request{Xid: 12345, Op: wire.OpSetData, Path: "/app/service/config",
	Data: bytes.Repeat([]byte{0x5a}, 256), Version: 41}

var benchGetDataReply = wire.Reply{Xid: 12345, Zxid: 0x1_0000_2000, Data: bytes.Repeat([]byte{0x5a}, 256),
	Stat: wire.Stat{Czxid: 0x1_0000_0001, Mzxid: 0x1_0000_2000, Pzxid: 0x1_0000_0001,
		Ctime: 1_700_000_000_000, Mtime: 1_700_000_123_456, Version: 41, Cversion: 3, Aversion: 0,
		EphemeralOwner: 0x0123_4567_89ab_cdef, DataLength: 256, NumChildren: 3}}

func BenchmarkSetDataRequest(b *testing.B) {
	b.ReportAllocs()
	var buf []byte
	var r wire.Request
	for b.Loop() {
		buf = wire.AppendRequest(buf[:0], &benchSetData)
		if err := wire.DecodeRequest(buf[wire.FrameHeaderSize:], &r); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkSetDataRequestEncode(b *testing.B) {
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = wire.AppendRequest(buf[:0], &benchSetData)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkSetDataRequestDecode(b *testing.B) {
	b.ReportAllocs()
	body := wire.AppendRequest(nil, &benchSetData)[wire.FrameHeaderSize:]
	var r wire.Request
	for b.Loop() {
		if err := wire.DecodeRequest(body, &r); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(body)))
}

func BenchmarkGetDataReply(b *testing.B) {
	b.ReportAllocs()
	var buf []byte
	var r wire.Reply
	for b.Loop() {
		buf = wire.AppendReply(buf[:0], wire.OpGetData, &benchGetDataReply)
		if err := wire.DecodeReply(buf[wire.FrameHeaderSize:], wire.OpGetData, &r); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkGetDataReplyEncode(b *testing.B) {
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = wire.AppendReply(buf[:0], wire.OpGetData, &benchGetDataReply)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkGetDataReplyDecode(b *testing.B) {
	b.ReportAllocs()
	body := wire.AppendReply(nil, wire.OpGetData, &benchGetDataReply)[wire.FrameHeaderSize:]
	var r wire.Reply
	for b.Loop() {
		if err := wire.DecodeReply(body, wire.OpGetData, &r); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(body)))
}
