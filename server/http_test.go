package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// httpConn speaks HTTP/1.1 by hand on one connection, so that a test sees
// what the server does with that connection (keeps it, closes it).
type httpConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialHTTP(t *testing.T, addr net.Addr) *httpConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &httpConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// send writes a request for path, keeping the connection alive.
func (c *httpConn) send(method, path string) error {
	_, err := fmt.Fprintf(c.nc, "%s %s HTTP/1.1\r\nHost: arbor\r\n\r\n", method, path)
	return err
}

// response reads the reply to a request of method, body and all.
func (c *httpConn) response(method string) (*http.Response, string, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

// get asks for path and wants 200.
func (c *httpConn) get(path string) string {
	c.t.Helper()
	if err := c.send("GET", path); err != nil {
		c.t.Fatal(err)
	}
	resp, body, err := c.response("GET")
	if err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET %s: %s %q", path, resp.Status, body)
	}
	return body
}

// closedByServer reports nil once the server has closed the connection,
// and an error if it answers something instead or leaves the connection
// open for the generous deadline.
func (c *httpConn) closedByServer() error {
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := c.br.ReadByte()
	var ne net.Error
	switch {
	case err == nil:
		rest, _ := c.br.Peek(c.br.Buffered())
		return fmt.Errorf("the server sent %q, want the connection closed", append([]byte{b}, rest...))
	case errors.As(err, &ne) && ne.Timeout():
		return errors.New("the connection is still open after 10 s")
	}
	return nil // EOF, or a reset if the server closed it with our request unread
}

func TestAnIdleHTTPConnectionIsClosedAfterTheIdleTimeout(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.HTTPIdleTimeout = 200 * time.Millisecond })
	c := dialHTTP(t, s.HTTPAddr())
	c.get("/status")
	if err := c.closedByServer(); err != nil {
		t.Fatal(err)
	}
}

// TestAnHTTPRequestInProgressIsNotIdle runs the member's HTTP server, as
// New builds it, with a handler that answers when the test lets it: such
// a request (a long poll, an event stream) must outlast the idle timeout.
func TestAnHTTPRequestInProgressIsNotIdle(t *testing.T) {
	t.Parallel()
	cfg := Config{HTTPIdleTimeout: 200 * time.Millisecond}
	started, release := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /quick", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "quick") })
	mux.HandleFunc("GET /wait", func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-release:
			_, _ = io.WriteString(w, "done")
		case <-r.Context().Done(): // the server gave up on the request: the body says so
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(&cfg, mux)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	slow := dialHTTP(t, ln.Addr())
	slow.get("/quick") // a keep-alive connection that has been idle once
	if err := slow.send("GET", "/wait"); err != nil {
		t.Fatal(err)
	}
	<-started
	// A connection idle since after the slow request started is closed:
	// the slow one has been in progress, silent, for longer than that.
	idle := dialHTTP(t, ln.Addr())
	idle.get("/quick")
	if err := idle.closedByServer(); err != nil {
		t.Fatalf("the idle connection: %v", err)
	}
	close(release)
	resp, body, err := slow.response("GET")
	if err != nil || resp.StatusCode != http.StatusOK || body != "done" {
		t.Fatalf("the request in progress was cut: %v %v %q", err, resp, body)
	}
	if err := slow.closedByServer(); err != nil {
		t.Fatalf("once answered, the connection is idle like any other: %v", err)
	}
}

func TestHTTPIdleTimeoutIsAtMostAMinute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeout time.Duration
		ok      bool
	}{
		{-time.Second, false},
		{time.Minute + time.Millisecond, false},
		{time.Hour, false},
		{time.Minute, true},
		{time.Millisecond, true},
	} {
		t.Run(tc.timeout.String(), func(t *testing.T) {
			s, err := New(Config{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", DataDir: t.TempDir(), HTTPIdleTimeout: tc.timeout})
			if err == nil {
				s.Close()
			}
			if (err == nil) != tc.ok {
				t.Fatalf("New: %v, want it taken: %v", err, tc.ok)
			}
		})
	}
}

func TestHTTPConnectionsAreCapped(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.HTTPMaxConns = 2 })
	a, b := dialHTTP(t, s.HTTPAddr()), dialHTTP(t, s.HTTPAddr())
	a.get("/status") // both are accepted now, and stay open between requests
	b.get("/status")
	refused := 0
	t.Run("one more is closed at once, without an answer", func(t *testing.T) {
		over := dialHTTP(t, s.HTTPAddr())
		_ = over.send("GET", "/status") // it may already be closed
		if err := over.closedByServer(); err != nil {
			t.Fatal(err)
		}
		refused++
	})
	t.Run("the open ones are still served", func(t *testing.T) {
		a.get("/status")
	})
	var again *httpConn
	outer := t // again outlives the subtest
	t.Run("a closed connection makes room", func(t *testing.T) {
		b.nc.Close()
		// The server counts b out once it reads b's end; until then a
		// newcomer is refused.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			again = dialHTTP(outer, s.HTTPAddr())
			if again.send("GET", "/status") == nil {
				if resp, _, err := again.response("GET"); err == nil && resp.StatusCode == http.StatusOK {
					break
				}
			}
			again.nc.Close()
			refused++
			if time.Now().After(deadline) {
				t.Fatal("still refused 10 s after a connection closed")
			}
		}
	})
	if again == nil {
		t.FailNow()
	}
	metrics := again.get("/metrics")
	for _, want := range []string{
		`arbor_limit{limit="http_connections"} 2` + "\n",
		fmt.Sprintf(`arbor_limit_refusals_total{limit="http_connections"} %d`+"\n", refused),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestHTTPEndpointsAnswerOnlyTheirMethods(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.Pprof = true })
	base := "http://" + s.HTTPAddr().String()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if code, _ := get(t, base+"/healthz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/healthz never became ok")
		}
	}
	type check struct {
		method, path string
		code         int
		allow        string // the Allow header of a 405
	}
	var checks []check
	for _, path := range []string{"/status", "/healthz", "/metrics", "/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap"} {
		for _, method := range []string{"GET", "HEAD"} {
			checks = append(checks, check{method, path, http.StatusOK, ""})
		}
		for _, method := range []string{"POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"} {
			checks = append(checks, check{method, path, http.StatusMethodNotAllowed, "GET, HEAD"})
		}
	}
	checks = append(checks,
		check{"POST", "/debug/pprof/symbol", http.StatusOK, ""}, // as Go's pprof serves it
		check{"PUT", "/debug/pprof/symbol", http.StatusMethodNotAllowed, "GET, HEAD, POST"},
		check{"GET", "/nowhere", http.StatusNotFound, ""},
		check{"POST", "/nowhere", http.StatusNotFound, ""},
	)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for _, c := range checks {
		name := fmt.Sprintf("%s %s answers %d", c.method, c.path, c.code)
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, base+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != c.code {
				t.Fatalf("%s", resp.Status)
			}
			if allow := resp.Header.Get("Allow"); allow != c.allow {
				t.Fatalf("Allow: %q, want %q", allow, c.allow)
			}
		})
	}
}
