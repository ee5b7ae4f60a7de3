// Package sasl is the server's side of SASL's DIGEST-MD5 mechanism (RFC
// 2831) as ZooKeeper's server runs it on its client port, and the reader
// of the JAAS files where ZooKeeper keeps its DIGEST-MD5 users. It does no
// I/O: the server carries the tokens in ZooKeeper's sasl requests and
// replies.
package sasl

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Errors of an exchange. Each wraps one of these; compare with errors.Is.
// None of them holds a password or a hash.
var (
	// ErrMalformed reports a token that does not follow RFC 2831's
	// grammar, or lacks a directive it must have.
	ErrMalformed = errors.New("sasl: malformed DIGEST-MD5 token")
	// ErrRefused reports a well-formed response that does not answer
	// this server's challenge: another nonce, realm or digest-uri, a
	// nonce count other than 1, a quality of protection not offered.
	ErrRefused = errors.New("sasl: DIGEST-MD5 response refused")
	// ErrUnknownUser reports a user the server has no password for.
	ErrUnknownUser = errors.New("sasl: unknown user")
	// ErrWrongPassword reports a response whose digest is not the one
	// the user's password makes.
	ErrWrongPassword = errors.New("sasl: wrong password")
	// ErrOver reports a token after the exchange ended.
	ErrOver = errors.New("sasl: the DIGEST-MD5 exchange is over")
)

// ZooKeeper's names for DIGEST-MD5: its server and its clients both name
// the realm (the "server name") zk-sasl-md5, and the service zookeeper,
// whatever the host, so the digest-uri is zookeeper/zk-sasl-md5.
const (
	ZooKeeperRealm   = "zk-sasl-md5"
	ZooKeeperService = "zookeeper"
)

// Config says what a DigestMD5 exchange checks.
type Config struct {
	// Realm is the one realm offered in the challenge, which the
	// response must name.
	Realm string
	// Service and Host are what the response's digest-uri must be,
	// serv-type "/" host (RFC 2831, 2.1.2); a serv-name after another
	// "/" is allowed. The host is compared without regard to case.
	Service, Host string
	// Password returns the password of user, or false if there is no
	// such user. It is called once per exchange.
	Password func(user string) (password string, ok bool)
	// Nonce returns the challenge's nonce; nil: 30 bytes from
	// crypto/rand, in base64. Tests set it.
	Nonce func() string
}

// ZooKeeperConfig is the Config of ZooKeeper's server, with the users of
// password.
func ZooKeeperConfig(password func(user string) (string, bool)) Config {
	return Config{Realm: ZooKeeperRealm, Service: ZooKeeperService, Host: ZooKeeperRealm, Password: password}
}

// DigestMD5 is the server's side of one DIGEST-MD5 login, in the steps
// ZooKeeper's server takes (Java's DIGEST-MD5 SaslServer):
//
//  1. The client sends an empty token (the mechanism has no initial
//     response); the server answers its challenge: the realm, a fresh
//     nonce, qop="auth", charset=utf-8 and algorithm=md5-sess.
//  2. The client sends its digest-response; the server checks it and, if
//     it proves the user's password, answers rspauth, which proves to
//     the client that the server knows the password too. The login is
//     done.
//
// Only the quality of protection "auth" is offered: no integrity or
// confidentiality layer (auth-int, auth-conf) is set up after the login.
// An authzid in the response is checked as part of the digest but grants
// nothing: the login is the user's, as in ZooKeeper, whose server
// authorizes every authzid and keeps the user's name.
//
// A DigestMD5 is used by one goroutine at a time.
type DigestMD5 struct {
	cfg   Config
	step  int // 0: the empty token is due; 1: the response is due; 2: over
	nonce string
	user  string // once done
}

// NewDigestMD5 starts an exchange.
func NewDigestMD5(cfg Config) *DigestMD5 { return &DigestMD5{cfg: cfg} }

