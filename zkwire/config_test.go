package zkwire

import (
	"reflect"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

var serverSpecTests = []struct {
	name string
	line string
	want ServerSpec
	out  string // the line written back; "" for line itself
	bad  string // part of the refusal's message; "" when it parses
}{
	{name: "a participant with a client address",
		line: "server.1=10.0.0.1:2888:3888:participant;10.0.0.1:2181",
		want: ServerSpec{ID: 1, Host: "10.0.0.1", QuorumPort: 2888, ElectionPort: 3888, Client: "10.0.0.1:2181"}},
	{name: "the role defaults to participant",
		line: "server.2=h:1:2;3", out: "server.2=h:1:2:participant;0.0.0.0:3",
		want: ServerSpec{ID: 2, Host: "h", QuorumPort: 1, ElectionPort: 2, Client: "0.0.0.0:3"}},
	{name: "kazoo's observer comes back as it was written",
		line: "server.100=0.0.0.0:40001:40002:observer;0.0.0.0:40003",
		want: ServerSpec{ID: 100, Host: "0.0.0.0", QuorumPort: 40001, ElectionPort: 40002, Observer: true, Client: "0.0.0.0:40003"}},
	{name: "the role is read without regard to case or spaces",
		line: "server.3=h:1:2: Observer ", out: "server.3=h:1:2:observer",
		want: ServerSpec{ID: 3, Host: "h", QuorumPort: 1, ElectionPort: 2, Observer: true}},
	{name: "no client address",
		line: "server.4=h:1:0:participant",
		want: ServerSpec{ID: 4, Host: "h", QuorumPort: 1}},
	{name: "a secure client address alone keeps its empty client part",
		line: "server.5=h:1:2:participant;;h:2281",
		want: ServerSpec{ID: 5, Host: "h", QuorumPort: 1, ElectionPort: 2, SecureClient: "h:2281"}},
	{name: "both client addresses",
		line: "server.6=h:1:2:participant;h:2181;h:2281",
		want: ServerSpec{ID: 6, Host: "h", QuorumPort: 1, ElectionPort: 2, Client: "h:2181", SecureClient: "h:2281"}},
	{name: "IPv6 hosts in brackets",
		line: "server.7=[::1]:1:2:participant;[::1]:2181",
		want: ServerSpec{ID: 7, Host: "::1", QuorumPort: 1, ElectionPort: 2, Client: "[::1]:2181"}},
	{name: "spaces around the key and value", line: "  server.8 = h:1:2:participant ", out: "server.8=h:1:2:participant",
		want: ServerSpec{ID: 8, Host: "h", QuorumPort: 1, ElectionPort: 2}},

	{name: "equal quorum and election ports are refused, as ZooKeeper refuses them", line: "server.1=h:1:1", bad: "must differ"},
	{name: "an unknown role", line: "server.1=h:1:2:voter", bad: "unknown role"},
	{name: "several addresses", line: "server.1=h:1:2|g:1:2", bad: "multiAddress"},
	{name: "one port only", line: "server.1=h:1", bad: "host:quorumPort:electionPort"},
	{name: "too many fields", line: "server.1=h:1:2:observer:x", bad: "host:quorumPort:electionPort"},
	{name: "a port out of range", line: "server.1=h:1:65536", bad: "port"},
	{name: "a port that is no number", line: "server.1=h:one:2", bad: "port"},
	{name: "a negative port", line: "server.1=h:-1:2", bad: "port"},
	{name: "no host", line: "server.1=:1:2", bad: "no valid host"},
	{name: "no port at all", line: "server.1=h", bad: "no port"},
	{name: "an unclosed IPv6 host", line: "server.1=[::1:1:2", bad: "IPv6"},
	{name: "a host with a newline in brackets", line: "server.1=[a\nserver.2=b]:1:2", bad: "no valid host"},
	{name: "a host with a space", line: "server.1=a b:1:2", bad: "no valid host"},
	{name: "server id 0", line: "server.0=h:1:2", bad: "above 0"},
	{name: "a server id that is no number", line: "server.x=h:1:2", bad: "above 0"},
	{name: "a key that is no server", line: "peer.1=h:1:2", bad: "unknown parameter"},
	{name: "no equals sign", line: "server.1", bad: "key=value"},
	{name: "a bad client address", line: "server.1=h:1:2;h:x", bad: "client address"},
	{name: "four parts", line: "server.1=h:1:2;3;4;5", bad: "at most"},
	{name: "an empty spec", line: "   ", bad: "empty"},
}

func TestParseServer(t *testing.T) {
	for _, tt := range serverSpecTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseServer(tt.line)
			if tt.bad != "" {
				if wire.CodeOf(err) != wire.CodeBadArguments || !strings.Contains(err.Error(), tt.bad) {
					t.Fatalf("ParseServer(%q) = %+v, %v; want BadArguments saying %q", tt.line, got, err, tt.bad)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseServer(%q) = %+v, %v; want %+v", tt.line, got, err, tt.want)
			}
			out := tt.out
			if out == "" {
				out = tt.line
			}
			if got.String() != out {
				t.Fatalf("written back as %q, want %q", got.String(), out)
			}
			if again, err := ParseServer(got.String()); err != nil || again != got {
				t.Fatalf("the written spec parses to %+v, %v", again, err)
			}
		})
	}
}

