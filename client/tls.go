package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// WithTLS makes every connection to the servers, reconnections included,
// TLS with cfg. When cfg names no ServerName, each server's certificate is
// verified against the host of its address. The handshake is bounded by
// the same deadline as the protocol's handshake. See TLSConfigFromFiles.
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// TLSConfigFromFiles builds a TLS configuration from PEM files, for
// WithTLS: certFile and keyFile are the client's certificate and key, for
// servers that require one (both or neither); caFile holds the CA
// certificates that verify the servers' certificates (empty: the system's
// roots). TLS 1.2 is the oldest it speaks.
func TLSConfigFromFiles(certFile, keyFile, caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case certFile != "" || keyFile != "":
		return nil, fmt.Errorf("tls: a client certificate needs its key (certificate %q, key %q)", certFile, keyFile)
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls: CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: CA: %s holds no PEM certificate", caFile)
		}
	}
	return cfg, nil
}

// tlsDialer wraps dial so that each connection it makes is TLS with cfg,
// its handshake done within ctx.
func tlsDialer(dial func(ctx context.Context, addr string) (net.Conn, error), cfg *tls.Config) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		nc, err := dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		conf := cfg
		if conf.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			conf = cfg.Clone()
			conf.ServerName = host
		}
		tc := tls.Client(nc, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			if ctx.Err() == nil && isPlaintextPort(err) {
				return nil, fmt.Errorf("tls handshake: %w (is the server's port plaintext?)", err)
			}
			return nil, fmt.Errorf("tls handshake: %w", err)
		}
		return tc, nil
	}
}

// isPlaintextPort reports whether a handshake failed as it does against a
// plaintext server: it hangs up on the ClientHello, a frame too long for
// it, or answers with something that is not TLS.
func isPlaintextPort(err error) bool {
	var rh tls.RecordHeaderError
	return errors.As(err, &rh) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET)
}
