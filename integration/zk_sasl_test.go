package integration

import (
	"bufio"
	"crypto/md5"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/internal/testcerts"
	"github.com/arbor-coord/arbor/server"
	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
)

// The tests in this file log in with SASL (DIGEST-MD5) on the ZooKeeper
// port the way ZooKeeper's clients do with a JAAS Client section: raw
// jute frames carry the sasl op (102), and the client's side of
// DIGEST-MD5 is computed here from RFC 2831, the way Java's client and
// kazoo's pure-sasl compute it (go-zookeeper has no SASL).

// saslUsersFile is a ZooKeeper server's jaas.conf.
const saslUsersFile = `Server {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       user_alice="alice-secret"
       user_bob="bob-secret"
       user_admin="admin-secret";
};
Client {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       username="alice"
       password="alice-secret";
};
`

// withSASL turns the ZooKeeper port on with the users of saslUsersFile,
// admin the superuser.
func withSASL(t *testing.T) func(*server.Config) {
	path := filepath.Join(t.TempDir(), "jaas.conf")
	if err := os.WriteFile(path, []byte(saslUsersFile), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(cfg *server.Config) {
		cfg.ZKListen, cfg.ZKSASLUsers, cfg.ZKSASLSuperUser = "127.0.0.1:0", path, "admin"
	}
}

// saslResponse answers a DIGEST-MD5 challenge for user and password as
// RFC 2831 has a client do (qop auth, no authzid), and returns the
// rspauth the server must answer.
func saslResponse(t *testing.T, challenge []byte, user, password string) (response []byte, rspauth string) {
	t.Helper()
	fields := map[string]string{}
	for _, kv := range strings.Split(string(challenge), ",") {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = strings.Trim(v, `"`)
	}
	realm, nonce := fields["realm"], fields["nonce"]
	if realm != "zk-sasl-md5" || nonce == "" || fields["qop"] != "auth" || fields["algorithm"] != "md5-sess" {
		t.Fatalf("challenge %q is not ZooKeeper's", challenge)
	}
	hex := func(s string) string { return fmt.Sprintf("%x", md5.Sum([]byte(s))) }
	const cnonce, uri = "OA6MHXh6VqTrRk", "zookeeper/zk-sasl-md5"
	secret := md5.Sum([]byte(user + ":" + realm + ":" + password))
	ha1 := hex(string(secret[:]) + ":" + nonce + ":" + cnonce)
	kd := func(a2 string) string { return hex(ha1 + ":" + nonce + ":00000001:" + cnonce + ":auth:" + hex(a2)) }
	response = fmt.Appendf(nil, `charset=utf-8,username="%s",realm="%s",nonce="%s",nc=00000001,cnonce="%s",digest-uri="%s",maxbuf=65536,response=%s,qop=auth`,
		user, realm, nonce, cnonce, uri, kd("AUTHENTICATE:"+uri))
	return response, "rspauth=" + kd(":"+uri)
}

// saslLogin logs c in as user with password and returns the reply to its
// last token: on success (Err 0) it has checked the server's rspauth.
func (c *rawZK) saslLogin(user, password string) zkwire.Reply {
	c.t.Helper()
	r := c.call(zkwire.Request{Op: zkwire.OpSASL, Data: []byte{}})
	if r.Err != 0 {
		return r
	}
	resp, rspauth := saslResponse(c.t, r.Data, user, password)
	r = c.call(zkwire.Request{Op: zkwire.OpSASL, Data: resp})
	if r.Err == 0 && string(r.Data) != rspauth {
		c.t.Fatalf("server's last token %q, want %q", r.Data, rspauth)
	}
	return r
}

// closedAfterFailure checks that c got AuthFailed with a null token and
// that the server then closed the connection.
func (c *rawZK) closedAfterFailure(r zkwire.Reply) {
	c.t.Helper()
	if r.Err != int32(wire.CodeAuthFailed) || r.Data != nil {
		c.t.Fatalf("reply %+v, want AuthFailed with a null token", r)
	}
	if _, err := c.read(zkwire.OpPing); !errors.Is(err, io.EOF) {
		c.t.Fatalf("connection after a failed SASL login: %v, want EOF", err)
	}
}

func (c *rawZK) whoAmI() []string {
	c.t.Helper()
	var ids []string
	for _, ci := range c.call(zkwire.Request{Op: zkwire.OpWhoAmI}).Clients {
		ids = append(ids, ci.AuthScheme+":"+ci.User)
	}
	return ids
}

func TestZooKeeperSASLLogin(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "", withSASL(t))
	addr := s.ZKAddr().String()
	onlyAlice := []zkwire.ACL{{Perms: zkwire.PermAll, ID: zkwire.ID{Scheme: "sasl", ID: "alice"}}}

	alice := dialRawZK(t, addr, zkwire.ConnectRequest{})
	t.Run("alice logs in and whoAmI lists her sasl identity", func(t *testing.T) {
		if r := alice.saslLogin("alice", "alice-secret"); r.Err != 0 {
			t.Fatalf("login: %+v", r)
		}
		if got := alice.whoAmI(); !slices.Equal(got, []string{"ip:127.0.0.1", "sasl:alice"}) {
			t.Fatalf("whoAmI = %q", got)
		}
	})
	t.Run("a node with the ACL sasl:alice:cdrwa is alice's", func(t *testing.T) {
		if r := alice.call(zkwire.Request{Op: zkwire.OpCreate, Path: "/sasl", Data: []byte("hers"), ACL: onlyAlice}); r.Err != 0 {
			t.Fatalf("create: %+v", r)
		}
		if r := alice.call(zkwire.Request{Op: zkwire.OpGetData, Path: "/sasl"}); r.Err != 0 || string(r.Data) != "hers" {
			t.Fatalf("alice's getData: %+v", r)
		}
		if r := alice.call(zkwire.Request{Op: zkwire.OpGetACL, Path: "/sasl"}); r.Err != 0 || !slices.Equal(r.ACL, onlyAlice) {
			t.Fatalf("getACL: %+v", r)
		}
		if r := alice.call(zkwire.Request{Op: zkwire.OpCreate, Path: "/sasl/auth", ACL: []zkwire.ACL{{Perms: zkwire.PermRead, ID: zkwire.ID{Scheme: "auth"}}}}); r.Err != 0 {
			t.Fatalf("create with auth: %+v", r)
		}
		want := []zkwire.ACL{{Perms: zkwire.PermRead, ID: zkwire.ID{Scheme: "sasl", ID: "alice"}}}
		if r := alice.call(zkwire.Request{Op: zkwire.OpGetACL, Path: "/sasl/auth"}); r.Err != 0 || !slices.Equal(r.ACL, want) {
			t.Fatalf("ACL auth after a SASL login = %+v, want %v", r.ACL, want)
		}
	})
	t.Run("bob, a client without a login and a digest alice get NoAuth", func(t *testing.T) {
		bob := dialRawZK(t, addr, zkwire.ConnectRequest{})
		if r := bob.saslLogin("bob", "bob-secret"); r.Err != 0 {
			t.Fatalf("bob's login: %+v", r)
		}
		anon := dialRawZK(t, addr, zkwire.ConnectRequest{})
		digest := dialRawZK(t, addr, zkwire.ConnectRequest{})
		if r := digest.call(zkwire.Request{Xid: zkwire.XidAuth, Op: zkwire.OpAuth, Scheme: "digest", Auth: []byte("alice:alice-secret")}); r.Err != 0 {
			t.Fatalf("digest auth: %+v", r)
		}
		for name, c := range map[string]*rawZK{"bob": bob, "no login": anon, "digest alice": digest} {
			if r := c.call(zkwire.Request{Op: zkwire.OpGetData, Path: "/sasl"}); r.Err != int32(wire.CodeNoAuth) {
				t.Errorf("%s's getData: %+v, want NoAuth", name, r)
			}
			if r := c.call(zkwire.Request{Op: zkwire.OpSetData, Path: "/sasl", Data: []byte("mine"), Version: -1}); r.Err != int32(wire.CodeNoAuth) {
				t.Errorf("%s's setData: %+v, want NoAuth", name, r)
			}
		}
	})
	t.Run("the SASL superuser passes every ACL", func(t *testing.T) {
		admin := dialRawZK(t, addr, zkwire.ConnectRequest{})
		if r := admin.saslLogin("admin", "admin-secret"); r.Err != 0 {
			t.Fatalf("admin's login: %+v", r)
		}
		if got := admin.whoAmI(); !slices.Equal(got, []string{"ip:127.0.0.1", "sasl:admin", "super:admin"}) {
			t.Fatalf("whoAmI = %q", got)
		}
		if r := admin.call(zkwire.Request{Op: zkwire.OpGetData, Path: "/sasl"}); r.Err != 0 || string(r.Data) != "hers" {
			t.Fatalf("admin's getData: %+v", r)
		}
	})
	t.Run("a wrong password fails the login and closes the connection, the server stays up", func(t *testing.T) {
		c := dialRawZK(t, addr, zkwire.ConnectRequest{})
		c.closedAfterFailure(c.saslLogin("alice", "bob-secret"))
		again := dialRawZK(t, addr, zkwire.ConnectRequest{})
		if r := again.saslLogin("alice", "alice-secret"); r.Err != 0 {
			t.Fatalf("login after a failed one: %+v", r)
		}
		if r := again.call(zkwire.Request{Op: zkwire.OpGetData, Path: "/sasl"}); r.Err != 0 {
			t.Fatalf("getData after a failed login elsewhere: %+v", r)
		}
		if r := alice.call(zkwire.Request{Op: zkwire.OpExists, Path: "/sasl"}); r.Err != 0 {
			t.Fatalf("alice's first connection after a failed login elsewhere: %+v", r)
		}
	})
	t.Run("an unknown user fails the login", func(t *testing.T) {
		c := dialRawZK(t, addr, zkwire.ConnectRequest{})
		c.closedAfterFailure(c.saslLogin("mallory", "alice-secret"))
	})
	t.Run("a malformed first token fails the login", func(t *testing.T) {
		c := dialRawZK(t, addr, zkwire.ConnectRequest{})
		c.closedAfterFailure(c.call(zkwire.Request{Op: zkwire.OpSASL, Data: []byte("username=\"alice\",\x00")}))
	})
	t.Run("a malformed response fails the login", func(t *testing.T) {
		c := dialRawZK(t, addr, zkwire.ConnectRequest{})
		if r := c.call(zkwire.Request{Op: zkwire.OpSASL, Data: []byte{}}); r.Err != 0 {
			t.Fatalf("first token: %+v", r)
		}
		c.closedAfterFailure(c.call(zkwire.Request{Op: zkwire.OpSASL, Data: []byte(`username="alice,response=`)}))
	})
	t.Run("a response replayed on another connection fails the login", func(t *testing.T) {
		first := dialRawZK(t, addr, zkwire.ConnectRequest{})
		r := first.call(zkwire.Request{Op: zkwire.OpSASL, Data: []byte{}})
		resp, _ := saslResponse(t, r.Data, "alice", "alice-secret")
		if r := first.call(zkwire.Request{Op: zkwire.OpSASL, Data: resp}); r.Err != 0 {
			t.Fatalf("first login: %+v", r)
		}
		second := dialRawZK(t, addr, zkwire.ConnectRequest{})
		if r := second.call(zkwire.Request{Op: zkwire.OpSASL, Data: []byte{}}); r.Err != 0 {
			t.Fatalf("second's first token: %+v", r)
		}
		second.closedAfterFailure(second.call(zkwire.Request{Op: zkwire.OpSASL, Data: resp}))
	})
	t.Run("a token after a login fails and closes the connection, as ZooKeeper's completed exchange does", func(t *testing.T) {
		c := dialRawZK(t, addr, zkwire.ConnectRequest{})
		if r := c.saslLogin("bob", "bob-secret"); r.Err != 0 {
			t.Fatalf("login: %+v", r)
		}
		c.closedAfterFailure(c.call(zkwire.Request{Op: zkwire.OpSASL, Data: []byte{}}))
	})
	t.Run("an auth packet of scheme sasl still fails", func(t *testing.T) {
		c := dialRawZK(t, addr, zkwire.ConnectRequest{})
		if r := c.call(zkwire.Request{Xid: zkwire.XidAuth, Op: zkwire.OpAuth, Scheme: "sasl", Auth: []byte("alice")}); r.Err != int32(wire.CodeAuthFailed) {
			t.Fatalf("auth sasl: %+v", r)
		}
	})
	t.Run("an Arbor client may give a node a sasl ACL, and cannot pass it", func(t *testing.T) {
		ac := dial(t, s.Addr().String())
		ctx := testCtx(t)
		if _, err := ac.Create(ctx, "/sasl-arbor", []byte("x"), client.Persistent, client.WithACL(client.SASLACL(client.PermAll, "alice"))); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ac.Get(ctx, "/sasl-arbor"); !errors.Is(err, client.ErrNoAuth) {
			t.Fatalf("the Arbor client's get: %v, want ErrNoAuth", err)
		}
		if r := alice.call(zkwire.Request{Op: zkwire.OpGetData, Path: "/sasl-arbor"}); r.Err != 0 {
			t.Fatalf("alice's getData: %+v", r)
		}
	})
}

