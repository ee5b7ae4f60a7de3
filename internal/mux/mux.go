// Package mux carries many client connections, each with its own session,
// over one TCP (or TLS) connection: a client that keeps thousands of
// sessions to a member needs a few sockets, not thousands. Each carried
// connection is a Channel, a net.Conn whose bytes are exactly what a
// connection of its own would carry, handshake first; so the server serves a
// channel as it serves a socket, and a client dials one in place of a socket.
//
// The format (docs/protocol.md §11): the client opens
// the connection with Preface, the server answers with the same bytes, and
// from then on both directions carry frames
//
//	length uint32 | channel uint32 | payload
//
// (big-endian; length counts the channel id and the payload). A payload is a
// piece of the channel's byte stream, at most MaxPayload bytes. The client
// opens a channel with an empty frame on a number past the last one it
// opened (it numbers them from 1 upwards and never reuses a number on a
// connection); after that, an empty frame from either side closes the
// channel. So a frame for a number not past the last one opened, and no
// longer open, is for a channel that has closed, and is dropped. The
// client closes the connection when its last channel closes.
//
// Channel 0 carries the connection's own frames: grants, pairs of a
// channel id and a number of bytes (uint32 each), the bytes of that
// channel the sender has read since its last grant; and a one-byte ping
// (1), which the server answers with a pong (2), sent by a client that has
// heard nothing for a while (see keepalive).
//
// Each channel has its own flow control, as HTTP/2's streams do: a side
// sends at most Window bytes on a channel that the other side has not
// yet granted back, and grants them back as its reader reads them. So the reader of a connection never waits for a
// channel: a session that stops reading holds up only itself, and a
// channel never holds more than Window bytes of input.
package mux

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Preface is what a client sends first on a connection it multiplexes, and
// what the server answers when it agrees: an Arbor frame whose body is the
// MessagePack array ["arbor-mux", 1]. A server that does not multiplex
// reads it as a malformed handshake and closes the connection.
var Preface = []byte{0, 0, 0, 12, 0x92, 0xa9, 'a', 'r', 'b', 'o', 'r', '-', 'm', 'u', 'x', 1}

// MaxPayload is the largest payload of a frame.
const MaxPayload = 64 << 10

// headerSize is the length and the channel id.
const headerSize = 8

// maxBuffered is how many bytes of output a connection holds before a
// channel's Write waits for the socket to take them.
const maxBuffered = 1 << 20

// Window is how many bytes a side may send on a channel that the other
// has not granted back: the most input a channel holds for its reader.
// keptInput is the largest input buffer a channel keeps once its reader
// has read it all.
const (
	Window    = 32 << 10
	keptInput = 4 << 10
)

// keepalive is how a client watches its connection: it pings once it has
// heard nothing for every, so that a live server's pong keeps Silent below
// it; a connection Silent for longer is one whose server may be gone (cut
// off, not closed), and client.Mux hands new sessions a new connection
// instead. The connection itself is not ended for its silence: on a
// machine past its CPU a client may not read for seconds, and its
// sessions, which watch their server with their own pings, decide for
// themselves. Tests shorten it.
var keepalive = struct{ every time.Duration }{time.Second}

// The one-byte payloads of channel 0.
const (
	ping = 1
	pong = 2
)

// ErrClosed is returned by the operations of a closed connection.
var ErrClosed = errors.New("mux: connection closed")

// AppendFrame appends the frame carrying payload on channel id to dst.
func AppendFrame(dst []byte, id uint32, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(4+len(payload)))
	dst = binary.BigEndian.AppendUint32(dst, id)
	return append(dst, payload...)
}

// ReadFrame reads one frame from r into buf's storage (reused when large
// enough). It refuses a frame whose length is under the channel id's or
// whose payload is over MaxPayload, without reading its payload.
func ReadFrame(r io.Reader, buf []byte) (id uint32, payload []byte, err error) {
	var head [headerSize]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[:4])
	if n < 4 || n-4 > MaxPayload {
		return 0, nil, fmt.Errorf("mux: frame of %d bytes (at least 4, at most %d)", n, 4+MaxPayload)
	}
	id = binary.BigEndian.Uint32(head[4:])
	if cap(buf) < int(n-4) {
		buf = make([]byte, n-4)
	}
	payload = buf[:n-4]
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return id, payload, nil
}

