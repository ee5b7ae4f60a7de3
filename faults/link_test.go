package faults

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// linkMode is what a link does with the frames it carries.
type linkMode int

const (
	linkPass      linkMode = iota // forward every frame (subject to loss and delay)
	linkReset                     // close every connection, and each new one at once
	linkBlackhole                 // accept and read, forward nothing: the sender cannot tell
)

func (m linkMode) String() string {
	return [...]string{"pass", "reset", "blackhole"}[m]
}

// maxPeerFrame is arbord's bound on a peer frame (raftnode.maxPeerFrame).
const maxPeerFrame = 1 << 30

// delayQueue bounds the frames a delaying link holds; past it frames are
// dropped, as a full network queue would.
const delayQueue = 8192

// link is a loopback TCP proxy on one directed peer link, from member from
// to member to: from's --peers names the link's address for to. Peer
// connections carry frames one way (a 4-byte length, then a kind byte and
// the payload), so the link parses them and can lose or delay single
// messages, not just bytes.
type link struct {
	from, to uint64
	ln       net.Listener
	target   string // to's real peer address

	mu    sync.Mutex // guards the fields below
	mode  linkMode
	loss  float64       // probability of dropping a frame in linkPass
	delay time.Duration // added to every frame in linkPass
	conns map[net.Conn]struct{}
	done  bool

	frames, dropped int64 // counters, under mu
	wg              sync.WaitGroup
}

func newLink(from, to uint64, target string) (*link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &link{from: from, to: to, ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

func (l *link) addr() string { return l.ln.Addr().String() }

// set changes the link's behaviour; leaving pass closes the connections it
// carries when the new mode is reset.
func (l *link) set(mode linkMode, loss float64, delay time.Duration) {
	l.mu.Lock()
	l.mode, l.loss, l.delay = mode, loss, delay
	var drop []net.Conn
	if mode == linkReset {
		for c := range l.conns {
			drop = append(drop, c)
		}
	}
	l.mu.Unlock()
	for _, c := range drop {
		c.Close()
	}
}

func (l *link) heal() { l.set(linkPass, 0, 0) }

func (l *link) close() {
	l.mu.Lock()
	l.done = true
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.ln.Close()
	l.wg.Wait()
}

func (l *link) track(cs ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return false
	}
	for _, c := range cs {
		l.conns[c] = struct{}{}
	}
	return true
}

func (l *link) untrack(cs ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		delete(l.conns, c)
		c.Close()
	}
}

func (l *link) accept() {
	defer l.wg.Done()
	for {
		in, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		reset := l.mode == linkReset
		l.mu.Unlock()
		if reset {
			in.Close()
			continue
		}
		out, err := net.DialTimeout("tcp", l.target, time.Second)
		if err != nil {
			in.Close() // the member is down: the sender redials later
			continue
		}
		if !l.track(in, out) {
			in.Close()
			out.Close()
			return
		}
		l.wg.Add(2)
		go func() {
			defer l.wg.Done()
			l.forward(in, out)
			l.untrack(in, out)
		}()
		go func() {
			// Nothing flows back on a peer connection; copy anyway, so
			// that a close on the receiver's side reaches the sender.
			defer l.wg.Done()
			_, _ = io.Copy(in, out)
			l.untrack(in, out)
		}()
	}
}

// timedFrame is a frame and when it may be written.
type timedFrame struct {
	b   []byte
	due time.Time
}

// forward copies frames from in to out as the link's mode says, keeping
// their order; delayed frames wait in a bounded queue.
func (l *link) forward(in, out net.Conn) {
	q := make(chan timedFrame, delayQueue)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for f := range q {
			if d := time.Until(f.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := out.Write(f.b); err != nil {
				in.Close()
				for range q {
				}
				return
			}
		}
	}()
	defer func() {
		close(q)
		<-writerDone
	}()
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(in, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n < 1 || n > maxPeerFrame {
			return
		}
		b := make([]byte, 4+n)
		copy(b, hdr[:])
		if _, err := io.ReadFull(in, b[4:]); err != nil {
			return
		}
		l.mu.Lock()
		mode, loss, delay := l.mode, l.loss, l.delay
		l.frames++
		drop := mode != linkPass || (loss > 0 && rand.Float64() < loss)
		if drop {
			l.dropped++
		}
		l.mu.Unlock()
		if mode == linkReset {
			return
		}
		if drop {
			continue
		}
		select {
		case q <- timedFrame{b: b, due: time.Now().Add(delay)}:
		default:
			l.mu.Lock()
			l.dropped++
			l.mu.Unlock()
		}
	}
}