func TestZooKeeperSASLWithoutUsers(t *testing.T) {
	t.Parallel()
	// ZooKeeper's server without a JAAS Server section answers a sasl
	// token OK with a null token (its Java client then gives up with
	// AuthFailed); Arbor refuses a second one.
	s := startServer(t, "", "", withZK)
	c := dialRawZK(t, s.ZKAddr().String(), zkwire.ConnectRequest{})
	if r := c.call(zkwire.Request{Op: zkwire.OpSASL, Data: []byte{}}); r.Err != 0 || r.Data != nil {
		t.Fatalf("first token: %+v, want OK with a null token", r)
	}
	if r := c.call(zkwire.Request{Op: zkwire.OpExists, Path: "/"}); r.Err != 0 {
		t.Fatalf("the connection after it: %+v", r)
	}
	c.closedAfterFailure(c.call(zkwire.Request{Op: zkwire.OpSASL, Data: []byte{}}))
	if got := dialRawZK(t, s.ZKAddr().String(), zkwire.ConnectRequest{}).whoAmI(); !slices.Equal(got, []string{"ip:127.0.0.1"}) {
		t.Fatalf("another client's whoAmI: %q", got)
	}
}

func TestZooKeeperSASLOverTLS(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	sf := ca.Issue(t, pkix.Name{CommonName: "localhost"})
	s := startServer(t, "", "", withSASL(t), func(cfg *server.Config) {
		cfg.TLSCert, cfg.TLSKey = sf.Cert, sf.Key
		cfg.ZKSecureListen = "127.0.0.1:0"
	})
	conf, err := client.TLSConfigFromFiles("", "", ca.File)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := tls.Dial("tcp", s.ZKSecureAddr().String(), conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	c := &rawZK{t: t, nc: nc, br: bufio.NewReader(nc)}
	c.write(zkwire.AppendConnectRequest(nil, &zkwire.ConnectRequest{TimeOut: 5000, Passwd: make([]byte, 16)}))
	body, err := wire.ReadFrame(c.br, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := zkwire.DecodeConnectResponse(body, &c.resp); err != nil || c.resp.SessionID == 0 {
		t.Fatalf("ConnectResponse %+v, %v", c.resp, err)
	}
	if r := c.saslLogin("bob", "bob-secret"); r.Err != 0 {
		t.Fatalf("login over TLS: %+v", r)
	}
	if got := c.whoAmI(); !slices.Equal(got, []string{"ip:127.0.0.1", "sasl:bob"}) {
		t.Fatalf("whoAmI = %q", got)
	}
}

func TestZooKeeperSASLUsersFileErrorsAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(bad, []byte(`Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_alice "pw-in-bad-file"; };`), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "jaas.conf")
	if err := os.WriteFile(good, []byte(saslUsersFile), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		users, supe string
		want        string
	}{
		{"a file that does not parse", bad, "", "line 1"},
		{"a missing file", filepath.Join(dir, "missing.conf"), "", "no such file"},
		{"a superuser who is not a user", good, "root", `"root" is not a user`},
		{"a superuser without users", "", "admin", "needs a SASL users file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := server.New(server.Config{
				Listen: "127.0.0.1:0", HTTP: "-", ZKListen: "127.0.0.1:0", DataDir: t.TempDir(),
				ZKSASLUsers: tc.users, ZKSASLSuperUser: tc.supe,
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "pw-in-bad-file") {
				t.Fatalf("the error %q holds a password", err)
			}
		})
	}
}
