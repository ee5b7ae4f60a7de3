package sasl

import (
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// testClient is the client's side of DIGEST-MD5, written for the tests
// from RFC 2831 alone (it shares no code with the server's side), the way
// Java's client and Python's pure-sasl answer ZooKeeper's challenge.
type testClient struct {
	user, password string
	digestURI      string // default zookeeper/zk-sasl-md5
	authzid        string
	cnonce         string
	latin1         bool // hash names and password in ISO 8859-1, as Java's client does

	// set from the challenge
	realm, nonce string
	ha1          string
}

func md5hex(s string) string { return fmt.Sprintf("%x", md5.Sum([]byte(s))) }

// challengeValue finds name="value" or name=value in a challenge.
func challengeValue(t testing.TB, challenge, name string) string {
	t.Helper()
	for _, part := range strings.Split(challenge, ",") {
		k, v, ok := strings.Cut(part, "=")
		if ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	t.Fatalf("challenge %q has no %s", challenge, name)
	return ""
}

// respond answers a challenge with a digest-response; edit may change the
// directives before they are written.
func (c *testClient) respond(t testing.TB, challenge []byte, edit func(map[string]string)) []byte {
	t.Helper()
	ch := string(challenge)
	c.realm, c.nonce = challengeValue(t, ch, "realm"), challengeValue(t, ch, "nonce")
	if q := challengeValue(t, ch, "qop"); q != "auth" {
		t.Fatalf("challenge offers qop %q, want auth", q)
	}
	if a := challengeValue(t, ch, "algorithm"); a != "md5-sess" {
		t.Fatalf("challenge's algorithm %q, want md5-sess", a)
	}
	if c.digestURI == "" {
		c.digestURI = "zookeeper/zk-sasl-md5"
	}
	if c.cnonce == "" {
		c.cnonce = "fFDVJsYsYb5dnHBdoDsXyw"
	}
	enc := func(s string) string {
		if !c.latin1 {
			return s
		}
		var b []byte
		for _, r := range s {
			if r > 0xff {
				return s
			}
			b = append(b, byte(r))
		}
		return string(b)
	}
	inner := md5.Sum([]byte(enc(c.user) + ":" + enc(c.realm) + ":" + enc(c.password)))
	a1 := string(inner[:]) + ":" + c.nonce + ":" + c.cnonce
	if c.authzid != "" {
		a1 += ":" + c.authzid
	}
	c.ha1 = md5hex(a1)
	d := map[string]string{
		"charset": "utf-8", "username": `"` + c.user + `"`, "realm": `"` + c.realm + `"`,
		"nonce": `"` + c.nonce + `"`, "nc": "00000001", "cnonce": `"` + c.cnonce + `"`,
		"digest-uri": `"` + c.digestURI + `"`, "qop": "auth", "maxbuf": "65536",
		"response": md5hex(c.ha1 + ":" + c.nonce + ":00000001:" + c.cnonce + ":auth:" + md5hex("AUTHENTICATE:"+c.digestURI)),
	}
	if c.authzid != "" {
		d["authzid"] = `"` + c.authzid + `"`
	}
	if edit != nil {
		edit(d)
	}
	var parts []string
	for _, k := range []string{"charset", "username", "realm", "nonce", "nc", "cnonce", "digest-uri", "maxbuf", "response", "qop", "authzid"} {
		if v, ok := d[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return []byte(strings.Join(parts, ","))
}

// checkRspauth checks the server's last token.
func (c *testClient) checkRspauth(t *testing.T, answer []byte) {
	t.Helper()
	want := "rspauth=" + md5hex(c.ha1+":"+c.nonce+":00000001:"+c.cnonce+":auth:"+md5hex(":"+c.digestURI))
	if string(answer) != want {
		t.Fatalf("server's answer %q, want %q", answer, want)
	}
}

var testUsers = map[string]string{"alice": "alice-secret", "bob": "bob-secret", "jörg": "pässwörd", "mei": "密码"}

func testConfig() Config {
	return ZooKeeperConfig(func(u string) (string, bool) { p, ok := testUsers[u]; return p, ok })
}

// login runs an exchange to its end with client c.
func login(t *testing.T, d *DigestMD5, c *testClient, edit func(map[string]string)) ([]byte, bool, error) {
	t.Helper()
	challenge, done, err := d.Next(nil)
	if err != nil || done {
		t.Fatalf("first step: %q, %v, %v", challenge, done, err)
	}
	return d.Next(c.respond(t, challenge, edit))
}

func TestRFC2831Example(t *testing.T) {
	// RFC 2831, section 4, adapted: the IMAP example's exchange, in its
	// base64 as the RFC prints it, run against a server configured with
	// the example's realm, service, nonce and user chris/secret.
	b64 := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	d := NewDigestMD5(Config{
		Realm: "elwood.innosoft.com", Service: "imap", Host: "elwood.innosoft.com",
		Password: func(u string) (string, bool) { return "secret", u == "chris" },
		Nonce:    func() string { return "OA6MG9tEQGm2hh" },
	})
	challenge, _, err := d.Next(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The RFC's challenge, in another order: Java's server writes qop
	// before charset and algorithm.
	rfcChallenge := b64(`cmVhbG09ImVsd29vZC5pbm5vc29mdC5jb20iLG5vbmNlPSJPQTZNRzl0
		RVFHbTJoaCIscW9wPSJhdXRoIixhbGdvcml0aG09bWQ1LXNlc3MsY2hh
		cnNldD11dGYtOA==`)
	got, want := strings.Split(string(challenge), ","), strings.Split(string(rfcChallenge), ",")
	for _, w := range want {
		if !strings.Contains(","+string(challenge)+",", ","+w+",") {
			t.Errorf("challenge %q lacks the RFC's %q", challenge, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("challenge %q, the RFC's %q", challenge, rfcChallenge)
	}
	answer, done, err := d.Next(b64(`Y2hhcnNldD11dGYtOCx1c2VybmFtZT0iY2hyaXMiLHJlYWxtPSJlbHdvb2
		QuaW5ub3NvZnQuY29tIixub25jZT0iT0E2TUc5dEVRR20yaGgiLG5jPTAw
		MDAwMDAxLGNub25jZT0iT0E2TUhYaDZWcVRyUmsiLGRpZ2VzdC11cmk9Im
		ltYXAvZWx3b29kLmlubm9zb2Z0LmNvbSIscmVzcG9uc2U9ZDM4OGRhZDkw
		ZDRiYmQ3NjBhMTUyMzIxZjIxNDNhZjcscW9wPWF1dGg=`))
	if err != nil || !done || d.User() != "chris" {
		t.Fatalf("the RFC's response: done %v, user %q, %v", done, d.User(), err)
	}
	if want := b64(`cnNwYXV0aD1lYTQwZjYwMzM1YzQyN2I1NTI3Yjg0ZGJhYmNkZmZmZA==`); string(answer) != string(want) {
		t.Fatalf("answer %q, the RFC's %q", answer, want)
	}
}

func TestDigestMD5Logins(t *testing.T) {
	tests := []struct {
		name   string
		client testClient
		edit   func(map[string]string)
		want   error // nil: the login succeeds
	}{
		{name: "a user with the right password logs in", client: testClient{user: "alice", password: "alice-secret"}},
		{name: "an authzid counts in the digest and the login is the user's",
			client: testClient{user: "bob", password: "bob-secret", authzid: "alice"}},
		{name: "a digest in upper case is the same digest", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { d["response"] = strings.ToUpper(d["response"]) }},
		{name: "no qop means auth", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { delete(d, "qop") }},
		{name: "a digest-uri with a serv-name is taken", client: testClient{user: "alice", password: "alice-secret", digestURI: "zookeeper/ZK-SASL-MD5/zk1"}},
		{name: "a non-ASCII password hashed in ISO 8859-1, as Java's client does",
			client: testClient{user: "jörg", password: "pässwörd", latin1: true}},
		{name: "a non-ASCII password hashed in UTF-8, as pure-sasl does",
			client: testClient{user: "jörg", password: "pässwörd"}},
		{name: "a password beyond ISO 8859-1 is hashed in UTF-8 either way",
			client: testClient{user: "mei", password: "密码", latin1: true}},

		{name: "a wrong password is refused", client: testClient{user: "alice", password: "bob-secret"}, want: ErrWrongPassword},
		{name: "another user's password is refused", client: testClient{user: "bob", password: "alice-secret"}, want: ErrWrongPassword},
		{name: "a user's name in another case is another user", client: testClient{user: "Alice", password: "alice-secret"}, want: ErrUnknownUser},
		{name: "an unknown user is refused", client: testClient{user: "mallory", password: ""}, want: ErrUnknownUser},
		{name: "another digest-uri host is refused", client: testClient{user: "alice", password: "alice-secret", digestURI: "zookeeper/zk1.example.com"}, want: ErrRefused},
		{name: "another service is refused", client: testClient{user: "alice", password: "alice-secret", digestURI: "ldap/zk-sasl-md5"}, want: ErrRefused},
		{name: "a digest-uri without a host is refused", client: testClient{user: "alice", password: "alice-secret", digestURI: "zookeeper"}, want: ErrRefused},
		{name: "another realm is refused", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { d["realm"] = `"EXAMPLE.COM"` }, want: ErrRefused},
		{name: "a response without a realm is refused", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { delete(d, "realm") }, want: ErrRefused},
		{name: "another nonce is refused", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { d["nonce"] = `"bm9uY2U="` }, want: ErrRefused},
		{name: "a nonce count past 1 is refused", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { d["nc"] = "00000002" }, want: ErrRefused},
		{name: "qop auth-int is refused", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { d["qop"] = "auth-int" }, want: ErrRefused},
		{name: "a charset other than utf-8 is refused", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { d["charset"] = "iso-8859-1" }, want: ErrRefused},

		{name: "a response without a username is malformed", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { delete(d, "username") }, want: ErrMalformed},
		{name: "a response without a cnonce is malformed", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { delete(d, "cnonce") }, want: ErrMalformed},
		{name: "a digest that is not hex is malformed", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { d["response"] = strings.Repeat("z", 32) }, want: ErrMalformed},
		{name: "a short digest is malformed", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { d["response"] = "d388dad90d4bbd760a152321f2143af" }, want: ErrMalformed},
		{name: "an unclosed quote is malformed", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { d["cnonce"] = `"abc` }, want: ErrMalformed},
		{name: "a directive named twice is malformed", client: testClient{user: "alice", password: "alice-secret"},
			edit: func(d map[string]string) { d["qop"] = `auth,qop=auth` }, want: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDigestMD5(testConfig())
			c := tt.client
			answer, done, err := login(t, d, &c, tt.edit)
			if tt.want != nil {
				if !errors.Is(err, tt.want) || done || answer != nil || d.User() != "" {
					t.Fatalf("got %q, done %v, user %q, %v; want %v", answer, done, d.User(), err, tt.want)
				}
				if strings.Contains(err.Error(), c.password) && c.password != "" {
					t.Fatalf("the error %q holds the password", err)
				}
				return
			}
			if err != nil || !done {
				t.Fatalf("login failed: done %v, %v", done, err)
			}
			c.checkRspauth(t, answer)
			if d.User() != c.user {
				t.Fatalf("logged in %q, want %q", d.User(), c.user)
			}
		})
	}
}

func TestDigestMD5ExchangeSteps(t *testing.T) {
	alice := func() *testClient { return &testClient{user: "alice", password: "alice-secret"} }
	t.Run("each exchange has its own nonce", func(t *testing.T) {
		c1, _, _ := NewDigestMD5(testConfig()).Next(nil)
		c2, _, _ := NewDigestMD5(testConfig()).Next(nil)
		n1, n2 := challengeValue(t, string(c1), "nonce"), challengeValue(t, string(c2), "nonce")
		if n1 == n2 || len(n1) < 32 {
			t.Fatalf("nonces %q and %q", n1, n2)
		}
	})
	t.Run("a response replayed to another exchange is refused", func(t *testing.T) {
		first := NewDigestMD5(testConfig())
		challenge, _, _ := first.Next(nil)
		resp := alice().respond(t, challenge, nil)
		if _, done, err := first.Next(resp); !done || err != nil {
			t.Fatalf("first login: %v", err)
		}
		second := NewDigestMD5(testConfig())
		_, _, _ = second.Next(nil)
		if _, done, err := second.Next(resp); done || !errors.Is(err, ErrRefused) {
			t.Fatalf("replayed response: done %v, %v; want ErrRefused", done, err)
		}
	})
	t.Run("a token after the login is refused", func(t *testing.T) {
		d := NewDigestMD5(testConfig())
		challenge, _, _ := d.Next(nil)
		resp := alice().respond(t, challenge, nil)
		if _, done, err := d.Next(resp); !done || err != nil {
			t.Fatalf("login: %v", err)
		}
		for _, tok := range [][]byte{resp, nil} {
			if _, done, err := d.Next(tok); done || !errors.Is(err, ErrOver) {
				t.Fatalf("token after the login: done %v, %v; want ErrOver", done, err)
			}
		}
		if d.User() != "alice" {
			t.Fatalf("user %q after a refused token", d.User())
		}
	})
	t.Run("a token after a failure is refused, the right one too", func(t *testing.T) {
		d := NewDigestMD5(testConfig())
		challenge, _, _ := d.Next(nil)
		c := &testClient{user: "alice", password: "wrong"}
		if _, _, err := d.Next(c.respond(t, challenge, nil)); !errors.Is(err, ErrWrongPassword) {
			t.Fatalf("wrong password: %v", err)
		}
		if _, done, err := d.Next(alice().respond(t, challenge, nil)); done || !errors.Is(err, ErrOver) {
			t.Fatalf("second try: done %v, %v; want ErrOver", done, err)
		}
	})
	t.Run("a first token that is not empty is refused", func(t *testing.T) {
		d := NewDigestMD5(testConfig())
		if _, _, err := d.Next([]byte("username=\"alice\"")); !errors.Is(err, ErrMalformed) {
			t.Fatalf("initial response: %v, want ErrMalformed", err)
		}
		if _, _, err := d.Next(nil); !errors.Is(err, ErrOver) {
			t.Fatalf("after it: %v, want ErrOver", err)
		}
	})
	t.Run("a response over 4096 bytes is refused", func(t *testing.T) {
		d := NewDigestMD5(testConfig())
		challenge, _, _ := d.Next(nil)
		long := alice().respond(t, challenge, func(m map[string]string) { m["authzid"] = `"` + strings.Repeat("a", MaxResponse) + `"` })
		if _, _, err := d.Next(long); !errors.Is(err, ErrMalformed) {
			t.Fatalf("long response: %v, want ErrMalformed", err)
		}
	})
}
