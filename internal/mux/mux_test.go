package mux

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// pair returns the two ends of a multiplexed connection over loopback TCP.
func pair(t *testing.T) (client, server *Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		br := bufio.NewReader(nc)
		head := make([]byte, len(Preface))
		if _, err := io.ReadFull(br, head); err != nil || !bytes.Equal(head, Preface) {
			nc.Close()
			accepted <- nil
			return
		}
		accepted <- Server(nc, br, 10*time.Second)
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client, err = Client(nc, time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("the server end did not start")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// echo serves every channel srv accepts by writing back what it reads.
func echo(srv *Conn) {
	for {
		ch, err := srv.Accept()
		if err != nil {
			return
		}
		go func() {
			defer ch.Close()
			_, _ = io.Copy(ch, ch)
		}()
	}
}

func TestChannelsCarryTheirOwnBytes(t *testing.T) {
	cl, srv := pair(t)
	go echo(srv)
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*MaxPayload/16+5) // several frames
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := cl.Open()
			if err != nil {
				errs <- err
				return
			}
			defer ch.Close()
			msg := append([]byte(fmt.Sprintf("channel %d:", i)), big...)
			go func() { _, _ = ch.Write(msg) }()
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(ch, got); err != nil {
				errs <- fmt.Errorf("channel %d: %w", i, err)
				return
			}
			if !bytes.Equal(got, msg) {
				errs <- fmt.Errorf("channel %d: got other bytes back", i)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClosingAChannelEndsItOnBothSidesOnly(t *testing.T) {
	cl, srv := pair(t)
	a, _ := cl.Open()
	b, _ := cl.Open()
	a.Write([]byte("a"))
	sa, _ := srv.Accept()
	sb, _ := srv.Accept()
	buf := make([]byte, 1)
	if _, err := io.ReadFull(sa, buf); err != nil || buf[0] != 'a' {
		t.Fatalf("first channel read %q, %v", buf, err)
	}
	a.Close()
	if _, err := sa.Read(buf); err != io.EOF {
		t.Fatalf("the server's end of a closed channel read %v, want EOF", err)
	}
	if _, err := a.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a closed channel read %v, want net.ErrClosed", err)
	}
	if _, err := a.Write(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a closed channel wrote %v, want net.ErrClosed", err)
	}
	b.Write([]byte("b"))
	if _, err := io.ReadFull(sb, buf); err != nil || buf[0] != 'b' {
		t.Fatalf("the other channel read %q, %v", buf, err)
	}
	sb.Write([]byte("B"))
	if _, err := io.ReadFull(b, buf); err != nil || buf[0] != 'B' {
		t.Fatalf("the other channel's answer read %q, %v", buf, err)
	}
	waitFor(t, func() bool { return srv.Channels() == 1 && cl.Channels() == 1 }, "one channel open on each side")
	b.Close()
	<-cl.Done() // a client's connection ends with its last channel
	<-srv.Done()
}

func TestAFrameForAClosedChannelIsDropped(t *testing.T) {
	cl, srv := pair(t)
	a, _ := cl.Open()
	b, _ := cl.Open()
	sa, _ := srv.Accept()
	sb, _ := srv.Accept()
	sa.Close()
	if _, err := a.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a channel the server closed read %v, want EOF", err)
	}
	// The client's late bytes for it go nowhere, and open nothing.
	a.Write([]byte("late"))
	b.Write([]byte("y"))
	if sb.ID() != b.ID() {
		t.Fatalf("accepted channel %d, want %d", sb.ID(), b.ID())
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(sb, buf); err != nil || buf[0] != 'y' {
		t.Fatalf("read %q, %v", buf, err)
	}
}

func TestTheConnectionsEndEndsEveryChannel(t *testing.T) {
	cl, srv := pair(t)
	a, _ := cl.Open()
	a.Write([]byte("x"))
	sa, _ := srv.Accept()
	srv.Close()
	if _, err := a.Read(make([]byte, 1)); err == nil {
		t.Fatal("a channel read on after its connection ended")
	}
	if _, err := sa.Write([]byte("y")); err == nil {
		t.Fatal("a server channel wrote on after its connection ended")
	}
	<-cl.Done()
	if _, err := cl.Open(); err == nil {
		t.Fatal("opened a channel on an ended connection")
	}
}

// A channel whose reader does not read takes a window of input and no
// more, and the other channels of its connection go on.
func TestAChannelThatIsNotReadHoldsUpOnlyItself(t *testing.T) {
	cl, srv := pair(t)
	a, _ := cl.Open()
	b, _ := cl.Open()
	sa, _ := srv.Accept()
	sb, _ := srv.Accept()
	big := bytes.Repeat([]byte{7}, 4*Window)
	wrote := make(chan error, 1)
	go func() {
		_, err := a.Write(big)
		wrote <- err
	}()
	waitFor(t, func() bool {
		sa.mu.Lock()
		defer sa.mu.Unlock()
		return len(sa.in)-sa.off == Window
	}, "a window of input on the channel not read")
	for i := range 20 {
		msg := []byte(fmt.Sprintf("message %d", i))
		b.Write(msg)
		got := make([]byte, len(msg))
		sb.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(sb, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("the other channel read %q, %v", got, err)
		}
	}
	select {
	case err := <-wrote:
		t.Fatalf("the write of %d bytes to a channel not read ended: %v", len(big), err)
	default:
	}
	got := make([]byte, len(big))
	if _, err := io.ReadFull(sa, got); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("reading the held channel: %v", err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// shortKeepalive makes clients ping after every, for the test.
func shortKeepalive(t *testing.T, every time.Duration) {
	saved := keepalive
	keepalive.every = every
	t.Cleanup(func() { keepalive = saved })
}

// A client pings a connection that is quiet, and the server answers: it
// is never silent for long, with nothing else on it.
func TestAQuietConnectionIsPingedAndAnswered(t *testing.T) {
	shortKeepalive(t, 20*time.Millisecond)
	cl, srv := pair(t)
	cl.Open()
	srv.Accept()
	for range 50 {
		time.Sleep(10 * time.Millisecond)
		if s := cl.Silent(); s > time.Second {
			t.Fatalf("silent for %v: the pings went unanswered", s)
		}
	}
}

// A server that goes silent without closing the connection shows as a
// connection silent for longer and longer.
func TestASilentServerShowsAsSilence(t *testing.T) {
	shortKeepalive(t, 20*time.Millisecond)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // answers the preface, then reads and says nothing
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		io.ReadFull(nc, make([]byte, len(Preface)))
		nc.Write(Preface)
		io.Copy(io.Discard, nc)
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cl, err := Client(nc, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cl.Open()
	waitFor(t, func() bool { return cl.Silent() > 300*time.Millisecond }, "the silence to show")
	if cl.Err() != nil {
		t.Fatalf("the connection ended: %v", cl.Err())
	}
}

func TestAChannelHonoursItsDeadlines(t *testing.T) {
	cl, _ := pair(t)
	a, _ := cl.Open()
	a.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	a.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := a.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past the deadline: %v", err)
	}
}

func TestAServerRefusesBadFrames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"too short", []byte{0, 0, 0, 3, 0, 0, 0, 1}},
		{"too long", []byte{0, 1, 0, 5, 0, 0, 0, 1}},
		{"a grant that is not pairs", AppendFrame(nil, 0, []byte("xy"))},
		{"a pong from a client", AppendFrame(nil, 0, []byte{pong})},
		{"a grant past the window", append(AppendFrame(nil, 1, nil), AppendFrame(nil, 0, []byte{0, 0, 0, 1, 0, 0, 0, 1})...)},
		{"bytes past the window", func() []byte {
			b := AppendFrame(nil, 1, nil)
			for sent := 0; sent <= Window; sent += MaxPayload / 4 {
				b = AppendFrame(b, 1, make([]byte, MaxPayload/4))
			}
			return b
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			srv := Server(a, bufio.NewReader(a), time.Second)
			go io.Copy(io.Discard, b)
			go func() { // accepts, and never reads
				for {
					if _, err := srv.Accept(); err != nil {
						return
					}
				}
			}()
			b.Write(tc.frame)
			select {
			case <-srv.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the connection did not end")
			}
			if srv.Err() == nil || errors.Is(srv.Err(), ErrClosed) {
				t.Fatalf("ended with %v, want the frame's fault", srv.Err())
			}
		})
	}
}

// The preface is an Arbor frame: a length, then the MessagePack array
// ["arbor-mux", 1] (docs/protocol.md §11).
func TestThePrefaceIsAnArborFrame(t *testing.T) {
	body, err := msgpack.Marshal([]any{"arbor-mux", 1})
	if err != nil {
		t.Fatal(err)
	}
	want := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if want = append(want, body...); !bytes.Equal(Preface, want) {
		t.Fatalf("preface %x, want %x", Preface, want)
	}
}

func TestReadFrameReadsWhatAppendFrameWrote(t *testing.T) {
	var stream []byte
	stream = AppendFrame(stream, 7, []byte("hello"))
	stream = AppendFrame(stream, 1<<32-1, nil)
	stream = AppendFrame(stream, 2, bytes.Repeat([]byte{1}, MaxPayload))
	r := bytes.NewReader(stream)
	for _, want := range []struct {
		id uint32
		n  int
	}{{7, 5}, {1<<32 - 1, 0}, {2, MaxPayload}} {
		id, payload, err := ReadFrame(r, nil)
		if err != nil || id != want.id || len(payload) != want.n {
			t.Fatalf("read channel %d, %d bytes, %v; want channel %d, %d bytes", id, len(payload), err, want.id, want.n)
		}
	}
	if _, _, err := ReadFrame(r, nil); err != io.EOF {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(AppendFrame(nil, 1, []byte("x")))
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 9})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		id, payload, err := ReadFrame(bytes.NewReader(data), nil)
		if err != nil {
			return
		}
		if len(payload) > MaxPayload {
			t.Fatalf("a payload of %d bytes", len(payload))
		}
		again := AppendFrame(nil, id, payload)
		if !bytes.Equal(again, data[:len(again)]) {
			t.Fatalf("frame %x read back as %x", data[:len(again)], again)
		}
	})
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Whatever a client sends, a server's end takes it or ends the connection
// with an error: it never panics, and never hands a channel more than its
// window.
func FuzzServerInput(f *testing.F) {
	open := AppendFrame(nil, 1, nil)
	f.Add(append(open, AppendFrame(nil, 1, []byte("hello"))...))
	f.Add(append(open, AppendFrame(nil, 0, []byte{0, 0, 0, 1, 0, 0, 0, 4})...))
	f.Add(append(append(open, AppendFrame(nil, 1, nil)...), AppendFrame(nil, 1, []byte("late"))...))
	f.Add(append(open, AppendFrame(nil, 3, []byte("skipped ahead"))...))
	f.Add(AppendFrame(nil, 0, []byte{ping}))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := net.Pipe()
		srv := Server(a, bufio.NewReader(a), time.Second)
		defer srv.Close()
		go io.Copy(io.Discard, b)
		accepted := make(chan []*Channel, 1)
		go func() { // accepts every channel, and reads a little of each
			var chs []*Channel
			for {
				ch, err := srv.Accept()
				if err != nil {
					accepted <- chs
					return
				}
				chs = append(chs, ch)
				go ch.Read(make([]byte, 3))
			}
		}()
		b.Write(data)
		b.Close()
		select {
		case <-srv.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the connection did not end when its input did")
		}
		for _, ch := range <-accepted {
			ch.mu.Lock()
			held := len(ch.in) - ch.off + ch.unacked
			ch.mu.Unlock()
			if held > Window {
				t.Fatalf("channel %d holds %d bytes, past its window", ch.id, held)
			}
		}
	})
}