// Next takes the client's next token and returns the server's answer; done
// reports that the login succeeded, as User. An error ends the exchange:
// every later token fails with ErrOver.
func (d *DigestMD5) Next(token []byte) (answer []byte, done bool, err error) {
	switch d.step {
	case 0:
		if len(token) != 0 {
			d.step = 2
			return nil, false, fmt.Errorf("%w: DIGEST-MD5 has no initial response, and the first token is not empty", ErrMalformed)
		}
		d.step = 1
		d.nonce = d.newNonce()
		return d.challenge(), false, nil
	case 1:
		d.step = 2
		answer, err = d.check(token)
		return answer, err == nil, err
	}
	return nil, false, ErrOver
}

// User is the user an exchange logged in, once done.
func (d *DigestMD5) User() string { return d.user }

func (d *DigestMD5) newNonce() string {
	if d.cfg.Nonce != nil {
		return d.cfg.Nonce()
	}
	b := make([]byte, 30)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.StdEncoding.EncodeToString(b)
}

// challenge is the digest-challenge, written as Java's server writes it.
func (d *DigestMD5) challenge() []byte {
	b := appendQuoted([]byte("realm="), d.cfg.Realm)
	b = append(b, ",nonce="...)
	b = appendQuoted(b, d.nonce)
	return append(b, `,qop="auth",charset=utf-8,algorithm=md5-sess`...)
}

// response is a parsed digest-response.
type response struct {
	user, realm, nonce, cnonce, nc, qop, digestURI, digest, authzid string
	utf8                                                            bool // charset=utf-8
}

// parseResponse reads a digest-response and checks its form.
func parseResponse(token []byte) (response, error) {
	dir, err := parseDirectives(token)
	if err != nil {
		return response{}, err
	}
	r := response{
		user: dir["username"], realm: dir["realm"], nonce: dir["nonce"], cnonce: dir["cnonce"],
		nc: dir["nc"], qop: dir["qop"], digestURI: dir["digest-uri"], digest: dir["response"], authzid: dir["authzid"],
	}
	for _, name := range []string{"username", "nonce", "cnonce", "nc", "digest-uri", "response"} {
		if dir[name] == "" {
			return response{}, fmt.Errorf("%w: the response has no %s", ErrMalformed, name)
		}
	}
	if r.qop == "" {
		r.qop = "auth" // RFC 2831: the default
	}
	switch cs, ok := dir["charset"]; {
	case !ok:
	case strings.EqualFold(cs, "utf-8"):
		r.utf8 = true
	default:
		return response{}, fmt.Errorf("%w: charset %q (only utf-8 is offered)", ErrRefused, cs)
	}
	if len(r.digest) != 32 {
		return response{}, fmt.Errorf("%w: the response's digest is not 32 hex digits", ErrMalformed)
	}
	if _, err := hex.DecodeString(r.digest); err != nil {
		return response{}, fmt.Errorf("%w: the response's digest is not 32 hex digits", ErrMalformed)
	}
	r.digest = strings.ToLower(r.digest)
	if !r.utf8 && !utf8.ValidString(r.user) {
		// Without charset=utf-8 the name is ISO 8859-1 (RFC 2831); the
		// users are looked up in UTF-8.
		r.user = latin1ToUTF8(r.user)
	}
	if !utf8.ValidString(r.user) || !utf8.ValidString(r.realm) || !utf8.ValidString(r.authzid) {
		return response{}, fmt.Errorf("%w: a name is not valid UTF-8", ErrMalformed)
	}
	return r, nil
}

