package server

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// A connection's identities are who it is for the ACL checks: always its
// ip, then whatever its auth requests and its SASL login (sasl.go) proved.
// They belong to the connection, not to the session (as in ZooKeeper: a
// client that reconnects sends its auth again, or logs in again). The
// list is never changed in place: an auth that adds an identity stores a
// new slice, so the reads, the write path (which puts them in each txn)
// and the apply path (which filters lasting watches with them) load it
// without locking or copying.

// maxIdentities bounds how many identities auth requests can give one
// connection: each travels in every txn the connection proposes.
const maxIdentities = 32

// initialIdentities computes the identities a connection has before any
// auth request: its ip and, on a TLS port that verified a client
// certificate, (x509, the certificate's subject), as ZooKeeper's
// X509AuthenticationProvider names it.
func (c *conn) initialIdentities() []wire.Identity {
	ids := []wire.Identity{{Scheme: "ip", ID: remoteIP(c.nc.RemoteAddr())}}
	if subject, ok := certSubject(c.nc); ok {
		ids = append(ids, wire.Identity{Scheme: "x509", ID: subject})
	}
	return ids
}

// identities returns the connection's identities; the slice must not be
// modified.
func (c *conn) identities() []wire.Identity {
	if p := c.ids.Load(); p != nil {
		return *p
	}
	return nil
}

// authenticate runs an auth request: it adds the identities the
// credential proves, or fails with AuthFailed (the connection carries on
// with what it had). Only the responder calls it, so there is one writer.
//
//   - digest, "user:password": the identity (digest, user:base64(sha1(
//     "user:password"))), ZooKeeper's DigestAuthenticationProvider; and
//     (super, user) too when that equals Config.SuperDigest. As in
//     ZooKeeper, any password is accepted: what it proves is that the
//     client knows the password an ACL's digest was made from.
//   - ip: nothing to add, the connection has its ip identity already.
func (c *conn) authenticate(scheme string, data []byte) error {
	add, err := c.proves(scheme, data)
	if err == nil {
		err = c.addIdentities(add...)
	}
	if err != nil {
		c.srv.metrics.authFailures.Inc()
		c.log.Info("auth failed", zap.String("scheme", scheme), zap.Error(err))
	}
	return err
}

// proves returns the identities an auth request's credential proves.
func (c *conn) proves(scheme string, data []byte) ([]wire.Identity, error) {
	var add []wire.Identity
	switch scheme {
	case "digest":
		id, err := digestID(string(data))
		if err != nil {
			return nil, err
		}
		add = append(add, wire.Identity{Scheme: "digest", ID: id})
		if c.srv.cfg.SuperDigest != "" && id == c.srv.cfg.SuperDigest {
			user, _, _ := strings.Cut(id, ":")
			add = append(add, wire.Identity{Scheme: tree.SuperScheme, ID: user})
		}
	case "ip":
	case "x509":
		return nil, wire.Errorf(wire.CodeAuthFailed, "an x509 identity comes from the client's TLS certificate, not from an auth request")
	default:
		return nil, wire.Errorf(wire.CodeAuthFailed, "unknown auth scheme %q (digest is known; a sasl identity comes from a SASL login)", scheme)
	}
	return add, nil
}

// addIdentities gives the connection the identities of add it does not
// have yet, or fails with AuthFailed past maxIdentities. Only the
// responder calls it.
func (c *conn) addIdentities(add ...wire.Identity) error {
	old := c.identities()
	ids := slices.Clone(old)
	for _, id := range add {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == len(old) {
		return nil
	}
	if len(ids) > maxIdentities {
		return wire.Errorf(wire.CodeAuthFailed, "a connection may hold at most %d identities", maxIdentities)
	}
	c.ids.Store(&ids)
	return nil
}

// digestID is ZooKeeper's digest identity for the credential
// "user:password" (wire.DigestID). The password is what follows the first
// colon, colons included.
func digestID(cred string) (string, error) {
	user, password, ok := strings.Cut(cred, ":")
	if !ok || user == "" {
		return "", wire.Errorf(wire.CodeAuthFailed, "a digest credential is user:password")
	}
	return wire.DigestID(user, password), nil
}

// checkSuperDigest checks Config.SuperDigest's form, user:base64(sha1).
func checkSuperDigest(d string) error {
	if d == "" {
		return nil
	}
	if err := tree.ValidateACL([]wire.ACL{{Scheme: "digest", ID: d}}); err != nil {
		return fmt.Errorf("super digest %q is not user:base64(sha1(user:password)) (see docs/security.md)", d)
	}
	return nil
}

// whoAmI is what the whoAmI op shows of ids: a digest identity as its user
// name alone (as ZooKeeper does), the others as they are.
func whoAmI(ids []wire.Identity) []wire.Identity {
	out := make([]wire.Identity, len(ids))
	for i, id := range ids {
		if id.Scheme == "digest" {
			id.ID, _, _ = strings.Cut(id.ID, ":")
		}
		out[i] = id
	}
	return out
}

// maskDigests returns acl with each digest id's hash replaced by "x", as
// ZooKeeper's getACL shows it to a caller without ADMIN on the node.
func maskDigests(acl []wire.ACL) []wire.ACL {
	out := slices.Clone(acl)
	for i, a := range out {
		if a.Scheme == "digest" {
			user, _, _ := strings.Cut(a.ID, ":")
			out[i].ID = user + ":x"
		}
	}
	return out
}

// resolveACLs gives a create (a multi's creates too) or setACL the ACL to
// store, with the connection's identities ids: see tree.ResolveACL.
func (s *Server) resolveACLs(r *wire.Request, ids []wire.Identity) error {
	var err error
	switch r.Op {
	case wire.OpCreate:
		r.ACL, err = tree.ResolveACL(r.ACL, s.cfg.DefaultACL, ids, false)
	case wire.OpSetACL:
		r.ACL, err = tree.ResolveACL(r.ACL, s.cfg.DefaultACL, ids, true)
	case wire.OpMulti:
		for i := range r.Ops {
			if r.Ops[i].Op == wire.OpCreate {
				if r.Ops[i].ACL, err = tree.ResolveACL(r.Ops[i].ACL, s.cfg.DefaultACL, ids, false); err != nil {
					return err
				}
			}
		}
	}
	return err
}

// remoteIP is the address part of addr, ZooKeeper's ip identity.
func remoteIP(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// super reports whether ids include the superuser.
func super(ids []wire.Identity) bool {
	return slices.ContainsFunc(ids, func(id wire.Identity) bool { return id.Scheme == tree.SuperScheme })
}
