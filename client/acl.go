package client

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/arbor-coord/arbor/wire"
)

// ACL is one entry of a znode's access control list, ZooKeeper's: the
// identities it matches (Scheme and ID) and the permissions it grants them.
// Make one with WorldACL, DigestACL, IPACL, AuthACL or X509ACL, or read a
// list with ParseACL.
type ACL = wire.ACL

// Perms is a set of permissions, ZooKeeper's: PermRead, PermWrite,
// PermCreate, PermDelete and PermAdmin, or PermAll.
type Perms = wire.Perms

// Identity is one of the identities a connection has on the server: its
// address (ip), the users it authenticated as (digest), and so on. WhoAmI
// lists them.
type Identity = wire.Identity

// The permissions. A node's ACL grants them on the node itself: PermRead
// to read its data, children and ACL; PermWrite to set its data;
// PermCreate and PermDelete to create and delete its children; PermAdmin
// to set its ACL.
const (
	PermRead   = wire.PermRead
	PermWrite  = wire.PermWrite
	PermCreate = wire.PermCreate
	PermDelete = wire.PermDelete
	PermAdmin  = wire.PermAdmin
	PermAll    = wire.PermAll
)

// The ACL schemes the server knows.
const (
	SchemeWorld  = "world"  // id "anyone": everyone
	SchemeDigest = "digest" // id "user:base64(sha1(user:password))"; authenticate with "user:password"
	SchemeIP     = "ip"     // id an address or a CIDR block of the client's address
	SchemeAuth   = "auth"   // no id: every identity the creating connection has authenticated as
	SchemeX509   = "x509"   // id the subject of the client's TLS certificate
	SchemeSASL   = "sasl"   // id a user a ZooKeeper client logged in as with SASL (DIGEST-MD5) on the server's ZooKeeper port
)

// WorldACL grants perms to everyone (world:anyone).
func WorldACL(perms Perms) ACL { return ACL{Perms: perms, Scheme: SchemeWorld, ID: "anyone"} }

// DigestACL grants perms to whoever authenticates (WithAuth or AddAuth,
// scheme "digest") with user and password: its id is DigestID(user,
// password), so the password itself is not stored.
func DigestACL(perms Perms, user, password string) ACL {
	return ACL{Perms: perms, Scheme: SchemeDigest, ID: DigestID(user, password)}
}

// DigestID returns the id of the digest identity of user with password as
// ZooKeeper computes it: user:base64(sha1(user:password)). It is also the
// form of a superuser digest in the server's configuration.
func DigestID(user, password string) string { return wire.DigestID(user, password) }

// DigestCredential is the credential to authenticate with in scheme
// "digest": "user:password".
func DigestCredential(user, password string) []byte { return []byte(user + ":" + password) }

// IPACL grants perms to clients connecting from addrOrCIDR: one address
// ("10.0.0.7", "::1") or a block ("10.0.0.0/8").
func IPACL(perms Perms, addrOrCIDR string) ACL {
	return ACL{Perms: perms, Scheme: SchemeIP, ID: addrOrCIDR}
}

// AuthACL grants perms to the identities the creating connection has
// authenticated as: the server replaces it with one entry per identity
// (it fails with ErrInvalidACL if there is none).
func AuthACL(perms Perms) ACL { return ACL{Perms: perms, Scheme: SchemeAuth} }

// X509ACL grants perms to clients whose TLS certificate has subject (for
// example "CN=alice,O=Acme").
func X509ACL(perms Perms, subject string) ACL {
	return ACL{Perms: perms, Scheme: SchemeX509, ID: subject}
}

// SASLACL grants perms to ZooKeeper clients that logged in as user with
// SASL on the server's ZooKeeper port (the server's --zk-sasl-users). An
// Arbor client cannot log in so: it can set such an ACL for them.
func SASLACL(perms Perms, user string) ACL { return ACL{Perms: perms, Scheme: SchemeSASL, ID: user} }

// ParsePerms reads permissions in ZooKeeper's letters, cdrwa, in any order.
func ParsePerms(s string) (Perms, error) { return wire.ParsePerms(s) }

// ParseACL reads an ACL in ZooKeeper's text form, as zkCli.sh takes it:
// entries scheme:id:perms separated by commas, such as
// "digest:alice:HASH:cdrwa,ip:10.0.0.0/8:r,world:anyone:r". The id is
// what lies between the first colon and the last, so a digest id or an
// IPv6 address keeps its own colons; an entry of scheme auth has an empty
// id ("auth::cdrwa"). A comma starts a new entry only when a scheme and a
// colon follow it, so an x509 subject keeps its commas
// ("x509:CN=alice,O=Acme:r"). The ids are checked as far as the client
// can: an address or CIDR for ip, user:hash for digest, anyone for world,
// a name for sasl.
func ParseACL(s string) ([]ACL, error) {
	acl, err := wire.ParseACL(s)
	for i := 0; err == nil && i < len(acl); i++ {
		err = checkACLEntry(acl[i])
	}
	if err != nil {
		return nil, fmt.Errorf("%w: acl %q: %w", ErrInvalidACL, s, err)
	}
	return acl, nil
}

// checkACLEntry checks the id of a against its scheme.
func checkACLEntry(a ACL) error {
	switch a.Scheme {
	case SchemeWorld:
		if a.ID != "anyone" {
			return fmt.Errorf("world's only id is anyone, not %q", a.ID)
		}
	case SchemeDigest:
		if user, hash, ok := strings.Cut(a.ID, ":"); !ok || user == "" || hash == "" {
			return fmt.Errorf("a digest id is user:base64(sha1(user:password)), not %q (see DigestID)", a.ID)
		}
	case SchemeIP:
		if _, err := netip.ParseAddr(a.ID); err != nil {
			if _, err := netip.ParsePrefix(a.ID); err != nil {
				return fmt.Errorf("an ip id is an address or a CIDR block, not %q", a.ID)
			}
		}
	case SchemeAuth:
	case SchemeX509:
		if a.ID == "" {
			return fmt.Errorf("an x509 id is a certificate subject, not empty")
		}
	case SchemeSASL:
		if a.ID == "" {
			return fmt.Errorf("a sasl id is a user name, not empty")
		}
	default:
		return fmt.Errorf("unknown scheme %q (want world, digest, ip, auth, x509 or sasl)", a.Scheme)
	}
	return nil
}

// FormatACL writes acl in the form ParseACL reads.
func FormatACL(acl []ACL) string { return wire.FormatACL(acl) }
