// Package zkwire is ZooKeeper's own client protocol, jute, as its client
// library and server write it: the 4-byte length framing, ConnectRequest and
// ConnectResponse (with the optional readOnly flag), RequestHeader and
// ReplyHeader, each op's request and response record, Stat, ACL, WatcherEvent,
// multi's MultiHeader sequence, SetWatches and SetWatches2, auth packets and
// whoAmI. The layouts are those of ZooKeeper's zookeeper.jute.
//
// It is a codec only: the server (package server) maps the decoded requests
// onto Arbor's own (package wire) and runs them through the same pipeline,
// and encodes the answers back with AppendReply.
//
// Jute encodes, big-endian and without tags: int as 4 bytes, long as 8,
// boolean as 1 byte, buffer as an int length and the bytes (length -1 for
// null), ustring like a buffer holding UTF-8, vector as an int count and
// the elements (count -1 for null), and a record as its fields in order.
package zkwire
