package sasl

import (
	"errors"
	"testing"
)

// The fuzz targets check that no token and no file makes the parsers
// panic, and that every refusal is one of the package's errors.
//
//	go test ./internal/sasl -run XXX -fuzz FuzzDigestMD5Response -fuzztime 1m

const fuzzNonce = "bm9uY2Vub25jZW5vbmNlbm9uY2U="

func FuzzDigestMD5Response(f *testing.F) {
	c := &testClient{user: "alice", password: "alice-secret"}
	challenge, _, _ := NewDigestMD5(fuzzConfig()).Next(nil)
	f.Add(c.respond(f, challenge, nil))
	for _, tt := range directiveTests {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte(`username="alice",realm="zk-sasl-md5",nonce="` + fuzzNonce + `",nc=00000001,cnonce="x",digest-uri="zookeeper/zk-sasl-md5",response=00000000000000000000000000000000,qop=auth`))
	f.Fuzz(func(t *testing.T, token []byte) {
		d := NewDigestMD5(fuzzConfig())
		if _, _, err := d.Next(nil); err != nil {
			t.Fatal(err)
		}
		answer, done, err := d.Next(token)
		switch {
		case done:
			if err != nil || d.User() == "" || len(answer) == 0 {
				t.Fatalf("done with %q, user %q, %v", answer, d.User(), err)
			}
		case errors.Is(err, ErrMalformed), errors.Is(err, ErrRefused), errors.Is(err, ErrUnknownUser), errors.Is(err, ErrWrongPassword):
			if answer != nil || d.User() != "" {
				t.Fatalf("refused with %q, user %q", answer, d.User())
			}
		default:
			t.Fatalf("unexpected outcome %q, %v", answer, err)
		}
	})
}

func fuzzConfig() Config {
	cfg := testConfig()
	cfg.Nonce = func() string { return fuzzNonce }
	return cfg
}

func FuzzParseJAAS(f *testing.F) {
	f.Add([]byte(zooKeeperJAAS))
	f.Add([]byte(`Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a="x\"y"; };`))
	f.Add([]byte("Server/*\n*/{x required//\n;};"))
	f.Fuzz(func(t *testing.T, data []byte) {
		users, err := ParseJAAS(data, "Server")
		if err != nil {
			if !errors.Is(err, ErrJAAS) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if len(users) == 0 {
			t.Fatal("a file taken with no users")
		}
		for u, p := range users {
			if u == "" || p == "" {
				t.Fatalf("user %q with password of %d bytes", u, len(p))
			}
		}
	})
}
