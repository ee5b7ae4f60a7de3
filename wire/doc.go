// Package wire is Arbor's client protocol: the frame codec, the message
// layouts, op codes, error codes, create modes and event types.
//
// A frame is a 4-byte big-endian length followed by that many bytes of
// msgpack. Every frame after the handshake is one msgpack array: a request
// is [xid, op, fields...], a reply is [xid, zxid, err, fields...]. The fields
// depend on the op and are listed in docs/protocol.md, the spec this package
// implements. Decoders read the fields they know and skip extra trailing
// ones, so a field appended by a later protocol version does not break an
// older peer.
//
// Encoding never uses reflection: strings, arrays and booleans go through
// msgpack's low-level Encoder and Decoder calls, and integers, byte strings
// and skipped values are read and written on the byte slice directly (the
// same msgpack formats; integers are written by internal/msgp, which tree's
// snapshots share), so that every length from the input is checked
// against what is left before anything is allocated. The hot paths allocate
// only the strings and byte slices a decoded message owns.
package wire
