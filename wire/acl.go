package wire

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"strings"
)

// Perms is a set of ZooKeeper's permissions, as a bit mask.
type Perms int32

// The permissions, with ZooKeeper's bits.
const (
	PermRead   Perms = 1 << 0 // getData, getChildren, exists, getACL's data
	PermWrite  Perms = 1 << 1 // setData
	PermCreate Perms = 1 << 2 // create a child
	PermDelete Perms = 1 << 3 // delete a child
	PermAdmin  Perms = 1 << 4 // setACL
	PermAll    Perms = PermRead | PermWrite | PermCreate | PermDelete | PermAdmin
)

// String writes p in ZooKeeper's letters, cdrwa order: "cdrwa", "r", "".
func (p Perms) String() string {
	var b strings.Builder
	for _, l := range permLetters {
		if p&l.perm != 0 {
			b.WriteByte(l.letter)
		}
	}
	return b.String()
}

var permLetters = []struct {
	letter byte
	perm   Perms
}{{'c', PermCreate}, {'d', PermDelete}, {'r', PermRead}, {'w', PermWrite}, {'a', PermAdmin}}

// ParsePerms reads permissions in ZooKeeper's letters, in any order.
func ParsePerms(s string) (Perms, error) {
	var p Perms
next:
	for i := 0; i < len(s); i++ {
		for _, l := range permLetters {
			if s[i] == l.letter {
				p |= l.perm
				continue next
			}
		}
		return 0, fmt.Errorf("unknown permission %q in %q (want letters of cdrwa)", s[i], s)
	}
	return p, nil
}

// Identity is who a connection is, in one scheme: (digest, "alice"),
// (ip, "127.0.0.1"), (x509, "CN=alice"), (world, "anyone").
type Identity struct {
	Scheme string
	ID     string
}

// DigestID returns the id of the digest identity of user with password, as
// ZooKeeper's DigestAuthenticationProvider computes it:
// user:base64(sha1(user:password)). It is the id of a digest ACL entry, the
// identity a connection gets by authenticating with "user:password", and
// the form of the server's superuser digest.
func DigestID(user, password string) string {
	sum := sha1.Sum([]byte(user + ":" + password))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// ACL is one entry of a znode's access control list: the identities it
// matches (Scheme and ID, whose form depends on the scheme) and the
// permissions it grants them.
type ACL struct {
	Perms  Perms
	Scheme string
	ID     string
}

// String writes a in ZooKeeper's form, scheme:id:perms.
func (a ACL) String() string { return a.Scheme + ":" + a.ID + ":" + a.Perms.String() }

// ParseACL reads an ACL in ZooKeeper's text form, as zkCli.sh takes it:
// entries scheme:id:perms separated by commas, such as
// "digest:alice:HASH:cdrwa,ip:10.0.0.0/8:r,world:anyone:r". The id is
// what lies between the first colon and the last, so a digest id or an
// IPv6 address keeps its own colons; an entry of scheme auth has an empty
// id ("auth::cdrwa"). A comma starts a new entry only when a scheme (letters
// and digits) and a colon follow it, so an x509 subject keeps its commas
// ("x509:CN=alice,O=Acme:r"). Spaces around an entry are dropped. It reads
// the form only: whether each id suits its scheme is for the caller to
// check (the server's checks are tree.ValidateACL's).
func ParseACL(s string) ([]ACL, error) {
	var acl []ACL
	for _, entry := range splitACL(s) {
		entry = strings.TrimSpace(entry)
		first := strings.IndexByte(entry, ':')
		last := strings.LastIndexByte(entry, ':')
		if first < 1 || first == last {
			return nil, fmt.Errorf("ACL entry %q is not scheme:id:perms", entry)
		}
		perms, err := ParsePerms(entry[last+1:])
		if err != nil {
			return nil, fmt.Errorf("ACL entry %q: %w", entry, err)
		}
		acl = append(acl, ACL{Perms: perms, Scheme: entry[:first], ID: entry[first+1 : last]})
	}
	return acl, nil
}

// splitACL cuts s at the commas that begin an entry.
func splitACL(s string) []string {
	var entries []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ',' && startsEntry(s[i+1:]) {
			entries = append(entries, s[start:i])
			start = i + 1
		}
	}
	return append(entries, s[start:])
}

// startsEntry reports whether s starts with a scheme and a colon.
func startsEntry(s string) bool {
	scheme, _, ok := strings.Cut(strings.TrimLeft(s, " "), ":")
	return ok && scheme != "" && strings.IndexFunc(scheme, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}) < 0
}

// FormatACL writes acl in the form ParseACL reads.
func FormatACL(acl []ACL) string {
	parts := make([]string, len(acl))
	for i, a := range acl {
		parts[i] = a.String()
	}
	return strings.Join(parts, ",")
}

// OpenACL is the ACL that grants everyone everything: world:anyone:cdrwa.
var OpenACL = []ACL{{Perms: PermAll, Scheme: "world", ID: "anyone"}}

// ReadACL is the ACL that lets everyone read and no one but the superuser
// do anything else: world:anyone:r (ZooKeeper's READ_ACL_UNSAFE), the ACL
// /zookeeper/config starts with.
var ReadACL = []ACL{{Perms: PermRead, Scheme: "world", ID: "anyone"}}

const aclFields = 3

func (enc *encoder) acls(acl []ACL) {
	enc.array(len(acl))
	for _, a := range acl {
		enc.array(aclFields)
		enc.int(int64(a.Perms))
		enc.str(a.Scheme)
		enc.str(a.ID)
	}
}

func (dec *decoder) acls() []ACL {
	n := dec.array(0)
	if n == 0 {
		return nil
	}
	acl := make([]ACL, 0, min(n, 64))
	for i := 0; i < n && dec.err == nil; i++ {
		m := dec.array(aclFields)
		a := ACL{Perms: Perms(dec.int32()), Scheme: dec.str(), ID: dec.str()}
		dec.skip(m - aclFields)
		acl = append(acl, a)
	}
	return acl
}
