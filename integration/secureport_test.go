package integration

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/internal/testcerts"
	"github.com/arbor-coord/arbor/server"
	"github.com/go-zookeeper/zk"
)

// With secure ports beside the plaintext ones (ZooKeeper's
// secureClientPort beside its clientPort), go-zookeeper and Arbor clients
// over TLS and over plaintext share one tree at once.
func TestTLSAndPlaintextClientsOfBothProtocolsAtOnce(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	sf := ca.Issue(t, pkix.Name{CommonName: "localhost"})
	s := startServer(t, "", "", func(cfg *server.Config) {
		cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = sf.Cert, sf.Key, ca.File
		cfg.ZKListen, cfg.SecureListen, cfg.ZKSecureListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	})
	cf := ca.Issue(t, pkix.Name{CommonName: "app"})
	conf, err := client.TLSConfigFromFiles(cf.Cert, cf.Key, ca.File)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	arborPlain := dial(t, s.Addr().String())
	arborTLS, err := client.Dial(ctx, []string{s.SecureAddr().String()}, client.WithTLS(conf))
	if err != nil {
		t.Fatal(err)
	}
	defer arborTLS.Close()
	zkPlain := dialZK(t, []string{s.ZKAddr().String()}, 5*time.Second)
	zkTLS, _, err := zk.Connect([]string{s.ZKSecureAddr().String()}, 5*time.Second, zk.WithLogger(newZKLogger(t)),
		zk.WithDialer(func(network, addr string, timeout time.Duration) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, conf.Clone())
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer zkTLS.Close()

	if _, err := arborPlain.Create(ctx, "/both", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	if _, err := arborTLS.Create(ctx, "/both/arbor-tls", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	open := zk.WorldACL(zk.PermAll)
	if _, err := zkPlain.Create("/both/zk-plain", nil, 0, open); err != nil {
		t.Fatal(err)
	}
	if _, err := zkTLS.Create("/both/zk-tls", nil, 0, open); err != nil {
		t.Fatalf("create over ZooKeeper's protocol and TLS: %v", err)
	}
	want := []string{"arbor-tls", "zk-plain", "zk-tls"}
	if kids, _, err := arborPlain.Children(ctx, "/both"); err != nil || !slices.Equal(kids, want) {
		t.Fatalf("the plaintext Arbor client lists %v, %v; want %v", kids, err, want)
	}
	kids, _, err := zkTLS.Children("/both")
	slices.Sort(kids)
	if err != nil || !slices.Equal(kids, want) {
		t.Fatalf("the TLS ZooKeeper client lists %v, %v; want %v", kids, err, want)
	}
}
