package raftnode

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// cardTransport is what the card tests need of either transport.
type cardTransport interface {
	SendCard(to uint64, card []byte)
	SetCardHandler(h func(from uint64, card []byte))
	SetFilter(f Filter)
}

// heardCard is a card as its receiver's handler got it.
type heardCard struct {
	from uint64
	card string
}

// cardPair is member 1's transport sending to member 2's, on TCP or on a
// memory network, and the cards 2's handler got.
type cardPair struct {
	from, to cardTransport
	got      chan heardCard
	logs     *observer.ObservedLogs // TCP only
	toAddr   string                 // TCP only: member 2's peer address
}

func newTCPCardPair(t *testing.T) *cardPair {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	log := func(name string) *zap.Logger {
		return zaptest.NewLogger(t).Named(name).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) }))
	}
	t2, err := NewTCPTransport(2, "127.0.0.1:0", nil, log("t2"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { t2.Close() })
	t1, err := NewTCPTransport(1, "127.0.0.1:0", map[uint64]string{2: t2.Addr().String()}, log("t1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { t1.Close() })
	return newCardPair(t1, t2, logs, t2.Addr().String())
}

func newMemCardPair(t *testing.T) *cardPair {
	t.Helper()
	nw := NewMemNetwork()
	t1, t2 := nw.NewTransport(1), nw.NewTransport(2)
	t.Cleanup(func() { t1.Close(); t2.Close() })
	return newCardPair(t1, t2, nil, "")
}

func newCardPair(from, to cardTransport, logs *observer.ObservedLogs, toAddr string) *cardPair {
	p := &cardPair{from: from, to: to, got: make(chan heardCard, 100), logs: logs, toAddr: toAddr}
	to.SetCardHandler(func(from uint64, card []byte) { p.got <- heardCard{from, string(card)} })
	return p
}

var cardPairs = []struct {
	name string
	new  func(t *testing.T) *cardPair
}{
	{"over TCP", newTCPCardPair},
	{"on the memory network", newMemCardPair},
}

func TestACardReachesTheHandlerWithItsSendersID(t *testing.T) {
	t.Parallel()
	for _, tc := range cardPairs {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.new(t)
			card := []byte("member 1's card")
			p.from.SendCard(2, card)
			card[0] = 'X' // the transport keeps no reference to it
			if got := recv(t, p.got); got != (heardCard{1, "member 1's card"}) {
				t.Fatalf("the handler got %+v", got)
			}
			full := bytes.Repeat([]byte{'c'}, MaxCard)
			p.from.SendCard(2, full)
			if got := recv(t, p.got); got.from != 1 || got.card != string(full) {
				t.Fatalf("a card of MaxCard bytes arrived as %d bytes from %d", len(got.card), got.from)
			}
		})
	}
}

func TestTheFilterDropsCardsAsItDropsRaftMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range cardPairs {
		t.Run(tc.name+", the sender's filter", func(t *testing.T) {
			p := tc.new(t)
			p.from.SetFilter(func(from, to uint64) bool { return to != 2 })
			p.from.SendCard(2, []byte("cut off"))
			p.from.SetFilter(nil)
			p.from.SendCard(2, []byte("healed"))
			if got := recv(t, p.got); got.card != "healed" {
				t.Fatalf("the handler got %q through the sender's filter", got.card)
			}
		})
		t.Run(tc.name+", the receiver's filter", func(t *testing.T) {
			p := tc.new(t)
			refused := make(chan uint64, 100)
			p.to.SetFilter(func(from, to uint64) bool {
				if from == 1 {
					refused <- from
					return false
				}
				return true
			})
			p.from.SendCard(2, []byte("cut off"))
			// The filter is asked before the handler would be called, on
			// the same goroutine: once it refused, the card is gone.
			recv(t, refused)
			select {
			case got := <-p.got:
				t.Fatalf("the handler got %q through the receiver's filter", got.card)
			default:
			}
		})
	}
}

