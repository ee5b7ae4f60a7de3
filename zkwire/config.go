package zkwire

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/arbor-coord/arbor/wire"
)

// ZooKeeper's dynamic configuration (QuorumPeerConfig, QuorumMaj): the
// data of /zookeeper/config, and the server specs reconfig takes. One
// line per server, ordered by id, then the version in hex with no newline
// after it (QuorumMaj.toString):
//
//	server.1=10.0.0.1:2888:3888:participant;0.0.0.0:2181
//	server.4=10.0.0.4:2888:3888:observer;10.0.0.4:2181;10.0.0.4:2281
//	version=100000003
//
// A server is host:quorumPort:electionPort[:role][;client[;secureClient]]
// (QuorumServer): role participant (the default) or observer; a client
// address host:port, or a port alone for host 0.0.0.0. The parsers follow
// ZooKeeper's and refuse what it refuses (equal quorum and election
// ports, an unknown role); they also refuse what Arbor cannot do (several
// addresses for one server, ZooKeeper's multiAddress). Every refusal is a
// *wire.Error with CodeBadArguments, reconfig's answer to a bad spec.

// ServerSpec is one server of the configuration.
type ServerSpec struct {
	ID           uint64
	Host         string // the quorum and election host, IPv6 without brackets
	QuorumPort   int
	ElectionPort int
	Observer     bool   // an observer, else a participant
	Client       string // the client address, host:port; "" for none
	SecureClient string // the secure client address, host:port; "" for none
}

// PeerAddr is the server's quorum address, host:quorumPort.
func (s *ServerSpec) PeerAddr() string {
	return net.JoinHostPort(s.Host, strconv.Itoa(s.QuorumPort))
}

// Role is "observer" or "participant".
func (s *ServerSpec) Role() string {
	if s.Observer {
		return "observer"
	}
	return "participant"
}

// Value is the spec as it follows "server.N=" (QuorumServer.toString).
func (s *ServerSpec) Value() string {
	var b strings.Builder
	b.WriteString(bracketed(s.Host))
	fmt.Fprintf(&b, ":%d:%d:%s", s.QuorumPort, s.ElectionPort, s.Role())
	if s.Client != "" {
		b.WriteString(";" + s.Client)
	}
	if s.SecureClient != "" {
		if s.Client == "" {
			b.WriteString(";")
		}
		b.WriteString(";" + s.SecureClient)
	}
	return b.String()
}

// String is the spec's line, server.N=value.
func (s ServerSpec) String() string { return fmt.Sprintf("server.%d=%s", s.ID, s.Value()) }

// Config is a dynamic configuration: its servers and its version.
type Config struct {
	Servers []ServerSpec // ordered by id
	Version int64
}

// Format writes c as /zookeeper/config holds it. A configuration of no
// servers at version 0 is empty, as a standalone ZooKeeper server's; at
// a version, it is that version's line alone.
func (c *Config) Format() []byte {
	if len(c.Servers) == 0 && c.Version == 0 {
		return nil // a standalone server's: no configuration at all
	}
	var b strings.Builder
	for _, s := range sortedByID(c.Servers) {
		b.WriteString(s.String())
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "version=%x", uint64(c.Version))
	return []byte(b.String())
}

// Server returns the spec of server id, if the configuration has it.
func (c *Config) Server(id uint64) (ServerSpec, bool) {
	i := slices.IndexFunc(c.Servers, func(s ServerSpec) bool { return s.ID == id })
	if i < 0 {
		return ServerSpec{}, false
	}
	return c.Servers[i], true
}

// ParseConfig parses the data of /zookeeper/config: server lines and a
// version line, blank lines skipped. Empty data is an empty
// configuration.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	for line := range strings.Lines(string(data)) {
		key, value, err := property(line)
		switch {
		case err != nil:
			return Config{}, err
		case key == "":
		case key == "version":
			v, err := strconv.ParseUint(value, 16, 64)
			if err != nil {
				return Config{}, badSpec("version %q is not hexadecimal", value)
			}
			c.Version = int64(v)
		default:
			s, err := parseServer(key, value)
			if err != nil {
				return Config{}, err
			}
			c.Servers = append(c.Servers, s)
		}
	}
	if err := CheckServers(c.Servers); err != nil {
		return Config{}, err
	}
	c.Servers = sortedByID(c.Servers)
	return c, nil
}

// ParseServer parses one server.N=spec.
func ParseServer(line string) (ServerSpec, error) {
	key, value, err := property(line)
	if err != nil {
		return ServerSpec{}, err
	}
	if key == "" {
		return ServerSpec{}, badSpec("an empty server spec")
	}
	return parseServer(key, value)
}

