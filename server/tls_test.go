package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/internal/testcerts"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// tlsServer is a server with TLS on both client ports, requiring client
// certificates from ca, and the log it wrote.
func tlsServer(t *testing.T, ca *testcerts.CA, mod ...func(*Config)) (*Server, *observer.ObservedLogs) {
	t.Helper()
	files := ca.Issue(t, pkix.Name{CommonName: "localhost"})
	core, logs := observer.New(zapcore.InfoLevel)
	s := startServer(t, "", append([]func(*Config){func(cfg *Config) {
		cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = files.Cert, files.Key, ca.File
		cfg.ZKListen = "127.0.0.1:0"
		cfg.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core))
	}}, mod...)...)
	return s, logs
}

// clientTLS is the TLS configuration of a client with a certificate for
// subject from ca (none when ca is nil) that trusts serverCA.
func clientTLS(t *testing.T, serverCA, ca *testcerts.CA, subject pkix.Name) *tls.Config {
	t.Helper()
	var cert, key string
	if ca != nil {
		f := ca.Issue(t, subject)
		cert, key = f.Cert, f.Key
	}
	conf, err := client.TLSConfigFromFiles(cert, key, serverCA.File)
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

// dialTLS opens a TLS connection to addr and speaks the wire protocol on it.
func dialTLS(t *testing.T, addr string, conf *tls.Config) *rawConn {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// waitLog waits until logs has an entry with message msg.
func waitLog(t *testing.T, logs *observer.ObservedLogs, msg string) {
	t.Helper()
	waitLogFor(t, logs, msg, 10*time.Second)
}

// waitLogFor waits up to d until logs has an entry with message msg.
func waitLogFor(t *testing.T, logs *observer.ObservedLogs, msg string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for logs.FilterMessage(msg).Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the server never logged %q; it logged %v", msg, logs.All())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestATLSClientWithACertificateFromTheCAIsServed(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	s, _ := tlsServer(t, ca)
	c := dialTLS(t, s.Addr().String(), clientTLS(t, ca, ca, pkix.Name{CommonName: "alice", Organization: []string{"Arbor"}}))
	if resp := c.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK {
		t.Fatalf("handshake refused: %v", resp.Err)
	}
	if r := c.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/tls", Data: []byte("x")}); r.Err != wire.CodeOK {
		t.Fatalf("create: %v", r.Err)
	}
	if r := c.call(wire.Request{Xid: 2, Op: wire.OpGetData, Path: "/tls"}); r.Err != wire.CodeOK || string(r.Data) != "x" {
		t.Fatalf("get: %v %q", r.Err, r.Data)
	}
	if v := c.nc.(*tls.Conn).ConnectionState().Version; v != tls.VersionTLS13 {
		t.Errorf("negotiated TLS version %#x, want 1.3", v)
	}
}

func TestTheVerifiedClientCertificatesSubjectIsItsX509Identity(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	s, _ := tlsServer(t, ca)
	c := dialTLS(t, s.Addr().String(), clientTLS(t, ca, ca, pkix.Name{CommonName: "alice", Organization: []string{"Arbor"}}))
	resp := c.connect(wire.ConnectRequest{})
	// The server may answer the handshake before it files the connection.
	var sc *conn
	for deadline := time.Now().Add(10 * time.Second); sc == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the session has no connection on the server")
		}
		s.mu.Lock()
		sc = s.bySession[resp.SessionID]
		s.mu.Unlock()
	}
	if got, ok := certSubject(sc.nc); !ok || got != "CN=alice,O=Arbor" {
		t.Fatalf("certSubject = %q, %v; want CN=alice,O=Arbor", got, ok)
	}
	if _, ok := certSubject(&net.TCPConn{}); ok {
		t.Fatal("a plaintext connection has a certificate subject")
	}
}

