// Package zkwire is ZooKeeper's own client protocol, jute, as its client
// library and server write it: the 4-byte length framing, ConnectRequest and
// ConnectResponse (with the optional readOnly flag), RequestHeader and
// ReplyHeader, each op's request and response record, Stat, ACL, WatcherEvent,
// multi's MultiHeader sequence, SetWatches and SetWatches2, auth packets,
// sasl's tokens and whoAmI. The layouts are those of ZooKeeper's zookeeper.jute.
//
// It also holds every translation between ZooKeeper's protocol and Arbor's
// own (package wire), with no server behind it (translate.go): requests onto
// wire.Request (RequestToWire: the create modes, a create's required ACL,
// multi, multiRead, getEphemerals' prefix), the pipeline's wire.Reply back
// into ZooKeeper's shape (ReplyFromWire: create against create2, a failed
// multi's results, multiRead's results), error codes (CodeFromWire), ACLs,
// notifications and the handshake. The server (package server) decodes
// with this package, runs the request through the same pipeline as Arbor's
// own, and encodes the answer with AppendReply.
//
// Jute encodes, big-endian and without tags: int as 4 bytes, long as 8,
// boolean as 1 byte, buffer as an int length and the bytes (length -1 for
// null), ustring like a buffer holding UTF-8, vector as an int count and
// the elements (count -1 for null), and a record as its fields in order.
package zkwire