func TestACardOverTheLimitIsRefused(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte{'c'}, MaxCard+1)
	t.Run("the TCP sender does not send it", func(t *testing.T) {
		p := newTCPCardPair(t)
		p.from.SendCard(2, big)
		p.from.SendCard(2, []byte("small"))
		if got := recv(t, p.got); got.card != "small" {
			t.Fatalf("a card of %d bytes arrived", len(got.card))
		}
		if p.logs.FilterMessage("member card over its limit; not sent").Len() != 1 {
			t.Fatalf("the sender did not log the card it dropped: %v", p.logs.All())
		}
	})
	t.Run("a TCP member closes the connection that sends it", func(t *testing.T) {
		p := newTCPCardPair(t)
		c, err := net.Dial("tcp", p.toAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Only the header: the length alone is refused, before any body
		// is read.
		hdr := make([]byte, 13)
		binary.BigEndian.PutUint32(hdr, uint32(1+8+len(big)))
		hdr[4] = frameCard
		binary.BigEndian.PutUint64(hdr[5:], 1)
		if _, err := c.Write(hdr); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = c.Read(make([]byte, 1))
		if ne, ok := err.(net.Error); err == nil || (ok && ne.Timeout()) {
			t.Fatalf("read %v from a connection that sent a card too big: it stayed open", err)
		}
		if p.logs.FilterMessage("bad peer frame; closing").Len() != 1 {
			t.Fatalf("the receiver did not log the frame it refused: %v", p.logs.All())
		}
	})
	t.Run("a TCP frame too short to name its sender is refused", func(t *testing.T) {
		tr := &TCPTransport{}
		if err := tr.deliver(frameCard, []byte{0, 0, 0}); err == nil {
			t.Fatal("a card frame of 3 bytes was taken")
		}
	})
	t.Run("the memory network's receiver refuses it", func(t *testing.T) {
		p := newMemCardPair(t)
		p.from.SendCard(2, big)
		p.from.SendCard(2, []byte("small")) // on the same link, so after it
		if got := recv(t, p.got); got.card != "small" {
			t.Fatalf("a card of %d bytes arrived", len(got.card))
		}
	})
}

func TestAFrameOfAnUnknownKindIsSkipped(t *testing.T) {
	t.Parallel()
	// A newer member may send a kind this one does not know (as an older
	// member did not know cards): the connection stays, and what follows
	// on it arrives.
	p := newTCPCardPair(t)
	c, err := net.Dial("tcp", p.toAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 1+3)
	b = append(b, 99, 'n', 'e', 'w')
	card := []byte("after")
	b = binary.BigEndian.AppendUint32(b, uint32(1+8+len(card)))
	b = append(b, frameCard)
	b = binary.BigEndian.AppendUint64(b, 1)
	b = append(b, card...)
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, p.got); got.card != "after" || got.from != 1 {
		t.Fatalf("got %+v after a frame of an unknown kind, want the card from 1", got)
	}
}

// Over TCP too, touches are followed by a probe that the receiver
// answers, and a receiver that stops hearing the sender stops answering.
func TestTCPTouchesAreProbedAndAnswered(t *testing.T) {
	t.Parallel()
	t1, err := NewTCPTransport(1, "127.0.0.1:0", nil, zaptest.NewLogger(t).Named("t1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { t1.Close() })
	t2, err := NewTCPTransport(2, "127.0.0.1:0", map[uint64]string{1: t1.Addr().String()}, zaptest.NewLogger(t).Named("t2"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { t2.Close() })
	t1.AddPeer(2, t2.Addr().String())
	touched := make(chan []int64, 10)
	t2.Attach(nil, func(ids []int64) { touched <- ids })

	t1.SendTouches(2, []int64{7, 8})
	if ids := <-touched; len(ids) != 2 || ids[0] != 7 || ids[1] != 8 {
		t.Fatalf("touched %v, want [7 8]", ids)
	}
	waitFor(t, "the probe's answer", func() bool {
		t1.acks.mu.Lock()
		knows := t1.acks.knows[2]
		t1.acks.mu.Unlock()
		return knows && t1.TouchesUnanswered(2) == 0
	})
	t2.SetFilter(func(from, to uint64) bool { return from != 1 }) // 2 no longer hears 1
	t1.SendTouches(2, []int64{7})
	time.Sleep(50 * time.Millisecond)
	if d := t1.TouchesUnanswered(2); d < 50*time.Millisecond {
		t.Fatalf("probe ignored for 50ms: unanswered for %v", d)
	}
}