// TestAnX509ACLGrantsTheCertificatesSubject: the verified certificate's
// subject is the connection's x509 identity, shown by whoAmI, matched by
// x509 ACLs and taken by scheme auth.
func TestAnX509ACLGrantsTheCertificatesSubject(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	s, _ := tlsServer(t, ca)
	dial := func(cn string) *rawConn {
		c := dialTLS(t, s.Addr().String(), clientTLS(t, ca, ca, pkix.Name{CommonName: cn, Organization: []string{"Arbor"}}))
		if resp := c.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK {
			t.Fatalf("handshake of %s refused: %v", cn, resp.Err)
		}
		return c
	}
	alice, bob := dial("alice"), dial("bob")

	r := alice.call(wire.Request{Xid: 1, Op: wire.OpWhoAmI})
	if !slices.Contains(r.Identities, wire.Identity{Scheme: "x509", ID: "CN=alice,O=Arbor"}) {
		t.Fatalf("whoAmI = %v, want the x509 identity CN=alice,O=Arbor", r.Identities)
	}
	mine := []wire.ACL{{Perms: wire.PermAll, Scheme: "x509", ID: "CN=alice,O=Arbor"}}
	if r := alice.call(wire.Request{Xid: 2, Op: wire.OpCreate, Path: "/alice", Data: []byte("a"), ACL: mine}); r.Err != wire.CodeOK {
		t.Fatalf("create with an x509 ACL: %v", r.Err)
	}
	if r := alice.call(wire.Request{Xid: 3, Op: wire.OpCreate, Path: "/auth", ACL: []wire.ACL{{Perms: wire.PermRead, Scheme: "auth"}}}); r.Err != wire.CodeOK {
		t.Fatalf("create with scheme auth: %v", r.Err)
	}
	if r := alice.call(wire.Request{Xid: 4, Op: wire.OpGetACL, Path: "/auth"}); len(r.ACL) != 1 || r.ACL[0] != (wire.ACL{Perms: wire.PermRead, Scheme: "x509", ID: "CN=alice,O=Arbor"}) {
		t.Fatalf("scheme auth became %v, want x509:CN=alice,O=Arbor:r", r.ACL)
	}
	for _, tc := range []struct {
		who  string
		c    *rawConn
		want wire.Code
	}{{"alice", alice, wire.CodeOK}, {"bob", bob, wire.CodeNoAuth}} {
		if r := tc.c.call(wire.Request{Xid: 5, Op: wire.OpGetData, Path: "/alice"}); r.Err != tc.want {
			t.Errorf("getData by %s = %v, want %v", tc.who, r.Err, tc.want)
		}
		if r := tc.c.call(wire.Request{Xid: 6, Op: wire.OpSetData, Path: "/alice", Data: []byte("b"), Version: -1}); r.Err != tc.want {
			t.Errorf("setData by %s = %v, want %v", tc.who, r.Err, tc.want)
		}
	}
	if r := bob.call(wire.Request{Xid: 7, Op: wire.OpAuth, AuthScheme: "x509", AuthData: []byte("CN=alice,O=Arbor")}); r.Err != wire.CodeAuthFailed {
		t.Fatalf("an x509 identity claimed by an auth request: %v, want AuthFailed", r.Err)
	}
}