// ParseJoining parses reconfig's joiningServers: server.N=spec entries
// separated by commas, each with a client address, as ZooKeeper requires
// of a server that joins.
func ParseJoining(s string) ([]ServerSpec, error) {
	var out []ServerSpec
	for _, part := range splitList(s) {
		spec, err := ParseServer(part)
		if err != nil {
			return nil, err
		}
		if spec.Client == "" && spec.SecureClient == "" {
			return nil, badSpec("%q has no client address: a joining server is host:quorumPort:electionPort[:role];[clientHost:]clientPort", part)
		}
		out = append(out, spec)
	}
	return out, nil
}

// ParseLeaving parses reconfig's leavingServers: server ids separated by
// commas.
func ParseLeaving(s string) ([]uint64, error) {
	var out []uint64
	for _, part := range splitList(s) {
		id, err := strconv.ParseUint(part, 10, 64)
		if err != nil || id == 0 {
			return nil, badSpec("leaving server %q is not a server id (a number above 0)", part)
		}
		out = append(out, id)
	}
	return out, nil
}

// ParseNewMembers parses reconfig's newMembers, the whole new
// configuration: server.N=spec entries separated by commas or newlines
// (a version= entry among them is ignored, as ZooKeeper ignores it).
func ParseNewMembers(s string) ([]ServerSpec, error) {
	var out []ServerSpec
	for line := range strings.Lines(strings.ReplaceAll(s, ",", "\n")) {
		key, value, err := property(line)
		switch {
		case err != nil:
			return nil, err
		case key == "", key == "version":
		default:
			spec, err := parseServer(key, value)
			if err != nil {
				return nil, err
			}
			out = append(out, spec)
		}
	}
	return out, nil
}

// Reconfigure computes the configuration a reconfig asks for from the
// servers of the current one, as ZooKeeper's PrepRequestProcessor does:
// newMembers, when given, is the whole new configuration; otherwise the
// leaving servers go and the joining ones come in, a joining server
// replacing the one of its id (so a joiner of a present id changes its
// role or addresses). A leaving id that is no server is passed over, as
// ZooKeeper passes it over. The result is ordered by id, and must keep a
// participant.
func Reconfigure(cur []ServerSpec, joining, leaving, newMembers string) ([]ServerSpec, error) {
	var next []ServerSpec
	if strings.TrimSpace(newMembers) != "" {
		if strings.TrimSpace(joining) != "" || strings.TrimSpace(leaving) != "" {
			return nil, badSpec("a reconfig gives either the new members or the joining and leaving servers, not both")
		}
		var err error
		if next, err = ParseNewMembers(newMembers); err != nil {
			return nil, err
		}
	} else {
		join, err := ParseJoining(joining)
		if err != nil {
			return nil, err
		}
		leave, err := ParseLeaving(leaving)
		if err != nil {
			return nil, err
		}
		for _, s := range cur {
			if !slices.Contains(leave, s.ID) && !slices.ContainsFunc(join, func(j ServerSpec) bool { return j.ID == s.ID }) {
				next = append(next, s)
			}
		}
		next = append(next, join...)
	}
	if err := CheckServers(next); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(next, func(s ServerSpec) bool { return !s.Observer }) {
		return nil, badSpec("the new configuration must keep at least one participant")
	}
	return sortedByID(next), nil
}

// CheckServers refuses two specs of one id, and two servers at one quorum
// address.
func CheckServers(servers []ServerSpec) error {
	ids, peers := map[uint64]bool{}, map[string]uint64{}
	for _, s := range servers {
		if ids[s.ID] {
			return badSpec("server.%d is given twice", s.ID)
		}
		ids[s.ID] = true
		if other, ok := peers[s.PeerAddr()]; ok {
			return badSpec("server.%d and server.%d have the same quorum address %s", other, s.ID, s.PeerAddr())
		}
		peers[s.PeerAddr()] = s.ID
	}
	return nil
}

// property splits a line key=value, trimming both; a blank line or a
// comment (# or !, as in a Java properties file) has an empty key.
func property(line string) (key, value string, err error) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' || line[0] == '!' {
		return "", "", nil
	}
	key, value, ok := strings.Cut(line, "=")
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	if !ok || key == "" {
		return "", "", badSpec("%q is not key=value", line)
	}
	return key, value, nil
}

