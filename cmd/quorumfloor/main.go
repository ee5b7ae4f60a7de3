// Command quorumfloor measures the least a durable write to a 3-member
// quorum can cost on this machine, with none of Arbor's code in the way:
// a client sends a record to a leader; the leader sends it to two
// followers, then writes it to its own log and fdatasyncs it; each
// follower writes, fdatasyncs and acknowledges; the leader answers the
// client once it and one follower hold the record durably. Every member is
// a process of its own, with its log in a file written with zeros ahead of
// time (as raftnode's pebble logs are), on loopback TCP.
//
//	quorumfloor -dir /var/tmp/floor -n 5000
//
// The p50 it prints is the floor under `arbor bench set --conns 1
// --workers 1` against a leader whose members keep their data in the same
// file system (docs/performance.md).
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

const logSize = 64 << 20 // preallocated per member; writes wrap around it

func main() {
	dir := flag.String("dir", os.TempDir(), "directory for the members' logs (the file system under test)")
	n := flag.Int("n", 5000, "writes to measure (at most 60 s of them)")
	size := flag.Int("size", 400, "bytes per record (about a 256-byte setData's raft entry)")
	role := flag.String("role", "", "internal: run as a member (leader or follower)")
	flag.Parse()
	var err error
	switch *role {
	case "":
		err = measure(*dir, *n, *size)
	case "follower":
		err = serveFollower(*dir, *size, os.Stdout)
	case "leader":
		err = serveLeader(*dir, *size, flag.Args(), os.Stdout)
	default:
		err = fmt.Errorf("unknown role %q", *role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quorumfloor:", err)
		os.Exit(1)
	}
}

// measure starts two followers and a leader as processes, runs the client
// and prints the latencies.
func measure(dir string, n, size int) error {
	if n < 1 || size < 8 {
		return fmt.Errorf("-n must be at least 1 and -size at least 8")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	}()
	start := func(args ...string) (string, error) {
		sub, err := os.MkdirTemp(dir, "member")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(sub) // the open log stays readable and writable
		cmd := exec.Command(self, append([]string{"-role", args[0], "-dir", sub, "-size", fmt.Sprint(size)}, args[1:]...)...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return "", err
		}
		if err := cmd.Start(); err != nil {
			return "", err
		}
		procs = append(procs, cmd)
		addr, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("%s did not start: %w", args[0], err)
		}
		return addr[:len(addr)-1], nil
	}
	f1, err := start("follower")
	if err != nil {
		return err
	}
	f2, err := start("follower")
	if err != nil {
		return err
	}
	leader, err := start("leader", f1, f2)
	if err != nil {
		return err
	}
	ds, err := writes(leader, n, size, time.Now().Add(60*time.Second))
	if err != nil {
		return err
	}
	slices.Sort(ds)
	q := func(p float64) float64 { return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000 }
	fmt.Printf("quorum write (%d in %s): p50 %.3f, p90 %.3f, p99 %.3f, min %.3f ms\n",
		len(ds), dir, q(0.5), q(0.9), q(0.99), q(0))
	return nil
}

// writes sends n records to the leader one at a time, until deadline, and
// returns how long each took to be answered.
func writes(addr string, n, size int, deadline time.Time) ([]time.Duration, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rec := make([]byte, size)
	var ds []time.Duration
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		t := time.Now()
		if _, err := c.Write(rec); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(c, rec[:8]); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t))
	}
	return ds, nil
}

// memberLog is a member's log: a file of zeros, overwritten in turn and
// fdatasynced after each record.
type memberLog struct {
	f   *os.File
	off int64
}

func openLog(dir string) (*memberLog, error) {
	f, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteAt(make([]byte, logSize), 0); err != nil {
		return nil, err
	}
	return &memberLog{f: f}, f.Sync()
}

func (l *memberLog) append(rec []byte) error {
	if l.off+int64(len(rec)) > logSize {
		l.off = 0
	}
	if _, err := l.f.WriteAt(rec, l.off); err != nil {
		return err
	}
	l.off += int64(len(rec))
	return syscall.Fdatasync(int(l.f.Fd()))
}

// member opens a member's log in dir, listens on loopback, tells the
// parent its address and takes the one connection it serves.
func member(dir string, out io.Writer) (*memberLog, net.Conn, error) {
	log, err := openLog(dir)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	if _, err := fmt.Fprintln(out, ln.Addr()); err != nil {
		return nil, nil, err
	}
	c, err := ln.Accept()
	return log, c, err
}

// serveFollower makes each record it receives durable, then acknowledges
// it with its first 8 bytes, the record's number.
func serveFollower(dir string, size int, out io.Writer) error {
	log, c, err := member(dir, out)
	if err != nil {
		return err
	}
	rec := make([]byte, size)
	for {
		if _, err := io.ReadFull(c, rec); err != nil {
			return nil // the leader is gone
		}
		if err := log.append(rec); err != nil {
			return err
		}
		if _, err := c.Write(rec[:8]); err != nil {
			return nil
		}
	}
}

// serveLeader sends each record from its client to the followers before it
// writes its own copy, as a raft leader does, and answers once its own
// copy and one follower's are durable.
func serveLeader(dir string, size int, followers []string, out io.Writer) error {
	acks := make(chan uint64, 2*len(followers)) // the numbers of the records acknowledged
	var peers []net.Conn
	for _, addr := range followers {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		peers = append(peers, c)
		go func() {
			b := make([]byte, 8)
			for {
				if _, err := io.ReadFull(c, b); err != nil {
					return
				}
				acks <- binary.BigEndian.Uint64(b)
			}
		}()
	}
	log, c, err := member(dir, out)
	if err != nil {
		return err
	}
	rec := make([]byte, size)
	for seq := uint64(1); ; seq++ {
		if _, err := io.ReadFull(c, rec); err != nil {
			return nil // the client is done
		}
		binary.BigEndian.PutUint64(rec, seq)
		for _, p := range peers {
			if _, err := p.Write(rec); err != nil {
				return err
			}
		}
		if err := log.append(rec); err != nil {
			return err
		}
		for <-acks != seq { // a slower follower's of an earlier record
		}
		if _, err := c.Write(rec[:8]); err != nil {
			return nil
		}
	}
}
