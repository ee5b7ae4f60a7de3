package integration

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/internal/testcerts"
	"github.com/arbor-coord/arbor/server"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// tlsCluster is a cluster with TLS on the client and peer ports: each
// member has certificates of its own, client ones from clientCA and peer
// ones from peerCA, and requires the other side's certificate on both.
type tlsCluster struct {
	*cluster
	clientCA, peerCA *testcerts.CA
	logs             *observer.ObservedLogs // what the first members logged
}

func startTLSCluster(t *testing.T, n int) *tlsCluster {
	t.Helper()
	tc := &tlsCluster{clientCA: testcerts.NewCA(t, "arbor client CA"), peerCA: testcerts.NewCA(t, "arbor peer CA")}
	core, logs := observer.New(zapcore.InfoLevel)
	tc.logs = logs
	tc.cluster = startCluster(t, n, func(cfg *server.Config) {
		tc.withTLS(t, cfg, tc.peerCA)
		cfg.Logger = cfg.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) }))
	})
	return tc
}

// withTLS gives member cfg.ID certificates: a client-port one from
// clientCA and a peer one from peerCA (which may be a CA the cluster does
// not trust). The client certificate of user "admin" may change the
// membership.
func (tc *tlsCluster) withTLS(t *testing.T, cfg *server.Config, peerCA *testcerts.CA) {
	name := pkix.Name{CommonName: fmt.Sprintf("member %d", cfg.ID), Organization: []string{"Arbor"}}
	cf, pf := tc.clientCA.Issue(t, name), peerCA.Issue(t, name)
	cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = cf.Cert, cf.Key, tc.clientCA.File
	cfg.PeerTLSCert, cfg.PeerTLSKey, cfg.PeerTLSCA = pf.Cert, pf.Key, tc.peerCA.File
	cfg.AdminIdentities = []wire.Identity{{Scheme: "x509", ID: "CN=admin,O=Arbor"}}
}

// clientTLS is the TLS of a client with a certificate from the cluster's
// client CA.
func (tc *tlsCluster) clientTLS(t *testing.T, user string) client.Option {
	t.Helper()
	f := tc.clientCA.Issue(t, pkix.Name{CommonName: user, Organization: []string{"Arbor"}})
	conf, err := client.TLSConfigFromFiles(f.Cert, f.Key, tc.clientCA.File)
	if err != nil {
		t.Fatal(err)
	}
	return client.WithTLS(conf)
}

// joinWith starts member id, added to the cluster before, as a new member
// whose peer certificate peerCA issued.
func (tc *tlsCluster) joinWith(t *testing.T, id uint64, peerCA *testcerts.CA) {
	t.Helper()
	cfg := tc.cfgs[1]
	peers := map[uint64]string{}
	for m, mc := range tc.cfgs {
		peers[m] = mc.Peers[m]
	}
	peers[id] = tc.peerAddr(id)
	cfg.ID, cfg.Listen, cfg.DataDir, cfg.Peers, cfg.PeerAddr, cfg.Join = id, freePort(t), t.TempDir(), peers, "", true
	cfg.Logger = zaptest.NewLogger(t).Named(fmt.Sprintf("n%d", id))
	tc.withTLS(t, &cfg, peerCA)
	tc.cfgs[id] = cfg
	tc.start(id)
}

