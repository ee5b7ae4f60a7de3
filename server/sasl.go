package server

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/arbor-coord/arbor/internal/sasl"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// SASL logins on the ZooKeeper ports, as ZooKeeper 3.9's server runs them
// for clients with a JAAS Client section (DIGEST-MD5 only, no Kerberos):
// after its session is set up, the client sends ZooKeeper's sasl op (102)
// with each of its tokens, and each is answered with the server's token in
// order with the connection's other requests. A login that succeeds gives
// the connection the identity (sasl, user), ZooKeeper's
// SASLAuthenticationProvider's, and (super, user) too for the SASL
// superuser (Config.ZKSASLSuperUser). One that fails is answered with
// AuthFailed and a null token, and the connection closes, as ZooKeeper
// does (its session stays, until it expires or another connection takes
// it).
//
// The users and their passwords come from ZooKeeper's own JAAS file
// (Config.ZKSASLUsers), read once at start. Neither a password nor a token
// is ever logged; a failed login is logged with the user's name and why.

// zkSASLSection is the section of the JAAS file that names the server's
// users: ZooKeeper's default (its zookeeper.sasl.serverconfig).
const zkSASLSection = "Server"

// loadSASLUsers reads the users of cfg.ZKSASLUsers, user to password; nil
// when it is not set.
func loadSASLUsers(cfg *Config) (map[string]string, error) {
	if cfg.ZKSASLUsers == "" {
		if cfg.ZKSASLSuperUser != "" {
			return nil, errors.New("a SASL superuser needs a SASL users file")
		}
		return nil, nil
	}
	f, err := os.Open(cfg.ZKSASLUsers)
	if err != nil {
		return nil, fmt.Errorf("SASL users: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, sasl.MaxJAASBytes+1))
	if err != nil {
		return nil, fmt.Errorf("SASL users: %w", err)
	}
	users, err := sasl.ParseJAAS(data, zkSASLSection)
	if err != nil {
		return nil, fmt.Errorf("SASL users file %s: %w", cfg.ZKSASLUsers, err)
	}
	for user := range users {
		if err := tree.ValidateACL([]wire.ACL{{Perms: wire.PermRead, Scheme: "sasl", ID: user}}); err != nil {
			return nil, fmt.Errorf("SASL users file %s: user %q could not be named in an ACL: %w", cfg.ZKSASLUsers, user, err)
		}
	}
	if super := cfg.ZKSASLSuperUser; super != "" {
		if _, ok := users[super]; !ok {
			return nil, fmt.Errorf("the SASL superuser %q is not a user of %s", super, cfg.ZKSASLUsers)
		}
	}
	return users, nil
}

// saslLogin is a connection's SASL login. Only the responder touches it.
type saslLogin struct {
	exchange *sasl.DigestMD5 // nil until the client's first token
	// unconfigured is set once a token was answered on a member without
	// SASL users.
	unconfigured bool
}

// saslStep runs one step of the connection's SASL login with the client's
// token and returns the server's, or an AuthFailed error. Only the
// responder calls it.
//
// A member without SASL users answers the first token as ZooKeeper's
// server without a JAAS Server section does, OK with a null token (its
// Java client then reports AuthFailed by itself, and closes); a second
// token is refused (kazoo would otherwise send empty tokens without end).
func (c *conn) saslStep(token []byte) ([]byte, error) {
	users := c.srv.saslUsers
	if users == nil {
		if c.sasl.unconfigured {
			return nil, c.saslFailed(errors.New("SASL is not configured on this member (arbord --zk-sasl-users)"))
		}
		c.sasl.unconfigured = true
		c.log.Info("a client asked for a SASL login, and SASL is not configured on this member (arbord --zk-sasl-users): answered with a null token, as ZooKeeper does")
		return nil, nil
	}
	if c.sasl.exchange == nil {
		c.sasl.exchange = sasl.NewDigestMD5(sasl.ZooKeeperConfig(func(user string) (string, bool) {
			password, ok := users[user]
			return password, ok
		}))
	}
	answer, done, err := c.sasl.exchange.Next(token)
	if err != nil {
		return nil, c.saslFailed(err)
	}
	if !done {
		return answer, nil
	}
	user := c.sasl.exchange.User()
	ids := []wire.Identity{{Scheme: "sasl", ID: user}}
	super := user == c.srv.cfg.ZKSASLSuperUser
	if super {
		ids = append(ids, wire.Identity{Scheme: tree.SuperScheme, ID: user})
	}
	if err := c.addIdentities(ids...); err != nil {
		return nil, c.saslFailed(err)
	}
	c.log.Info("SASL login", zap.String("user", user), zap.Bool("superuser", super))
	return answer, nil
}

// saslFailed counts and logs a failed SASL step, and returns the error
// that answers it.
func (c *conn) saslFailed(err error) error {
	c.srv.metrics.authFailures.Inc()
	c.log.Info("SASL login failed", zap.Error(err))
	return wire.Errorf(wire.CodeAuthFailed, "SASL login failed: %v", err)
}
