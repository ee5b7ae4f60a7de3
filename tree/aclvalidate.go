package tree

import (
	"encoding/base64"
	"net/netip"
	"strings"

	"github.com/arbor-coord/arbor/wire"
)

// The server checks an ACL before it proposes a create or setACL: the tree
// stores what it is given.

// MaxACLEntries is the most entries an ACL may have, and MaxACLBytes the
// most bytes of schemes and ids they may hold together: an ACL is kept
// beside the data, whose limit it does not count against, and resolving
// one compares its entries pairwise.
const (
	MaxACLEntries = 1024
	MaxACLBytes   = 64 << 10
)

// ValidateACL checks every entry of acl: world takes the id anyone; digest
// an id user:base64(sha1), whose hash is 20 bytes; ip an address or a
// network in CIDR form; x509 any non-empty id (a certificate's subject);
// sasl a user name, non-empty and, if it holds an @, in the form of a
// Kerberos principal, name[/host]@REALM (ZooKeeper's
// SASLAuthenticationProvider's rule). No id may hold a control character. Permissions must be letters of
// cdrwa. Scheme auth is refused here: it stands for the caller's
// identities and is expanded by ResolveACL first. An empty list is
// refused, and so is one over MaxACLEntries or MaxACLBytes. The errors
// match wire.ErrInvalidACL.
func ValidateACL(acl []wire.ACL) error {
	if len(acl) == 0 {
		return wire.Errorf(wire.CodeInvalidACL, "an empty ACL")
	}
	if err := checkACLSize(acl); err != nil {
		return err
	}
	for _, a := range acl {
		if err := validateEntry(a); err != nil {
			return err
		}
	}
	return nil
}

// checkACLSize refuses an ACL over MaxACLEntries or MaxACLBytes.
func checkACLSize(acl []wire.ACL) error {
	if len(acl) > MaxACLEntries {
		return wire.Errorf(wire.CodeInvalidACL, "an ACL of %d entries is over the limit of %d", len(acl), MaxACLEntries)
	}
	n := 0
	for _, a := range acl {
		n += len(a.Scheme) + len(a.ID)
	}
	if n > MaxACLBytes {
		return wire.Errorf(wire.CodeInvalidACL, "an ACL of %d bytes of schemes and ids is over the limit of %d", n, MaxACLBytes)
	}
	return nil
}

func validateEntry(a wire.ACL) error {
	if strings.ContainsFunc(a.ID, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return wire.Errorf(wire.CodeInvalidACL, "ACL %s:%q: an id may not hold control characters", a.Scheme, a.ID)
	}
	if a.Perms&^wire.PermAll != 0 {
		return wire.Errorf(wire.CodeInvalidACL, "ACL %s:%s has permission bits %#x beyond cdrwa", a.Scheme, a.ID, int32(a.Perms))
	}
	switch a.Scheme {
	case "world":
		if a.ID != "anyone" {
			return wire.Errorf(wire.CodeInvalidACL, "ACL world:%s: scheme world takes only the id anyone", a.ID)
		}
	case "digest":
		user, hash, ok := strings.Cut(a.ID, ":")
		if !ok || user == "" || !isSHA1Base64(hash) {
			return wire.Errorf(wire.CodeInvalidACL, "ACL digest:%s: a digest id is user:base64(sha1(user:password)), a 28-character hash", a.ID)
		}
	case "ip":
		if !validIPPattern(a.ID) {
			return wire.Errorf(wire.CodeInvalidACL, "ACL ip:%s: an ip id is an address or a network in CIDR form", a.ID)
		}
	case "x509":
		if a.ID == "" {
			return wire.Errorf(wire.CodeInvalidACL, "ACL x509 with an empty id: it takes a certificate's subject")
		}
	case "sasl":
		if !validSASLName(a.ID) {
			return wire.Errorf(wire.CodeInvalidACL, "ACL sasl:%s: a sasl id is a user name, not empty, and name[/host]@REALM if it holds an @", a.ID)
		}
	case "auth":
		return wire.Errorf(wire.CodeInvalidACL, "ACL scheme auth cannot be stored: it stands for the caller's identities")
	default:
		return wire.Errorf(wire.CodeInvalidACL, "ACL %s:%s: unknown scheme %q (world, digest, ip, x509, sasl and auth are known)", a.Scheme, a.ID, a.Scheme)
	}
	return nil
}