// parseServer parses the spec value of key server.N.
func parseServer(key, value string) (ServerSpec, error) {
	idText, ok := strings.CutPrefix(key, "server.")
	if !ok {
		return ServerSpec{}, badSpec("unknown parameter %q: a server is server.N=host:quorumPort:electionPort[:role][;[clientHost:]clientPort]", key)
	}
	id, err := strconv.ParseUint(idText, 10, 64)
	if err != nil || id == 0 {
		return ServerSpec{}, badSpec("%q: the server id is not a number above 0", key)
	}
	s := ServerSpec{ID: id}
	parts := strings.Split(value, ";")
	if len(parts) > 3 {
		return ServerSpec{}, badSpec("server.%d=%s: at most a server part, a client address and a secure client address, separated by ;", id, value)
	}
	if err := s.parseServerPart(strings.TrimSpace(parts[0])); err != nil {
		return ServerSpec{}, fmt.Errorf("server.%d=%s: %w", id, value, err)
	}
	if len(parts) >= 2 {
		if s.Client, err = clientAddr(parts[1]); err != nil {
			return ServerSpec{}, fmt.Errorf("server.%d=%s: client address: %w", id, value, err)
		}
	}
	if len(parts) == 3 {
		if s.SecureClient, err = clientAddr(parts[2]); err != nil {
			return ServerSpec{}, fmt.Errorf("server.%d=%s: secure client address: %w", id, value, err)
		}
	}
	return s, nil
}

// parseServerPart parses host:quorumPort:electionPort[:role] into s.
func (s *ServerSpec) parseServerPart(p string) error {
	if strings.Contains(p, "|") {
		return badSpec("several addresses for one server (ZooKeeper's multiAddress) are not supported")
	}
	host, rest, err := splitHost(p)
	if err != nil {
		return err
	}
	fields := strings.Split(rest, ":")
	if len(fields) < 2 || len(fields) > 3 {
		return badSpec("want host:quorumPort:electionPort[:role]")
	}
	s.Host = host
	if s.QuorumPort, err = port(fields[0]); err != nil {
		return err
	}
	if s.ElectionPort, err = port(fields[1]); err != nil {
		return err
	}
	if s.QuorumPort == s.ElectionPort {
		return badSpec("the quorum and election ports must differ")
	}
	if len(fields) == 3 {
		switch strings.ToLower(strings.TrimSpace(fields[2])) {
		case "participant":
		case "observer":
			s.Observer = true
		default:
			return badSpec("unknown role %q: participant or observer", fields[2])
		}
	}
	return nil
}

// clientAddr parses a client address, host:port or a port alone (host
// 0.0.0.0), as host:port; "" for an empty part.
func clientAddr(p string) (string, error) {
	p = strings.TrimSpace(p)
	if p == "" {
		return "", nil
	}
	if !strings.Contains(p, ":") {
		n, err := port(p)
		if err != nil {
			return "", err
		}
		return net.JoinHostPort("0.0.0.0", strconv.Itoa(n)), nil
	}
	host, rest, err := splitHost(p)
	if err != nil {
		return "", err
	}
	n, err := port(rest)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(n)), nil
}

// splitHost splits a host, IPv6 in brackets or up to the first colon,
// from what follows its colon.
func splitHost(p string) (host, rest string, err error) {
	if strings.HasPrefix(p, "[") {
		end := strings.Index(p, "]")
		if end < 0 || !strings.HasPrefix(p[end+1:], ":") {
			return "", "", badSpec("%q: an IPv6 host is [host]:port", p)
		}
		host, rest = p[1:end], p[end+2:]
	} else {
		var ok bool
		if host, rest, ok = strings.Cut(p, ":"); !ok {
			return "", "", badSpec("%q has no port", p)
		}
	}
	if host = strings.TrimSpace(host); !validHost(host) {
		return "", "", badSpec("%q: no valid host", p)
	}
	return host, rest, nil
}

// validHost reports whether host is a name or an address: letters,
// digits, and . - _ (and : and % in an IPv6 address, which came in
// brackets), so that no spec can break the configuration's lines.
func validHost(host string) bool {
	if host == "" {
		return false
	}
	for _, r := range host {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_:%", r)
		if !ok {
			return false
		}
	}
	return true
}

func port(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > 65535 {
		return 0, badSpec("port %q is not a number from 0 to 65535", s)
	}
	return n, nil
}

// splitList splits a comma-separated list, trimming each entry and
// leaving out the empty ones (ZooKeeper's StringUtils.split).
func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func bracketed(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

func sortedByID(servers []ServerSpec) []ServerSpec {
	out := slices.Clone(servers)
	slices.SortFunc(out, func(a, b ServerSpec) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func badSpec(format string, args ...any) error {
	return wire.Errorf(wire.CodeBadArguments, format, args...)
}
