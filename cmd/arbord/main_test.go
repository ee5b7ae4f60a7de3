package main

import (
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/server"
)

func TestEnvironmentSetsFlagsTheCommandLineLeftAlone(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	data := fs.String("data", "arbor-data", "")
	listen := fs.String("listen", "127.0.0.1:2281", "")
	level := fs.String("log-level", "info", "")
	if err := fs.Parse([]string{"--listen", "127.0.0.1:9"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"ARBOR_DATA": "/srv/arbor", "ARBOR_LISTEN": "127.0.0.1:7", "ARBOR_LOG_LEVEL": "debug"}
	if err := applyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if *data != "/srv/arbor" || *listen != "127.0.0.1:9" || *level != "debug" {
		t.Fatalf("data %q listen %q level %q", *data, *listen, *level)
	}
	fs.Int("max-conns", 0, "")
	if err := applyEnv(fs, func(k string) (string, bool) { return "many", k == "ARBOR_MAX_CONNS" }); err == nil {
		t.Fatal("a bad ARBOR_MAX_CONNS was accepted")
	}
}

func TestParsePeers(t *testing.T) {
	got, err := parsePeers("1=127.0.0.1:2381,2=127.0.0.1:2382")
	if err != nil || !maps.Equal(got, map[uint64]string{1: "127.0.0.1:2381", 2: "127.0.0.1:2382"}) {
		t.Fatalf("parsePeers = %v, %v", got, err)
	}
	for _, bad := range []string{"1", "x=a:1", "0=a:1", "1=", "1=a:1,1=b:2"} {
		if _, err := parsePeers(bad); err == nil {
			t.Errorf("parsePeers(%q) accepted", bad)
		}
	}
}

func TestLimitFlagsTurnZeroIntoNoLimitWhereAllowed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr bool
		check   func(server.Config) bool
	}{
		{"the defaults are the server's", nil, false, func(c server.Config) bool {
			return c.MaxConnsPerIP == server.DefaultMaxConnsPerIP && c.MaxOutstanding == server.DefaultMaxOutstanding &&
				c.MaxWatches == server.DefaultMaxWatches && c.MaxListBytes == server.DefaultMaxListBytes &&
				c.HTTPMaxConns == server.DefaultHTTPMaxConns
		}},
		{"0 turns the HTTP connection limit off", []string{"--http-max-conns", "0"}, false, func(c server.Config) bool {
			return c.HTTPMaxConns == server.NoLimit
		}},
		{"0 turns the per-IP limit off", []string{"--max-conns-per-ip", "0"}, false, func(c server.Config) bool {
			return c.MaxConnsPerIP == server.NoLimit
		}},
		{"0 turns the watch limit off", []string{"--max-watches", "0"}, false, func(c server.Config) bool {
			return c.MaxWatches == server.NoLimit
		}},
		{"a value is kept", []string{"--max-ephemerals", "5"}, false, func(c server.Config) bool {
			return c.MaxEphemerals == 5
		}},
		{"the path and name limits default to the server's", nil, false, func(c server.Config) bool {
			return c.MaxPath == server.DefaultMaxPath && c.MaxName == server.DefaultMaxName
		}},
		{"0 turns the handshake cap off", []string{"--max-handshaking", "0"}, false, func(c server.Config) bool {
			return c.MaxHandshaking == server.NoLimit
		}},
		{"0 turns the path and name limits off", []string{"--max-path", "0", "--max-name", "0"}, false, func(c server.Config) bool {
			return c.MaxPath == server.NoLimit && c.MaxName == server.NoLimit
		}},
		{"the outstanding requests cannot be unbounded", []string{"--max-outstanding", "0"}, true, nil},
		{"the outstanding bytes cannot be unbounded", []string{"--max-outstanding-bytes", "0"}, true, nil},
		{"a negative limit is refused", []string{"--max-list-names", "-1"}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			var cfg server.Config
			limits := limitFlags(fs, &cfg)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := limits.apply()
			if (err != nil) != tc.wantErr {
				t.Fatalf("apply: %v, want an error: %v", err, tc.wantErr)
			}
			if err == nil && !tc.check(cfg) {
				t.Fatalf("config %+v", cfg)
			}
		})
	}
}

func TestMemoryLimitReadsSizesAsGOMEMLIMITDoes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want byteSize
	}{
		{"0", 0},
		{"1000", 1000},
		{"1000B", 1000},
		{"512KiB", 512 << 10},
		{"300MiB", 300 << 20},
		{"2GiB", 2 << 30},
		{"1TiB", 1 << 40},
	} {
		var s byteSize
		if err := s.Set(tc.in); err != nil || s != tc.want {
			t.Errorf("Set(%q) = %d, %v; want %d", tc.in, s, err, tc.want)
			continue
		}
		var back byteSize
		if err := back.Set(s.String()); err != nil || back != s {
			t.Errorf("%q prints as %q, which reads as %d (%v)", tc.in, s.String(), back, err)
		}
	}
	for _, bad := range []string{"", "MiB", "-1MiB", "300MB", "1.5GiB", "300 MiB", "9999999TiB"} {
		var s byteSize
		if err := s.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted as %d", bad, s)
		}
	}
}

func TestAdminIdentitiesAreCheckedBeforeTheServerStarts(t *testing.T) {
	safe := []string{"--listen", "127.0.0.1:0", "--http", "-", "--data", t.TempDir()}
	for _, tc := range []struct {
		name string
		list string
		want string
	}{
		{"a subject without its scheme is refused", "CN=ops,O=Arbor", "--admin-identities"},
		{"admin certificates without a CA to ask for them are refused", "x509:CN=ops,O=Arbor", "--tls-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(append([]string{"--admin-identities", tc.list}, safe...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestABadSASLUsersFileStopsTheServerAtStartWithoutItsPasswords(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "jaas.conf")
	if err := os.WriteFile(bad, []byte("Server {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n user_alice=\"s3cret\"\n};"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ARBOR_ZK_SASL_USERS", bad) // the variable, as for every flag
	err := run([]string{"--listen", "127.0.0.1:0", "--http", "-", "--zk-listen", "127.0.0.1:0", "--data", t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "line 4") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("run = %v, want an error naming the file and line 4, without the password", err)
	}
}

func TestHTTPIdleTimeoutMustBeMoreThanZeroAndAtMostAMinute(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{
		{0, false},
		{-time.Second, false},
		{time.Minute + time.Second, false},
		{time.Minute, true},
		{200 * time.Millisecond, true},
	} {
		if err := checkHTTPIdleTimeout(tc.d); (err == nil) != tc.ok {
			t.Errorf("checkHTTPIdleTimeout(%v) = %v, want it taken: %v", tc.d, err, tc.ok)
		}
	}
}

func TestParseIDs(t *testing.T) {
	if got, err := parseIDs("--observers", "4,5"); err != nil || !slices.Equal(got, []uint64{4, 5}) {
		t.Fatalf("parseIDs = %v, %v", got, err)
	}
	if got, err := parseIDs("--observers", ""); err != nil || got != nil {
		t.Fatalf("parseIDs of nothing = %v, %v", got, err)
	}
	for _, bad := range []string{"x", "0", "4,", "4,4", "-1"} {
		if _, err := parseIDs("--observers", bad); err == nil {
			t.Errorf("parseIDs(%q) accepted", bad)
		}
	}
}