func TestConfigFormatAndParse(t *testing.T) {
	c := Config{Version: 0x10000000a, Servers: []ServerSpec{
		{ID: 3, Host: "h3", QuorumPort: 2383, Client: "h3:2183"},
		{ID: 1, Host: "h1", QuorumPort: 2381, Client: "h1:2181"},
		{ID: 4, Host: "h4", QuorumPort: 2384, ElectionPort: 3888, Observer: true},
	}}
	const want = "server.1=h1:2381:0:participant;h1:2181\n" +
		"server.3=h3:2383:0:participant;h3:2183\n" +
		"server.4=h4:2384:3888:observer\n" +
		"version=10000000a"
	if got := string(c.Format()); got != want {
		t.Fatalf("Format:\n%s\nwant\n%s", got, want)
	}
	parsed, err := ParseConfig([]byte(want))
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Version != c.Version || len(parsed.Servers) != 3 || parsed.Servers[0].ID != 1 || string(parsed.Format()) != want {
		t.Fatalf("ParseConfig: %+v", parsed)
	}
	if s, ok := parsed.Server(4); !ok || !s.Observer {
		t.Fatalf("Server(4) = %+v, %v", s, ok)
	}
	if _, ok := parsed.Server(2); ok {
		t.Fatal("Server(2) found a server the configuration does not have")
	}
	// kazoo reads the version from the last line, after the last newline.
	last := want[strings.LastIndex(want, "\n")+1:]
	if last != "version=10000000a" {
		t.Fatalf("last line %q", last)
	}
	// A standalone server has none; a cluster's whose members have not
	// named themselves yet (or whose last named one left) has its version,
	// which kazoo reads from the last line of a reconfig's answer.
	if empty := (&Config{}).Format(); len(empty) != 0 {
		t.Fatalf("a standalone configuration is %q, want empty", empty)
	}
	if got := string((&Config{Version: 5}).Format()); got != "version=5" {
		t.Fatalf("a configuration without servers is %q, want version=5", got)
	}
	for _, bad := range []string{"version=xyz", "server.1=h:1:2\nserver.1=g:3:4", "server.1=h:1:2\nserver.2=h:1:3", "clientPort=2181"} {
		if _, err := ParseConfig([]byte(bad)); wire.CodeOf(err) != wire.CodeBadArguments {
			t.Errorf("ParseConfig(%q): %v, want BadArguments", bad, err)
		}
	}
}

