package server

import (
	"testing"

	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
	"go.uber.org/zap"
)

// BenchmarkCodec decodes a request and encodes its reply in each protocol,
// as a connection's reader and responder do: the codec's share of a
// request's cost, the rest of the pipeline being the same for both.
func BenchmarkCodec(b *testing.B) {
	value := make([]byte, 256)
	stat := wire.Stat{Czxid: 1, Mzxid: 9, Ctime: 1, Mtime: 2, Version: 3, DataLength: 256, Pzxid: 1}
	path := "/bench/set-0000000001/k0000042"
	for _, tc := range []struct {
		name  string
		codec func(*conn) codec
		frame []byte // with its length prefix
		reply wire.Reply
	}{
		{"arbor/getData", newArborCodec,
			wire.AppendRequest(nil, &wire.Request{Xid: 7, Op: wire.OpGetData, Path: path}),
			wire.Reply{Xid: 7, Zxid: 9, Data: value, Stat: stat}},
		{"zk/getData", newZKCodec,
			zkwire.AppendRequest(nil, &zkwire.Request{Xid: 7, Op: zkwire.OpGetData, Path: path}),
			wire.Reply{Xid: 7, Zxid: 9, Data: value, Stat: stat}},
		{"arbor/setData", newArborCodec,
			wire.AppendRequest(nil, &wire.Request{Xid: 7, Op: wire.OpSetData, Path: path, Data: value, Version: -1}),
			wire.Reply{Xid: 7, Zxid: 9, Stat: stat}},
		{"zk/setData", newZKCodec,
			zkwire.AppendRequest(nil, &zkwire.Request{Xid: 7, Op: zkwire.OpSetData, Path: path, Data: value, Version: -1}),
			wire.Reply{Xid: 7, Zxid: 9, Stat: stat}},
		{"arbor/create", newArborCodec,
			wire.AppendRequest(nil, &wire.Request{Xid: 7, Op: wire.OpCreate, Path: path + "/n-", Data: value,
				ACL: []wire.ACL{{Perms: wire.PermAll, Scheme: "world", ID: "anyone"}}, Mode: wire.ModePersistentSequential}),
			wire.Reply{Xid: 7, Zxid: 9, Path: path + "/n-0000000001"}},
		{"zk/create", newZKCodec,
			zkwire.AppendRequest(nil, &zkwire.Request{Xid: 7, Op: zkwire.OpCreate, Path: path + "/n-", Data: value,
				ACL: zkwire.OpenACL, Flags: int32(wire.ModePersistentSequential)}),
			wire.Reply{Xid: 7, Zxid: 9, Path: path + "/n-0000000001"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := &conn{srv: &Server{cfg: Config{MaxPath: 4096, MaxName: 1024}}, log: zap.NewNop()}
			cd := tc.codec(c)
			body := tc.frame[4:]
			var out []byte
			b.ReportAllocs()
			for b.Loop() {
				r := &request{}
				if err := cd.decode(body, r); err != nil || r.err != nil {
					b.Fatal(err, r.err)
				}
				out = cd.appendReply(out[:0], r, tc.reply)
			}
		})
	}
}
