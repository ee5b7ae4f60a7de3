package quota

import (
	"testing"
	"time"
)

func TestATakerWaitsUntilTheBytesComeBack(t *testing.T) {
	p := New(100)
	if !p.Take(60, nil) || !p.Take(40, nil) {
		t.Fatal("bytes within the limit were not lent")
	}
	took := make(chan bool)
	go func() { took <- p.Take(10, nil) }()
	select {
	case <-took:
		t.Fatal("a taker past the limit was lent at once")
	case <-time.After(20 * time.Millisecond):
	}
	p.Give(40)
	if !<-took {
		t.Fatal("the waiting taker was not lent the bytes given back")
	}
	if got := p.Used(); got != 70 {
		t.Fatalf("used %d, want 70", got)
	}
}

func TestATakerStopsWaitingWhenDone(t *testing.T) {
	p := New(10)
	p.Take(10, nil)
	done := make(chan struct{})
	close(done)
	if p.Take(1, done) {
		t.Fatal("a taker past the limit was lent bytes after it was done")
	}
	if got := p.Used(); got != 10 {
		t.Fatalf("a refused taker changed used to %d", got)
	}
}

func TestAnEmptyPoolLendsMoreThanItHas(t *testing.T) {
	p := New(10)
	if !p.Take(25, nil) {
		t.Fatal("an empty pool refused a large taker")
	}
	if got := p.Used(); got != 25 {
		t.Fatalf("used %d, want 25", got)
	}
}
