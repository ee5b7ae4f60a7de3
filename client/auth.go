package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/arbor-coord/arbor/internal/clock"
	"github.com/arbor-coord/arbor/wire"
)

// authInfo is a credential the client sends on every connection.
type authInfo struct {
	scheme     string
	credential []byte
}

func (a authInfo) request() wire.Request {
	return wire.Request{Op: wire.OpAuth, AuthScheme: a.scheme, AuthData: a.credential}
}

// WithAuth authenticates the session in scheme with credential (for
// "digest", DigestCredential(user, password), that is "user:password"). It
// may be given several times: the connection then has every identity.
// Identities belong to a connection on the server, so the client sends its
// credentials again on every new connection, before anything else (see
// AddAuth). Dial fails with an error matching ErrAuthFailed if the server
// refuses one.
func WithAuth(scheme string, credential []byte) Option {
	a := authInfo{scheme: scheme, credential: bytes.Clone(credential)}
	return func(o *options) { o.auths = append(o.auths, a) }
}

// AddAuth adds an identity to the session: it authenticates in scheme with
// credential, as WithAuth does at Dial. Once it has returned nil, the
// client sends the credential again on every later connection, before any
// other request, so the identity lasts as long as the client.
//
// A refused credential fails with an error matching ErrAuthFailed and is
// not kept; the server may also close the connection (ZooKeeper does), and
// the client then reconnects as usual. If the connection breaks before the
// answer, AddAuth sends the credential again on the next connection (an
// auth can be repeated), until ctx ends. An AddAuth that fails because ctx
// ended may still have been accepted: the current connection may then have
// the identity, but later ones will not; call AddAuth again to be sure.
//
// If, on a new connection, the server refuses a credential that it had
// accepted before (its users changed, say), the client cannot go on with
// fewer identities than its code relies on: it gives its session up. The
// state becomes StateAuthFailed, for good (WithSessionRenewal does not
// renew it); Done is closed; every pending watch receives an EventSession
// event; and Err and every call return an error that matches ErrAuthFailed
// and also ErrSessionExpired, so code that stops when its session ends
// stops here too. The client tries to close the session on the server;
// if it cannot, the session expires there after its timeout.
func (c *Client) AddAuth(ctx context.Context, scheme string, credential []byte) error {
	if scheme == "" {
		return fmt.Errorf("addAuth: %w: no scheme", ErrBadArguments)
	}
	a := authInfo{scheme: scheme, credential: bytes.Clone(credential)}
	for {
		c.mu.Lock()
		epoch := c.authEpoch
		c.mu.Unlock()
		_, err := c.do(ctx, "addAuth", scheme, a.request(), nil)
		if errors.Is(err, ErrConnectionLoss) && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return err
		}
		c.mu.Lock()
		if c.authEpoch == epoch {
			// No connection has started since the call: every later one
			// sends the credential.
			c.auths = append(c.auths[:len(c.auths):len(c.auths)], a)
			c.mu.Unlock()
			return nil
		}
		c.mu.Unlock()
		// A new connection took the list of credentials meanwhile, maybe
		// without this one: send it again.
	}
}

// open connects to addr (see connect) and sends the client's credentials
// on the new connection, within limit. When the server refuses one, open
// closes the session, which cannot go on without it, and returns an error
// for which isRefusedAuth is true.
func (c *Client) open(ctx context.Context, addr string, limit time.Duration) (*conn, error) {
	ctx, cancel := clock.WithTimeout(ctx, c.clock, limit)
	defer cancel()
	cn, err := c.connect(ctx, addr, limit)
	if err != nil {
		return nil, err
	}
	err = c.sendAuths(ctx, cn)
	if err == nil {
		return cn, nil
	}
	if isRefusedAuth(err) {
		c.giveUp(cn, addr)
	}
	cn.fail(connLoss(err))
	cn.wait()
	return nil, fmt.Errorf("server %s: %w", addr, err)
}

// giveUp closes the session after a refused credential: on cn if the
// server kept it open, else on a new connection to addr (a server may
// close the connection after a refused auth, as ZooKeeper does).
func (c *Client) giveUp(cn *conn, addr string) {
	c.mu.Lock()
	wait := min(closeWait, c.timeout/3)
	c.mu.Unlock()
	if c.closeSession(cn, wait) == nil {
		return
	}
	cn.fail(ErrClosed)
	cn.wait()
	ctx, cancel := clock.WithTimeout(c.runCtx, c.clock, c.attemptLimit())
	defer cancel()
	again, err := c.connect(ctx, addr, c.attemptLimit())
	if err != nil {
		c.log.Info("arbor: could not close the session; it expires on the server after its timeout",
			zap.String("session", c.sessionHex()), zap.Error(err))
		return
	}
	c.closeSession(again, wait)
	again.fail(ErrClosed)
	again.wait()
}