// isSHA1Base64 reports whether s is 20 bytes in padded standard base64.
func isSHA1Base64(s string) bool {
	var buf [21]byte
	if len(s) != base64.StdEncoding.EncodedLen(20) {
		return false
	}
	n, err := base64.StdEncoding.Decode(buf[:], []byte(s))
	return err == nil && n == 20
}

// validSASLName reports whether s may be a sasl id: not empty, and
// either without an @ or of the form name[/host]@realm, none of the three
// holding a / or an @ (ZooKeeper's KerberosName).
func validSASLName(s string) bool {
	if s == "" {
		return false
	}
	principal, realm, ok := strings.Cut(s, "@")
	if !ok {
		return true
	}
	name, host, _ := strings.Cut(principal, "/")
	return !strings.ContainsAny(realm, "/@") && !strings.ContainsAny(name, "/@") && !strings.ContainsAny(host, "/@")
}

func validIPPattern(s string) bool {
	if strings.Contains(s, "/") {
		_, err := netip.ParsePrefix(s)
		return err == nil
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}

// ResolveACL returns the ACL to store for a create's or setACL's acl, as
// ZooKeeper's fixupACL does. An empty acl is defaultACL for a create and
// an error for setACL. An entry of scheme auth stands for each of ids that
// a client proved (digest, x509 and sasl; not ip, world or super), with the
// entry's permissions, and is an error when there is none. Duplicates are
// dropped. Every entry is then checked (ValidateACL). acl is returned
// unchanged, without allocating, when there is nothing to expand or drop.
func ResolveACL(acl, defaultACL []wire.ACL, ids []wire.Identity, setACL bool) ([]wire.ACL, error) {
	if len(acl) == 0 {
		if setACL {
			return nil, wire.Errorf(wire.CodeInvalidACL, "setACL with an empty ACL")
		}
		return defaultACL, nil
	}
	if err := checkACLSize(acl); err != nil {
		return nil, err
	}
	if needsRewrite(acl) {
		out := make([]wire.ACL, 0, len(acl)+len(ids))
		for _, a := range acl {
			if a.Scheme != "auth" {
				out = appendUnique(out, a)
				continue
			}
			proved := false
			for _, id := range ids {
				if id.Scheme == "digest" || id.Scheme == "x509" || id.Scheme == "sasl" {
					out = appendUnique(out, wire.ACL{Perms: a.Perms, Scheme: id.Scheme, ID: id.ID})
					proved = true
				}
			}
			if !proved {
				return nil, wire.Errorf(wire.CodeInvalidACL, "ACL auth:%s: the connection has no authenticated identity (add one with auth first)", a.ID)
			}
		}
		acl = out
	}
	if err := ValidateACL(acl); err != nil {
		return nil, err
	}
	return acl, nil
}

// needsRewrite reports whether acl has an auth entry or a duplicate.
func needsRewrite(acl []wire.ACL) bool {
	for i, a := range acl {
		if a.Scheme == "auth" {
			return true
		}
		for _, b := range acl[:i] {
			if a == b {
				return true
			}
		}
	}
	return false
}

func appendUnique(acl []wire.ACL, a wire.ACL) []wire.ACL {
	for _, b := range acl {
		if a == b {
			return acl
		}
	}
	return append(acl, a)
}

// ParseACL reads an ACL in ZooKeeper's text form (see wire.ParseACL) and
// checks it with ValidateACL.
func ParseACL(s string) ([]wire.ACL, error) {
	acl, err := wire.ParseACL(s)
	if err != nil {
		return nil, wire.Errorf(wire.CodeInvalidACL, "%v", err)
	}
	if err := ValidateACL(acl); err != nil {
		return nil, err
	}
	return acl, nil
}
