package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/arbor-coord/arbor/internal/mux"
	"github.com/arbor-coord/arbor/raftnode"
	"go.uber.org/zap"
)

// TLS on the client ports (Config.Listen and Config.ZKListen) and on the
// peer port. The client ports share one configuration, so the ZooKeeper
// port is never a plaintext way around a TLS client port. The handshake
// runs on the connection's own goroutine, within the handshake's deadline
// (see handshakes), before the protocol's handshake; a client certificate,
// when the port requires one, names the client by its subject
// (certSubject).

// minTLSVersion is the oldest TLS the server speaks: 1.2. Go negotiates
// 1.3 whenever the other side has it.
const minTLSVersion = tls.VersionTLS12

// clientTLSConfig is the TLS configuration of the client ports, nil when
// cfg does not turn TLS on. With a CA, a client must present a
// certificate the CA signed.
func clientTLSConfig(cfg *Config) (*tls.Config, error) {
	if cfg.TLSCert == "" && cfg.TLSKey == "" && cfg.TLSCA == "" {
		return nil, nil
	}
	cert, err := loadKeyPair("client port", cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, err
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: minTLSVersion}
	if cfg.TLSCA != "" {
		if conf.ClientCAs, err = loadCertPool(cfg.TLSCA); err != nil {
			return nil, fmt.Errorf("client port TLS CA: %w", err)
		}
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// peerTLSOptions is the TLS of the peer transport, none when cfg does not
// turn it on. The member's certificate serves both its listener and its
// connections to the others; with a CA, each side verifies the other's
// certificate against it.
func peerTLSOptions(cfg *Config) ([]raftnode.TransportOption, error) {
	if cfg.PeerTLSCert == "" && cfg.PeerTLSKey == "" && cfg.PeerTLSCA == "" {
		return nil, nil
	}
	cert, err := loadKeyPair("peer port", cfg.PeerTLSCert, cfg.PeerTLSKey)
	if err != nil {
		return nil, err
	}
	listen := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: minTLSVersion}
	dial := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: minTLSVersion}
	if cfg.PeerTLSCA != "" {
		pool, err := loadCertPool(cfg.PeerTLSCA)
		if err != nil {
			return nil, fmt.Errorf("peer port TLS CA: %w", err)
		}
		listen.ClientCAs, listen.ClientAuth = pool, tls.RequireAndVerifyClientCert
		dial.RootCAs = pool
	}
	return []raftnode.TransportOption{raftnode.WithTLS(listen, dial)}, nil
}

// loadKeyPair loads the certificate and key of what (a port), which need
// each other.
func loadKeyPair(what, certFile, keyFile string) (tls.Certificate, error) {
	if certFile == "" || keyFile == "" {
		return tls.Certificate{}, fmt.Errorf("%s TLS needs both a certificate and its key (cert %q, key %q)", what, certFile, keyFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s TLS: %w", what, err)
	}
	return cert, nil
}

// loadCertPool reads the PEM certificates of file into a pool.
func loadCertPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// listen listens on addr, with TLS when conf is not nil.
func listen(addr string, conf *tls.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || conf == nil {
		return ln, err
	}
	return tls.NewListener(ln, conf), nil
}

// tlsHandshake completes the TLS handshake of a connection to a TLS port
// within the deadline the accept set (see handshakes), so a silent client
// cannot hold the connection's goroutine. It reports whether the
// connection may carry on; a plaintext connection (to a plaintext port)
// always may.
func (c *conn) tlsHandshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	err := tc.HandshakeContext(c.ctx)
	var plain tls.RecordHeaderError
	var netErr net.Error
	switch {
	case err == nil:
		return true
	case errors.As(err, &plain):
		c.log.Warn("closing connection: client sent plaintext to a TLS port")
	case c.ctx.Err() != nil: // the connection or the server closed
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		c.log.Info("closing connection: no TLS handshake within the timeout")
	default:
		c.log.Warn("closing connection: TLS handshake failed", zap.Error(err))
	}
	return false
}

// certSubject is the subject of the verified client certificate of nc, a
// TLS connection whose handshake is done: the identity of scheme x509. It
// is written as ZooKeeper's X509AuthenticationProvider writes it (Java's
// X500Principal.getName(), RFC 2253), as in "CN=alice,O=Arbor". It reports
// false for a plaintext connection or one without a verified certificate.
func certSubject(nc net.Conn) (string, bool) {
	if ch, ok := nc.(*mux.Channel); ok {
		nc = ch.Underlying() // a session carried by a multiplexed connection is its client's
	}
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return "", false
	}
	st := tc.ConnectionState()
	if !st.HandshakeComplete || len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return "", false
	}
	name, err := rfc2253(st.VerifiedChains[0][0].RawSubject)
	if err != nil {
		return "", false
	}
	return name, true
}

// x500Attribute is one attribute of a distinguished name, its value kept
// as encoded.
type x500Attribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// x500RDNSET is a relative distinguished name (encoding/asn1 makes a slice
// type whose name ends in SET a SET OF).
type x500RDNSET []x500Attribute

// rfc2253Keywords are the attribute types Java's X500Principal.getName()
// writes by name; it writes any other as its OID.
var rfc2253Keywords = map[string]string{
	"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.9": "STREET",
	"2.5.4.10": "O", "2.5.4.11": "OU",
	"0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}

// rfc2253 writes the DER-encoded distinguished name raw as RFC 2253 does,
// in the form of Java's X500Principal.getName(): the last RDN first, RDNs
// separated by ",", the attributes of a multi-valued RDN by "+", a known
// type by its keyword with its string value escaped, any other as
// OID=#hex of its encoding.
func rfc2253(raw []byte) (string, error) {
	var rdns []x500RDNSET
	rest, err := asn1.Unmarshal(raw, &rdns)
	if err != nil {
		return "", fmt.Errorf("subject: %w", err)
	}
	if len(rest) > 0 {
		return "", errors.New("subject: trailing data")
	}
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if i < len(rdns)-1 {
			b.WriteByte(',')
		}
		for j, a := range rdns[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			kw, known := rfc2253Keywords[a.Type.String()]
			if s, ok := directoryString(a.Value); known && ok {
				b.WriteString(kw + "=" + escapeRFC2253(s))
				continue
			}
			b.WriteString(a.Type.String() + "=#" + hex.EncodeToString(a.Value.FullBytes))
		}
	}
	return b.String(), nil
}

// directoryString is v's text when v is a string type whose bytes are its
// text (UTF8String, PrintableString, IA5String).
func directoryString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagUTF8String, asn1.TagPrintableString, asn1.TagIA5String:
		return string(v.Bytes), true
	}
	return "", false
}

// escapeRFC2253 escapes an attribute value as RFC 2253, section 2.4, asks.
func escapeRFC2253(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case strings.ContainsRune(`,+"\<>;`, r),
			i == 0 && (r == ' ' || r == '#'),
			i == len(s)-1 && r == ' ':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