// waitApplied waits until member id applied at least index entries.
func (tc *tlsCluster) waitApplied(t *testing.T, id uint64, index uint64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for tc.servers[id].Status().Applied < index {
		if time.Now().After(deadline) {
			t.Fatalf("member %d applied %d entries, not %d, within 15s", id, tc.servers[id].Status().Applied, index)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAClusterWithTLSOnBothPortsElectsALeaderAndReplicates(t *testing.T) {
	t.Parallel()
	tc := startTLSCluster(t, 3)
	ctx := testCtx(t)
	lead := tc.leader()
	c := dial(t, tc.addr(lead), tc.clientTLS(t, "alice"))
	if _, err := c.Create(ctx, "/tls", []byte("secret"), client.Persistent); err != nil {
		t.Fatal(err)
	}
	tc.converged()
	for id := range tc.servers {
		m := dial(t, tc.addr(id), tc.clientTLS(t, "bob"))
		if err := m.Sync(ctx, "/tls"); err != nil {
			t.Fatal(err)
		}
		if data, _, err := m.Get(ctx, "/tls"); err != nil || string(data) != "secret" {
			t.Fatalf("member %d: get /tls = %q, %v", id, data, err)
		}
	}

	// A client reconnects over TLS: its member restarts on the same
	// address and the session carries on.
	f := tc.follower()
	fc := dial(t, tc.addr(f), tc.clientTLS(t, "carol"), client.WithSessionTimeout(10*time.Second))
	session := fc.SessionID()
	tc.stop(f)
	tc.start(f)
	if _, err := fc.Create(ctx, "/after-restart", nil, client.Persistent); err != nil {
		t.Fatalf("create after the member restarted: %v", err)
	}
	if fc.SessionID() != session {
		t.Fatalf("the session changed from %#x to %#x", session, fc.SessionID())
	}
	if n := tc.logs.FilterMessage("closing peer connection: TLS handshake failed").Len(); n > 0 {
		t.Fatalf("members refused each other %d times: %v", n, tc.logs.FilterMessage("closing peer connection: TLS handshake failed").All())
	}
}

func TestAMemberWithAPeerCertificateFromAnotherCACannotJoin(t *testing.T) {
	t.Parallel()
	tc := startTLSCluster(t, 3)
	ctx := testCtx(t)
	admin := dial(t, tc.addr(tc.leader()), tc.clientTLS(t, "admin"))
	if _, err := admin.Create(ctx, "/before", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}

	// Only an admin certificate may add it; another is refused, even from
	// loopback.
	bob := dial(t, tc.addr(tc.leader()), tc.clientTLS(t, "bob"))
	if _, err := bob.AddMember(ctx, 4, tc.peerAddr(4), true); !errors.Is(err, client.ErrNoAuth) {
		t.Fatalf("AddMember with bob's certificate: %v, want ErrNoAuth", err)
	}
	// A member whose certificate the cluster's peer CA signed joins.
	if _, err := admin.AddMember(ctx, 4, tc.peerAddr(4), true); err != nil {
		t.Fatal(err)
	}
	tc.joinWith(t, 4, tc.peerCA)
	tc.waitApplied(t, 4, tc.servers[tc.leader()].Status().Applied)

	// One with a certificate from another CA, which trusts the cluster's,
	// never hears from it: each side refuses the other's certificate.
	if _, err := admin.AddMember(ctx, 5, tc.peerAddr(5), true); err != nil {
		t.Fatal(err)
	}
	tc.joinWith(t, 5, testcerts.NewCA(t, "an intruder's CA"))
	if _, err := admin.Create(ctx, "/after", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	// The leader, which dials it, says why.
	refused := func() *observer.ObservedLogs {
		return tc.logs.FilterMessage("peer TLS handshake failed").Filter(func(e observer.LoggedEntry) bool {
			return e.ContextMap()["peer"] == uint64(5) && strings.Contains(fmt.Sprint(e.ContextMap()["error"]), "certificate")
		})
	}
	deadline := time.Now().Add(15 * time.Second)
	for refused().Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no member logged refusing the intruder's certificate: %v", tc.logs.FilterMessage("peer TLS handshake failed").All())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Ten election timeouts (of 10 ticks): long enough to have heard of
	// the leader.
	time.Sleep(10 * 10 * clusterTick)
	var applied uint64
	for id := uint64(1); id <= 3; id++ {
		applied = max(applied, tc.servers[id].Status().Applied)
	}
	tc.waitApplied(t, 4, applied) // the member that joined has /after
	if st := tc.servers[5].Status(); st.Leader != 0 || st.Applied != 0 {
		t.Fatalf("the intruder knows leader %d and applied %d entries", st.Leader, st.Applied)
	}
}

func TestATLSClientToAPlaintextPortGetsAClearError(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	conf, err := client.TLSConfigFromFiles("", "", testcerts.NewCA(t, "arbor CA").File)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	c, err := client.Dial(ctx, []string{s.Addr().String()}, client.WithTLS(conf))
	if err == nil {
		c.Close()
		t.Fatal("a TLS client got a session on a plaintext port")
	}
	if !strings.Contains(err.Error(), "is the server's port plaintext?") {
		t.Fatalf("the error does not say why: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Dial took %v with a 2s deadline", took)
	}
}