// Conn is one multiplexed connection, seen from either end.
type Conn struct {
	nc     net.Conn
	client bool
	accept chan *Channel // the server's new channels, for Accept

	mu      sync.Mutex // guards the fields below
	chans   map[uint32]*Channel
	last    uint32        // the highest channel id opened
	out     []byte        // frames not yet written
	spare   []byte        // the flusher's other buffer
	wake    chan struct{} // capacity 1: out has bytes
	drained chan struct{} // closed and replaced when the flusher takes out, if a writer is waiting
	waiting bool          // a writer waits on drained
	err     error         // why the connection ended; nil while it lives
	done    chan struct{} // closed when it ends

	writeTimeout time.Duration
	heard        atomic.Int64 // when a frame last came, in UnixNano
}

// Client starts the client's end of nc: it sends Preface and reads the
// server's answer, by deadline (zero: none). On error nc is left to the
// caller to close.
func Client(nc net.Conn, deadline time.Time) (*Conn, error) {
	_ = nc.SetDeadline(deadline)
	if _, err := nc.Write(Preface); err != nil {
		return nil, err
	}
	answer := make([]byte, len(Preface))
	if _, err := io.ReadFull(nc, answer); err != nil {
		return nil, fmt.Errorf("the server does not multiplex sessions (an Arbor server older than multiplexed connections, or not Arbor's port?): %w", err)
	}
	if string(answer) != string(Preface) {
		return nil, fmt.Errorf("the server did not agree to multiplex sessions: it answered %x", answer)
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	c := newConn(nc, true, 0)
	go c.readLoop(bufio.NewReaderSize(nc, 16<<10))
	go c.keepAlive(keepalive.every)
	return c, nil
}

// keepAlive pings the server whenever the connection has been quiet for
// every.
func (c *Conn) keepAlive(every time.Duration) {
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			if c.Silent() >= every {
				c.queue(0, []byte{ping})
			}
		}
	}
}

// Silent is how long since a frame last came on the connection.
func (c *Conn) Silent() time.Duration {
	return time.Since(time.Unix(0, c.heard.Load()))
}

// queue queues a frame whatever the output holds: the frames that open
// and close channels and those of channel 0 never wait.
func (c *Conn) queue(id uint32, payload []byte) {
	c.mu.Lock()
	c.queueLocked(id, payload)
	c.mu.Unlock()
}

func (c *Conn) queueLocked(id uint32, payload []byte) {
	if c.err == nil {
		c.out = AppendFrame(c.out, id, payload)
		signal(c.wake)
	}
}

// Server starts the server's end of nc, whose Preface br has just read (br
// reads nc, and may hold what followed the preface): it answers the
// preface, then reads frames. Accept returns the channels the client
// opens. A write to the socket that takes longer than writeTimeout ends the
// connection.
func Server(nc net.Conn, br *bufio.Reader, writeTimeout time.Duration) *Conn {
	c := newConn(nc, false, writeTimeout)
	c.accept = make(chan *Channel)
	c.out = append(c.out, Preface...)
	signal(c.wake)
	go c.readLoop(br)
	return c
}

func newConn(nc net.Conn, client bool, writeTimeout time.Duration) *Conn {
	c := &Conn{
		nc: nc, client: client, chans: map[uint32]*Channel{},
		wake: make(chan struct{}, 1), drained: make(chan struct{}), done: make(chan struct{}),
		writeTimeout: writeTimeout,
	}
	c.heard.Store(time.Now().UnixNano())
	go c.flush()
	return c
}

// Open opens a new channel (the client's end).
func (c *Conn) Open() (*Channel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	if c.last == 1<<32-1 {
		return nil, errors.New("mux: out of channel ids on this connection")
	}
	c.last++
	// The empty frame that opens it is queued with its number taken: a
	// server sees the channels open in the order of their numbers.
	c.queueLocked(c.last, nil)
	return c.addLocked(c.last), nil
}