// counts returns the frames the link saw and how many it dropped.
func (l *link) counts() (frames, dropped int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.frames, l.dropped
}

// linkProbe sends numbered peer frames through a link to a listener.
type linkProbe struct {
	t    *testing.T
	l    *link
	recv chan uint32
	nc   net.Conn
}

func newLinkProbe(t *testing.T) *linkProbe {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &linkProbe{t: t, recv: make(chan uint32, 1024)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var b [9]byte // length 5: a kind byte and a 4-byte number
				for {
					if _, err := io.ReadFull(c, b[:]); err != nil {
						return
					}
					p.recv <- binary.BigEndian.Uint32(b[5:])
				}
			}()
		}
	}()
	if p.l, err = newLink(1, 2, ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.l.close)
	p.dial()
	return p
}

func (p *linkProbe) dial() {
	p.t.Helper()
	nc, err := net.Dial("tcp", p.l.addr())
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { nc.Close() })
	p.nc = nc
}

func (p *linkProbe) send(n uint32) error {
	var b [9]byte
	binary.BigEndian.PutUint32(b[:], 5)
	b[4] = 1
	binary.BigEndian.PutUint32(b[5:], n)
	_, err := p.nc.Write(b[:])
	return err
}

// got returns the numbers received within d, or as soon as want came.
func (p *linkProbe) got(want int, d time.Duration) []uint32 {
	var out []uint32
	timeout := time.After(d)
	for len(out) < want {
		select {
		case n := <-p.recv:
			out = append(out, n)
		case <-timeout:
			return out
		}
	}
	return out
}

func TestALinkPassesLosesDelaysAndCuts(t *testing.T) {
	p := newLinkProbe(t)
	for i := range uint32(100) {
		p.send(i)
	}
	if got := p.got(100, time.Second); len(got) != 100 || got[99] != 99 {
		t.Fatalf("passing: got %d frames, want all 100 in order", len(got))
	}

	p.l.set(linkPass, 0.5, 0)
	for i := range uint32(400) {
		p.send(i)
	}
	if got := len(p.got(400, 300*time.Millisecond)); got < 100 || got > 300 {
		t.Fatalf("losing half: %d of 400 frames arrived", got)
	}

	p.l.set(linkPass, 0, 150*time.Millisecond)
	start := time.Now()
	p.send(1)
	if got := p.got(1, 50*time.Millisecond); len(got) != 0 {
		t.Fatal("a delayed frame arrived at once")
	}
	if got := p.got(1, time.Second); len(got) != 1 || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("delayed: got %v after %v", got, time.Since(start))
	}

	p.l.set(linkBlackhole, 0, 0)
	for i := range uint32(10) {
		if err := p.send(i); err != nil {
			t.Fatalf("a blackhole refused a write: %v", err)
		}
	}
	if got := p.got(1, 200*time.Millisecond); len(got) != 0 {
		t.Fatalf("a blackhole let %d frames through", len(got))
	}

	p.l.set(linkReset, 0, 0)
	_ = p.nc.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := p.nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("a reset link kept the connection open")
	}
	p.l.heal()
	p.dial()
	p.send(7)
	if got := p.got(1, time.Second); len(got) != 1 || got[0] != 7 {
		t.Fatalf("after healing: got %v", got)
	}
	if frames, dropped := p.l.counts(); frames < 500 || dropped < 100 {
		t.Fatalf("counted %d frames, %d dropped", frames, dropped)
	}
}
