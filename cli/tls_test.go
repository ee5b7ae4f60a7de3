package cli

import (
	"crypto/x509/pkix"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/internal/testcerts"
	"github.com/arbor-coord/arbor/server"
	"go.uber.org/zap/zaptest"
)

func TestTheTLSFlagsReachATLSServerThatRequiresClientCertificates(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	srv := ca.Issue(t, pkix.Name{CommonName: "localhost"})
	s := newServer(t, server.Config{
		Listen: "127.0.0.1:0", HTTP: "-", DataDir: t.TempDir(),
		TickInterval: 10 * time.Millisecond, Logger: zaptest.NewLogger(t),
		TLSCert: srv.Cert, TLSKey: srv.Key, TLSCA: ca.File,
	})
	addr := s.Addr().String()
	alice := ca.Issue(t, pkix.Name{CommonName: "alice", Organization: []string{"Arbor"}})

	must(t, addr, "--tls-cert", alice.Cert, "--tls-key", alice.Key, "--tls-ca", ca.File, "create", "/tls", "over TLS")
	env := []string{"ARBOR_TLS_CERT=" + alice.Cert, "ARBOR_TLS_KEY=" + alice.Key, "ARBOR_TLS_CA=" + ca.File}
	if r := runArbor(t, "", env, "--servers", addr, "get", "/tls"); r.code != 0 || r.stdout != "over TLS\n" {
		t.Fatalf("get with the ARBOR_TLS_* variables: %v", r)
	}

	t.Run("arbor bench opens its sessions over TLS", func(t *testing.T) {
		rep := decode[jBench](t, must(t, addr, "--tls-cert", alice.Cert, "--tls-key", alice.Key, "--tls-ca", ca.File,
			"bench", "session", "-o", "json", "--ops", "10", "--duration", "20s", "--warmup", "0", "--workers", "1"))
		if rep.Ops != 10 || rep.Errors != 0 {
			t.Fatalf("%d sessions, %d errors over TLS", rep.Ops, rep.Errors)
		}
	})
	t.Run("without a client certificate the server refuses the session", func(t *testing.T) {
		// The client tries until its timeout and reports the last refusal:
		// 5 s gives a loaded machine's handshakes time to be refused, not
		// cut by the deadline.
		r := arbor(t, addr, "--timeout", "5s", "--tls-ca", ca.File, "get", "/tls")
		if r.code != 1 || !strings.Contains(r.stderr, "certificate required") {
			t.Fatalf("want exit 1 saying a certificate is required: %v", r)
		}
	})
	t.Run("a plaintext client is told nothing it could take for an answer", func(t *testing.T) {
		r := arbor(t, addr, "--timeout", "2s", "get", "/tls")
		if r.code != 1 || !strings.Contains(r.stderr, "cannot reach") {
			t.Fatalf("want exit 1, cannot reach: %v", r)
		}
	})
	t.Run("a certificate without its key is a usage mistake", func(t *testing.T) {
		r := arbor(t, addr, "--tls-cert", alice.Cert, "get", "/tls")
		if r.code != 2 || !strings.Contains(r.stderr, "--tls-cert and --tls-key go together") {
			t.Fatalf("want exit 2: %v", r)
		}
	})
}
