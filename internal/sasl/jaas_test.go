package sasl

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

// zooKeeperJAAS is a server's jaas.conf as ZooKeeper's documentation
// writes it, with a client section beside.
const zooKeeperJAAS = `
// ZooKeeper's users
Server {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       user_super="adminsecret"
       user_alice="alice-secret";
};
/* the client's side,
   which the server leaves alone */
Client {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       username="alice"
       password="alice-secret";
};
`

// secret is in every bad file below, where a password would be: no error
// may quote it.
const secret = "s3cr3t-Pa55"

func TestParseJAAS(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string // nil: refused
	}{
		{"ZooKeeper's example", zooKeeperJAAS, map[string]string{"super": "adminsecret", "alice": "alice-secret"}},
		{"the users of several entries, and unquoted values", `Server {
			org.apache.zookeeper.server.auth.DigestLoginModule REQUIRED user_a=pa user_b="pb";
			org.apache.zookeeper.server.auth.DigestLoginModule optional debug=true user_c="p c";
		};`, map[string]string{"a": "pa", "b": "pb", "c": "p c"}},
		{"escapes in a quoted password", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a="x\"y\\z\tw"; };`,
			map[string]string{"a": "x\"y\\z\tw"}},
		// Java's StreamTokenizer: octal of up to three digits (three only
		// from a first digit of 0 to 3), \a and \v, any other letter for
		// itself. (A file ZooKeeper reads as "pAss" must log in as it.)
		{"Java's octal and other escapes", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a="p\101ss" user_b="\7\0101\477\344\q\a\v"; };`,
			map[string]string{"a": "pAss", "b": "\a\x08" + "1" + "'7" + "ä" + "q\a\v"}},
		{"a one-line file with comments between tokens", `Server/*a*/{org.apache.zookeeper.server.auth.DigestLoginModule required//b
			user_a = "p" ; } ;`, map[string]string{"a": "p"}},
		{"UTF-8 in a user's name and password", "Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_jörg=\"pässwörd\"; };",
			map[string]string{"jörg": "pässwörd"}},

		{"no Server section", `Client { org.apache.zookeeper.server.auth.DigestLoginModule required username="a" password="` + secret + `"; };`, nil},
		{"an empty file", "", nil},
		{"a Server section without users", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required; };`, nil},
		{"Kerberos' login module", `Server { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k" principal="zookeeper/h@R"; };`, nil},
		{"a bad control flag", `Server { org.apache.zookeeper.server.auth.DigestLoginModule mandatory user_a="` + secret + `"; };`, nil},
		{"a user named twice", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a="x" user_a="` + secret + `"; };`, nil},
		{"a section named twice", zooKeeperJAAS + `Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_b="` + secret + `"; };`, nil},
		{"an option user_ without a name", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_="` + secret + `"; };`, nil},
		{"an empty password", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=""; };`, nil},
		{"a property reference", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a="${` + secret + `}"; };`, nil},
		{"a missing equals sign", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a "` + secret + `"; };`, nil},
		{"a missing semicolon after the entry", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a="` + secret + `" };`, nil},
		{"a missing semicolon after the section", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a="` + secret + `"; }`, nil},
		{"a quoted string not closed on its line", "Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=\"" + secret + "\n\"; };", nil},
		{"a comment not closed", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a="` + secret + `"; }; /* `, nil},
		{"single quotes", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a='` + secret + `'; };`, nil},
		{"a stray character in a password", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=` + secret + `#x; };`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseJAAS([]byte(tt.in), "Server")
			if tt.want == nil {
				if !errors.Is(err, ErrJAAS) {
					t.Fatalf("got %q, %v; want an ErrJAAS", got, err)
				}
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "S3CR3T") {
					t.Fatalf("the error %q quotes the password", err)
				}
				t.Log(err)
				return
			}
			if err != nil || !maps.Equal(got, tt.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	t.Run("errors name the line", func(t *testing.T) {
		_, err := ParseJAAS([]byte("Server {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n user_a \"x\";\n};"), "Server")
		if err == nil || !strings.Contains(err.Error(), "line 3") {
			t.Fatalf("error %v, want one naming line 3", err)
		}
	})
	t.Run("another section name", func(t *testing.T) {
		got, err := ParseJAAS([]byte(strings.Replace(zooKeeperJAAS, "Server", "ZKServer", 1)), "ZKServer")
		if err != nil || got["alice"] != "alice-secret" {
			t.Fatalf("got %q, %v", got, err)
		}
	})
	t.Run("a file over the limit", func(t *testing.T) {
		if _, err := ParseJAAS(make([]byte, MaxJAASBytes+1), "Server"); !errors.Is(err, ErrJAAS) {
			t.Fatalf("got %v", err)
		}
	})
}