// Accept waits for the client to open a channel (the server's end).
func (c *Conn) Accept() (*Channel, error) {
	select {
	case ch := <-c.accept:
		return ch, nil
	case <-c.done:
		return nil, c.Err()
	}
}

// Channels is the number of channels open.
func (c *Conn) Channels() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.chans)
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (nil while it lives).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection and every channel on it.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	return nil
}

func (c *Conn) addLocked(id uint32) *Channel {
	ch := newChannel(c, id)
	c.chans[id] = ch
	return ch
}

// fail ends the connection with err (the first error counts): the socket
// closes, and so does every channel.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	chans := c.chans
	c.chans = map[uint32]*Channel{}
	close(c.done)
	c.mu.Unlock()
	_ = c.nc.Close()
	for _, ch := range chans {
		ch.end()
	}
}

// readLoop hands each frame's payload to its channel until the connection
// fails.
func (c *Conn) readLoop(br *bufio.Reader) {
	var buf []byte
	for {
		id, payload, err := ReadFrame(br, buf)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrClosed
			}
			c.fail(err)
			return
		}
		buf = payload[:0]
		c.heard.Store(time.Now().UnixNano())
		if id == 0 {
			if err := c.own(payload); err != nil {
				c.fail(err)
				return
			}
			continue
		}
		ch, isNew := c.channel(id)
		if isNew {
			select {
			case c.accept <- ch:
			case <-c.done:
				return
			}
		}
		switch {
		case ch == nil: // a channel closed already: its data goes nowhere
		case len(payload) == 0 && !isNew: // the peer closed it
			c.forget(id)
			ch.peerClose()
		case len(payload) == 0: // the frame that opened it
		default:
			if err := ch.deliver(payload); err != nil {
				c.fail(err)
				return
			}
		}
	}
}

// channel finds the open channel id, or opens it for a server when the
// client numbered it past the last one (isNew).
func (c *Conn) channel(id uint32) (ch *Channel, isNew bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch := c.chans[id]; ch != nil {
		return ch, false
	}
	if c.client || id <= c.last || c.err != nil {
		return nil, false
	}
	c.last = id
	return c.addLocked(id), true
}

// write queues the frames carrying p (not empty) on channel id, waiting
// while the connection holds maxBuffered bytes of output, until deadline
// (zero: no deadline) or until stop is closed.
func (c *Conn) write(id uint32, p []byte, deadline time.Time, stop <-chan struct{}) (int, error) {
	var timeout <-chan time.Time // made when it first has to wait
	written := 0
	for {
		c.mu.Lock()
		for c.err == nil && len(c.out) < maxBuffered && written < len(p) {
			n := min(len(p)-written, MaxPayload)
			c.out = AppendFrame(c.out, id, p[written:written+n])
			written += n
		}
		err, drained := c.err, c.drained
		if err == nil && written < len(p) {
			c.waiting = true
		}
		c.mu.Unlock()
		signal(c.wake)
		if err != nil {
			return written, err
		}
		if written == len(p) {
			return written, nil
		}
		if timeout == nil && !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-drained:
		case <-stop:
			return written, net.ErrClosed
		case <-timeout:
			return written, os.ErrDeadlineExceeded
		}
	}
}

// flush writes the queued frames to the socket until the connection ends.
func (c *Conn) flush() {
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.mu.Lock()
		out := c.out
		if len(out) == 0 { // a writer waits only on a full buffer
			c.mu.Unlock()
			continue
		}
		c.out, c.spare = c.spare[:0], nil
		if c.waiting {
			close(c.drained)
			c.drained, c.waiting = make(chan struct{}), false
		}
		c.mu.Unlock()
		if c.writeTimeout > 0 {
			_ = c.nc.SetWriteDeadline(time.Now().Add(c.writeTimeout))
		}
		if _, err := c.nc.Write(out); err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		if cap(out) <= 2*maxBuffered {
			c.spare = out[:0]
		}
		c.mu.Unlock()
	}
}