// check checks a digest-response against the challenge and the user's
// password, and returns the response-auth to answer.
func (d *DigestMD5) check(token []byte) ([]byte, error) {
	r, err := parseResponse(token)
	if err != nil {
		return nil, err
	}
	if r.nonce != d.nonce {
		return nil, fmt.Errorf("%w: the nonce is not this exchange's", ErrRefused)
	}
	if r.realm != d.cfg.Realm {
		return nil, fmt.Errorf("%w: realm %q, want %q", ErrRefused, r.realm, d.cfg.Realm)
	}
	if r.nc != "00000001" {
		return nil, fmt.Errorf("%w: nonce count %q, want 00000001 (the server answers one response)", ErrRefused, r.nc)
	}
	if r.qop != "auth" {
		return nil, fmt.Errorf("%w: qop %q (only auth is offered)", ErrRefused, r.qop)
	}
	if !d.digestURIOK(r.digestURI) {
		return nil, fmt.Errorf("%w: digest-uri %q, want %s/%s", ErrRefused, r.digestURI, d.cfg.Service, d.cfg.Host)
	}
	password, known := d.cfg.Password(r.user)
	if !known {
		password = "" // the digests are still made, so that an unknown user takes as long
	}
	for _, secret := range credentials(r.user, r.realm, password) {
		ha1 := hexMD5(a1(secret, r))
		if subtle.ConstantTimeCompare([]byte(digest(ha1, r, "AUTHENTICATE:")), []byte(r.digest)) == 1 && known {
			d.user = r.user
			return []byte("rspauth=" + digest(ha1, r, ":")), nil
		}
	}
	if !known {
		return nil, fmt.Errorf("%w %q", ErrUnknownUser, r.user)
	}
	return nil, fmt.Errorf("%w for user %q", ErrWrongPassword, r.user)
}

// digestURIOK reports whether uri is serv-type "/" host ["/" serv-name]
// with this server's service and host.
func (d *DigestMD5) digestURIOK(uri string) bool {
	parts := strings.SplitN(uri, "/", 3)
	return len(parts) >= 2 && parts[0] == d.cfg.Service && strings.EqualFold(parts[1], d.cfg.Host) &&
		(len(parts) == 2 || parts[2] != "")
}

// credentials returns the forms of "user:realm:password" a client may
// have hashed: RFC 2831's (with charset=utf-8, each of the three in ISO
// 8859-1 when all its characters fit, else in UTF-8; without it, in ISO
// 8859-1), which Java's client follows, and plain UTF-8, which clients
// such as Python's pure-sasl (kazoo's) send. They differ only for
// non-ASCII names and passwords.
func credentials(user, realm, password string) [][]byte {
	rfc := make([]byte, 0, len(user)+len(realm)+len(password)+2)
	rfc = append(append(append(append(append(rfc, toLatin1(user)...), ':'), toLatin1(realm)...), ':'), toLatin1(password)...)
	plain := []byte(user + ":" + realm + ":" + password)
	if string(rfc) == string(plain) {
		return [][]byte{plain}
	}
	return [][]byte{rfc, plain}
}

// a1 is A1 (RFC 2831, 2.1.2.1): H(user:realm:password), the nonce, the
// cnonce and the authzid if there is one.
func a1(secret []byte, r response) []byte {
	h := md5.Sum(secret)
	a := append(h[:], ':')
	a = append(append(append(a, r.nonce...), ':'), r.cnonce...)
	if r.authzid != "" {
		a = append(append(a, ':'), r.authzid...)
	}
	return a
}

// digest is the response-value for qop auth (RFC 2831, 2.1.2.1) with A2
// = prefix digest-uri: "AUTHENTICATE:" for the client's response, ":"
// for the server's rspauth.
func digest(ha1 string, r response, prefix string) string {
	ha2 := hexMD5([]byte(prefix + r.digestURI))
	return hexMD5([]byte(ha1 + ":" + r.nonce + ":" + r.nc + ":" + r.cnonce + ":" + r.qop + ":" + ha2))
}

func hexMD5(b []byte) string {
	h := md5.Sum(b)
	return hex.EncodeToString(h[:])
}

// toLatin1 is s in ISO 8859-1 if every character of it is in that set,
// else s unchanged (UTF-8), as RFC 2831 has a client hash names and
// passwords under charset=utf-8.
func toLatin1(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			return []byte(s)
		}
		out = append(out, byte(r))
	}
	return out
}

// latin1ToUTF8 reads s as ISO 8859-1.
func latin1ToUTF8(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		sb.WriteRune(rune(s[i]))
	}
	return sb.String()
}