func TestReconfigure(t *testing.T) {
	cur := []ServerSpec{
		{ID: 1, Host: "h", QuorumPort: 2381, Client: "h:2181"},
		{ID: 2, Host: "h", QuorumPort: 2382, Client: "h:2182"},
		{ID: 3, Host: "h", QuorumPort: 2383, Client: "h:2183"},
	}
	ids := func(specs []ServerSpec) string {
		var b strings.Builder
		for _, s := range specs {
			b.WriteString(s.String() + " ")
		}
		return strings.TrimSpace(b.String())
	}
	tests := []struct {
		name                        string
		joining, leaving, newMember string
		want                        string // the servers' lines, space-separated
		bad                         string
	}{
		{name: "a joining server comes in, in id order",
			joining: "server.4=h:2384:3884:participant;h:2184",
			want:    "server.1=h:2381:0:participant;h:2181 server.2=h:2382:0:participant;h:2182 server.3=h:2383:0:participant;h:2183 server.4=h:2384:3884:participant;h:2184"},
		{name: "a leaving server goes", leaving: "2",
			want: "server.1=h:2381:0:participant;h:2181 server.3=h:2383:0:participant;h:2183"},
		{name: "both at once, with spaces and empty entries", joining: " server.5=h:2385:3885:observer;2185 ,", leaving: "3, ,1",
			want: "server.2=h:2382:0:participant;h:2182 server.5=h:2385:3885:observer;0.0.0.0:2185"},
		{name: "a joiner of a present id replaces it (a new role)", joining: "server.3=h:2383:3883:observer;h:2183",
			want: "server.1=h:2381:0:participant;h:2181 server.2=h:2382:0:participant;h:2182 server.3=h:2383:3883:observer;h:2183"},
		{name: "a leaving id that is no server is passed over, as ZooKeeper does", leaving: "9",
			want: "server.1=h:2381:0:participant;h:2181 server.2=h:2382:0:participant;h:2182 server.3=h:2383:0:participant;h:2183"},
		{name: "new members, separated by commas and newlines, are the whole configuration",
			newMember: "server.1=h:2381:3881;h:2181,server.2=h:2382:3882;h:2182\n\nversion=7\n",
			want:      "server.1=h:2381:3881:participant;h:2181 server.2=h:2382:3882:participant;h:2182"},
		{name: "new members need no client address", newMember: "server.1=h:2381:3881",
			want: "server.1=h:2381:3881:participant"},

		{name: "a joiner without a client address", joining: "server.4=h:2384:3884", bad: "no client address"},
		{name: "kazoo's bad input", joining: "some thing", bad: "key=value"},
		{name: "a leaving id that is no number", leaving: "two", bad: "not a server id"},
		{name: "new members and joiners at once", joining: "server.4=h:2384:3884;2184", newMember: "server.1=h:2381:3881", bad: "not both"},
		{name: "new members naming one id twice", newMember: "server.1=h:2381:3881,server.1=h:2382:3882", bad: "twice"},
		{name: "a joiner at another server's quorum address", joining: "server.4=h:2381:3884;2184", bad: "same quorum address"},
		{name: "no participant left", leaving: "1,2,3", bad: "at least one participant"},
		{name: "observers only", newMember: "server.1=h:2381:3881:observer", bad: "at least one participant"},
		{name: "new members with an unknown key", newMember: "clientPort=2181", bad: "unknown parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Reconfigure(cur, tt.joining, tt.leaving, tt.newMember)
			if tt.bad != "" {
				if wire.CodeOf(err) != wire.CodeBadArguments || !strings.Contains(err.Error(), tt.bad) {
					t.Fatalf("Reconfigure = %s, %v; want BadArguments saying %q", ids(got), err, tt.bad)
				}
				return
			}
			if err != nil || ids(got) != tt.want {
				t.Fatalf("Reconfigure = %s, %v;\nwant %s", ids(got), err, tt.want)
			}
		})
	}
	if !reflect.DeepEqual(cur[0], ServerSpec{ID: 1, Host: "h", QuorumPort: 2381, Client: "h:2181"}) {
		t.Fatal("Reconfigure changed the current servers")
	}
}

// FuzzParseServer: no spec makes the parser panic, and what parses writes
// back to a line that parses to the same spec.
//
//	go test ./zkwire -run XXX -fuzz FuzzParseServer -fuzztime 1m
func FuzzParseServer(f *testing.F) {
	for _, tt := range serverSpecTests {
		f.Add(tt.line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s, err := ParseServer(line)
		if err != nil {
			if wire.CodeOf(err) != wire.CodeBadArguments {
				t.Fatalf("ParseServer(%q): %v is not BadArguments", line, err)
			}
			return
		}
		again, err := ParseServer(s.String())
		if err != nil || again != s {
			t.Fatalf("ParseServer(%q) = %+v, written %q, parsed again %+v, %v", line, s, s.String(), again, err)
		}
	})
}

// FuzzParseConfig: no data makes ParseConfig or Reconfigure panic, and a
// configuration that parses formats back to data that parses the same.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("server.1=h:1:2:participant;h:3\nversion=1f"), "server.4=h:4:5;6", "1")
	f.Add([]byte(""), "", "")
	f.Fuzz(func(t *testing.T, data []byte, joining, leaving string) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		again, err := ParseConfig(c.Format())
		if len(c.Servers) > 0 && (err != nil || !reflect.DeepEqual(again, c)) {
			t.Fatalf("ParseConfig(%q) = %+v, formatted %q, parsed again %+v, %v", data, c, c.Format(), again, err)
		}
		for _, next := range [][3]string{{joining, leaving, ""}, {"", "", joining}} {
			servers, err := Reconfigure(c.Servers, next[0], next[1], next[2])
			if err != nil {
				continue
			}
			cfg := Config{Servers: servers, Version: 1}
			if again, err := ParseConfig(cfg.Format()); err != nil || !reflect.DeepEqual(again, cfg) {
				t.Fatalf("Reconfigure(%q) gave %q, which parses to %+v, %v", next, cfg.Format(), again, err)
			}
		}
	})
}