// own takes a payload of channel 0: a ping, which a server answers, a
// pong, or grants.
func (c *Conn) own(payload []byte) error {
	if len(payload) != 1 {
		return c.granted(payload)
	}
	switch b := payload[0]; {
	case b == ping && !c.client:
		c.queue(0, []byte{pong})
	case b == pong && c.client:
	default:
		return fmt.Errorf("mux: control byte %d on channel 0", b)
	}
	return nil
}

// granted adds the grants of a channel-0 payload to their channels'
// credit.
func (c *Conn) granted(payload []byte) error {
	if len(payload) == 0 || len(payload)%8 != 0 {
		return fmt.Errorf("mux: a grant of %d bytes (pairs of 8)", len(payload))
	}
	for ; len(payload) > 0; payload = payload[8:] {
		id, n := binary.BigEndian.Uint32(payload), binary.BigEndian.Uint32(payload[4:])
		c.mu.Lock()
		ch := c.chans[id]
		c.mu.Unlock()
		if ch == nil {
			continue // closed since
		}
		if err := ch.addCredit(int64(n)); err != nil {
			return err
		}
	}
	return nil
}

// grant queues a grant of n bytes of channel id, whatever the output
// holds: a grant never waits.
func (c *Conn) grant(id uint32, n int) {
	var pair [8]byte
	binary.BigEndian.PutUint32(pair[:], id)
	binary.BigEndian.PutUint32(pair[4:], uint32(n))
	c.queue(0, pair[:])
}

// forget forgets channel id, and reports whether it was open. A client's
// connection ends with its last channel, so that no idle socket is kept.
func (c *Conn) forget(id uint32) bool {
	c.mu.Lock()
	_, open := c.chans[id]
	delete(c.chans, id)
	idle := c.client && len(c.chans) == 0
	c.mu.Unlock()
	if idle {
		c.fail(ErrClosed)
	}
	return open
}

// drop forgets channel id and, unless the peer closed it first, tells the
// peer with an empty frame.
func (c *Conn) drop(id uint32) {
	if c.forget(id) {
		c.queue(id, nil)
	}
}

// Channel is one connection carried by a Conn: a net.Conn.
type Channel struct {
	c  *Conn
	id uint32

	mu            sync.Mutex // guards the fields below
	in            []byte     // received and not yet read: in[off:]
	off           int
	unacked       int       // bytes read and not yet granted back to the peer
	credit        int64     // bytes the peer will still take: Window less those sent and not granted back
	peerClosed    bool      // the peer closed the channel: reads end with EOF once in is read
	readDeadline  time.Time // zero: none
	writeDeadline time.Time

	readable  chan struct{} // capacity 1: in has bytes, the peer closed, or the read deadline moved
	credited  chan struct{} // capacity 1: the peer granted bytes back
	closeOnce sync.Once
	endOnce   sync.Once
	closed    chan struct{} // closed by end
}

func newChannel(c *Conn, id uint32) *Channel {
	return &Channel{c: c, id: id, credit: Window,
		readable: make(chan struct{}, 1), credited: make(chan struct{}, 1), closed: make(chan struct{})}
}

// ID is the channel's number on its connection.
func (ch *Channel) ID() uint32 { return ch.id }

// Underlying is the socket (or TLS connection) that carries the channel.
func (ch *Channel) Underlying() net.Conn { return ch.c.nc }

// signal wakes the one goroutine that may wait on c.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// deliver queues payload for the channel's reader. A peer that sends
// more than the channel's window breaks the protocol.
func (ch *Channel) deliver(payload []byte) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	queued := len(ch.in) - ch.off
	if queued+ch.unacked+len(payload) > Window {
		return fmt.Errorf("mux: channel %d was sent %d bytes past its window", ch.id, queued+ch.unacked+len(payload)-Window)
	}
	if queued == 0 {
		ch.in, ch.off = ch.in[:0], 0
	}
	ch.in = append(ch.in, payload...)
	signal(ch.readable)
	return nil
}

// addCredit adds n bytes the peer granted back.
func (ch *Channel) addCredit(n int64) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.credit+n > Window {
		return fmt.Errorf("mux: channel %d was granted %d bytes past its window", ch.id, ch.credit+n-Window)
	}
	ch.credit += n
	signal(ch.credited)
	return nil
}

