// Package integration holds the end-to-end tests: real servers on loopback
// ports (in-process, or arbord processes for the crash tests) driven by the
// real client; the ZooKeeper port is driven by go-zookeeper, raw jute
// frames and, when installed, ZooKeeper's zkCli.sh (zk_test.go). It has no
// code of its own besides test helpers.
package integration
