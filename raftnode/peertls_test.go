package raftnode

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/internal/testcerts"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// peerTLSOption is WithTLS with a certificate for member id from ca,
// trusting trust (both ways), or plaintext when ca is nil.
func peerTLSOption(t *testing.T, ca, trust *testcerts.CA, id int) []TransportOption {
	t.Helper()
	if ca == nil {
		return nil
	}
	f := ca.Issue(t, pkix.Name{CommonName: "member", SerialNumber: string(rune('0' + id))})
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(trust.File)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	listen := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	dial := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return []TransportOption{WithTLS(listen, dial)}
}

// transportPair is transport 1 sending to transport 2, each with opts of
// its own, their logs observed, and what 2 received of session touches.
type transportPair struct {
	logs    *observer.ObservedLogs
	touched chan []int64
	from    *TCPTransport
}

func newTransportPair(t *testing.T, opts1, opts2 []TransportOption) *transportPair {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	log := func(name string) *zap.Logger {
		return zaptest.NewLogger(t).Named(name).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) }))
	}
	t2, err := NewTCPTransport(2, "127.0.0.1:0", nil, log("t2"), opts2...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { t2.Close() })
	p := &transportPair{logs: logs, touched: make(chan []int64, 100)}
	t2.Attach(nil, func(ids []int64) { p.touched <- ids })
	p.from, err = NewTCPTransport(1, "127.0.0.1:0", map[uint64]string{2: t2.Addr().String()}, log("t1"), opts1...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.from.Close() })
	return p
}

// waitLog waits until the pair logged msg, and returns its entries.
func (p *transportPair) waitLog(t *testing.T, msg string, within time.Duration) []observer.LoggedEntry {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		p.from.SendTouches(2, []int64{1})
		if l := p.logs.FilterMessage(msg); l.Len() > 0 {
			return l.All()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %v", msg, p.logs.All())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPeersWithCertificatesFromTheirCATalkOverTLS(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "peer CA")
	p := newTransportPair(t, peerTLSOption(t, ca, ca, 1), peerTLSOption(t, ca, ca, 2))
	deadline := time.After(10 * time.Second)
	for {
		p.from.SendTouches(2, []int64{7, 8})
		select {
		case ids := <-p.touched:
			if len(ids) != 2 || ids[0] != 7 || ids[1] != 8 {
				t.Fatalf("received touches %v, sent [7 8]", ids)
			}
			if n := len(p.logs.All()); n != 0 {
				t.Fatalf("the transports logged %v", p.logs.All())
			}
			return
		case <-deadline:
			t.Fatalf("nothing arrived over TLS: %v", p.logs.All())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestPeersRefuseEachOthersTLSWhenItDoesNotMatch(t *testing.T) {
	t.Parallel()
	ca, other := testcerts.NewCA(t, "peer CA"), testcerts.NewCA(t, "another CA")
	for _, tc := range []struct {
		name         string
		opts1, opts2 func(t *testing.T) []TransportOption
		log          string // what one side logs
		within       time.Duration
	}{
		{"a certificate from another CA",
			func(t *testing.T) []TransportOption { return peerTLSOption(t, other, ca, 1) },
			func(t *testing.T) []TransportOption { return peerTLSOption(t, ca, ca, 2) },
			"closing peer connection: TLS handshake failed", 10 * time.Second},
		{"a plaintext member dialing a TLS peer port",
			func(*testing.T) []TransportOption { return nil },
			func(t *testing.T) []TransportOption { return peerTLSOption(t, ca, ca, 2) },
			"closing peer connection: it sent plaintext to a TLS port", 10 * time.Second},
		{"a TLS member dialing a plaintext peer port",
			func(t *testing.T) []TransportOption { return peerTLSOption(t, ca, ca, 1) },
			func(*testing.T) []TransportOption { return nil },
			"peer TLS handshake failed: no answer (is its peer port plaintext?)", peerTLSDialTimeout + 10*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTransportPair(t, tc.opts1(t), tc.opts2(t))
			p.waitLog(t, tc.log, tc.within)
			time.Sleep(200 * time.Millisecond) // more attempts, which are not logged again
			if n := p.logs.FilterMessage(tc.log).Len(); n != 1 {
				t.Fatalf("%d log lines for one misconfigured peer: %v", n, p.logs.All())
			}
			select {
			case ids := <-p.touched:
				t.Fatalf("touches %v got through", ids)
			default:
			}
		})
	}
}

func TestReadBodyReadsALongBodyInChunksAndFailsOnAShortOne(t *testing.T) {
	t.Parallel()
	want := bytes.Repeat([]byte("arbor"), 1<<20) // 5 MiB: several chunks
	got, err := readBody(bytes.NewReader(want), len(want))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("readBody of %d bytes: %d bytes, %v", len(want), len(got), err)
	}
	// What a TLS ClientHello's first bytes claim, with nothing after.
	claimed := int(binary.BigEndian.Uint32([]byte{0x16, 0x03, 0x01, 0x00}))
	if _, err := readBody(bytes.NewReader(want[:100]), claimed); err == nil {
		t.Fatal("a short body was read")
	}
}

func TestTheRecordOfRefusedPeerHostsStaysBounded(t *testing.T) {
	t.Parallel()
	tr := &TCPTransport{refused: map[string]string{}}
	refusal := errors.New("tls: bad certificate")
	for i := range 3 * maxRefusedHosts {
		if last := tr.noteHandshake(fmt.Sprintf("10.0.%d.%d", i/256, i%256), refusal); last != "" {
			t.Fatalf("a new host had a last refusal %q", last)
		}
		if len(tr.refused) > maxRefusedHosts {
			t.Fatalf("%d hosts remembered, more than %d", len(tr.refused), maxRefusedHosts)
		}
	}
	tr.noteHandshake("127.0.0.1", refusal)
	if last := tr.noteHandshake("127.0.0.1", refusal); last != refusal.Error() {
		t.Fatalf("a host refused again had last refusal %q", last)
	}
	if tr.noteHandshake("127.0.0.1", nil); tr.refused["127.0.0.1"] != "" {
		t.Fatal("a host that then succeeded is still remembered")
	}
}
