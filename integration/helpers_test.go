package integration

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
	"go.uber.org/zap/zaptest"
)

// startServer runs a single-node server on loopback with its data in dir
// (a fresh one when dir is ""), listening on addr (any port when "").
func startServer(t testing.TB, dir, addr string, mod ...func(*server.Config)) *server.Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	cfg := server.Config{
		Listen: addr, HTTP: "-", DataDir: dir,
		MinSessionTimeout: 200 * time.Millisecond, TickInterval: 10 * time.Millisecond,
		Logger:          zaptest.NewLogger(t).Named("server"),
		FourLetterWords: []string{"*"}, // every word, for the tests that ask (the default is srvr and isro)
	}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !cfg.Join && len(cfg.Peers) == 0 {
		shardAtStart(t, s)
	}
	return s
}

func dial(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts = append([]client.Option{client.WithLogger(zaptest.NewLogger(t).Named("client"))}, opts...)
	c, err := client.Dial(ctx, []string{addr}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// freePort returns a loopback address nobody listens on right now. It picks
// from 20000-24999, below Linux's ephemeral range (32768-60999), so that
// the outgoing connections of tests running meanwhile cannot take the port
// between this check and the server's listen; the fault suite, which runs
// beside this package, picks from 25000-29999. It never returns an address
// twice: two members given one port would fail to start.
func freePort(t testing.TB) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(5000))
		if ports[addr] {
			continue
		}
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			ports[addr] = true
			return addr
		}
	}
	t.Fatal("no free loopback port in 20000-24999")
	return ""
}

// ports are the addresses freePort handed out.
var (
	portsMu sync.Mutex
	ports   = map[string]bool{}
)

// waitEvent waits for one event on ch (an Arbor or a go-zookeeper watch).
func waitEvent[E any](t *testing.T, ch <-chan E, within time.Duration) E {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed without an event")
		}
		return ev
	case <-time.After(within):
		t.Fatalf("no event within %v", within)
	}
	var zero E
	return zero
}

// noEvent checks that nothing arrives on ch for a while.
func noEvent(t *testing.T, ch <-chan client.Event, within time.Duration) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if ok {
			t.Fatalf("unexpected event %v", ev)
		}
	case <-time.After(within):
	}
}

// proxy forwards loopback connections to a server and can cut them or
// freeze them (stop forwarding while keeping them open), to make a client
// lose its server or fall silent.
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   []net.Conn // mu guards conns, refuse, frozen
	refuse  bool
	frozen  bool
	thawed  *sync.Cond
	stopped bool
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.thawed = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse
		p.mu.Unlock()
		out, err := net.Dial("tcp", p.target)
		if refuse || err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies src to dst, holding every chunk while the proxy is frozen.
func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		for p.frozen && !p.stopped {
			p.thawed.Wait()
		}
		p.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			return
		}
	}
}

// cut closes every forwarded connection; with refuse set, new ones are
// closed at once too.
func (p *proxy) cut(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = refuse
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) setRefuse(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = refuse
}

// freeze stops (true) or resumes (false) forwarding.
func (p *proxy) freeze(frozen bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = frozen
	p.thawed.Broadcast()
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.stopped = true
	p.thawed.Broadcast()
	p.mu.Unlock()
	p.cut(true)
}