func TestAPlaintextClientOnATLSPortIsClosedAndLogged(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	s, logs := tlsServer(t, ca)
	for _, tc := range []struct {
		port  string
		addr  net.Addr
		hello []byte
	}{
		{"arbor", s.Addr(), wire.AppendConnectRequest(nil, &wire.ConnectRequest{ProtocolVersion: wire.ProtocolVersion, TimeoutMs: 5000})},
		{"zookeeper", s.ZKAddr(), []byte("ruok\n")}, // echo ruok | nc
	} {
		t.Run("on the "+tc.port+" port", func(t *testing.T) {
			before := logs.FilterMessage("closing connection: client sent plaintext to a TLS port").Len()
			nc, err := net.Dial("tcp", tc.addr.String())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := nc.Write(tc.hello); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(nc)
			if err != nil && !isReset(err) {
				t.Fatalf("reading from the TLS port: %v", err)
			}
			// Go's TLS server answers a record that is not TLS with nothing
			// an Arbor or ZooKeeper client could take for a reply.
			if len(b) >= 4 && strings.Contains(string(b), "imok") {
				t.Fatalf("the plaintext client was answered: %q", b)
			}
			waitLog(t, logs, "closing connection: client sent plaintext to a TLS port")
			if n := logs.FilterMessage("closing connection: client sent plaintext to a TLS port").Len(); n != before+1 {
				t.Fatalf("%d log lines for one plaintext client", n-before)
			}
		})
	}
	// The server still serves TLS clients.
	c := dialTLS(t, s.Addr().String(), clientTLS(t, ca, ca, pkix.Name{CommonName: "bob"}))
	if resp := c.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK {
		t.Fatalf("handshake after the plaintext clients: %v", resp.Err)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(err.Error(), "reset")
}

func TestATLSClientWithoutAGoodCertificateIsRefused(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	other := testcerts.NewCA(t, "another CA")
	s, logs := tlsServer(t, ca)
	for _, tc := range []struct {
		name string
		conf *tls.Config
	}{
		{"a certificate from another CA", clientTLS(t, ca, other, pkix.Name{CommonName: "mallory"})},
		{"no certificate", clientTLS(t, ca, nil, pkix.Name{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := logs.FilterMessage("closing connection: TLS handshake failed").Len()
			// With TLS 1.3 the client finishes its side of the handshake
			// before the server checks its certificate: the refusal arrives
			// when it reads.
			nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", s.Addr().String(), tc.conf)
			if err == nil {
				defer nc.Close()
				_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
				_, _ = nc.Write(wire.AppendConnectRequest(nil, &wire.ConnectRequest{ProtocolVersion: wire.ProtocolVersion, TimeoutMs: 5000}))
				_, err = wire.ReadFrame(bufio.NewReader(nc), nil, 1<<20)
			}
			if err == nil {
				t.Fatal("the server answered the handshake")
			}
			deadline := time.Now().Add(10 * time.Second)
			for logs.FilterMessage("closing connection: TLS handshake failed").Len() == before {
				if time.Now().After(deadline) {
					t.Fatalf("the refusal was not logged: %v", logs.All())
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

func TestASilentClientOnATLSPortDoesNotHoldUpClose(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	s, _ := tlsServer(t, ca, func(c *Config) { c.HandshakeTimeout, c.ShortHandshakeTimeout = time.Hour, time.Hour })
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// The silent client holds a connection goroutine in its TLS
	// handshake until Close, which must not wait the handshake timeout
	// (an hour) out.
	waitFor(t, "the silent client to be in its handshake", func() bool { return s.limits.handshakes.count() == 1 })
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close waits for a silent TLS client")
	}
}

func TestTLSSettingsThatDoNotGoTogetherAreRefused(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	f := ca.Issue(t, pkix.Name{CommonName: "localhost"})
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"a certificate without its key", func(c *Config) { c.TLSCert = f.Cert }, "needs both a certificate and its key"},
		{"a CA without a certificate", func(c *Config) { c.TLSCA = ca.File }, "needs both a certificate and its key"},
		{"a key that is not the certificate's", func(c *Config) { c.TLSCert, c.TLSKey = f.Cert, f.Cert }, "client port TLS"},
		{"a CA file with no certificate", func(c *Config) { c.TLSCert, c.TLSKey, c.TLSCA = f.Cert, f.Key, f.Key }, "holds no PEM certificate"},
		{"a secure port without a certificate", func(c *Config) { c.SecureListen = "127.0.0.1:0" }, "secure client ports need a TLS certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Listen: "127.0.0.1:0", HTTP: "-", DataDir: t.TempDir(), Logger: zaptest.NewLogger(t)}
			tc.mod(&cfg)
			s, err := New(cfg)
			if err == nil {
				s.Close()
				t.Fatal("New accepted the settings")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestRFC2253WritesSubjectsAsZooKeepersX509ProviderDoes(t *testing.T) {
	t.Parallel()
	cn, o, ou, c := []int{2, 5, 4, 3}, []int{2, 5, 4, 10}, []int{2, 5, 4, 11}, []int{2, 5, 4, 6}
	dc := []int{0, 9, 2342, 19200300, 100, 1, 25}
	email := []int{1, 2, 840, 113549, 1, 9, 1}
	atv := func(oid []int, v any) pkix.AttributeTypeAndValue {
		return pkix.AttributeTypeAndValue{Type: oid, Value: v}
	}
	for _, tc := range []struct {
		name string
		rdns pkix.RDNSequence
		want string
	}{
		{"the most specific name comes first",
			pkix.RDNSequence{{atv(c, "DE")}, {atv(o, "Arbor")}, {atv(cn, "alice")}}, "CN=alice,O=Arbor,C=DE"},
		{"the order is the certificate's own",
			pkix.RDNSequence{{atv(cn, "alice")}, {atv(o, "Arbor")}}, "O=Arbor,CN=alice"},
		{"special characters are escaped, and a space at either end",
			pkix.RDNSequence{{atv(o, "Arbor, Inc.")}, {atv(cn, " #a+b;c<d>\"e\\ ")}}, `CN=\ #a\+b\;c\<d\>\"e\\\ ,O=Arbor\, Inc.`},
		{"a number sign is escaped at the start only",
			pkix.RDNSequence{{atv(cn, "#a#")}}, `CN=\#a#`},
		{"a multi-valued name is joined with a plus, in its DER order",
			pkix.RDNSequence{{atv(ou, "ops"), atv(cn, "bob")}}, "CN=bob+OU=ops"},
		{"domain components have their keyword",
			pkix.RDNSequence{{atv(dc, "org")}, {atv(dc, "arbor")}}, "DC=arbor,DC=org"},
		{"other types are written as OID=#hex",
			pkix.RDNSequence{{atv(email, "a@b")}}, "1.2.840.113549.1.9.1=#0c03614062"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := asn1.Marshal(tc.rdns)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rfc2253(raw)
			if err != nil || got != tc.want {
				t.Fatalf("rfc2253 = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := rfc2253([]byte{0x30, 0x05, 0x01}); err == nil {
		t.Fatal("a malformed subject was accepted")
	}
}

// With secure ports (ZooKeeper's secureClientPort), TLS and plaintext
// clients are served at once, on both protocols, from the same tree; a
// plaintext client on a secure port is still refused.
func TestPlaintextAndTLSClientsAreServedAtOnce(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	s, logs := tlsServer(t, ca, func(cfg *Config) {
		cfg.SecureListen, cfg.ZKSecureListen = "127.0.0.1:0", "127.0.0.1:0"
	})
	plain := dialRaw(t, s)
	if resp := plain.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK {
		t.Fatalf("plaintext handshake on the plaintext port: %v", resp.Err)
	}
	if r := plain.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/both", Data: []byte("v")}); r.Err != wire.CodeOK {
		t.Fatalf("create over plaintext: %v", r.Err)
	}
	secure := dialTLS(t, s.SecureAddr().String(), clientTLS(t, ca, ca, pkix.Name{CommonName: "alice"}))
	if resp := secure.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK {
		t.Fatalf("TLS handshake on the secure port: %v", resp.Err)
	}
	if r := secure.call(wire.Request{Xid: 1, Op: wire.OpGetData, Path: "/both"}); r.Err != wire.CodeOK || string(r.Data) != "v" {
		t.Fatalf("getData over TLS: %q, %v", r.Data, r.Err)
	}
	if r := secure.call(wire.Request{Xid: 2, Op: wire.OpWhoAmI}); !slices.Contains(r.Identities, wire.Identity{Scheme: "x509", ID: "CN=alice"}) {
		t.Fatalf("the TLS client is %v, want x509:CN=alice among its identities", r.Identities)
	}
	if r := plain.call(wire.Request{Xid: 2, Op: wire.OpWhoAmI}); slices.ContainsFunc(r.Identities, func(id wire.Identity) bool { return id.Scheme == "x509" }) {
		t.Fatalf("the plaintext client has an x509 identity: %v", r.Identities)
	}

	ruok := func(nc net.Conn) string {
		t.Helper()
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		// echo ruok | nc: five bytes, a whole TLS record header to a TLS
		// port that gets plaintext.
		if _, err := nc.Write([]byte("ruok\n")); err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(nc)
		return string(b)
	}
	nc, err := net.Dial("tcp", s.ZKAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	if got := ruok(nc); got != "imok" {
		t.Fatalf("ruok on the plaintext ZooKeeper port: %q", got)
	}
	tc, err := tls.Dial("tcp", s.ZKSecureAddr().String(), clientTLS(t, ca, ca, pkix.Name{CommonName: "alice"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := ruok(tc); got != "imok" {
		t.Fatalf("ruok on the secure ZooKeeper port: %q", got)
	}

	before := logs.FilterMessage("closing connection: client sent plaintext to a TLS port").Len()
	nc, err = net.Dial("tcp", s.SecureAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	if got := ruok(nc); strings.Contains(got, "imok") {
		t.Fatalf("a plaintext client on the secure port was answered: %q", got)
	}
	waitLogFor(t, logs, "closing connection: client sent plaintext to a TLS port", 10*time.Second)
	if logs.FilterMessage("closing connection: client sent plaintext to a TLS port").Len() <= before {
		t.Fatal("the plaintext client on the secure port was not logged")
	}
}

// Sessions on a multiplexed TLS connection are its certificate's: each has
// the x509 identity, as a session on a TLS connection of its own has.
func TestSessionsOnAMultiplexedTLSConnectionHaveItsIdentity(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	s, _ := tlsServer(t, ca)
	m := client.NewMux(client.WithTLS(clientTLS(t, ca, ca, pkix.Name{CommonName: "alice", Organization: []string{"Arbor"}})))
	t.Cleanup(func() { m.Close() })
	for range 3 {
		c := dialClient(t, s, client.WithMux(m))
		ids, err := c.WhoAmI(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ids, client.Identity{Scheme: "x509", ID: "CN=alice,O=Arbor"}) {
			t.Fatalf("whoAmI = %v, want x509:CN=alice,O=Arbor", ids)
		}
	}
	if m.Conns() != 1 {
		t.Fatalf("the Mux holds %d connections, want 1", m.Conns())
	}
}