// sendAuths sends the client's credentials on cn, a new connection that is
// not yet in use, and waits for the answers (within ctx), so that the
// requests that follow have every identity.
func (c *Client) sendAuths(ctx context.Context, cn *conn) error {
	c.mu.Lock()
	auths := c.auths
	c.authEpoch++
	c.mu.Unlock()
	if len(auths) == 0 {
		return nil
	}
	reqs := make([]*request, len(auths))
	for i, a := range auths {
		reqs[i] = newRequest(a.request(), nil)
		if cn.send(reqs[i]) != nil {
			return cn.cause()
		}
	}
	for i, r := range reqs {
		rep, err := r.wait(ctx)
		if err != nil {
			return fmt.Errorf("auth %s: %w", auths[i].scheme, err)
		}
		if rep.Err != wire.CodeOK {
			return &refusedAuth{fmt.Errorf("auth %s: %w", auths[i].scheme, rep.Err.Err())}
		}
	}
	return nil
}

// refusedAuth is the error of a credential the server refused on a new
// connection.
type refusedAuth struct{ err error }

func (e *refusedAuth) Error() string { return e.err.Error() }
func (e *refusedAuth) Unwrap() error { return e.err }

func isRefusedAuth(err error) bool {
	var r *refusedAuth
	return errors.As(err, &r)
}

// authFailed gives the session up (see AddAuth) after a server refused a
// credential on a new connection, which open has closed.
func (c *Client) authFailed(cause error) {
	err := fmt.Errorf("%w; the client gave its session up: %w", cause, ErrSessionExpired)
	c.log.Warn("arbor: a credential was refused on a new connection; the session is given up",
		zap.String("session", c.sessionHex()), zap.Error(err))
	c.mu.Lock()
	c.expiredErr = err
	c.setStateLocked(StateAuthFailed, nil)
	c.mu.Unlock()
	c.watches.closeAll(Event{Type: EventSession, State: StateAuthFailed, Err: err})
}

// WhoAmI returns the identities of the client's connection on the server:
// its address (scheme ip), the identities its credentials gave it, and so
// on.
func (c *Client) WhoAmI(ctx context.Context) ([]Identity, error) {
	rep, err := c.do(ctx, "whoAmI", "", wire.Request{Op: wire.OpWhoAmI}, nil)
	if err != nil {
		return nil, err
	}
	return rep.Identities, nil
}

// GetACL returns the ACL of the node at path, and its Stat (Aversion is
// the ACL's version). It needs PermRead, or PermAdmin to see a digest
// entry's hash, which the server hides from other callers.
func (c *Client) GetACL(ctx context.Context, path string, opts ...ReadOption) ([]ACL, Stat, error) {
	if err := wire.ValidatePath(path, false); err != nil {
		return nil, Stat{}, opError("getACL", path, err)
	}
	rep, err := c.do(ctx, "getACL", path, readRequest(wire.OpGetACL, path, false, opts), nil)
	if err != nil {
		return nil, Stat{}, err
	}
	return rep.ACL, rep.Stat, nil
}

// SetACL replaces the ACL of the node at path if the ACL's version
// (Stat.Aversion) is version (-1: any version), and returns the node's new
// Stat. It needs PermAdmin. An empty acl fails with ErrInvalidACL.
func (c *Client) SetACL(ctx context.Context, path string, acl []ACL, version int32) (Stat, error) {
	if err := wire.ValidatePath(path, false); err != nil {
		return Stat{}, opError("setACL", path, err)
	}
	if len(acl) == 0 {
		return Stat{}, opError("setACL", path, fmt.Errorf("%w: empty ACL", ErrInvalidACL))
	}
	rep, err := c.do(ctx, "setACL", path, wire.Request{Op: wire.OpSetACL, Path: path, ACL: acl, Version: version}, nil)
	if err != nil {
		return Stat{}, err
	}
	return rep.Stat, nil
}

// CreateOption is an option of Create, CreateStat, CreateTTL, CreateOp and
// CreateTTLOp.
type CreateOption func(*createOptions)

type createOptions struct {
	acl    []ACL
	aclSet bool
	lease  int64
	turn   *LockTurn
}

// LockTurn is a new lock node's turn in its lock's queue (TellTurn).
type LockTurn = wire.LockTurn

// TellTurn asks the server to say, with the create's reply, the new node's
// turn in its lock's queue (a lock node, named by package lockq): whether
// its acquisition holds the lock, or the node it waits for, as a list of
// the queue just after the create would show. The create fills *t; t.Known
// is false when the node is no lock node, or the server does not know the
// field (the client then lists the queue). A Multi's creates ignore it.
func TellTurn(t *LockTurn) CreateOption {
	return func(o *createOptions) { o.turn = t }
}

// WithACL gives the new node acl. Without it the node gets the server's
// default ACL (world:anyone:cdrwa unless the server is configured
// otherwise). WithACL with no entries fails with ErrInvalidACL.
func WithACL(acl ...ACL) CreateOption {
	acl = slices.Clone(acl)
	return func(o *createOptions) { o.acl, o.aclSet = acl, true }
}