// peerClose ends the channel's input: its reads end with EOF once they
// have what came before.
func (ch *Channel) peerClose() {
	ch.mu.Lock()
	ch.peerClosed = true
	ch.mu.Unlock()
	signal(ch.readable)
}

// Read reads the channel's input.
func (ch *Channel) Read(p []byte) (int, error) {
	for {
		ch.mu.Lock()
		if ch.off < len(ch.in) {
			n := copy(p, ch.in[ch.off:])
			ch.off += n
			if ch.off == len(ch.in) && cap(ch.in) > keptInput {
				ch.in, ch.off = nil, 0 // a burst's buffer is not kept
			}
			// Granted back half a window at a time: the peer, with
			// the other half, sends on while the grant travels.
			ch.unacked += n
			grant := 0
			if ch.unacked >= Window/2 {
				grant, ch.unacked = ch.unacked, 0
			}
			ch.mu.Unlock()
			if grant > 0 {
				ch.c.grant(ch.id, grant)
			}
			return n, nil
		}
		eof, deadline := ch.peerClosed, ch.readDeadline
		ch.mu.Unlock()
		select {
		case <-ch.closed:
			return 0, net.ErrClosed
		default:
		}
		if eof {
			return 0, io.EOF
		}
		var timer *time.Timer
		var timeout <-chan time.Time // nil, for ever, without a deadline
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			timer = time.NewTimer(d)
			timeout = timer.C
		}
		select {
		case <-ch.readable:
		case <-ch.closed:
		case <-timeout:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// Write queues p on the connection.
func (ch *Channel) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // an empty frame would close the channel
	}
	select {
	case <-ch.closed:
		return 0, net.ErrClosed
	default:
	}
	written := 0
	var timeout <-chan time.Time // made when it first has to wait
	for written < len(p) {
		ch.mu.Lock()
		deadline := ch.writeDeadline
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			ch.mu.Unlock()
			return written, os.ErrDeadlineExceeded
		}
		n := int(min(ch.credit, int64(len(p)-written)))
		ch.credit -= int64(n)
		ch.mu.Unlock()
		if n > 0 {
			m, err := ch.c.write(ch.id, p[written:written+n], deadline, ch.closed)
			written += m
			if err != nil {
				ch.mu.Lock()
				ch.credit += int64(n - m) // not sent after all
				ch.mu.Unlock()
				return written, err
			}
			continue
		}
		if timeout == nil && !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			timeout = t.C
		}
		select { // for the peer to grant some back
		case <-ch.credited:
		case <-ch.closed:
			return written, net.ErrClosed
		case <-timeout:
			return written, os.ErrDeadlineExceeded
		}
	}
	return written, nil
}

// Close closes the channel and tells the peer.
func (ch *Channel) Close() error {
	ch.closeOnce.Do(func() {
		ch.end()
		ch.c.drop(ch.id)
	})
	return nil
}

// end closes the channel's side: its reads and writes fail.
func (ch *Channel) end() {
	ch.endOnce.Do(func() { close(ch.closed) })
}

func (ch *Channel) LocalAddr() net.Addr                { return ch.c.nc.LocalAddr() }
func (ch *Channel) RemoteAddr() net.Addr               { return ch.c.nc.RemoteAddr() }
func (ch *Channel) SetReadDeadline(t time.Time) error  { ch.setDeadlines(&t, nil); return nil }
func (ch *Channel) SetWriteDeadline(t time.Time) error { ch.setDeadlines(nil, &t); return nil }
func (ch *Channel) SetDeadline(t time.Time) error      { ch.setDeadlines(&t, &t); return nil }

// setDeadlines sets the deadlines given (nil: unchanged); a Read that
// waits looks at its deadline again.
func (ch *Channel) setDeadlines(read, write *time.Time) {
	ch.mu.Lock()
	if read != nil {
		ch.readDeadline = *read
	}
	if write != nil {
		ch.writeDeadline = *write
	}
	ch.mu.Unlock()
	if read != nil {
		signal(ch.readable)
	}
}
